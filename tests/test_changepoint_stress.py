"""The harder labelled histories of benchmarks/changepoint_stress.py and the recall
ceiling that benchmarks/changepoint_wide.py reports: what they draw and what they count."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def modules():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import changepoint_stress
        import changepoint_wide
    finally:
        sys.path.remove(str(BENCHMARKS))
    return changepoint_stress, changepoint_wide


def test_stress_histories_are_the_same_for_a_seed_and_hold_every_family(modules):
    stress, _ = modules
    a, b = stress.stress_histories(5, 3), stress.stress_histories(5, 3)
    assert [h["family"] for h in a] == [f for f in stress.STRESS_FAMILIES for _ in range(5)]
    assert all(np.array_equal(x["x"], y["x"]) and x["changes"] == y["changes"] for x, y in zip(a, b))


def test_close_steps_lie_4_to_12_nights_apart_and_others_at_least_10(modules):
    stress, _ = modules
    for h in stress.stress_histories(40, 11):
        nights = [c for c, _, _ in h["changes"]]
        gaps = np.diff(nights)
        if h["family"] == "close":
            assert len(nights) >= 1 and all(4 <= g <= 12 for g in gaps)
        else:
            assert all(g >= 10 for g in gaps) and len(nights) <= 2
        assert all(stress.FIRST_STEP_NIGHT <= c < len(h["x"]) for c in nights)


def test_a_labelled_step_moves_the_level_by_its_relative_size(modules):
    stress, _ = modules
    h = next(h for h in stress.stress_histories(30, 5) if h["family"] == "heavy" and len(h["changes"]) == 1)
    (c, rel, sig), = h["changes"]
    x = h["x"]
    # heavy tails: compare medians of long stretches, not means
    assert abs(np.median(x[c:]) - np.median(x[:c]) - rel) < max(0.5 * abs(rel), 0.01)


def test_the_floor_ceiling_is_the_share_of_steps_above_the_default_floors(modules):
    _, wide = modules
    x = np.ones(100)
    history = {"family": "gaussian", "label": "g", "x": x,
               "changes": [(20, 0.05, 5.0), (40, 0.01, 5.0), (60, 0.05, 1.5), (80, 0.03, 3.0)]}
    score = wide.score_wide([history], [[]])
    assert score["ceiling_floors"] == pytest.approx(0.5)  # 1 % is under 2 %, 1.5 sigma under 2 sigma
    assert score["ceiling_rel_floor"] == pytest.approx(0.75)
    assert score["all"] == (0.0, 4)
