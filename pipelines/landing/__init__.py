"""Landing: atomic shard files, file checks, and ingest of results produced elsewhere."""
