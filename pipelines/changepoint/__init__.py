"""Change detection on perf series: level changes in one history, family-wide FDR
control, scoring against labelled series, and A/B comparison of two sample sets."""

from pipelines.changepoint.compare import Comparison, compare
from pipelines.changepoint.detector import (Change, DetectorParams, bh_adjust, confirms, detect, effect_floor,
                                            measure_at, select_significant)
from pipelines.changepoint.metrics import covering, f1_score

__all__ = [
    "Change", "Comparison", "DetectorParams", "bh_adjust", "compare", "confirms", "covering", "detect",
    "effect_floor", "f1_score", "measure_at", "select_significant",
]
