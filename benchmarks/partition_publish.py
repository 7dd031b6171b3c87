"""What does publishing a partition as a snapshot cost, next to Spark's in-place overwrite?

    .venv/bin/python benchmarks/partition_publish.py --rows 600000 --pools 3 --repeats 6

One Spark session, one lake of its own (rows drawn at random, nothing measured), two
tables of the same shape partitioned by (dt, pool). Each round republishes the same
`--pools` partitions of one night, `--rows` rows in all, into both tables, the order of
the two alternating between rounds so that a drift of the machine's load hits both:
- "in place": `insertInto(overwrite=True)` with dynamic partition overwrite, what
  `catalog.write_partitions` did until 2026-11-26 (it deletes the files a reader may
  just have listed);
- "snapshot": `catalog.write_partitions` now (a new snapshot directory per partition,
  its pointer, and `ALTER TABLE ... PARTITION ... SET LOCATION` for each).
It prints each round's seconds and the ratio of the medians (the first round, which
creates the tables, left out). Figures go to benchmarks/NOTES-services.md by hand, with
the machine and the date.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--pools", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()

    from pyspark.sql import functions as F

    from pipelines.config.lake import Lake
    from pipelines.warehouse import catalog
    from pipelines.warehouse.session import get_spark
    from schemas.definition import Column, Table

    def table(name: str) -> Table:
        return Table(name=name, grain="one row per k (a benchmark table)", version=1, keys=("k", "dt", "pool"),
                     partition_by=("dt", "pool"),
                     columns=(Column("k", "int64", "key", False), Column("v", "float64", "value"),
                              Column("dt", "string", "night", False), Column("pool", "string", "pool", False)))

    in_place, snapshot = table("bench_in_place"), table("bench_snapshot")
    with tempfile.TemporaryDirectory(prefix="perflake-publish-bench-") as tmp:
        lake = Lake(Path(tmp) / "lake")
        spark = get_spark(lake, app="perflake-publish-bench")
        rows = spark.range(args.rows).select(
            F.col("id").alias("k"), F.rand(1).alias("v"), F.lit("2030-01-01").alias("dt"),
            (F.col("id") % args.pools).cast("string").alias("pool")).cache()
        rows.count()

        def publish_in_place() -> None:
            name = catalog.ensure_table(spark, lake, in_place)
            rows.select(*spark.table(name).columns).repartition("dt", "pool").write.insertInto(name, overwrite=True)

        ways = {"in place": publish_in_place,
                "snapshot": lambda: catalog.write_partitions(spark, lake, rows, snapshot)}
        seconds: dict[str, list[float]] = {k: [] for k in ways}
        for r in range(args.repeats):
            for kind in (list(ways) if r % 2 == 0 else list(reversed(ways))):
                t0 = time.perf_counter()
                ways[kind]()
                seconds[kind].append(time.perf_counter() - t0)
            print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in seconds.items()), flush=True)
        medians = {k: statistics.median(v[1:]) for k, v in seconds.items()}
        print(f"medians (rounds 1-{args.repeats - 1}): " + ", ".join(f"{k} {v:.2f} s" for k, v in medians.items())
              + f"; snapshot / in place {medians['snapshot'] / medians['in place']:.2f}")
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
