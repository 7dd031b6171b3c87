"""The bodies of the Airflow DAGs' tasks, the Airflow environment, and the demo run."""
