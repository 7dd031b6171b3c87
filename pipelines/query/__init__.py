"""Queries: read-only SQL (Spark, DuckDB), the JDBC server, A/B comparisons of runs."""
