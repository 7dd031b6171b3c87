"""A Spark standalone cluster on loopback (one master, one worker) started from pyspark's
own launcher, and `spark-submit` of perflake's jobs to any master.

The same job files run in local mode, here, or on a real cluster: only the master URL
changes (see docs/spark.md). Used by tests/test_spark_cluster.py and for trying jobs
against a cluster on one machine.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernels_bench.collectives import free_port
from pipelines.config.processes import group_members
from pipelines.warehouse.session import spark_home
from pipelines.config.lake import Lake

REPO_ROOT = Path(__file__).resolve().parents[2]  # tests/launchers/ -> the checkout


def submit_command(job: str, master: str, *args: str, conf: dict[str, str] | None = None) -> list[str]:
    """spark-submit of jobs/<job>.py to `master`; executors use this interpreter."""
    conf = {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable, **(conf or {})}
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [str(REPO_ROOT / "jobs" / f"{job}.py"), *args]


def submit(job: str, master: str, lake: Lake, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Run a job to completion; raises with the job's log tail when it fails."""
    env = {**os.environ, "PERFLAKE_HOME": str(lake.root),
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("PERFLAKE_SPARK_MASTER", None)  # spark-submit's --master decides
    out = subprocess.run(submit_command(job, master, "--lake", str(lake.root), *args), env=env,
                         capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"spark-submit jobs/{job}.py to {master} failed (exit {out.returncode}):\n"
                           f"{out.stderr[-4000:]}")
    return out


class LocalCluster:
    """`with LocalCluster() as c: submit(..., c.master_url, ...)`; both daemons and every
    executor they started are stopped on exit."""

    def __init__(self, worker_cores: int = 2, worker_memory: str = "2g"):
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.workdir = Path(tempfile.mkdtemp(prefix="perflake-spark-cluster-"))
        self.procs: list[subprocess.Popen] = []

    def _daemon(self, cls: str, *args: str, log: str) -> subprocess.Popen:
        # loopback UIs, executors' files outside the venv, no REST submission port (docs/spark.md)
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(self.workdir / "work"),
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        cmd = [str(spark_home() / "bin" / "spark-class"), cls, *args]
        p = subprocess.Popen(cmd, env=env, stdout=open(self.workdir / log, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def start(self, timeout_s: float = 120) -> "LocalCluster":
        self._daemon("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(free_port()), log="master.log")
        self._daemon("org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                     "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                     "--webui-port", str(free_port()), log="worker.log")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"a Spark daemon exited early; see {self.workdir}/*.log")
            if "Successfully registered with master" in (self.workdir / "worker.log").read_text():
                return self
            time.sleep(1)
        raise TimeoutError(f"the worker did not register within {timeout_s:.0f} s; see {self.workdir}/worker.log")

    def stop(self, timeout_s: float = 30) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            while group_members(p.pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
