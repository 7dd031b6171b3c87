"""Warehouse access: the Spark session, the `perf` catalog, snapshot publishing, table readers."""
