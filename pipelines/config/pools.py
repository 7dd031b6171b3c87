"""The pool registry (pipelines/config/pools.yaml, or $PERFLAKE_POOLS)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


from kernels_bench.yaml_file import load_yaml
from pipelines.config.lake import safe_name

DEFAULT_PATH = Path(__file__).parent / "pools.yaml"
_KINDS = ("cpu", "gpu", "simulated")


@dataclass(frozen=True)
class Pool:
    name: str
    sku: str
    device_kind: str
    slots: int
    queue: str

    def device(self, index: int = 0) -> str:
        """The harness device string for the index-th device of this pool."""
        if self.device_kind == "cpu":
            return "cpu"
        if self.device_kind == "simulated":
            return f"sim:{self.sku}"
        return f"cuda:{index}"


def load_pools(path: str | Path | None = None) -> dict[str, Pool]:
    p = Path(path or os.environ.get("PERFLAKE_POOLS") or DEFAULT_PATH)
    doc = load_yaml(p) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{p}: a mapping of pool name to its settings")
    pools = {}
    for name, spec in doc.items():
        where = f"{p}: {name}"
        safe_name(name, f"{where}: pool name")
        if not isinstance(spec, dict):
            raise ValueError(f"{where}: settings must be a mapping")
        missing = [k for k in ("sku", "device_kind", "slots") if k not in spec]
        if missing:
            raise ValueError(f"{where}: missing {missing}")
        if spec["device_kind"] not in _KINDS:
            raise ValueError(f"{where}.device_kind: {spec['device_kind']!r} is not one of {_KINDS}")
        if not isinstance(spec["slots"], int) or spec["slots"] < 1:
            raise ValueError(f"{where}.slots: a positive integer, got {spec['slots']!r}")
        pools[name] = Pool(name, str(spec["sku"]), spec["device_kind"], spec["slots"], spec.get("queue", "default"))
    return pools


def pool(name: str) -> Pool:
    pools = load_pools()
    if name not in pools:
        raise KeyError(f"unknown pool {name!r}; pools: {sorted(pools)}")
    return pools[name]
