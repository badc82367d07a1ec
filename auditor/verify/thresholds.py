"""Agreement with human labels and the decision threshold (pure).

An answer is flagged when its score (its least supported claim's p_supported) is below the
threshold. The judge's threshold is chosen on labelled answers by one documented rule: the
threshold with the highest balanced accuracy, among midpoints between adjacent observed
scores; ties go to the middle of the best run, so the choice does not hug one record.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from auditor.claim_rows import Claim, flagged_at

__all__ = [
    "Agreement",
    "agreement",
    "auroc",
    "balanced_accuracy",
    "best_threshold",
    "bootstrap_interval",
    "contrast_figures",
    "roc_points",
    "share_interval",
]


def balanced_accuracy(pairs: Sequence[tuple[bool, bool]]) -> float:
    """Mean of recall and specificity over (gold, flagged) pairs; 0 for a missing class."""
    positives = [flagged for gold, flagged in pairs if gold]
    negatives = [not flagged for gold, flagged in pairs if not gold]
    recall = sum(positives) / len(positives) if positives else 0.0
    specificity = sum(negatives) / len(negatives) if negatives else 0.0
    return (recall + specificity) / 2


def best_threshold(scores: Sequence[float], gold: Sequence[bool]) -> float:
    """The threshold (flag when score < t) with the highest balanced accuracy on these labels."""
    if len(scores) != len(gold) or not scores:
        raise ValueError("need as many labels as scores, at least one")
    values = sorted(set(scores))
    candidates = [values[0] - 1e-9] + [(a + b) / 2 for a, b in itertools.pairwise(values)]
    candidates.append(values[-1] + 1e-9)
    rated = [
        balanced_accuracy([(g, s < t) for s, g in zip(scores, gold, strict=True)])
        for t in candidates
    ]
    top = max(rated)
    best = [t for t, r in zip(candidates, rated, strict=True) if r >= top - 1e-12]
    return min(max(best[len(best) // 2], 0.0), 1.0)


def auroc(scores: Sequence[float], gold: Sequence[bool]) -> float | None:
    """Probability that a hallucinated answer scores below a clean one (ties count half)."""
    bad = [s for s, g in zip(scores, gold, strict=True) if g]
    good = [s for s, g in zip(scores, gold, strict=True) if not g]
    if not bad or not good:
        return None
    wins = sum(1.0 if b < c else 0.5 if b == c else 0.0 for b in bad for c in good)
    return wins / (len(bad) * len(good))


def roc_points(scores: Sequence[float], gold: Sequence[bool]) -> list[tuple[float, float]]:
    """(false-positive rate, true-positive rate) as the threshold rises through the scores."""
    bad = sum(gold)
    good = len(gold) - bad
    points = [(0.0, 0.0)]
    for t in [*sorted(set(scores)), float("inf")]:
        flagged = [s < t for s in scores]
        tp = sum(f and g for f, g in zip(flagged, gold, strict=True))
        fp = sum(f and not g for f, g in zip(flagged, gold, strict=True))
        points.append((fp / good if good else 0.0, tp / bad if bad else 0.0))
    return points


@dataclass(frozen=True)
class Agreement:
    """Response-level agreement of flags with human labels."""

    answers: int
    balanced_accuracy: float
    interval: tuple[float, float]  # bootstrap 95 %
    precision: float
    recall: float
    specificity: float
    f1: float


def agreement(pairs: Sequence[tuple[bool, bool]], rounds: int = 2000) -> Agreement:
    """Balanced accuracy with its bootstrap interval, precision, recall, specificity, F1."""
    tp = sum(g and f for g, f in pairs)
    fp = sum(f and not g for g, f in pairs)
    fn = sum(g and not f for g, f in pairs)
    tn = len(pairs) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Agreement(
        answers=len(pairs),
        balanced_accuracy=balanced_accuracy(pairs),
        interval=bootstrap_interval(pairs, rounds),
        precision=precision,
        recall=recall,
        specificity=tn / (tn + fp) if tn + fp else 0.0,
        f1=f1,
    )


def bootstrap_interval(
    pairs: Sequence[tuple[bool, bool]], rounds: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95 % percentile interval of balanced accuracy over answers resampled with replacement."""
    if not pairs:
        return 0.0, 0.0
    rng = random.Random(seed)
    values = sorted(
        balanced_accuracy([pairs[rng.randrange(len(pairs))] for _ in pairs]) for _ in range(rounds)
    )
    return values[int(0.025 * rounds)], values[int(0.975 * rounds) - 1]


def share_interval(flags: list[bool], rounds: int = 2000) -> tuple[float, float]:
    """Bootstrap 95 % interval of the share of True."""
    rng = random.Random(0)
    shares = sorted(
        sum(flags[rng.randrange(len(flags))] for _ in flags) / len(flags) for _ in range(rounds)
    )
    return shares[int(0.025 * rounds)], shares[int(0.975 * rounds) - 1]


def contrast_figures(
    labels: dict[str, dict[str, Any]], checks: list[dict[str, Any]], threshold: float
) -> dict[str, Any]:
    """Shares of wrong and of correct answers flagged at `threshold`, overall and per kind
    (flagged by the check's own rule, so a run can be re-scored at another threshold)."""
    by_kind: dict[str, list[bool]] = {}
    wrong: list[bool] = []
    correct: list[bool] = []
    for row in checks:
        label = labels[row["id"]]
        flagged = flagged_at([Claim.from_json(c) for c in row["claims"]], threshold)
        (wrong if label["hallucinated"] else correct).append(flagged)
        by_kind.setdefault(label["kind"], []).append(flagged)
    return {
        "wrong_flagged": sum(wrong) / max(1, len(wrong)),
        "wrong_interval": share_interval(wrong) if wrong else (0.0, 0.0),
        "correct_flagged": sum(correct) / max(1, len(correct)),
        "correct_interval": share_interval(correct) if correct else (0.0, 0.0),
        "wrong": len(wrong),
        "correct": len(correct),
        "by_kind": {kind: (sum(f), len(f)) for kind, f in sorted(by_kind.items())},
    }
