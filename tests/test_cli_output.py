"""What commands print, mostly without a lake: `perflake regressions`' first line,
`perflake ingest`'s next step and `perflake project`'s error table."""
from __future__ import annotations

import math

import pandas as pd


def test_the_regressions_headline_is_a_whole_sentence_when_nothing_changed():
    from pipelines.cli.regressions import headline

    assert headline([], None, 0) == "0 changed series in the whole history."
    assert headline([], "2026-11-22", 0) == "0 changed series on 2026-11-22."


def test_the_regressions_headline_counts_each_series_once_and_the_groups_before_listing_them(spark):
    """A series slower and using more energy is in two groups (one per metric): the
    headline once said 2 changed series for it."""
    from pipelines.cli.regressions import headline
    from pipelines.mining.attribution import changes, pooled

    change = dict(cause="no recorded difference", direction="regression", device_kind="simulated", family="gemm",
                  dtype="fp16", gpu_sku="H100-SXM5-80GB", status="confirmed", change_dt="2026-11-18", change_pct=0.2)
    rows = spark.createDataFrame([{**change, "series_key": "s1", "metric": "latency"},
                                  {**change, "series_key": "s1", "metric": "energy"},
                                  {**change, "series_key": "s2", "metric": None, "change_dt": "2026-11-19"}])
    night = changes(rows, "2026-11-18")
    groups = [g.asDict() for g in pooled(night).collect()]
    assert len(groups) == 2 and {g["series"] for g in groups} == {1}
    assert headline(groups, "2026-11-18", night.select("series_key").distinct().count()) == \
        "1 changed series on 2026-11-18, 2 group(s):"
    every = changes(rows)
    assert headline([g.asDict() for g in pooled(every).collect()], None,
                    every.select("series_key").distinct().count()) == "2 changed series in the whole history, 2 group(s):"


def test_ingest_names_the_mine_that_publishes_each_landed_night():
    from pipelines.cli.ingest import next_steps

    assert next_steps([]) == ""
    one = next_steps([{"dt": "2026-11-27", "pool": "h100"}, {"dt": "2026-11-27", "pool": "h100"}])
    assert one.splitlines() == [
        "next:", "  perflake mine --date 2026-11-27 --pool h100   publishes what landed (the perf tables show it once "
                 "mined)"]
    two = next_steps([{"dt": "2026-11-27", "pool": "h100"}, {"dt": "2026-11-26", "pool": "h200"},
                      {"dt": "2026-11-27", "pool": "cpu"}]).splitlines()
    assert two[0] == "next:" and len(two) == 3
    assert two[1].startswith("  perflake mine --date 2026-11-26 --pool h200 ")
    assert two[2].startswith("  perflake mine --date 2026-11-27 --pool cpu --pool h100 ")
    assert two[1].index("publishes") == two[2].index("publishes")  # aligned, as `make demo`'s next steps


def _summary(measured: bool) -> pd.DataFrame:
    nan = math.nan
    rows = [{"family": "gemm", "projected": 24, "measured": 24 if measured else 0,
             "median_abs_error_pct": 1.234 if measured else nan, "p90_abs_error_pct": 3.5 if measured else nan,
             "median_error_pct": -0.5 if measured else nan},
            {"family": "attention", "projected": 12, "measured": 0, "median_abs_error_pct": nan,
             "p90_abs_error_pct": nan, "median_error_pct": nan}]
    return pd.DataFrame(rows)


def test_project_prints_a_dash_for_an_error_not_yet_measured_as_its_heading_says():
    from pipelines.cli.report import projection_errors

    for measured in (True, False):
        lines = projection_errors([("B200-SXM-180GB", _summary(measured))]).splitlines()
        assert lines[0] == ("projection error onto B200-SXM-180GB (percent of the measured median; '-' until "
                            "measured):")
        assert "NULL" not in "\n".join(lines)
        header, rule, gemm, attention, count = lines[1:]
        assert count == "(2 rows)"
        cells = [c.strip() for c in attention.split("|")]
        assert cells == ["attention", "12", "0", "-", "-", "-"]
        # every row keeps the table's column boundaries
        assert [i for i, ch in enumerate(attention) if ch == "|"] == [i for i, ch in enumerate(header) if ch == "|"]
    measured = projection_errors([("B200-SXM-180GB", _summary(True))]).splitlines()
    assert [c.strip() for c in measured[3].split("|")] == ["gemm", "24", "24", "1.23", "3.5", "-0.5"]
    # numbers right-aligned, the dash where the number's last digit would be
    assert measured[4].index("-") + 1 == measured[3].index("1.23") + len("1.23")


