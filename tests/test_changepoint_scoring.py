"""pipelines.changepoint's scoring, FDR and A/B compare on hand-computed examples."""

import numpy as np
import pytest

from pipelines.changepoint import bh_adjust
from pipelines.changepoint.compare import compare
from pipelines.changepoint.metrics import covering, f1_score, precision_recall


def test_bh_adjust_matches_a_hand_computed_example():
    # sorted p: 0.01, 0.02, 0.03, 0.04, 0.20 (m = 5) -> p*m/rank: 0.05, 0.05, 0.05, 0.05, 0.20
    q = bh_adjust([0.04, 0.01, 0.20, 0.03, 0.02])
    np.testing.assert_allclose(q, [0.05, 0.05, 0.20, 0.05, 0.05])
    # monotone step-up: 0.01*3/1 = 0.03 but 0.02*3/2 = 0.03 and 0.9 stays 0.9
    np.testing.assert_allclose(bh_adjust([0.01, 0.02, 0.9]), [0.03, 0.03, 0.9])


def test_f1_on_a_hand_example():
    # truth {0,10,20} and {0,10}; predicted {0,11,40}. Union matches 0 and 10 -> P = 2/3;
    # recalls 2/3 and 2/2 -> R = 5/6; F1 = 2PR/(P+R) = 20/27.
    ann = {"1": [10, 20], "2": [10]}
    assert precision_recall(ann, [11, 40]) == pytest.approx((2 / 3, 5 / 6))
    assert f1_score(ann, [11, 40]) == pytest.approx(20 / 27)
    # predicting only 20: P = 2/2; recalls 2/3 and 1/2 -> R = 7/12; F1 = 14/19.
    assert f1_score(ann, [20]) == pytest.approx(14 / 19)
    # predicting nothing still predicts 0: P = 1; recalls 1/3 and 1/2 -> R = 5/12; F1 = 10/17.
    assert f1_score(ann, []) == pytest.approx(10 / 17)


def test_covering_on_a_hand_example():
    # n = 10, truth cut at 5 ([0,5), [5,10)); prediction cut at 4 ([0,4), [4,10)):
    # (5 * 4/5 + 5 * 5/6) / 10 = 49/60.
    assert covering({"a": [5]}, [4], 10) == pytest.approx(49 / 60)
    assert covering({"a": [5]}, [5], 10) == pytest.approx(1.0)
    assert covering({"a": [5], "b": []}, [], 10) == pytest.approx((0.5 + 1.0) / 2)


def test_compare_says_slower_for_a_clear_10_percent_shift():
    rng = np.random.default_rng(0)
    a = rng.normal(1.0, 0.01, 40)
    b = rng.normal(1.1, 0.01, 40)
    r = compare(a, b)
    assert r.verdict == "slower" and r.ratio == pytest.approx(1.1, abs=0.01)
    assert r.ci_low > 1.0 and r.p_value < 1e-6
    assert compare(b, a).verdict == "faster"


def test_compare_says_same_for_identical_distributions():
    rng = np.random.default_rng(1)
    r = compare(rng.normal(1.0, 0.01, 100), rng.normal(1.0, 0.01, 100))
    assert r.verdict == "same"


def test_compare_says_ambiguous_when_too_few_noisy_samples():
    rng = np.random.default_rng(2)
    assert compare(rng.normal(1.0, 0.2, 3), rng.normal(1.05, 0.2, 3)).verdict == "ambiguous"


@pytest.mark.parametrize("n", [5, 6])
def test_bootstrap_medians_have_the_distribution_of_resampled_medians(n):
    import itertools

    from pipelines.changepoint.compare import bootstrap_medians

    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0][:n])
    exact: dict[float, float] = {}
    for idx in itertools.product(range(n), repeat=n):  # every resample, equally likely
        m = float(np.median(x[list(idx)]))
        exact[m] = exact.get(m, 0.0) + 1.0 / n**n
    draws = bootstrap_medians(x, 200_000, np.random.default_rng(3))
    values, counts = np.unique(draws, return_counts=True)
    drawn = dict(zip(values.tolist(), (counts / len(draws)).tolist()))
    assert set(drawn) <= set(exact)
    assert max(abs(drawn.get(m, 0.0) - p) for m, p in exact.items()) < 0.005
