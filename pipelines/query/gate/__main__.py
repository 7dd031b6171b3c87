"""`python -m pipelines.query.gate [--force]`: build the gate's jar (make setup runs it)."""
from __future__ import annotations

import sys

from pipelines.query.gate import build

if __name__ == "__main__":
    try:
        print(f"perflake SQL gate: {build(force='--force' in sys.argv[1:])}")
    except RuntimeError as e:
        print(f"perflake SQL gate: error: {e}", file=sys.stderr)
        sys.exit(1)