def test_project_csv_and_json_are_one_document_for_every_target_with_their_own_empty_values():
    import csv
    import io
    import json

    from pipelines.cli.report import projection_errors

    both = [("B200-SXM-180GB", _summary(False)), ("H200-SXM-141GB", _summary(True))]
    rows = list(csv.reader(io.StringIO(projection_errors(both, "csv"))))
    assert rows[0][:2] == ["target", "family"] and len(rows) == 5  # one header, no heading line
    assert rows[2] == ["B200-SXM-180GB", "attention", "12", "0", "", "", ""]
    parsed = json.loads(projection_errors(both, "json"))  # the whole output parses
    assert [(r["target"], r["family"]) for r in parsed] == [
        ("B200-SXM-180GB", "gemm"), ("B200-SXM-180GB", "attention"),
        ("H200-SXM-141GB", "gemm"), ("H200-SXM-141GB", "attention")]
    assert parsed[1]["median_abs_error_pct"] is None and parsed[2]["median_abs_error_pct"] == 1.23


def test_a_reader_that_goes_away_an_interrupt_and_a_bad_port_each_end_quietly(tmp_path, monkeypatch, capsys):
    import subprocess
    import sys

    import pytest

    from pipelines.cli import main
    from pipelines.cli import model

    perflake = f"{sys.executable} -c 'import sys; from pipelines.cli import main; sys.exit(main())'"
    head = subprocess.run(f"{perflake} model --list | head -1", shell=True, text=True, capture_output=True,
                          timeout=120)
    assert head.stdout.strip() and "Traceback" not in head.stderr and "BrokenPipe" not in head.stderr, head.stderr

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "_list", interrupted)
    assert main(["model", "--list"]) == 130
    assert capsys.readouterr().err.strip() == "perflake model: interrupted"
    with pytest.raises(SystemExit) as stopped:
        main(["web", "--port", "99999"])
    assert stopped.value.code == 2 and "port 99999 is not between 1 and 65535" in capsys.readouterr().err


def test_compare_on_a_lake_with_nothing_mined_names_the_lake_in_one_sentence(tmp_path, monkeypatch, capsys):
    from pipelines.cli import main

    monkeypatch.setenv("PERFLAKE_HOME", str(tmp_path / "empty"))
    assert main(["compare", "a", "b", "--engine", "duckdb"]) == 2
    err = capsys.readouterr().err
    assert f"the lake {tmp_path / 'empty'} has not published a table" in err and "Traceback" not in err


def test_compare_refuses_a_significance_or_tolerance_that_is_not_one(capsys):
    import pytest

    from pipelines.cli import main

    for flag, value, says in (("--alpha", "nan", "not a probability"), ("--alpha", "1.5", "not a probability"),
                              ("--tolerance", "-1", "not a relative change")):
        with pytest.raises(SystemExit) as stopped:
            main(["compare", "a", "b", flag, value])
        assert stopped.value.code == 2 and says in capsys.readouterr().err


def test_a_ctrl_c_that_spark_turns_into_its_own_error_still_reads_as_an_interrupt(tmp_path, monkeypatch):
    """pyspark's SIGINT handler cancels the session's jobs; the cancelled job, or the py4j
    call it cuts short, can come back as a Spark error, which read as "Spark could not
    run the query" (exit 2). A query that fails on its own still does."""
    import logging
    import os
    import signal

    import pytest
    from py4j.protocol import Py4JError
    from pyspark.sql import SparkSession

    from pipelines.cli import _quiet_py4j
    from pipelines.config.lake import Lake
    from pipelines.query import sql
    from pipelines.warehouse import session

    class Session:  # the process's own session, whose query is cut short
        def __init__(self, interrupt: bool):
            self.interrupt = interrupt

        def sql(self, statement):
            if self.interrupt:
                os.kill(os.getpid(), signal.SIGINT)
            raise Py4JError("An error occurred while calling o42.collectToPython")

    def pyspark_handler(signum, frame):  # cancelAllJobs on a connection that is busy
        raise Py4JError("Error while sending or receiving")

    before = signal.signal(signal.SIGINT, pyspark_handler)
    try:
        for interrupt, raised in ((True, KeyboardInterrupt), (False, sql.QueryError)):
            spark = Session(interrupt)
            monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: spark))
            monkeypatch.setattr(session, "get_spark", lambda lake: spark)
            with pytest.raises(raised):
                sql._run_spark("SELECT 1", Lake(tmp_path), 10)
        assert signal.getsignal(signal.SIGINT) is pyspark_handler  # given back
    finally:
        signal.signal(signal.SIGINT, before)
    # py4j logs the interrupt on the root logger with two screens of traceback; the CLI drops it.
    py4j = logging.LogRecord("root", logging.ERROR, f"{os.sep}x{os.sep}py4j{os.sep}java_gateway.py", 1059,
                             "KeyboardInterrupt while sending command.", None, None)
    monkeypatch.setattr(logging.getLogger(), "filters", [])
    _quiet_py4j()
    assert not logging.getLogger().filter(py4j)


def test_services_status_on_a_lake_without_services_says_so(tmp_path, monkeypatch, capsys):
    from pipelines.cli import main

    monkeypatch.setenv("PERFLAKE_HOME", str(tmp_path))
    assert main(["services", "status"]) == 1  # nothing runs
    out = capsys.readouterr()
    assert f"the lake {tmp_path} has no services" in out.err and "postgresql" in out.out
