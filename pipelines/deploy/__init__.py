"""`make up` / `make down` / `make status`: the shared services of a lake (docs/deploy.md)."""
