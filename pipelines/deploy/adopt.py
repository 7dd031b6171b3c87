"""Register a lake's existing tables in a new (shared) metastore: `make up` on a lake that
was mined embedded. Each table found under warehouse/ is created at its own location
(schemas/tables.py), an unpartitioned one pointed at its live snapshot, and a partitioned
one given the partitions its directories hold, each at its live snapshot. Nothing is
read or written but metadata.

    python -m pipelines.deploy.adopt      (PERFLAKE_HOME names the lake)
"""
from __future__ import annotations

from pipelines.config.lake import Lake
from pipelines.warehouse import snapshots
from pipelines.warehouse.catalog import ensure_table, partition_values, register_partitions
from pipelines.warehouse.session import get_spark
from schemas.tables import ALL_TABLES


def adopt(lake: Lake) -> list[str]:
    spark = get_spark(lake, app="perflake-adopt")
    adopted = []
    for table in ALL_TABLES.values():
        if not lake.table_path(table.name).is_dir():
            continue
        name = ensure_table(spark, lake, table)
        if table.partition_by:  # each partition at its live snapshot (or its own files)
            table_dir = lake.table_path(table.name)
            found = snapshots.partition_dirs(table_dir, len(table.partition_by))
            register_partitions(spark, name, table, {
                partition_values(table, d.relative_to(table_dir)): snapshots.live_dir(d) for d in found})
        adopted.append(name)
    return adopted


def main() -> int:
    for name in adopt(Lake.from_env()):
        print(f"registered {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
