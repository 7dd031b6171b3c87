"""Launchers for tests and development: a local Airflow, a local Spark standalone cluster."""
