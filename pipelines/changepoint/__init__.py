"""Change detection on perf series: level changes in one history, family-wide FDR
control, scoring against labelled series, and A/B comparison of two sample sets."""

from pipelines.changepoint.compare import Comparison, compare
from pipelines.changepoint.detector import detect
from pipelines.changepoint.known import confirms, faded, measure_at
from pipelines.changepoint.fdr import bh_adjust, select_significant
from pipelines.changepoint.metrics import covering, f1_score
from pipelines.changepoint.model import Change, DetectorParams, effect_floor

__all__ = [
    "Change", "Comparison", "DetectorParams", "bh_adjust", "compare", "confirms", "covering", "detect", "faded",
    "effect_floor", "f1_score", "measure_at", "select_significant",
]
