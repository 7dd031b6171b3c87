"""Page 6, roofline and projections per GPU: each case of the GPU's newest night placed
by arithmetic intensity and achieved TFLOP/s under the GPU's roofs (one per dtype), and
perf.projections onto the GPU against the latency measured since, where both exist.

One device kind at a time, as everywhere (`pipelines.projection.lookup.choose_kind`): a
GPU measured both for real and on the simulated device shows its real measurements and
the projections calibrated on real ones unless `kind=simulated` asks for the others."""
from __future__ import annotations

from fastapi import APIRouter, Request

from pipelines.web import params
from pipelines.web.reader import Reader
from pipelines.web.render import page
from pipelines.web.sql import SHAPE

router = APIRouter()
KINDS = ("gpu", "cpu", "simulated")


def skus(reader: Reader) -> list[str]:
    out = set()
    if reader.has("hardware"):
        out |= {r["sku"] for r in reader.rows("SELECT DISTINCT sku FROM perf.hardware WHERE sku IS NOT NULL")}
    if reader.has("projections"):
        out |= {r["sku"] for r in reader.rows("SELECT DISTINCT target_sku AS sku FROM perf.projections")}
    return sorted(out)


def most_measured(reader: Reader) -> list[str]:
    """The GPUs of perf.series, the one with the most series first."""
    if not reader.has("series"):
        return []
    return [r["gpu_sku"] for r in reader.rows("SELECT gpu_sku, count(*) AS n FROM perf.series WHERE gpu_sku IS NOT "
                                              "NULL GROUP BY gpu_sku ORDER BY n DESC, gpu_sku")]


def hardware(reader: Reader, sku: str) -> dict | None:
    if not reader.has("hardware"):
        return None
    rows = reader.rows("SELECT sku, name, device_kind, peak_tflops, memory_bandwidth_gbps, source "
                       "FROM perf.hardware WHERE sku = ?", [sku])
    if not rows:
        return None
    hw = rows[0]
    hw["peak_tflops"] = {k: float(v) for k, v in dict(hw["peak_tflops"] or {}).items() if _number(v)}
    return hw


def _number(v) -> bool:
    try:
        return float(v) > 0
    except (TypeError, ValueError):
        return False


def kinds(reader: Reader, sku: str) -> list[str]:
    """The device kinds `sku` was measured as, or (never measured) projected from; real
    ('gpu') first, as the page's default."""
    found = set()
    if reader.has("case_stats"):
        found |= {r["device_kind"] for r in reader.rows(
            "SELECT DISTINCT device_kind FROM hot.gpu_nights WHERE gpu_sku = ? AND device_kind IS NOT NULL", [sku])}
    if not found and reader.has("projections"):
        found |= {r["device_kind"] for r in reader.rows(
            "SELECT DISTINCT device_kind FROM perf.projections WHERE target_sku = ? AND device_kind <> ''", [sku])}
    return sorted(found, key=lambda k: (k != "gpu", k))


def measured(reader: Reader, sku: str, kind: str | None, as_of: str | None) -> tuple[str | None, list[dict]]:
    """(night, its cases on `sku` of device kind `kind`): the newest night on or before
    `as_of` that measured the GPU as that kind."""
    if not reader.has("case_stats") or kind is None:
        return None, []
    # hot.gpu_nights and hot.gpu_points: the reader's case_stats by GPU and night (reader.DERIVED).
    (night,) = reader.frame("SELECT max(dt) FROM hot.gpu_nights WHERE gpu_sku = ? AND device_kind = ? "
                            "AND (? IS NULL OR dt <= ?)", [sku, kind, as_of, as_of]).iloc[0].tolist()
    if night is None:
        return None, []
    rows = reader.rows(
        f"SELECT cs.series_key, cs.kernel, cs.family, cs.backend, cs.dtype, {SHAPE} AS shape, "
        f"cs.pool, cs.flops_per_call, cs.bytes_per_call, cs.median_ns, cs.pct_of_peak, cs.device_kind "
        f"FROM hot.gpu_points cs LEFT JOIN perf.cases c USING (case_id) WHERE cs.gpu_sku = ? AND cs.dt = ? "
        f"AND cs.device_kind = ? ORDER BY cs.kernel, cs.dtype, shape, cs.pool, cs.series_key", [sku, night, kind])
    for r in rows:
        flops, bytes_ = r["flops_per_call"] or 0.0, r["bytes_per_call"] or 0.0
        r["intensity"] = flops / bytes_ if bytes_ > 0 and flops > 0 else None
        r["tflops"] = flops / r["median_ns"] / 1e3 if flops > 0 else None
    return night, rows


def projections(reader: Reader, sku: str, kind: str | None) -> list[dict]:
    """Projections onto `sku` calibrated on measurements of device kind `kind`."""
    if not reader.has("projections") or kind is None:
        return []
    return reader.rows("SELECT case_id, source_sku, device_kind, kernel, dtype, shape, regime, projected_ns, "
                       "measured_ns, error_pct, calibration_level, model, measured_dt FROM perf.projections "
                       "WHERE target_sku = ? AND device_kind = ? ORDER BY kernel, dtype, shape LIMIT 5000",
                       [sku, kind])


@router.get("/roofline")
def roofline_page(request: Request, sku: str | None = None, date: str | None = None, kind: str | None = None):
    sku, as_of = params.name(sku, "sku"), params.date(date)
    kind = params.choice(kind, "kind", KINDS, "") or None
    reader: Reader = request.app.state.reader
    view = reader.memo(("roofline", sku, as_of, kind), lambda: roofline_view(reader, sku, as_of, kind))
    return page(request, "roofline.html", current="roofline", **view)


def roofline_view(reader: Reader, sku: str | None, as_of: str | None, kind: str | None = None) -> dict:
    """What the roofline page shows for `sku` (default: the most measured GPU with roofs)
    as of `as_of`, of device kind `kind` (default: real where the GPU has real
    measurements): the page's template values."""
    known, measured_skus = reader.memo(("roofline-gpus",), lambda: (skus(reader), most_measured(reader)))
    if sku is None:  # the most measured GPU with roofs, else any
        sku = next((s for s in measured_skus if s in known), (known or measured_skus or [None])[0])
    hw = hardware(reader, sku) if sku else None
    if sku and hw is None and sku not in known and sku not in measured_skus:
        raise params.NotFound(f"no GPU {sku!r} in perf.hardware, perf.projections or perf.series")
    known = sorted(set(known) | set(measured_skus))
    held = kinds(reader, sku) if sku else []
    if kind is None:
        kind = held[0] if held else None
    night, points = measured(reader, sku, kind, as_of) if sku else (None, [])
    proj = projections(reader, sku, kind) if sku else []
    both = [p for p in proj if p["measured_ns"] and p["projected_ns"]]
    errors = sorted(abs(p["error_pct"]) for p in both if p["error_pct"] is not None)
    chart = {"hw": hw, "points": [{k: p[k] for k in ("series_key", "kernel", "dtype", "shape", "intensity", "tflops",
                                                     "median_ns", "pct_of_peak")}
                                  for p in points if p["intensity"] and p["tflops"]],
             "projections": [{k: p[k] for k in ("kernel", "dtype", "shape", "projected_ns", "measured_ns",
                                                "error_pct")} for p in both]}
    return dict(sku=sku, skus=known, hw=hw, kind=kind, other_kinds=[k for k in held if k != kind],
                night=night, points=points, projections=proj, measured_both=len(both),
                as_of=as_of, median_error=errors[len(errors) // 2] if errors else None, chart=chart)
