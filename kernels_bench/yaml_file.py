"""Reading the harness's YAML files (suites, the hardware catalog) with PyYAML's safe
loader: a file that is not valid YAML is an error naming the file and the line."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def load_yaml(path: str | Path) -> Any:
    """The document in `path` (None for an empty file); ValueError naming the file, the
    line and the column of a syntax error; FileNotFoundError naming the file."""
    p = Path(path)
    try:
        return yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ValueError(f"{p}{where}: not valid YAML: {problem}") from None
