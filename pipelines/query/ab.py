"""Two selections of runs compared case by case on their raw samples: is B faster,
slower, the same as A, or can the samples not tell (pipelines.changepoint.compare)?

A side is a set of `key=value` filters on perf.runs columns (all must hold), e.g.
`run_id=nightly-2033-01-05-sim-h100` or `gpu_sku=H100-SXM5-80GB torch_version=2.13.0`.
Keys come from a fixed list and values are bound as literals, never pasted into SQL.
Only kept samples count (not throttled, not outliers); when a side spans several runs,
their samples are pooled. Two engines, same rules and same numbers: `compare_runs` on
Spark (any size; the case comparisons run in parallel) and `compare_runs_duckdb` on the
embedded DuckDB views of the published tables (no JVM to start: seconds, not a minute).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.changepoint import compare

# perf.runs columns a side may be selected by.
SELECTABLE = ("run_id", "pool", "dt", "reason", "suite", "host", "device_kind", "gpu_sku", "gpu_name",
              "driver_version", "cuda_version", "cudnn_version", "nccl_version", "torch_version",
              "triton_version", "python_version", "harness_commit", "hardware_fingerprint", "software_fingerprint")
UNMATCHED = "unmatched"  # the case has samples on one side only
# The order of the rows a comparison prints (nulls first, as Spark's ascending sort).
ORDER = ("kernel", "dtype", "shape", "case_id")

_RESULT = T.StructType([
    T.StructField("case_id", T.StringType()), T.StructField("kind_a", T.StringType()),
    T.StructField("kind_b", T.StringType()), T.StructField("n_a", T.LongType()), T.StructField("n_b", T.LongType()),
    T.StructField("median_a_ns", T.DoubleType()), T.StructField("median_b_ns", T.DoubleType()),
    T.StructField("ratio", T.DoubleType()), T.StructField("ci_low", T.DoubleType()),
    T.StructField("ci_high", T.DoubleType()), T.StructField("p_value", T.DoubleType()),
    T.StructField("verdict", T.StringType()), T.StructField("test", T.StringType()),
])


@dataclass(frozen=True)
class Side:
    """One side of a comparison: perf.runs rows matching every (column, value) filter."""

    filters: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, items: list[str], run_id: str | None = None) -> "Side":
        """From `key=value` strings (and an optional run id); errors name the bad item."""
        filters = [("run_id", run_id)] if run_id else []
        for item in items or []:
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key or not value:
                raise ValueError(f"filter {item!r} is not KEY=VALUE")
            if key not in SELECTABLE:
                raise ValueError(f"filter {item!r}: {key!r} is not a run attribute one can select by; "
                                 f"use one of {', '.join(SELECTABLE)}")
            filters.append((key, value))
        if not filters:
            raise ValueError("a side of the comparison needs a run id or at least one KEY=VALUE filter")
        return cls(tuple(filters))

    def __str__(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.filters)

    def runs(self, runs: DataFrame) -> DataFrame:
        """The distinct (run_id, dt, pool) of the runs this side selects."""
        cond = F.lit(True)
        for key, value in self.filters:
            cond = cond & (F.col(key).cast("string") == F.lit(value))
        return runs.where(cond).select("run_id", "dt", "pool").distinct()


def kept_samples(samples: DataFrame, runs: list[tuple[str, str, str]], side: str) -> DataFrame:
    """(case_id, device_kind, side, latency_ns) of the kept samples of `runs`, given as
    (run_id, dt, pool)."""
    # dt and pool first: they are partition columns, so only those files are read.
    rows = samples.where(F.col("dt").isin(sorted({r[1] for r in runs}))
                         & F.col("pool").isin(sorted({r[2] for r in runs}))
                         & F.col("run_id").isin(sorted({r[0] for r in runs})))
    kept = ~F.col("throttled") & ~F.coalesce(F.col("outlier"), F.lit(False))
    return rows.where(kept).select("case_id", "device_kind", F.lit(side).alias("side"), "latency_ns")


def compare_runs(samples: DataFrame, runs: DataFrame, cases: DataFrame | None, a: Side, b: Side, *,
                 alpha: float = 0.01, tolerance: float = 0.02) -> DataFrame:
    """One row per case measured on either side: sample counts, medians, the ratio
    median(B)/median(A) with its bootstrap CI, the p-value and name of the test, and a
    verdict (faster, slower, same, ambiguous; unmatched when a side has no samples), plus
    the case's kernel, dtype, shape and each side's device kinds (compare simulated with
    measured only on purpose). Raises ValueError when a side selects no run."""
    sides = []
    for name, side in (("a", a), ("b", b)):
        selected = [tuple(r) for r in side.runs(runs).collect()]
        if not selected:
            raise ValueError(f"side {name.upper()} ({side}) matches no run in perf.runs")
        sides.append(kept_samples(samples, selected, name))
    out = (sides[0].unionByName(sides[1]).groupBy("case_id")
           .applyInPandas(_case_comparer(alpha, tolerance), _RESULT))
    if cases is not None:
        shape = F.array_join(F.transform(F.array_sort(F.map_entries("params")),
                                         lambda e: F.concat(e["key"], F.lit("="), e["value"])), ",")
        out = out.join(cases.select("case_id", "kernel", "backend", "dtype", shape.alias("shape")), "case_id", "left")
    else:
        out = out.select("*", *[F.lit(None).cast("string").alias(c) for c in ("kernel", "backend", "dtype", "shape")])
    return out.select("case_id", "kernel", "backend", "dtype", "shape", "kind_a", "kind_b", "n_a", "n_b",
                      "median_a_ns", "median_b_ns", "ratio", "ci_low", "ci_high", "p_value", "verdict", "test")


def _case_comparer(alpha: float, tolerance: float):
    # A plain function (not functools.partial): Spark inspects the UDF's type hints.
    def compare_case(rows: pd.DataFrame) -> pd.DataFrame:
        return _compare_case(rows, alpha=alpha, tolerance=tolerance)
    return compare_case


def compare_runs_duckdb(con, a: Side, b: Side, *, alpha: float = 0.01, tolerance: float = 0.02) -> list[dict]:
    """`compare_runs` on DuckDB: `con` holds the `perf` views of pipelines.query.sql's
    duckdb_connection. The same rows (as dicts, same columns and values), ordered by
    kernel, dtype, shape and case."""
    frames = []
    for name, side in (("a", a), ("b", b)):
        # Keys are checked against SELECTABLE (Side.parse); values are bound parameters.
        where = " AND ".join(f'CAST("{key}" AS VARCHAR) = ?' for key, _ in side.filters)
        selected = con.execute(f"SELECT DISTINCT run_id, dt, pool FROM perf.runs WHERE {where}",
                               [value for _, value in side.filters]).fetchall()
        if not selected:
            raise ValueError(f"side {name.upper()} ({side}) matches no run in perf.runs")
        run_ids, dts, pools = (sorted({r[i] for r in selected}) for i in range(3))
        frames.append(con.execute(
            "SELECT case_id, device_kind, ? AS side, latency_ns FROM perf.samples "
            "WHERE list_contains(?, dt) AND list_contains(?, pool) AND list_contains(?, run_id) "
            "AND NOT throttled AND NOT coalesce(outlier, false)", [name, dts, pools, run_ids]).df())
    rows = pd.concat(frames, ignore_index=True)
    out = [_compare_case(group, alpha=alpha, tolerance=tolerance).iloc[0].to_dict()
           for _, group in rows.groupby("case_id", sort=True)]
    ids = [r["case_id"] for r in out]
    shapes = {case_id: (kernel, backend, dtype, ",".join(f"{k}={v}" for k, v in sorted(dict(params or {}).items())))
              for case_id, kernel, backend, dtype, params in con.execute(
                  "SELECT case_id, kernel, backend, dtype, params FROM perf.cases WHERE list_contains(?, case_id)",
                  [ids]).fetchall()}
    result = []
    for r in out:
        kernel, backend, dtype, shape = shapes.get(r["case_id"], (None,) * 4)
        r = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()}
        result.append({"case_id": r["case_id"], "kernel": kernel, "backend": backend, "dtype": dtype, "shape": shape,
                       **{c: r[c] for c in _RESULT.names if c != "case_id"}})
    return sorted(result, key=lambda r: tuple((r[c] is not None, r[c] or "") for c in ORDER))


def _compare_case(rows: pd.DataFrame, *, alpha: float, tolerance: float) -> pd.DataFrame:
    # The order the engine delivered the samples in does not matter: the rank test and
    # the medians ignore it, and the bootstrap draws from the sorted samples.
    a = rows.loc[rows["side"] == "a", "latency_ns"].to_numpy(dtype=float)
    b = rows.loc[rows["side"] == "b", "latency_ns"].to_numpy(dtype=float)
    kinds = {s: ",".join(sorted(set(rows.loc[rows["side"] == s, "device_kind"].dropna()))) or None for s in "ab"}
    out = {"case_id": rows["case_id"].iloc[0], "kind_a": kinds["a"], "kind_b": kinds["b"], "n_a": len(a),
           "n_b": len(b),
           "median_a_ns": float(np.median(a)) if len(a) else None,
           "median_b_ns": float(np.median(b)) if len(b) else None}
    if len(a) < 2 or len(b) < 2:
        out.update(ratio=None, ci_low=None, ci_high=None, p_value=None, verdict=UNMATCHED, test=None)
    else:
        c = compare(a, b, alpha=alpha, tolerance=tolerance)
        out.update(ratio=c.ratio, ci_low=c.ci_low, ci_high=c.ci_high, p_value=c.p_value, verdict=c.verdict,
                   test=c.test)
    return pd.DataFrame([out], columns=_RESULT.names)
