"""The data-quality suites, as code: one per landed table (samples, runs, case_results)
and one for the published case_stats.

Every expectation is tagged `meta={"severity": "hard" | "soft"}`:
- hard: the batch is wrong in a way that would corrupt published numbers; its
  partition must not be published (see pipelines.mining.quality.enforce);
- soft: suspicious but publishable; reported in perf.dq_results as a warning.

Row-level faults (one negative latency among thousands) are the cleaning step's job:
those rows are quarantined with a reason. The hard row-level gates below therefore
allow a small share of bad rows (`mostly`) and fire only when a batch is broken
wholesale (a unit error, a harness bug), which cleaning must not paper over.

The suites are built fresh on each call (cheap) so that no caller shares mutable
GX objects; pipelines.mining.quality caches them per process.
"""
from __future__ import annotations

from typing import Callable

# Value sets shared with the table contract in schemas/tables.py.
DEVICE_KINDS = ["gpu", "cpu", "simulated"]
RUN_STATUSES = ["ok", "partial", "failed"]
RUN_REASONS = ["nightly", "backfill", "rerun", "manual", "import"]
CASE_STATUSES = ["ok", "failed", "skipped", "timeout", "oom", "crashed", "stopped"]
KNOWN_DTYPES = ["fp64", "fp32", "tf32", "bf16", "fp16", "fp8"]

# Share of rows a row-level hard gate tolerates before it declares the batch broken.
ROW_GATE_MOSTLY = 0.99
# case_stats: a case noisier than this (IQR / median) is flagged, not withheld.
MAX_REL_NOISE = 0.5

HARD, SOFT = "hard", "soft"


def _gx():
    # Imported lazily: great_expectations takes seconds to import and most callers of
    # schemas/ (the harness on a GPU worker) never validate anything.
    import great_expectations as gx

    return gx


def _tag(severity: str) -> dict:
    from great_expectations.expectations.metadata_types import FailureSeverity

    gx_severity = FailureSeverity.CRITICAL if severity == HARD else FailureSeverity.WARNING
    return {"meta": {"severity": severity}, "severity": gx_severity}


def _not_null(columns: list[str], severity: str = HARD) -> list:
    E = _gx().expectations
    return [E.ExpectColumnValuesToNotBeNull(column=c, **_tag(severity)) for c in columns]


def samples_suite():
    E = _gx().expectations
    return _gx().ExpectationSuite(name="samples", expectations=[
        *_not_null(["run_id", "case_id", "iteration", "latency_ns"]),
        E.ExpectColumnValuesToBeBetween(column="latency_ns", min_value=0, strict_min=True,
                                        mostly=ROW_GATE_MOSTLY, **_tag(HARD)),
        E.ExpectColumnValuesToBeInSet(column="device_kind", value_set=DEVICE_KINDS, **_tag(HARD)),
        *_not_null(["throttled"], SOFT),
    ])


def runs_suite():
    E = _gx().expectations
    return _gx().ExpectationSuite(name="runs", expectations=[
        *_not_null(["run_id", "started_at", "finished_at"]),
        E.ExpectColumnValuesToBeInSet(column="device_kind", value_set=DEVICE_KINDS, **_tag(HARD)),
        E.ExpectColumnValuesToBeInSet(column="status", value_set=RUN_STATUSES, **_tag(HARD)),
        E.ExpectColumnValuesToBeInSet(column="reason", value_set=RUN_REASONS, **_tag(SOFT)),
        # A shard that finished before it started means a clock problem on the worker.
        E.ExpectColumnPairValuesAToBeGreaterThanB(column_A="finished_at", column_B="started_at", or_equal=True,
                                                  ignore_row_if="either_value_is_missing", **_tag(SOFT)),
    ])


def case_results_suite():
    E = _gx().expectations
    return _gx().ExpectationSuite(name="case_results", expectations=[
        *_not_null(["run_id", "case_id", "kernel"]),
        E.ExpectColumnValuesToBeInSet(column="status", value_set=CASE_STATUSES, **_tag(HARD)),
        E.ExpectColumnValuesToBeInSet(column="dtype", value_set=KNOWN_DTYPES, **_tag(SOFT)),
        E.ExpectColumnValuesToBeBetween(column="n_samples", min_value=0, **_tag(SOFT)),
    ])


def case_stats_suite():
    E = _gx().expectations
    ordered = dict(or_equal=True, ignore_row_if="either_value_is_missing", **_tag(HARD))
    return _gx().ExpectationSuite(name="case_stats", expectations=[
        E.ExpectColumnValuesToBeInSet(column="status", value_set=CASE_STATUSES, **_tag(HARD)),
        # Nulls (cases that did not run) are not counted by GX column-map expectations,
        # so this reads "where a median exists, it is positive".
        E.ExpectColumnValuesToBeBetween(column="median_ns", min_value=0, strict_min=True, **_tag(HARD)),
        E.ExpectColumnPairValuesAToBeGreaterThanB(column_A="median_ns", column_B="p10_ns", **ordered),
        E.ExpectColumnPairValuesAToBeGreaterThanB(column_A="p90_ns", column_B="median_ns", **ordered),
        E.ExpectColumnPairValuesAToBeGreaterThanB(column_A="n", column_B="n_kept", **ordered),
        E.ExpectColumnValuesToBeBetween(column="rel_noise", min_value=0, max_value=MAX_REL_NOISE, **_tag(SOFT)),
    ])


SUITES: dict[str, Callable] = {
    "samples": samples_suite,
    "runs": runs_suite,
    "case_results": case_results_suite,
    "case_stats": case_stats_suite,
}


def build_suite(name: str):
    """The named suite, freshly built; KeyError naming the known suites otherwise."""
    try:
        return SUITES[name]()
    except KeyError:
        raise KeyError(f"unknown data-quality suite {name!r}; known: {sorted(SUITES)}") from None


def severity_of(expectation) -> str:
    """'hard' or 'soft' for an expectation (or its configuration); untagged counts as hard,
    so that forgetting the tag errs on the side of stopping."""
    meta = getattr(expectation, "meta", None) or {}
    return SOFT if meta.get("severity") == SOFT else HARD
