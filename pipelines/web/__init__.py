"""perflake web: the dashboard over the lake (docs/web.md). `create_app` in app.py."""
