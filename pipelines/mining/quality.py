"""Data-quality gates: Great Expectations validation of Spark DataFrames, the results
published to perf.dq_results, and the policy that turns them into go / no-go.

    results = [validate(df, "samples", f"samples dt={dt} pool={pool}", dt=dt, lake=lake)]
    write_dq_results(spark, lake, results, dt)
    enforce(results)          # raises DataQualityError when a hard expectation failed

The GX context is ephemeral (nothing on disk but the Data Docs site) and is created
once per process: creating it and registering the suites costs seconds, a validation
of a small DataFrame about one to three.
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
    """The process's GX context with one Spark dataframe asset, validation definition
    and checkpoint per suite (and per Data Docs site)."""

    def __init__(self):
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # no phoning home from jobs
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.gx = gx
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.source = self.context.data_sources.add_spark("perflake")
        self.batches: dict[str, object] = {}
        self.suites: dict[str, object] = {}
        self.definitions: dict[tuple[str, str], object] = {}
        self.checkpoints: dict[tuple[str, str, str], object] = {}
        self.sites: dict[str, str] = {}
        self.stored: dict[str, object] = {}  # Data Docs page -> its validation's identifier in the store
        self.lock = threading.Lock()

    def batch_definition(self, suite: str):
        if suite not in self.batches:
            asset = self.source.add_dataframe_asset(suite)
            self.batches[suite] = asset.add_batch_definition_whole_dataframe("whole")
            self.suites[suite] = self.context.suites.add(build_suite(suite))
        return self.batches[suite]

    def site(self, docs_dir: Path) -> str:
        key = str(docs_dir)
        if key not in self.sites:
            name = "perflake-" + hashlib.sha256(key.encode()).hexdigest()[:8]
            self.context.add_data_docs_site(name, {
                "class_name": "SiteBuilder", "show_how_to_buttons": False,
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": key}})
            self.sites[key] = name
        return self.sites[key]

    def checkpoint(self, suite: str, site: str, result_format: str):
        gx = self.gx
        if (suite, site) not in self.definitions:
            self.definitions[(suite, site)] = self.context.validation_definitions.add(gx.ValidationDefinition(
                name=f"{suite}@{site}", data=self.batch_definition(suite), suite=self.suites[suite]))
        if (suite, site, result_format) not in self.checkpoints:
            # No Data Docs action: pages are rendered in one pass per job (build_docs), since
            # loading the site's templates costs about as much as a validation.
            self.checkpoints[(suite, site, result_format)] = self.context.checkpoints.add(gx.Checkpoint(
                name=f"{suite}@{site}/{result_format}", validation_definitions=[self.definitions[(suite, site)]],
                result_format=result_format))
        return self.checkpoints[(suite, site, result_format)]


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


def validate(spark_df, suite_name: str, batch_label: str, *, lake: Lake | None = None,
             partition: dict | None = None, docs: bool = True) -> DQResult:
    """Validate `spark_df` against the named suite (schemas/expectations.py) with Great
    Expectations. Never raises for failed expectations: they are in the result, with their
    severity and what was observed. With `lake`, the validation is also rendered into
    the lake's Data Docs site (about a second more); with docs=False, later, by
    build_docs (several results in one pass).

    A batch is first validated for pass/fail only (a third of the Spark work of a full
    result), and again with the unexpected values quoted only when something failed."""
    g = _gx()
    run_at = dt_.datetime.now(dt_.timezone.utc)
    with g.lock:  # GX stores and site builders are not thread-safe
        vr, page = _run(g, spark_df, suite_name, batch_label, lake, run_at, "BOOLEAN_ONLY")
        if not vr.success:
            vr, page = _run(g, spark_df, suite_name, batch_label, lake, run_at, "SUMMARY")
    failures = tuple(_failure(er) for er in vr.results if not er.success)
    rows = _row_count(vr)
    if rows < 0:  # pass/fail results carry no counts
        rows = spark_df.count()
    result = DQResult(suite=suite_name, batch=batch_label, success=bool(vr.success), evaluated=len(vr.results),
                      rows=rows, run_at=run_at, failures=failures, docs=page, partition=dict(partition or {}))
    if lake is not None and docs:
        build_docs(lake, [result])
    return result


def _run(g: _Gx, spark_df, suite_name: str, batch_label: str, lake: Lake | None, run_at, result_format: str):
    """(GX validation result, its Data Docs page or None)."""
    from great_expectations.core.run_identifier import RunIdentifier

    if lake is None:
        batch = g.batch_definition(suite_name).get_batch(batch_parameters={"dataframe": spark_df})
        return batch.validate(g.suites[suite_name], result_format=result_format), None
    site_dir = docs_dir(lake)
    cp = g.checkpoint(suite_name, g.site(site_dir), result_format)
    run_name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", batch_label)
    res = cp.run(batch_parameters={"dataframe": spark_df}, run_id=RunIdentifier(run_name=run_name, run_time=run_at))
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
        return f"observed {r['observed_value']!r}"
    parts = []
    if r.get("unexpected_count") is not None:
        parts.append(f"{r['unexpected_count']} of {r.get('element_count')} rows unexpected"
                     f" ({r.get('unexpected_percent', 0):.3g} %)")
    sample = r.get("partial_unexpected_list") or []
    if sample:
        parts.append(f"e.g. {sample[:_MAX_OBSERVED]!r}")
    return ", ".join(parts) or "failed"


def validate_by_pool(spark_df, suite_name: str, dt: str, *, lake: Lake | None = None,
                     docs: bool = True) -> list[DQResult]:
    """One validation per pool present in `spark_df` (batch 'suite dt=... pool=...'), so
    that a broken pool withholds only its own partition. Data Docs as for validate."""
    from pyspark.sql import functions as F

    pools = sorted(r[0] for r in spark_df.select("pool").distinct().collect())
    results = [validate(spark_df.where(F.col("pool") == p), suite_name, f"{suite_name} dt={dt} pool={p}",
                        lake=lake, partition={"dt": dt, "pool": p}, docs=False) for p in pools]
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
