"""A workload's step time, throughput and energy on one GPU, from the kernels it calls.

Each call of the decomposition (pipelines/projection/decompose.py) is priced from the
lake, the most trusted figure first, and says which it used (`source`):

1. measured: the newest median of that very case on that GPU (and software, if asked);
2. interpolated: between measured neighbouring shapes of the same kernel on that GPU
   (pipelines/projection/lookup.py: one parameter apart, bracketing, log-log);
3. roofline: the roofline projection (pipelines/projection/roofline.py), calibrated on
   that GPU's own measurements when it has any, else on another measured GPU, else
   the spec sheet's roofs alone (a lower bound). A collective's roof is the catalog's
   link bandwidth plus a fixed latency (COLLECTIVE_LATENCY_NS, an assumption).

The step is the sum of its calls on one GPU (the `tp` GPUs run in parallel): no overlap
of communication with compute and no launch gaps are modelled (docs/model.md).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kernels_bench.hardware import Hardware, hardware, roofs_ns
from pipelines.projection.decompose import OP_CLASSES, Call, decompose
from pipelines.projection.lookup import Lookup, interpolate
from pipelines.projection.workload import Scenario, Workload

MODEL = "workload-sum-v1"
SOURCES = ("measured", "interpolated", "roofline")
# NCCL's small-message all-reduce latency within an NVLink node is ~10 us; an
# assumption until the lake measures the collective (then it is measured or interpolated).
COLLECTIVE_LATENCY_NS = 10_000.0
# A call whose roofline bound is under this share of its time is bound by its fixed
# cost (launch, latency), not by a roof.
LATENCY_SHARE = 0.25


def price_calls(calls: list[Call], lookup: Lookup, target: Hardware) -> pd.DataFrame:
    """One row per call: its time on `target`, where the figure came from, the roof that
    binds it and its energy where the lake measured energy."""
    from pipelines.projection.roofline import place, project

    measured = lookup.measured.set_index("case_id") if not lookup.measured.empty else pd.DataFrame()
    frame = pd.DataFrame([{"case_id": c.case.case_id, "family": c.case.family, "kernel": c.case.kernel,
                           "backend": c.case.backend, "dtype": c.case.dtype, "shape": c.case.label,
                           "flops_per_call": c.flops, "bytes_per_call": c.bytes} for c in calls])
    frame = frame.drop_duplicates("case_id")
    placed = place(frame, target).set_index("case_id")
    projected = (project(frame, lookup.calibration, target).set_index("case_id")
                 if lookup.calibration is not None else None)
    rows = []
    for c in calls:
        cid, roof = c.case.case_id, placed.loc[c.case.case_id]
        bound = float(np.fmax(np.nan_to_num(roof["compute_ns"]), roof["memory_ns"]))
        regime = roof["regime"]
        if c.op_class == "communication":
            bound, regime = _link_ns(c.bytes, target), "communication"
        energy = math.nan
        if cid in measured.index:
            m = measured.loc[cid]
            ns, source, how = float(m["median_ns"]), "measured", f"median of run {m['run_id']} (dt {m['dt']})"
            energy = _float(m["energy_per_call_j"])
        elif (hit := interpolate(c.case, lookup.measured)) is not None:
            (ns, energy, how), source = hit, "interpolated"
        else:
            ns, how = _roofline(c, bound, projected, lookup)
            source = "roofline"
        share = bound / ns if ns > 0 else math.nan
        rows.append({"op": c.op, "op_class": c.op_class, "layer": c.layer, "count": c.count, "case_id": cid,
                     "case": c.case.label, "kernel": c.case.kernel, "flops_per_call": c.flops,
                     "bytes_per_call": c.bytes, "ns_per_call": ns, "total_ns": ns * c.count, "source": source,
                     "how": how, "bound_ns": bound, "roof_pct": share * 100,
                     "bound": "latency" if share < LATENCY_SHARE else regime, "energy_per_call_j": energy})
    return pd.DataFrame(rows)


def _float(v) -> float:
    try:
        return float(v) if v is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def _link_ns(bytes_: float, target: Hardware) -> float:
    """The link roof of a collective's bus bytes (NaN where the catalog has no link figure)."""
    if not target.link_bandwidth_gbps:
        return math.nan
    return float(roofs_ns(0.0, bytes_, 1.0, target.link_bandwidth_gbps)[1])


def _roofline(c: Call, bound: float, projected: pd.DataFrame | None, lookup: Lookup) -> tuple[float, str]:
    """(ns, how) of a call nothing measured covers."""
    if c.op_class == "communication":
        if bound != bound:
            return COLLECTIVE_LATENCY_NS, "no link bandwidth in the catalog: the assumed latency alone"
        return COLLECTIVE_LATENCY_NS + bound, (f"link roof + {COLLECTIVE_LATENCY_NS / 1e3:.0f} us latency "
                                               f"(assumed)")
    if projected is not None:
        p = projected.loc[c.case.case_id]
        if p["projected_ns"] == p["projected_ns"]:
            return float(p["projected_ns"]), f"roofline, efficiency from {p['calibration_level']}"
    return bound, "roofline bound at spec-sheet peaks (uncalibrated: a lower bound)"


