"""pipelines.query.ab.compare_cases: many cases compared at once give each case exactly
the numbers pipelines.changepoint.compare gives it alone (no JVM, no lake)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines.changepoint import compare
from pipelines.query.ab import UNMATCHED, compare_cases


def _rows(cases: dict[str, tuple[np.ndarray, np.ndarray]], rng) -> pd.DataFrame:
    """Samples of each case in a shuffled order, as an engine may deliver them."""
    parts = [pd.DataFrame({"case_id": case_id, "device_kind": "simulated", "side": side, "latency_ns": values})
             for case_id, (a, b) in cases.items() for side, values in (("a", a), ("b", b))]
    rows = pd.concat(parts, ignore_index=True)
    return rows.iloc[rng.permutation(len(rows))].reset_index(drop=True)


def _cases(rng) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Sizes odd and even, shared and not, a few with the exact small-sample test, integer
    latencies (ties), shifts from none to 10 %, and zeros."""
    out = {}
    for i in range(120):
        n_a, n_b = int(rng.choice([3, 8, 9, 36, 37, 38, 40, 79])), int(rng.choice([5, 9, 37, 38, 40, 80]))
        level = rng.uniform(5e3, 5e5)
        shift = rng.choice([1.0, 1.0, 1.01, 1.05, 1.10, 0.9])
        out[f"case-{i:03d}"] = (np.round(level * rng.normal(1, 0.01, n_a)),
                                np.round(level * shift * rng.normal(1, 0.01, n_b)))
    for i in range(4):  # zeros in A: some resampled medians of A are 0 and their ratios are left out
        a = np.round(1e4 * rng.normal(1, 0.01, 9))
        a[:3] = 0
        out[f"zeros-{i}"] = (a, np.round(1e4 * rng.normal(1, 0.01, 9)))
    return out


def test_batched_comparison_equals_compare_case_by_case():
    rng = np.random.default_rng(7)
    cases = _cases(rng)
    got = compare_cases(_rows(cases, rng)).set_index("case_id")
    assert list(got.index) == sorted(cases)
    for case_id, (a, b) in cases.items():
        c = compare(a, b)
        row = got.loc[case_id]
        assert (row["n_a"], row["n_b"]) == (len(a), len(b))
        assert (row["median_a_ns"], row["median_b_ns"]) == (np.median(a), np.median(b))
        # Equal to the last bit: the web and both engines must print the same numbers.
        assert (row["ratio"], row["ci_low"], row["ci_high"], row["p_value"]) == (c.ratio, c.ci_low, c.ci_high,
                                                                               c.p_value), case_id
        assert (row["verdict"], row["test"]) == (c.verdict, c.test)


def test_a_case_with_fewer_than_two_samples_a_side_is_unmatched():
    rows = pd.DataFrame({"case_id": ["x", "x", "x", "y"], "device_kind": ["gpu", "gpu", "gpu", "gpu"],
                         "side": ["a", "a", "b", "b"], "latency_ns": [10.0, 11.0, 10.0, 12.0]})
    got = compare_cases(rows).set_index("case_id")
    assert list(got["verdict"]) == [UNMATCHED, UNMATCHED]
    assert got.loc["x", "median_a_ns"] == 10.5 and got.loc["y", "kind_a"] is None
    assert got.loc["y", "ratio"] is None or np.isnan(got.loc["y", "ratio"])


def test_device_kinds_of_a_side_are_listed_sorted_and_once():
    rows = pd.DataFrame({"case_id": ["x"] * 6, "device_kind": ["gpu", "simulated", "gpu", None, "gpu", "gpu"],
                         "side": ["a", "a", "a", "b", "b", "b"], "latency_ns": [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]})
    row = compare_cases(rows).iloc[0]
    assert (row["kind_a"], row["kind_b"]) == ("gpu,simulated", "gpu")


def test_a_side_with_a_non_positive_median_is_refused_as_compare_refuses_it():
    rows = pd.DataFrame({"case_id": ["x"] * 20, "device_kind": ["gpu"] * 20, "side": ["a"] * 10 + ["b"] * 10,
                         "latency_ns": [0.0] * 10 + [5.0] * 10})
    with pytest.raises(ValueError, match="median of a must be > 0"):
        compare_cases(rows)


def test_compare_notes_a_real_gpu_against_a_simulated_one_but_not_a_case_one_side_lacks():
    from pipelines.query.ab import mixed_kinds

    rows = [{"kind_a": "gpu", "kind_b": "simulated"}, {"kind_a": "gpu", "kind_b": "gpu"},
            {"kind_a": "gpu", "kind_b": None}, {"kind_a": None, "kind_b": "gpu"}]
    # unmatched cases (one side measured nothing) once printed "side B is None"
    assert mixed_kinds(rows) == ["side A is gpu and side B is simulated for some cases"]
