"""Data-quality gates: Great Expectations validation of Spark DataFrames, the results
published to perf.dq_results, and the policy that turns them into go / no-go.

    results = [validate(df, "samples", f"samples dt={dt} pool={pool}", dt=dt, lake=lake)]
    write_dq_results(spark, lake, results, dt)
    enforce(results)          # raises DataQualityError when a hard expectation failed

The GX context is ephemeral (nothing on disk but the Data Docs site) and is created
once per process: creating it and registering the suites costs seconds.

Which engine validates a batch: GX computes each expectation's metrics as Spark jobs of
their own (a night's four suites were ~150 Spark stages, half of a small mine), so a batch
of up to LOCAL_MAX_ROWS rows is collected once (one Spark job) and validated by GX's
pandas engine in this process; a larger one stays on Spark. The suites are the same on
both and give the same verdicts (tests/test_quality.py compares them).
"""
from __future__ import annotations

import datetime as dt_
import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.config.lake import Lake, safe_date
from schemas.expectations import HARD, build_suite, severity_of
from schemas.tables import DQ_RESULTS

log = logging.getLogger(__name__)

# Unexpected values quoted per failed expectation: enough to see the problem, small
# enough for one table cell.
_MAX_OBSERVED = 5
# Batches up to this many rows are validated locally with GX's pandas engine (a night's
# batch per pool is hundreds to tens of thousands of rows: tens of MB at most).
LOCAL_MAX_ROWS = 200_000
ENGINES = ("auto", "spark", "pandas")


class DataQualityError(RuntimeError):
    """A hard expectation failed: the named batches must not be published."""

    def __init__(self, failed: list["DQResult"]):
        self.failed = failed
        lines = [f"{r.suite} [{r.batch}]: " + "; ".join(f.describe() for f in r.failures if f.severity == HARD)
                 for r in failed]
        super().__init__("data-quality gate failed; these batches were not published:\n  " + "\n  ".join(lines)
                         + "\nSee perf.dq_results and the Data Docs under <lake>/dq/docs; fix the source "
                           "or quarantine the bad rows, then re-run the job for that date.")


@dataclass(frozen=True)
class FailedExpectation:
    expectation: str  # GX type, e.g. expect_column_values_to_be_between
    column: str  # column, or "A,B" for column-pair expectations
    severity: str  # hard or soft
    observed: str  # what GX saw: counts, a sample of unexpected values, or the exception

    def describe(self) -> str:
        return f"{self.expectation}({self.column}) [{self.severity}]: {self.observed}"


@dataclass(frozen=True)
class DQResult:
    suite: str
    batch: str
    success: bool
    evaluated: int
    rows: int
    run_at: dt_.datetime
    failures: tuple[FailedExpectation, ...] = ()
    docs: str | None = None  # Data Docs page of this validation, when built
    partition: dict = field(default_factory=dict)  # e.g. {"dt": ..., "pool": ...}

    @property
    def hard_failures(self) -> int:
        return sum(f.severity == HARD for f in self.failures)

    @property
    def soft_failures(self) -> int:
        return sum(f.severity != HARD for f in self.failures)

    @property
    def failed_expectations(self) -> list[str]:
        return [f"{f.expectation}({f.column})" for f in self.failures]

    def row(self, dt: str) -> dict:
        return {"suite": self.suite, "batch": self.batch, "success": self.success,
                "hard_failures": self.hard_failures, "soft_failures": self.soft_failures,
                "failed_expectations": json.dumps([f.__dict__ for f in self.failures]),
                "evaluated": self.evaluated, "rows": self.rows, "run_at": self.run_at, "dt": dt}


