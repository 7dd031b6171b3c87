"""Two selections of runs compared case by case on their raw samples: is B faster,
slower, the same as A, or can the samples not tell (pipelines.changepoint.compare)?

A side is a set of `key=value` filters on perf.runs columns (all must hold), e.g.
`run_id=nightly-2033-01-05-sim-h100` or `gpu_sku=H100-SXM5-80GB torch_version=2.13.0`.
Keys come from a fixed list and values are bound as literals, never pasted into SQL.
Only kept samples count (not throttled, not outliers); when a side spans several runs,
their samples are pooled. Two engines, same rules and same numbers: `compare_runs` on
Spark (any size; the case comparisons run in parallel) and `compare_runs_duckdb` on the
embedded DuckDB views of the published tables (no JVM to start: seconds, not a minute).
Both compare through `compare_cases`, which gives each case exactly the numbers of
pipelines.changepoint.compare, computed for all cases of one sample size at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from scipy.stats import mannwhitneyu

from pipelines.changepoint import compare
from pipelines.changepoint.compare import CONFIDENCE, N_BOOT, SEED, TEST_NAME, bootstrap_median_ranks, verdict_of
from pipelines.query.selectable import SELECTABLE

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
        """The distinct (run_id, dt, pool, device_kind) of the runs this side selects."""
        cond = F.lit(True)
        for key, value in self.filters:
            cond = cond & (F.col(key).cast("string") == F.lit(value))
        return runs.where(cond).select("run_id", "dt", "pool", "device_kind").distinct()

    def check_selected(self, name: str, selected: list[tuple]) -> None:
        """ValueError when the side selects no run, or runs of more than one device kind
        (`selected`: (run_id, dt, pool, device_kind)): their samples pooled would give a
        median of real and simulated measurements together."""
        if not selected:
            raise ValueError(f"side {name.upper()} ({self}) matches no run in perf.runs")
        kinds = sorted({r[3] for r in selected})
        if len(kinds) > 1:
            pools = {k: sorted({r[2] for r in selected if r[3] == k}) for k in kinds}
            raise MixedKinds(f"side {name.upper()} ({self}) selects runs of more than one device kind "
                             f"({'; '.join(f'{k}: pools {v}' for k, v in pools.items())}), whose samples "
                             f"would be pooled into one median; add {' or '.join(f'device_kind={k}' for k in kinds)} "
                             "to it")


def kept_samples(samples: DataFrame, runs: list[tuple], side: str) -> DataFrame:
    """(case_id, device_kind, side, latency_ns) of the kept samples of `runs`, given as
    (run_id, dt, pool, ...)."""
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
        side.check_selected(name, selected)
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
        return compare_cases(rows, alpha=alpha, tolerance=tolerance)
    return compare_case


class SideTooLarge(ValueError):
    """A side selects more samples than the caller compares at once."""


class MixedKinds(ValueError):
    """A side selects runs of more than one device kind (real and simulated)."""


def compare_runs_duckdb(con, a: Side, b: Side, *, alpha: float = 0.01, tolerance: float = 0.02,
                        max_samples: int | None = None) -> list[dict]:
    """`compare_runs` on DuckDB: `con` holds the `perf` views of pipelines.query.sql's
    duckdb_connection. The same rows (as dicts, same columns and values), ordered by
    kernel, dtype, shape and case. With `max_samples`, a side selecting more samples
    raises SideTooLarge before any is loaded (a shared server's bound on one request)."""
    frames = []
    for name, side in (("a", a), ("b", b)):
        # Keys are checked against SELECTABLE (Side.parse); values are bound parameters.
        where = " AND ".join(f'CAST("{key}" AS VARCHAR) = ?' for key, _ in side.filters)
        selected = con.execute(f"SELECT DISTINCT run_id, dt, pool, device_kind FROM perf.runs WHERE {where}",
                               [value for _, value in side.filters]).fetchall()
        side.check_selected(name, selected)
        run_ids, dts, pools = (sorted({r[i] for r in selected}) for i in range(3))
        # IN lists, not list_contains(?, dt): DuckDB skips the other partitions' files only for these.
        where = (f"dt IN ({_marks(dts)}) AND pool IN ({_marks(pools)}) AND run_id IN ({_marks(run_ids)}) "
                 "AND NOT throttled AND NOT coalesce(outlier, false)")
        args = [*dts, *pools, *run_ids]
        if max_samples is not None:
            n = con.execute(f"SELECT count(*) FROM perf.samples WHERE {where}", args).fetchone()[0]
            if n > max_samples:
                raise SideTooLarge(f"side {name.upper()} ({side}) selects {n:,} samples of {len(run_ids)} runs, more "
                                   f"than {max_samples:,} compared at once here; narrow it (a run, a pool, a suite)")
        frames.append(con.execute(f"SELECT case_id, device_kind, ? AS side, latency_ns FROM perf.samples WHERE {where}",
                                  [name, *args]).df())
    out = _compared(pd.concat(frames, ignore_index=True), alpha=alpha, tolerance=tolerance)
    ids = [r["case_id"] for r in out]
    shapes = {case_id: (kernel, backend, dtype, ",".join(f"{k}={v}" for k, v in sorted(dict(params or {}).items())))
              for case_id, kernel, backend, dtype, params in con.execute(
                  "SELECT case_id, kernel, backend, dtype, params FROM perf.cases WHERE list_contains(?, case_id)",
                  [ids]).fetchall()}
    result = []
    for r in out:
        kernel, backend, dtype, shape = shapes.get(r["case_id"], (None,) * 4)
        result.append({"case_id": r["case_id"], "kernel": kernel, "backend": backend, "dtype": dtype, "shape": shape,
                       **{c: r[c] for c in _RESULT.names if c != "case_id"}})
    return sorted(result, key=lambda r: tuple((r[c] is not None, r[c] or "") for c in ORDER))


def _marks(values: list) -> str:
    return ", ".join("?" * len(values))


def mixed_kinds(rows: list[dict]) -> list[str]:
    """A note for each pair of device kinds that a matched case compares across (a real
    GPU against a simulated one); a case measured on one side only is not a mix."""
    mixed = sorted({(r["kind_a"], r["kind_b"]) for r in rows
                    if r["kind_a"] and r["kind_b"] and r["kind_a"] != r["kind_b"]})
    return [f"side A is {a} and side B is {b} for some cases" for a, b in mixed]


def compare_cases(rows: pd.DataFrame, *, alpha: float = 0.01, tolerance: float = 0.02) -> pd.DataFrame:
    """One result row per case in `rows` (case_id, device_kind, side 'a' or 'b',
    latency_ns), ordered by case_id: its sample counts and medians, and for a case with at
    least 2 samples a side the ratio, interval, p-value and verdict that
    pipelines.changepoint.compare gives its two sample sets (else verdict `unmatched`)."""
    return pd.DataFrame(_compared(rows, alpha=alpha, tolerance=tolerance), columns=_RESULT.names)


def _compared(rows: pd.DataFrame, *, alpha: float, tolerance: float) -> list[dict]:
    """compare_cases as a list of dicts of plain Python values."""
    if rows.empty:
        return []
    codes, case_ids = pd.factorize(rows["case_id"], sort=True)
    is_b = (rows["side"] == "b").to_numpy()
    latency = rows["latency_ns"].to_numpy(dtype=float)
    # Each case's samples in one run of `ordered`: side A, then B, each ascending (the
    # order the bootstrap resamples from; the rank test and the medians ignore order).
    order = np.lexsort((latency, is_b, codes))
    ordered = latency[order]
    counts = np.bincount(codes * 2 + is_b, minlength=2 * len(case_ids)).reshape(-1, 2)
    start_a = np.concatenate(([0], np.cumsum(counts.sum(axis=1))[:-1]))
    start_b = start_a + counts[:, 0]
    finite = np.bincount(codes, weights=~np.isfinite(latency), minlength=len(case_ids)) == 0
    kept = rows[["case_id", "side", "device_kind"]].dropna().drop_duplicates().sort_values("device_kind")
    kinds = kept.groupby(["case_id", "side"])["device_kind"].agg(",".join).to_dict()
    out = [{"case_id": case_id, "kind_a": kinds.get((case_id, "a")), "kind_b": kinds.get((case_id, "b")),
            "n_a": int(n_a), "n_b": int(n_b), "median_a_ns": None, "median_b_ns": None, "ratio": None,
            "ci_low": None, "ci_high": None, "p_value": None, "verdict": UNMATCHED, "test": None}
           for case_id, (n_a, n_b) in zip(case_ids, counts)]
    # Cases whose rank test is the normal approximation for every input (more than 8
    # samples a side) are compared together per pair of sizes; the rest one by one.
    together = finite & (counts[:, 0] > 8) & (counts[:, 1] > 8)
    for i in np.flatnonzero(~together):
        a = ordered[start_a[i]:start_b[i]]
        b = ordered[start_b[i]:start_b[i] + counts[i, 1]]
        _fill(out[i], a, b, alpha=alpha, tolerance=tolerance)
    sizes = counts[together]
    for n_a, n_b in np.unique(sizes, axis=0):
        group = np.flatnonzero(together)[(sizes[:, 0] == n_a) & (sizes[:, 1] == n_b)]
        a = ordered[start_a[group][:, None] + np.arange(n_a)]
        b = ordered[start_b[group][:, None] + np.arange(n_b)]
        for i, row in zip(group, _compare_sorted(a, b, alpha=alpha, tolerance=tolerance)):
            out[i].update(row)
    return out


def _fill(out: dict, a: np.ndarray, b: np.ndarray, *, alpha: float, tolerance: float) -> None:
    """One case's comparison by pipelines.changepoint.compare itself."""
    out["median_a_ns"] = float(np.median(a)) if len(a) else None
    out["median_b_ns"] = float(np.median(b)) if len(b) else None
    if len(a) >= 2 and len(b) >= 2:
        c = compare(a, b, alpha=alpha, tolerance=tolerance)
        out.update(ratio=c.ratio, ci_low=c.ci_low, ci_high=c.ci_high, p_value=c.p_value, verdict=c.verdict,
                   test=c.test)


def _compare_sorted(a: np.ndarray, b: np.ndarray, *, alpha: float, tolerance: float) -> list[dict]:
    """compare(a[i], b[i]) for each row i of two matrices of finite samples, each row
    sorted: the same medians, rank test, bootstrap draws (they depend on the sizes and the
    seed alone) and percentiles, on whole matrices."""
    median_a, median_b = np.median(a, axis=1), np.median(b, axis=1)
    if np.any(median_a <= 0):
        raise ValueError("compare: median of a must be > 0 to form a ratio")
    p = mannwhitneyu(a, b, alternative="two-sided", axis=1).pvalue
    ranks_a, ranks_b = _median_ranks(a.shape[1], b.shape[1])
    resampled_a = _resampled_medians(a, *ranks_a)
    ratios = _resampled_medians(b, *ranks_b) / np.where(resampled_a > 0, resampled_a, np.nan)
    tail = (1 - CONFIDENCE) / 2 * 100
    if np.isnan(ratios).any():  # np.nanpercentile goes row by row; rarely needed
        lo, hi = np.nanpercentile(ratios, [tail, 100 - tail], axis=1)
    else:
        lo, hi = np.percentile(ratios, [tail, 100 - tail], axis=1)
    return [{"median_a_ns": float(ma), "median_b_ns": float(mb), "ratio": float(mb / ma), "ci_low": float(l),
             "ci_high": float(h), "p_value": float(pv), "test": TEST_NAME,
             "verdict": verdict_of(float(pv), float(l), float(h), alpha=alpha, tolerance=tolerance)}
            for ma, mb, l, h, pv in zip(median_a, median_b, lo, hi, p)]


@lru_cache(maxsize=256)
def _median_ranks(n_a: int, n_b: int) -> tuple[tuple, tuple]:
    """The positions of the N_BOOT resampled medians of A and of B in their sorted samples,
    drawn as compare draws them (A first, from one generator seeded SEED). They depend on
    the sizes alone, so every comparison of these sizes shares them (32 kB a pair)."""
    rng = np.random.default_rng(SEED)
    ranks = bootstrap_median_ranks(n_a, N_BOOT, rng), bootstrap_median_ranks(n_b, N_BOOT, rng)
    for positions in ranks:
        for p in positions:
            if p is not None:
                p.flags.writeable = False
    return ranks


def _resampled_medians(x: np.ndarray, lower: np.ndarray, upper: np.ndarray | None) -> np.ndarray:
    """The bootstrap medians of each row of x (rows sorted) at these positions, one row per row of x."""
    return x[:, lower] if upper is None else (x[:, lower] + x[:, upper]) / 2
