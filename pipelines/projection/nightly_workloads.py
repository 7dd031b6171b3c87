"""The workloads projected every night: the presets and scenarios of
nightly_workloads.yaml, each on every catalog GPU a night measured, from the kernels
measured up to that night (`perflake model ... --history`, one night at a time). The
mine task writes them to perf.workload_projections; the nightly report and the
dashboard's Models page show them against the night before, so that a kernel regression
also reads as "decode on the H100 got 4 % slower".
"""
from __future__ import annotations

from pathlib import Path

from kernels_bench.yaml_file import load_yaml
from pipelines.projection.workload import Scenario, Workload, WorkloadError, load_workload

NIGHTLY_PATH = Path(__file__).with_name("nightly_workloads.yaml")
_SCENARIO_KEYS = {"prefill": ("phase", "batch", "prompt", "tp", "ep"), "decode": ("phase", "batch", "context", "tp",
                                                                                  "ep")}


def load_nightly(path: str | Path = NIGHTLY_PATH) -> list[tuple[Workload, Scenario]]:
    """(workload, scenario) pairs of `path`, validated: WorkloadError naming the file,
    the preset, the scenario's place and the problem otherwise."""
    try:
        doc = load_yaml(path)
    except ValueError as e:
        raise WorkloadError(str(e)) from None
    return parse_nightly(doc, str(path))


def parse_nightly(doc, where: str) -> list[tuple[Workload, Scenario]]:
    """A mapping of preset name to a list of scenarios, as (workload, scenario) pairs."""
    if not isinstance(doc, dict) or not doc:
        raise WorkloadError(f"{where}: a mapping of preset name to a list of scenarios")
    out = []
    for name, scenarios in doc.items():
        try:
            w = load_workload(str(name))
        except WorkloadError as e:
            raise WorkloadError(f"{where}: {e}") from None
        if not isinstance(scenarios, list) or not scenarios:
            raise WorkloadError(f"{where}: {name}: a list of scenarios, got {scenarios!r}")
        for i, s in enumerate(scenarios):
            out.append((w, _scenario(s, w, f"{where}: {name}[{i}]")))
    return out


def _scenario(doc, w: Workload, where: str) -> Scenario:
    phase = doc.get("phase") if isinstance(doc, dict) else None
    if phase not in _SCENARIO_KEYS:
        raise WorkloadError(f"{where}: phase: use one of {', '.join(_SCENARIO_KEYS)}, got {phase!r}")
    allowed = _SCENARIO_KEYS[phase]
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise WorkloadError(f"{where}: unknown keys {unknown} for {phase}; allowed: {list(allowed)}")
    length = allowed[2]
    if length not in doc or "batch" not in doc:
        raise WorkloadError(f"{where}: {phase} needs batch and {length}")
    try:
        return Scenario(phase, doc["batch"], doc[length], doc.get("tp", 1), doc.get("ep", 1)).check(w)
    except WorkloadError as e:
        raise WorkloadError(f"{where}: {e}") from None


def measured_gpus(frames, dates, pools=None) -> list[tuple[str, str, str]]:
    """(dt, catalog SKU, device kind) of every GPU with a successful measurement on one
    of `dates` (in `pools`, when given). SKUs outside the catalog (the demo's `cpu`) have
    no roofs to price unmeasured calls with, and are left out."""
    from kernels_bench.hardware import load_catalog
    from pipelines.warehouse.frames import any_of

    if not frames.has("case_stats"):
        return []
    in_dates, date_args = any_of("dt", dates)
    in_pools, pool_args = any_of("pool", pools) if pools else ("true", [])
    rows = frames.table("case_stats", f"{in_dates} AND {in_pools} AND status = 'ok' AND median_ns > 0",
                        "DISTINCT dt, gpu_sku, device_kind", params=[*date_args, *pool_args])
    catalog = load_catalog()
    return sorted((str(r.dt), r.gpu_sku, r.device_kind) for r in rows.itertuples(index=False)
                  if r.gpu_sku in catalog and r.device_kind)


def project_nights(frames, dates, pools=None, nightly: list[tuple[Workload, Scenario]] | None = None) -> list[dict]:
    """The summaries (pipelines/projection/model.py) of every nightly workload on every
    GPU measured on each of `dates`, each from that GPU's measurements up to its night:
    the perf.workload_projections rows of those nights."""
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import project_workload

    nightly = load_nightly() if nightly is None else nightly
    gpus = measured_gpus(frames, dates, pools)
    out = []
    for sku, kind in sorted({(sku, kind) for _, sku, kind in gpus}):
        lookup = load_lookup(frames, sku, device_kind=kind)
        for dt in sorted(d for d, s, k in gpus if (s, k) == (sku, kind)):
            night = lookup.as_of(dt)
            out += [project_workload(w, s, night)[1] for w, s in nightly]
    return out
