"""kernels_bench: measures GPU kernels (and their CPU and simulated stand-ins) and writes
every raw sample with full provenance in the landing schema of `schemas.tables`.

Runs on a bare worker with torch, pyarrow, numpy and PyYAML.
"""
