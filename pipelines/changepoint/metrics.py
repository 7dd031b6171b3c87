"""Scores of a change-point segmentation against human annotations (TCPDBench's).

Both follow van den Burg & Williams, "An Evaluation of Change Point Detection
Algorithms" (2020), written here from their definitions:

- F1 with a margin: index 0 is a change point of the prediction and of every annotator
  (so a method that reports nothing still scores). A prediction is a true positive for a
  set of true points if it is the closest unused prediction within `margin` of one of
  them (each prediction matches at most one true point). Precision is computed against
  the union of all annotators' points; recall is averaged over annotators.
- Segmentation covering: each annotator's segmentation is covered by the predicted one,
  C = (1/n) * sum over true segments A of |A| * max over predicted segments B of
  Jaccard(A, B), and C is averaged over annotators.

`annotations` maps annotator id to that annotator's 0-based change-point indices (the
first index of each new segment), as in TCPD's annotations.json.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def _true_positives(truth: Iterable[int], predicted: Iterable[int], margin: int) -> int:
    """Number of true points matched one-to-one by a prediction within `margin`."""
    unused = set(predicted)
    hits = 0
    for tau in sorted(set(truth)):
        close = [(abs(tau - x), x) for x in unused if abs(tau - x) <= margin]
        if close:
            unused.remove(min(close)[1])
            hits += 1
    return hits


def precision_recall(annotations: Mapping[str, Iterable[int]], predictions: Iterable[int],
                     margin: int = 5) -> tuple[float, float]:
    """Precision (against the union of annotators) and mean recall over annotators."""
    if not annotations:
        raise ValueError("precision_recall needs at least one annotator")
    per_user = [set(cps) | {0} for cps in annotations.values()]
    predicted = set(predictions) | {0}
    union = set().union(*per_user)
    precision = _true_positives(union, predicted, margin) / len(predicted)
    recall = sum(_true_positives(t, predicted, margin) / len(t) for t in per_user) / len(per_user)
    return precision, recall


def f1_score(annotations: Mapping[str, Iterable[int]], predictions: Iterable[int],
             margin: int = 5) -> float:
    """TCPDBench's F1: harmonic mean of precision_recall (0 when both are 0)."""
    p, r = precision_recall(annotations, predictions, margin)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _segments(cps: Iterable[int], n_obs: int) -> list[tuple[int, int]]:
    """Half-open [start, end) segments of 0..n_obs cut at the given indices."""
    cuts = sorted({c for c in cps if 0 < c < n_obs})
    bounds = [0, *cuts, n_obs]
    return list(zip(bounds[:-1], bounds[1:]))


def _jaccard(a: tuple[int, int], b: tuple[int, int]) -> float:
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    return inter / union


def covering(annotations: Mapping[str, Iterable[int]], predictions: Iterable[int],
             n_obs: int) -> float:
    """TCPDBench's segmentation covering of the annotations by the predictions, in [0, 1]."""
    if not annotations:
        raise ValueError("covering needs at least one annotator")
    if n_obs <= 0:
        raise ValueError(f"covering needs n_obs > 0, got {n_obs}")
    predicted = _segments(predictions, n_obs)
    scores = []
    for cps in annotations.values():
        truth = _segments(cps, n_obs)
        total = sum((a[1] - a[0]) * max(_jaccard(a, b) for b in predicted) for a in truth)
        scores.append(total / n_obs)
    return sum(scores) / len(scores)
