"""The mining job runs unchanged on a Spark standalone cluster (master and worker started
from pyspark's launcher on 127.0.0.1), submitted with spark-submit, and publishes the
same tables as in local mode. It uses its own lake: the shared test session holds the
other lake's metastore."""
from __future__ import annotations

import json

import psutil
import pyarrow.parquet as pq
import pytest

from pipelines.config.processes import group_members
from pipelines.config.lake import Lake
from pipelines.warehouse.frames import Frames
from launchers.spark_cluster import LocalCluster, submit
from pipelines.sweep.shards import plan_shards, run_shard

DT = "2031-03-01"
FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}


def _listening_addresses(cluster: LocalCluster) -> set[tuple[str, int]]:
    """(host, port) of every socket the cluster's daemons listen on; IPv4-mapped IPv6
    addresses are written as IPv4."""
    found = set()
    for proc in cluster.procs:
        for pid in group_members(proc.pid):
            try:
                conns = psutil.Process(pid).net_connections(kind="inet")
            except psutil.NoSuchProcess:
                continue
            found |= {(c.laddr.ip.removeprefix("::ffff:"), c.laddr.port) for c in conns
                      if c.status == psutil.CONN_LISTEN}
    return found


def test_mine_submitted_to_a_standalone_cluster_publishes_case_stats(tmp_path):
    lake = Lake(tmp_path / "lake")
    for shard in plan_shards(run_id="cluster-1", dt=DT, pool="sim-h100", suites=["gemm-demo"], reason="manual",
                             stopping=FAST):
        run_shard(shard, lake)
    landed = sum(pq.ParquetFile(f).metadata.num_rows for f in (lake.landing / "samples").rglob("*.parquet"))

    cluster = LocalCluster(worker_cores=1, worker_memory="1g")
    try:
        cluster.start()
        listening = _listening_addresses(cluster)
        out = submit("mine", cluster.master_url, lake, "--date", DT)
    finally:
        cluster.stop()
    assert all(group_members(p.pid) == [] for p in cluster.procs), "cluster processes survived the stop"
    # RPC ports and both web UIs on loopback only, and no REST submission server (docs/spark.md)
    assert len(listening) >= 4 and {host for host, _ in listening} == {"127.0.0.1"}, listening
    assert 6066 not in {port for _, port in listening}, listening

    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["samples"] == landed and summary["case_stats"] == 6
    assert "app-" in (cluster.workdir / "worker.log").read_text()  # an executor really ran on the worker
    stats = Frames(lake).table("case_stats").to_dict("records")
    assert len(stats) == 6
    assert all(r["status"] == "ok" and r["median_ns"] > 0 and r["device_kind"] == "simulated" for r in stats)
