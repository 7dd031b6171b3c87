"""Projections: kernels onto catalog GPUs (roofline model)."""