class _Gx:
    """The process's GX context with one dataframe asset per suite and engine (Spark,
    pandas), and a validation definition and checkpoint per suite, engine and Data Docs site."""

    def __init__(self):
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # no phoning home from jobs
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.gx = gx
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.sources = {"spark": self.context.data_sources.add_spark("perflake"),
                        "pandas": self.context.data_sources.add_pandas("perflake-local")}
        self.batches: dict[tuple[str, str], object] = {}
        self.suites: dict[str, object] = {}
        self.definitions: dict[tuple[str, str, str], object] = {}
        self.checkpoints: dict[tuple[str, str, str, str], object] = {}
        self.sites: dict[str, str] = {}
        self.stored: dict[str, object] = {}  # Data Docs page -> its validation's identifier in the store
        self.lock = threading.Lock()

    def batch_definition(self, suite: str, engine: str):
        if suite not in self.suites:
            self.suites[suite] = self.context.suites.add(build_suite(suite))
        if (suite, engine) not in self.batches:
            asset = self.sources[engine].add_dataframe_asset(suite)
            self.batches[(suite, engine)] = asset.add_batch_definition_whole_dataframe("whole")
        return self.batches[(suite, engine)]

    def site(self, docs_dir: Path) -> str:
        key = str(docs_dir)
        if key not in self.sites:
            name = "perflake-" + hashlib.sha256(key.encode()).hexdigest()[:8]
            self.context.add_data_docs_site(name, {
                "class_name": "SiteBuilder", "show_how_to_buttons": False,
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": key}})
            self.sites[key] = name
        return self.sites[key]

    def checkpoint(self, suite: str, engine: str, site: str, result_format: str):
        gx = self.gx
        if (suite, engine, site) not in self.definitions:
            self.definitions[(suite, engine, site)] = self.context.validation_definitions.add(gx.ValidationDefinition(
                name=f"{suite}@{site}/{engine}", data=self.batch_definition(suite, engine), suite=self.suites[suite]))
        key = (suite, engine, site, result_format)
        if key not in self.checkpoints:
            # No Data Docs action: pages are rendered in one pass per job (build_docs), since
            # loading the site's templates costs about as much as a validation.
            self.checkpoints[key] = self.context.checkpoints.add(gx.Checkpoint(
                name=f"{suite}@{site}/{engine}/{result_format}",
                validation_definitions=[self.definitions[(suite, engine, site)]], result_format=result_format))
        return self.checkpoints[key]


_GX: _Gx | None = None
_GX_LOCK = threading.Lock()


def _gx() -> _Gx:
    global _GX
    with _GX_LOCK:
        if _GX is None:
            _GX = _Gx()
        return _GX


def docs_dir(lake: Lake) -> Path:
    """Where the GX Data Docs site of this lake lives (index.html at its top)."""
    return lake.root / "dq" / "docs"


def local_frame(spark_df, max_rows: int = LOCAL_MAX_ROWS):
    """`spark_df` collected as a pandas DataFrame when it has at most `max_rows` rows
    (one Spark job), else None."""
    head = spark_df.limit(max_rows + 1).toArrow()
    return _pandas(head) if head.num_rows <= max_rows else None


def _pandas(table):
    """An Arrow table as pandas with nullable column types: an integer column with a null
    stays integers and its null stays a null, as on Spark (NumPy types would make both floats)."""
    import pandas as pd
    import pyarrow as pa

    nullable = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
                pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(), pa.float32(): pd.Float32Dtype(),
                pa.float64(): pd.Float64Dtype(), pa.string(): pd.StringDtype(), pa.large_string(): pd.StringDtype()}
    return table.to_pandas(types_mapper=nullable.get)


def validate(df, suite_name: str, batch_label: str, *, lake: Lake | None = None,
             partition: dict | None = None, docs: bool = True, engine: str = "auto") -> DQResult:
    """Validate `df` (a Spark or pandas DataFrame) against the named suite
    (schemas/expectations.py) with Great Expectations. Never raises for failed
    expectations: they are in the result, with their severity and what was observed. With
    `lake`, the validation is also rendered into the lake's Data Docs site (about a second
    more); with docs=False, later, by build_docs (several results in one pass).

    engine: "auto" validates a Spark DataFrame of up to LOCAL_MAX_ROWS rows with the pandas
    engine (see the module's doc), "spark" and "pandas" force one.

    A batch is first validated for pass/fail only (a third of the work of a full result),
    and again with the unexpected values quoted only when something failed."""
    if engine not in ENGINES:
        raise ValueError(f"unknown validation engine {engine!r}; known: {', '.join(ENGINES)}")
    data, engine = _on_engine(df, engine)
    g = _gx()
    run_at = dt_.datetime.now(dt_.timezone.utc)
    with g.lock:  # GX stores and site builders are not thread-safe
        vr, page = _run(g, data, engine, suite_name, batch_label, lake, run_at, "BOOLEAN_ONLY")
        if not vr.success:
            vr, page = _run(g, data, engine, suite_name, batch_label, lake, run_at, "SUMMARY")
    failures = tuple(_failure(er) for er in vr.results if not er.success)
    rows = _row_count(vr)
    if rows < 0:  # pass/fail results carry no counts
        rows = len(data) if engine == "pandas" else data.count()
    result = DQResult(suite=suite_name, batch=batch_label, success=bool(vr.success), evaluated=len(vr.results),
                      rows=rows, run_at=run_at, failures=failures, docs=page, partition=dict(partition or {}))
    if lake is not None and docs:
        build_docs(lake, [result])
    return result


def _on_engine(df, engine: str):
    """(the data to validate, "spark" or "pandas")."""
    import pandas as pd

    if isinstance(df, pd.DataFrame):
        if engine == "spark":
            raise ValueError("a pandas DataFrame cannot be validated on the Spark engine")
        return df, "pandas"
    if engine == "spark":
        return df, "spark"
    if engine == "pandas":
        return _pandas(df.toArrow()), "pandas"
    local = local_frame(df)
    return (df, "spark") if local is None else (local, "pandas")


def _run(g: _Gx, data, engine: str, suite_name: str, batch_label: str, lake: Lake | None, run_at,
         result_format: str):
    """(GX validation result, its Data Docs page or None)."""
    from great_expectations.core.run_identifier import RunIdentifier

    if lake is None:
        batch = g.batch_definition(suite_name, engine).get_batch(batch_parameters={"dataframe": data})
        return batch.validate(g.suites[suite_name], result_format=result_format), None
    site_dir = docs_dir(lake)
    cp = g.checkpoint(suite_name, engine, g.site(site_dir), result_format)
    run_name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", batch_label)
    res = cp.run(batch_parameters={"dataframe": data}, run_id=RunIdentifier(run_name=run_name, run_time=run_at))
    (ident, vr), = res.run_results.items()
    page = str(site_dir / "validations" / Path(*ident.to_tuple()).with_suffix(".html"))
    g.stored[page] = ident
    return vr, page


def build_docs(lake: Lake, results: list[DQResult]) -> None:
    """Render the Data Docs pages of `results` (validated with this lake) and the site's
    index, in one pass."""
    g = _gx()
    with g.lock:
        idents = [g.stored.pop(r.docs) for r in results if r.docs in g.stored]
        if idents:
            g.context.build_data_docs(site_names=[g.site(docs_dir(lake))], resource_identifiers=idents)


def _row_count(vr) -> int:
    for er in vr.results:
        n = (er.result or {}).get("element_count")
        if n is not None:
            return int(n)
    return -1


def _failure(er) -> FailedExpectation:
    cfg = er.expectation_config
    kw = cfg.kwargs
    column = kw.get("column") or ",".join(str(kw[k]) for k in ("column_A", "column_B") if k in kw)
    return FailedExpectation(expectation=cfg.type, column=column, severity=severity_of(cfg),
                             observed=_observed(er))


def _observed(er) -> str:
    info = er.exception_info or {}
    if info.get("raised_exception"):
        return f"could not be evaluated: {info.get('exception_message')}"
    r = er.result or {}
    if "observed_value" in r:
        return f"observed {_plain(r['observed_value'])!r}"
    parts = []
    if r.get("unexpected_count") is not None:
        parts.append(f"{r['unexpected_count']} of {r.get('element_count')} rows unexpected"
                     f" ({r.get('unexpected_percent', 0):.3g} %)")
    sample = [_plain(v) for v in r.get("partial_unexpected_list") or []]
    if sample:
        parts.append(f"e.g. {sample[:_MAX_OBSERVED]!r}")
    return ", ".join(parts) or "failed"


def _plain(value):
    """A pandas/numpy scalar as the Python value it holds (quoted as Spark's would be)."""
    import pandas as pd

    if value is pd.NA:
        return None
    if isinstance(value, (tuple, list)):  # a pair expectation's (A, B)
        return type(value)(_plain(v) for v in value)
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", None) == 0 else value


def validate_by_pool(spark_df, suite_name: str, dt: str, *, lake: Lake | None = None,
                     docs: bool = True, engine: str = "auto") -> list[DQResult]:
    """One validation per pool present in `spark_df` (batch 'suite dt=... pool=...'), so
    that a broken pool withholds only its own partition. Data Docs as for validate; a
    night of up to LOCAL_MAX_ROWS rows is collected once and each pool validated locally."""
    from pyspark.sql import functions as F

    local = None if engine == "spark" else local_frame(spark_df)
    if local is not None:
        batches = {p: local[local["pool"] == p] for p in sorted(local["pool"].dropna().unique())}
    else:
        pools = sorted(r[0] for r in spark_df.select("pool").distinct().collect())
        batches = {p: spark_df.where(F.col("pool") == p) for p in pools}
    results = [validate(batch, suite_name, f"{suite_name} dt={dt} pool={p}", lake=lake,
                        partition={"dt": dt, "pool": p}, docs=False, engine=engine)
               for p, batch in batches.items()]
    if lake is not None and docs:
        build_docs(lake, results)
    return results


def blocked(results: list[DQResult], key: str = "pool") -> set:
    """Values of the partition column `key` whose batches failed a hard expectation: the
    partitions a job must leave unpublished."""
    return {r.partition.get(key) for r in results if r.hard_failures}


def enforce(results: list[DQResult]) -> None:
    """Raise DataQualityError naming every batch with a failed hard expectation. Soft
    failures are logged as warnings and never raise."""
    for r in results:
        for f in r.failures:
            if f.severity != HARD:
                log.warning("data quality warning: %s [%s]: %s", r.suite, r.batch, f.describe())
    failed = [r for r in results if r.hard_failures]
    if failed:
        raise DataQualityError(failed)


def write_dq_results(spark, lake: Lake, results: list[DQResult], dt: str) -> None:
    """Publish `results` to perf.dq_results partition dt=`dt`. A batch validated again
    replaces its earlier row; rows of other batches of the same date stay."""
    from pipelines.warehouse import catalog
    from schemas.spark import ordered_columns, spark_schema

    if not results:
        return
    safe_date(dt)
    new = spark.createDataFrame([r.row(dt) for r in results], spark_schema(DQ_RESULTS))
    name = catalog.ensure_table(spark, lake, DQ_RESULTS)
    from pyspark.sql import functions as F

    keys = list(DQ_RESULTS.keys)
    kept = spark.table(name).where(F.col("dt") == dt).join(new.select(*keys), keys, "left_anti")
    # Materialise before overwriting: the partition cannot be read and replaced in one plan.
    merged = new.unionByName(kept.select(*ordered_columns(DQ_RESULTS))).localCheckpoint(eager=True)
    catalog.write_partitions(spark, lake, merged, DQ_RESULTS)
