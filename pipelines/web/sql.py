"""SQL fragments the pages share. Only the dashboard's own text goes into a query; the
values (dates, pools, names) are `?` parameters listed beside each fragment. perf.case_stats
is the reader's copy (pipelines/web/reader.py): one row per run and case, with its series_key."""
from __future__ import annotations

# Run attributes whose change between two points of a series is marked on its history.
PROVENANCE = ("driver_version", "cuda_version", "torch_version", "triton_version", "harness_commit")


def night_filter(nights: list[dict], prefix: str = "") -> tuple[str, list[str]]:
    """(`(dt = ? AND pool = ?) OR ...`, its parameters) for the given (dt, pool) nights."""
    if not nights:
        return "false", []
    text = " OR ".join(f"({prefix}dt = ? AND {prefix}pool = ?)" for _ in nights)
    return text, [v for n in nights for v in (n["dt"], n["pool"])]

# A case's parameters (perf.cases `c`) as `k=v,...` in key order, as frames.shape_label writes
# them: computed once, when the reader copies perf.cases (pipelines/web/reader.py).
SHAPE_OF_PARAMS = ("coalesce(array_to_string(list_transform(list_sort(map_entries(params)), "
                   "lambda e: e.key || '=' || e.value), ','), '')")
SHAPE = "coalesce(c.shape, '')"
