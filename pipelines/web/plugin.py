"""perflake web inside the Airflow UI: an Airflow 3 plugin that mounts the dashboard's
FastAPI app on the API server under /perflake and adds a "perflake" entry to the UI's
navigation. Registered through the `airflow.plugins` entry point (pyproject.toml), so
nothing is copied into $AIRFLOW_HOME/plugins.

The app reads the lake of $PERFLAKE_HOME. The API server's own login does not cover
mounted apps: set $PERFLAKE_WEB_TOKEN for the API server when it listens beyond loopback
(docs/web.md).
"""
from __future__ import annotations

import os

from airflow.plugins_manager import AirflowPlugin

from pipelines.config.lake import Lake
from pipelines.web.app import create_app

URL_PREFIX = "/perflake"


class PerflakeWebPlugin(AirflowPlugin):
    name = "perflake"
    fastapi_apps = [{"app": create_app(Lake.from_env(), token=os.environ.get("PERFLAKE_WEB_TOKEN") or None),
                     "url_prefix": URL_PREFIX, "name": "perflake web"}]
    external_views = [{"name": "perflake", "href": f"{URL_PREFIX}/", "destination": "nav",
                       "url_route": "perflake"}]
