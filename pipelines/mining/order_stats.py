"""Order statistics of sorted array columns (numpy's default linear interpolation), so a
group's quantiles come from one sorted collect instead of one exact-percentile
aggregation per statistic."""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def at(arr: Column, one_based: Column) -> Column:
    """The element at a 1-based rank."""
    return F.element_at(arr, one_based.cast("int"))


def quantile(arr: Column, n: Column, q: float) -> Column:
    """Linear-interpolated quantile of a sorted array of length n (null when n = 0)."""
    pos = F.lit(q) * (n - 1)
    lo = F.floor(pos)
    hi = F.ceil(pos)
    v_lo, v_hi = at(arr, lo + 1), at(arr, hi + 1)
    return F.when(n > 0, v_lo + (v_hi - v_lo) * (pos - lo))
