"""SQL fragments the pages share. Only the dashboard's own text goes into a query; the
values (dates, pools, names) are `?` parameters listed beside each fragment."""
from __future__ import annotations

# The series key of a case_stats row `cs` joined with its run's hardware fingerprint `r`:
# the same hash pipelines.mining.history.series_key computes on Spark.
SERIES_KEY = ("substr(sha256(concat_ws('|', coalesce(cs.case_id, ''), coalesce(cs.gpu_sku, ''), "
              "coalesce(r.hardware_fingerprint, ''), coalesce(cs.device_kind, ''))), 1, 16)")

# case_stats rows matching {where}, the latest attempt per run and case.
LATEST_ATTEMPT = ("SELECT * FROM perf.case_stats WHERE {where} "
                  "QUALIFY row_number() OVER (PARTITION BY run_id, case_id ORDER BY attempt DESC) = 1")

# Run attributes whose change between two points of a series is marked on its history.
PROVENANCE = ("driver_version", "cuda_version", "torch_version", "triton_version", "harness_commit")


def night_filter(nights: list[dict], prefix: str = "") -> tuple[str, list[str]]:
    """(`(dt = ? AND pool = ?) OR ...`, its parameters) for the given (dt, pool) nights."""
    if not nights:
        return "false", []
    text = " OR ".join(f"({prefix}dt = ? AND {prefix}pool = ?)" for _ in nights)
    return text, [v for n in nights for v in (n["dt"], n["pool"])]

# A case's parameters (perf.cases `c`) as `k=v,...` in key order, as frames.shape_label writes them.
SHAPE = ("coalesce(array_to_string(list_transform(list_sort(map_entries(c.params)), "
         "lambda e: e.key || '=' || e.value), ','), '')")
