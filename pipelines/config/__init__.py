"""Configuration: the lake's layout, the pool registry, the owners file, progress lines."""
