"""`python -m kernels_bench` as its users meet it: a mistake in what was asked is one
line and exit status 2, never a traceback (-v adds it); a reader that stops reading
(`list | head`) ends it quietly; and on the CPU the measuring processes run with a
known thread count, recorded in the run's provenance."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kernels_bench.__main__ import main
from kernels_bench.case import Case
from kernels_bench.device import DeviceError, check_device
from kernels_bench.errors import UsageError
from kernels_bench.hardware import hardware
from kernels_bench.isolation import IsolatedMeasurer
from kernels_bench.runner import ShardSpec, run_shard
from kernels_bench.stopping import StoppingRule
from kernels_bench.suite import PlannedCase, Suite, SuiteError

REPO = Path(__file__).resolve().parent.parent
RULE = StoppingRule(min_samples=3, min_time_s=0.0, timeout_s=0.5, max_samples=3)
NOOP = Case.make("selftest", "noop", "python", "fp32")


def harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernels_bench", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


def one_line(status: int, err: str) -> str:
    """The error line, after checking the exit status and that it is all that was said."""
    assert status == 2, (status, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# --- one line for a mistake ------------------------------------------------------------

@pytest.mark.parametrize("args,says", [
    (["--device", "sim:H999"], ["unknown GPU SKU 'H999'", "H100-SXM5-80GB"]),
    (["--device", "tpu"], ["device 'tpu'", "cpu, cuda, cuda:N or sim:SKU"]),
    (["--device", "cuda:x"], ["device 'cuda:x'"]),
    (["--stopping", "{bad"], ["--stopping:"]),
    (["--stopping", '{"min_tme_s": 1}'], ["--stopping:", "min_tme_s"]),
    (["--device", "sim:L40S", "--inject", '[{"factor": 2}]'], ["--inject:"]),
    (["--suite", "nosuch"], ["no suite 'nosuch'"]),
    (["--kernel", "nomatch"], ["matches --kernel 'nomatch'", "nothing to run"]),
    (["--date", "2026-02-30"], ["--date '2026-02-30' is not a calendar date"]),
    (["--date", "26-11-30"], ["--date '26-11-30'"]),
    (["--run-id", "../../x"], ["--run-id '../../x'"]),
    (["--attempt", "-5"], ["--attempt counts from 1"]),
    (["--stopping", '{"timeout_s": 1e12}'], ["stopping.timeout_s is 1000000000000.0: expected 0.001 to 10800.0"]),
    (["--stopping", '{"max_samples": 0}'], ["stopping.max_samples is 0"]),
    (["--stopping", '{"min_samples": "lots"}'], ["stopping.min_samples is 'lots': expected a whole number"]),
])
def test_a_mistake_in_a_run_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, args, says):
    out = tmp_path / "out"
    argv = ["run", "--suite", "gemm-demo", "--out", str(out), *args]
    line = one_line(main(argv), capsys.readouterr().err)
    assert all(s in line for s in says), line
    assert not out.exists()


def test_an_out_that_cannot_be_written_is_refused_before_anything_is_measured(tmp_path, capsys):
    taken = tmp_path / "a-file"
    taken.write_text("x")
    for out, says in ((taken, "a file is there, not a folder"), ("/proc/nope", "cannot make this folder")):
        line = one_line(main(["run", "--suite", "gemm-demo", "--out", str(out)]), capsys.readouterr().err)
        assert says in line, line


def test_cuda_without_a_gpu_says_so_and_offers_cpu_and_sim(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    line = one_line(main(["run", "--suite", "gemm-demo", "--device", "cuda", "--out", str(tmp_path / "o")]),
                    capsys.readouterr().err)
    assert "no CUDA device" in line and "--device cpu" in line and "--device sim:" in line


def test_a_missing_gpu_index_names_the_visible_ones(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(DeviceError, match=r"'cuda:5': 2 CUDA devices visible \(cuda:0 to cuda:1\)"):
        check_device("cuda:5")
    check_device("cuda:1")


def test_the_errors_keep_the_types_their_callers_catch():
    with pytest.raises(KeyError):
        hardware("H999")
    assert issubclass(SuiteError, ValueError) and issubclass(SuiteError, UsageError)
    assert issubclass(DeviceError, ValueError)  # perflake's CLI says a ValueError in one line too


def test_cuda_on_a_machine_without_it_is_one_line_from_the_command(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc = harness("run", "--suite", "gemm-demo", "--device", "cuda", "--out", str(tmp_path / "o"))
    line = one_line(proc.returncode, proc.stderr)
    assert "this machine has no CUDA device" in line and "--device cpu" in line
    assert proc.stdout == ""


def test_an_unknown_sku_is_one_line_from_the_command_and_v_adds_the_traceback(tmp_path):
    proc = harness("run", "--suite", "gemm-demo", "--device", "sim:H999", "--out", str(tmp_path / "o"))
    assert "unknown GPU SKU 'H999'" in one_line(proc.returncode, proc.stderr)
    verbose = harness("-v", "run", "--suite", "gemm-demo", "--device", "sim:H999", "--out", str(tmp_path / "o"))
    assert verbose.returncode == 2 and "Traceback" in verbose.stderr
    assert verbose.stderr.splitlines()[-1].startswith("error: unknown GPU SKU 'H999'")


def test_a_reader_that_stops_reading_ends_the_listing_quietly():
    # The pipe's read end is closed before the harness writes: its first write fails,
    # as `list --suite llm-gemm | head` makes a later one fail.
    proc = subprocess.Popen([sys.executable, "-m", "kernels_bench", "list", "--suite", "llm-gemm"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert err == ""


# --- CPU threads -------------------------------------------------------------------------

def test_the_measuring_child_runs_with_the_thread_count_it_was_given():
    with IsolatedMeasurer("cpu", RULE, cpu_threads=2) as m:
        assert m.measure(NOOP).status == "ok"
        assert m.threads == 2
    with IsolatedMeasurer("cpu", RULE) as m:  # not pinned: torch's default, nothing reported
        assert m.measure(NOOP).status == "ok"
        assert m.threads is None


def _run_env(tmp_path, device: str, **spec) -> dict:
    suite = Suite("tiny", (PlannedCase(NOOP),), RULE)
    spec = ShardSpec(run_id="r-threads", shard=0, num_shards=1, pool="t", device=device, dt="2026-01-02", **spec)
    paths = run_shard(suite, spec, tmp_path, progress=lambda m: None)
    (run,) = pq.read_table(paths["runs"]).to_pylist()
    return dict(run["env"])


def test_a_cpu_run_records_the_thread_count_it_measured_with(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "8")  # what the caller's environment said is not what was used
    env = _run_env(tmp_path, "cpu", cpu_threads=2)
    assert env["OMP_NUM_THREADS"] == "2" and env["MKL_NUM_THREADS"] == "2"


def test_a_simulated_run_is_untouched_by_the_cpu_thread_count(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    env = _run_env(tmp_path, "sim:H100-SXM5-80GB", cpu_threads=3)
    assert "OMP_NUM_THREADS" not in env and "MKL_NUM_THREADS" not in env


def test_a_cpu_thread_count_under_one_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(DeviceError, match="cpu threads"):
        _run_env(tmp_path / "o", "cpu", cpu_threads=0)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("measured, says", [(2, "(the other cases are recorded as stopped)"),
                                            (3, "(the signal came after the last case: every case was measured)")])
def test_a_stopped_run_says_whether_cases_were_left_unmeasured(tmp_path, capsys, monkeypatch, measured, says):
    """A SIGTERM after the last case still stops the run (exit 3), but no case was
    stopped: the line must not say that some were."""
    import signal

    from kernels_bench import __main__ as cli
    from kernels_bench.runner import STOPPED_EXIT, ShardStopped

    def stopped(*args, **kwargs):
        raise ShardStopped(signal.SIGTERM, measured, 3, {"runs": tmp_path / "run.parquet"})

    monkeypatch.setattr(cli, "run_shard", stopped)
    assert main(["run", "--suite", "cpu-smoke", "--device", "cpu", "--out", str(tmp_path / "out")]) == STOPPED_EXIT
    err = capsys.readouterr().err
    assert f"stopped by SIGTERM after {measured} of 3 cases" in err and says in err
