"""Declarative suites: YAML with groups of axes expanded into cases.

    name: gemm-demo
    stopping: {min_time_s: 0.2}        # overrides of the stopping rule
    groups:
      - kernel: matmul
        backends: [torch]
        dtypes: [fp32, bf16]
        axes:                           # cartesian product; a dict value sets several params
          shape: [{m: 256, n: 256, k: 256}, {m: 512, n: 512, k: 512}]
        include: [{m: 64, n: 64, k: 64}] # extra parameter sets
        exclude: [{dtype: bf16, m: 512}] # partial matches removed
        skip: [{where: {dtype: fp8}, reason: "no fp8 on this pool"}]
        tags: [llm]
"""
from __future__ import annotations

import itertools
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels_bench.case import Case
from kernels_bench.errors import UsageError
from kernels_bench.kernels import KERNELS
from kernels_bench.stopping import StoppingRule
from kernels_bench.yaml_file import load_yaml

SUITES_DIR = Path(__file__).parent / "suites"
EXPLOSION_WARNING = 5_000
_GROUP_KEYS = {"kernel", "backends", "dtypes", "axes", "include", "exclude", "skip", "tags"}


class SuiteError(UsageError, ValueError):
    pass


@dataclass(frozen=True)
class PlannedCase:
    case: Case
    skip_reason: str | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suite:
    name: str
    cases: tuple[PlannedCase, ...]
    stopping: StoppingRule = field(default_factory=StoppingRule)
    source: str = ""

    def shard(self, index: int, count: int, seed: int | None = None) -> list[PlannedCase]:
        """Deterministic: cases are ordered by id and dealt round-robin. A seed shuffles
        the order within the shard (not its membership)."""
        if count < 1 or not 0 <= index < count:
            raise SuiteError(f"shard {index}/{count} is out of range")
        ordered = sorted(self.cases, key=lambda pc: pc.case.case_id)
        mine = ordered[index::count]
        if seed is not None:
            random.Random(seed).shuffle(mine)
        return mine

    def filter(self, kernel_pattern: str | None = None, case_ids: list[str] | None = None) -> "Suite":
        """The cases whose kernel matches the glob and whose id is listed (when given)."""
        import fnmatch

        kept = tuple(pc for pc in self.cases
                     if (not kernel_pattern or fnmatch.fnmatch(pc.case.kernel, kernel_pattern))
                     and (not case_ids or pc.case.case_id in case_ids))
        return Suite(self.name, kept, self.stopping, self.source)


def suite_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    if not name_or_path.replace("-", "").replace("_", "").isalnum():
        raise SuiteError(f"suite name {name_or_path!r} may hold only letters, digits, '-' and '_'")
    p = SUITES_DIR / f"{name_or_path}.yaml"
    if not p.exists():
        known = sorted(x.stem for x in SUITES_DIR.glob("*.yaml"))
        raise SuiteError(f"no suite {name_or_path!r}; known suites: {known}")
    return p


def load_suite(name_or_path: str) -> Suite:
    path = suite_path(name_or_path)
    doc = load_yaml(path)
    where = str(path)
    if not isinstance(doc, dict) or "groups" not in doc:
        raise SuiteError(f"{where}: a suite is a mapping with a 'groups' list")
    try:
        stopping = StoppingRule.from_dict(doc.get("stopping"))
    except (TypeError, ValueError) as e:
        raise SuiteError(f"{where}: stopping: {e}") from None
    cases: list[PlannedCase] = []
    for i, group in enumerate(doc["groups"]):
        cases.extend(_expand_group(group, f"{where}: groups[{i}]"))
    seen: dict[str, PlannedCase] = {}
    for pc in cases:
        seen.setdefault(pc.case.case_id, pc)
    if len(seen) > EXPLOSION_WARNING:
        warnings.warn(f"{where}: suite expands to {len(seen)} cases (over {EXPLOSION_WARNING}); check its axes")
    return Suite(doc.get("name", path.stem), tuple(seen.values()), stopping, where)


def _expand_group(group: Any, where: str) -> list[PlannedCase]:
    if not isinstance(group, dict):
        raise SuiteError(f"{where}: a group is a mapping")
    unknown = set(group) - _GROUP_KEYS
    if unknown:
        raise SuiteError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_GROUP_KEYS)}")
    name = group.get("kernel")
    if name not in KERNELS:
        raise SuiteError(f"{where}.kernel: unknown kernel {name!r}; known: {sorted(KERNELS)}")
    kernel = KERNELS[name]
    backends = group.get("backends") or list(kernel.backends)
    bad = set(backends) - set(kernel.backends)
    if bad:
        raise SuiteError(f"{where}.backends: {sorted(bad)} not offered by {name} ({list(kernel.backends)})")
    dtypes = group.get("dtypes") or ["fp32"]
    axes = group.get("axes") or {}
    if not isinstance(axes, dict):
        raise SuiteError(f"{where}.axes: a mapping of axis name to a list of values")
    param_sets = []
    for combo in itertools.product(*[_as_list(v, f"{where}.axes.{k}") for k, v in axes.items()]):
        params: dict[str, Any] = {}
        for key, value in zip(axes, combo):
            params.update(value if isinstance(value, dict) else {key: value})
        param_sets.append(params)
    param_sets += list(group.get("include") or [])
    excludes = group.get("exclude") or []
    skips = group.get("skip") or []
    tags = tuple(group.get("tags") or ())
    out = []
    for backend, dtype, params in itertools.product(backends, dtypes, param_sets):
        flat = {"backend": backend, "dtype": dtype, **params}
        if any(_matches(flat, ex) for ex in excludes):
            continue
        reason = next((s.get("reason", "skipped by suite") for s in skips if _matches(flat, s.get("where", {}))), None)
        case = Case.make(kernel.family, name, backend, dtype, **params)
        out.append(PlannedCase(case, reason, tags))
    return out


def _as_list(v: Any, where: str) -> list:
    if not isinstance(v, list) or not v:
        raise SuiteError(f"{where}: an axis is a non-empty list")
    return v


def _matches(flat: dict, pattern: dict) -> bool:
    return all(flat.get(k) == v for k, v in pattern.items())