def project_workload(w: Workload, s: Scenario, lookup: Lookup,
                     target: Hardware | None = None) -> tuple[pd.DataFrame, dict]:
    """(the priced calls, the step's summary) of `s` on the lookup's GPU (or on `target`,
    a device outside the catalog, e.g. the CPU of benchmarks/model_e2e.py)."""
    target = target or hardware(lookup.sku)
    calls = price_calls(decompose(w, s), lookup, target)
    return calls, summarise(w, s, calls, lookup, target)


def summarise(w: Workload, s: Scenario, calls: pd.DataFrame, lookup: Lookup, target: Hardware) -> dict:
    """The step's figures: time, tokens/s, per layer and per op class, MFU, energy per
    token, and the share of the time resting on each source."""
    step = float(calls["total_ns"].sum())
    by_class = calls.groupby("op_class")["total_ns"].sum()
    by_source = calls.groupby("source")["total_ns"].sum()
    by_bound = calls.groupby("bound")["total_ns"].sum()
    model_flops = float((calls["flops_per_call"] * calls["count"])[calls["op_class"] != "communication"].sum()) * s.tp
    peak = target.peak_tflops.get(w.dtype)
    mfu = model_flops / (step * 1e3 * peak * s.tp) if peak and step > 0 else math.nan  # TFLOP/s = 1e3 flop/ns
    with_energy = calls["energy_per_call_j"].notna()
    covered_ns = float(calls.loc[with_energy, "total_ns"].sum())
    joules = float((calls["energy_per_call_j"] * calls["count"])[with_energy].sum())
    # The uncovered time is charged at the covered calls' mean power: an estimate, whose share is reported.
    step_j = joules + (step - covered_ns) * joules / covered_ns if covered_ns > 0 else math.nan
    kv_bytes = 2 * w.layers * s.kv_heads_per_gpu(w) * w.head_dim * s.batch * s.seq * _dtype_bytes(w.dtype)
    memory = w.weight_bytes / s.tp + kv_bytes
    return {
        "workload": w.name, "scenario": s.label, "phase": s.phase, "batch": s.batch, "seq": s.seq, "tp": s.tp,
        "ep": s.ep, "target_sku": target.sku, "device_kind": lookup.device_kind, "software": lookup.software,
        "as_of_dt": lookup.dates[-1] if lookup.dates else None,
        "step_ns": step, "tokens_per_step": s.tokens, "tokens_per_s": s.tokens / step * 1e9 if step else math.nan,
        "per_layer_ns": float(calls.loc[calls["layer"], "total_ns"].sum()) / w.layers,
        **{f"{c}_ns": float(by_class.get(c, 0.0)) for c in OP_CLASSES},
        **{f"{b}_bound_pct": float(by_bound.get(b, 0.0)) / step * 100 for b in
           ("compute", "memory", "communication", "latency")},
        "model_tflop": model_flops / 1e12, "mfu_pct": mfu * 100,
        "energy_per_token_j": step_j * s.tp / s.tokens if step_j == step_j else math.nan,
        "energy_covered_pct": covered_ns / step * 100 if step else math.nan,
        **{f"{src}_pct": float(by_source.get(src, 0.0)) / step * 100 for src in SOURCES},
        "memory_per_gpu_gb": memory / 1e9,
        "fits": target.memory_bytes is None or memory <= target.memory_bytes,
        "model": MODEL, "context": lookup.context, "simulated": lookup.simulated,
    }


def _dtype_bytes(dtype: str) -> int:
    from kernels_bench.kernels.base import DTYPE_BYTES

    return DTYPE_BYTES[dtype]


def compare(a: tuple[pd.DataFrame, dict], b: tuple[pd.DataFrame, dict]) -> pd.DataFrame:
    """Side by side per op class and in total: time on A, on B, and B / A."""
    (_, sa), (_, sb) = a, b
    rows = [{"what": f"{c} (ms)", "a": sa[f"{c}_ns"] / 1e6, "b": sb[f"{c}_ns"] / 1e6} for c in OP_CLASSES
            if sa[f"{c}_ns"] or sb[f"{c}_ns"]]
    rows += [{"what": "step (ms)", "a": sa["step_ns"] / 1e6, "b": sb["step_ns"] / 1e6},
             {"what": "tokens/s", "a": sa["tokens_per_s"], "b": sb["tokens_per_s"]},
             {"what": "MFU (%)", "a": sa["mfu_pct"], "b": sb["mfu_pct"]},
             {"what": "energy/token (J)", "a": sa["energy_per_token_j"], "b": sb["energy_per_token_j"]},
             {"what": "measured (% of time)", "a": sa["measured_pct"], "b": sb["measured_pct"]}]
    out = pd.DataFrame(rows)
    out["b/a"] = out["b"] / out["a"]
    return out


def history(w: Workload, s: Scenario, lookup: Lookup) -> pd.DataFrame:
    """The step as projected from each night's newest measurements (up to that night):
    a kernel regression shows as the step getting slower."""
    rows = []
    for dt in lookup.dates:
        _, summary = project_workload(w, s, lookup.as_of(dt))
        rows.append({"dt": dt, "step_ms": summary["step_ns"] / 1e6, "tokens_per_s": summary["tokens_per_s"],
                     "measured_pct": summary["measured_pct"], "interpolated_pct": summary["interpolated_pct"],
                     "roofline_pct": summary["roofline_pct"]})
    out = pd.DataFrame(rows)
    if not out.empty:
        out["change_pct"] = (out["step_ms"] / out["step_ms"].shift(1) - 1) * 100
    return out
