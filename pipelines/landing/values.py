"""Rows that cannot be measurements: physically impossible values and repeated keys.

Each check returns the reason a row is set aside (naming the row and the field), or
None. These are the mining job's cleaning rules (pipelines/mining/clean.py) applied at
the door, plus bounds that only the hardware can set, so that an impossible value never
lands as a measurement.
"""
from __future__ import annotations

import json
import math

HOUR_NS = 3_600 * 10**9          # one call taking longer than an hour is not a kernel timing
CLOCK_MARGIN = 1.10              # the catalog's clock is the spec sheet's boost clock; readings wobble above it
MAX_TEMPERATURE_C = 150.0        # silicon shuts down long before; a reading above is a broken sensor
ABSOLUTE_ZERO_C = -273.15


def clock_ceiling_mhz(sku: str | None) -> float | None:
    """The highest SM clock a sample on `sku` can report, from the hardware catalog
    (None when the catalog does not know the SKU or its clock)."""
    from kernels_bench.hardware import load_catalog

    hw = load_catalog().get(sku or "")
    return hw.sm_clock_default_mhz * CLOCK_MARGIN if hw and hw.sm_clock_default_mhz else None


def sample_problem(r: dict, i: int, run: dict, clock_ceiling: float | None) -> str | None:
    lat = r["latency_ns"]
    if r["iteration"] < 0:
        return f"row {i}: iteration {r['iteration']} is negative (field iteration)"
    if lat <= 0:
        return f"row {i}: latency_ns {lat} is not positive (field latency_ns)"
    if lat > HOUR_NS:
        return f"row {i}: latency_ns {lat} is more than an hour per call (field latency_ns)"
    clock = r.get("sm_clock_mhz")
    if clock is not None and clock < 0:
        return f"row {i}: sm_clock_mhz {clock} is negative (field sm_clock_mhz)"
    if clock is not None and clock_ceiling is not None and clock > clock_ceiling:
        return (f"row {i}: sm_clock_mhz {clock} is above {clock_ceiling:.0f} MHz, the most a "
                f"{run.get('gpu_sku')} reaches (hardware catalog; field sm_clock_mhz)")
    temp = r.get("temperature_c")
    if temp is not None and not (math.isfinite(temp) and ABSOLUTE_ZERO_C <= temp <= MAX_TEMPERATURE_C):
        return f"row {i}: temperature_c {temp} is not a possible reading (field temperature_c)"
    power = r.get("power_w")
    if power is not None and not (math.isfinite(power) and power >= 0):
        return f"row {i}: power_w {power} is negative or not finite (field power_w)"
    if r["device_kind"] != run["device_kind"]:
        return (f"row {i}: device_kind {r['device_kind']!r} differs from the run's {run['device_kind']!r} "
                "(field device_kind): simulated and measured data never mix")
    return None


_NON_NEGATIVE = ("n_samples", "flops_per_call", "bytes_per_call", "energy_per_call_j", "avg_power_w")
# What the harness writes (schemas/tables.py); any other word would be mined as a failure of no known kind.
CASE_STATUSES = ("ok", "failed", "skipped", "timeout", "oom", "crashed", "stopped")
RUN_STATUSES = ("ok", "partial", "failed")


def result_problem(r: dict, i: int, run: dict) -> str | None:
    if r["shard"] != run["shard"]:
        return (f"row {i}: case_results.shard {r['shard']} does not match the shard's run metadata "
                f"(shard {run['shard']}); the files of different shards were mixed")
    if r["status"] not in CASE_STATUSES:
        return f"row {i}: status {r['status']!r} is not one of {', '.join(CASE_STATUSES)} (field status)"
    for col in _NON_NEGATIVE:
        v = r.get(col)
        if v is not None and not (math.isfinite(v) and v >= 0):
            return f"row {i}: {col} {v} is negative or not finite (field {col})"
    return None


def repeated_keys(rows: list[dict], keys: tuple[str, ...], kind: str,
                  skip: set[int] = frozenset(), index=None) -> tuple[set[int], dict[int, str], int]:
    """(indices of exact repeats, which land once: dropped silently but counted;
    {index: reason} for rows whose key repeats an earlier row's with other values;
    the number of exact repeats). Rows in `skip` (set aside already, for their own
    values) take no part: the first valid copy of a key is the one that lands.
    `index`: each row's position in its file (default: its position in `rows`)."""
    first: dict[tuple, tuple[int, str]] = {}
    exact, differing = set(), {}
    for i, r in zip(range(len(rows)) if index is None else index, rows):
        if i in skip:
            continue
        key = tuple(r[k] for k in keys)
        body = json.dumps(r, sort_keys=True, default=str)
        if key not in first:
            first[key] = (i, body)
        elif first[key][1] == body:
            exact.add(i)
        else:
            differing[i] = (f"row {i}: {kind} key {dict(zip(keys, key))} repeats row {first[key][0]} with other "
                            "values; the first valid copy landed, this one is set aside")
    return exact, differing, len(exact)
