"""False discovery control across the family of series mined in one night."""

from __future__ import annotations

import numpy as np


def bh_adjust(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order.

    q_i = min over j with p_j >= p_i of p_j * m / rank_j, capped at 1; rejecting every
    q <= q* controls the false discovery rate at q* for independent (or positively
    dependent) tests.
    """
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"bh_adjust expects a 1-D sequence of p-values, got shape {p.shape}")
    if np.any((p < 0) | (p > 1) | ~np.isfinite(p)):
        raise ValueError("bh_adjust: every p-value must be a finite number in [0, 1]")
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    q_sorted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    q = np.empty(m)
    q[order] = q_sorted
    return q


def select_significant(changes_by_series, q: float = 0.05) -> dict:
    """Keep, across a family of series, the changes whose BH q-value is <= q.

    `changes_by_series` maps a series key to the list of Change that `detect` returned
    for it; the result maps the same keys to the changes kept (possibly empty lists).
    Every change of every series is one test of the family.
    """
    keys = list(changes_by_series)
    flat = [(k, c) for k in keys for c in changes_by_series[k]]
    kept: dict = {k: [] for k in keys}
    if not flat:
        return kept
    qvals = bh_adjust([c.p_value for _, c in flat])
    for (k, c), qv in zip(flat, qvals):
        if qv <= q:
            kept[k].append(c)
    return kept
