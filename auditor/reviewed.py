"""Rates from people's review of a random sample of answers, with the judge narrowing them.

A person labels n of a pipeline's N checked answers (hallucinated or not). The rate is theirs:
valid whatever the judge, because the sample is random. The judge's verdicts on all N answers
narrow the interval by prediction-powered inference (PPI++: Angelopoulos, Duchi and Zrnic,
arXiv 2311.01453), with `ppi_py`'s power-tuned mean: the judge's share is estimated from the
labelled answers, so a judge that tells nothing gets weight ~0 and the interval is no wider
than the labels' alone (up to the tuning's own noise). Each answer counts with the inverse
of its inclusion probability (a uniform sample: all the same).

PPI's interval is a large-sample one for an infinite population: when most of a pipeline's
answers are reviewed (n / N from `FINITE_SHARE` on), it under-covers (simulated on real answers:
0.74 with 10 of 14 reviewed), and the labels alone, with a finite-population correction,
are used instead (all N reviewed: the rate is exact). With fewer than `MIN_FOR_PPI` labels the
judge's share cannot be estimated and the rate comes from the labels alone (Wilson). Every
result says which interval it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditor.calibration import wilson_interval
from auditor.claim_rows import Claim, flagged_at

__all__ = [
    "FINITE_SHARE",
    "MIN_FOR_PPI",
    "ReviewedRate",
    "judge_agreement",
    "labels_only_interval",
    "reviewed_rate",
    "reviewers",
]

FINITE_SHARE = 0.5  # from this share of answers reviewed on, PPI's interval is not used
MIN_FOR_PPI = 10
Z95 = 1.959963984540054


@dataclass(frozen=True)
class ReviewedRate:
    """A reviewed rate with its 95 % interval, the labels behind it and how it was made."""

    value: float
    low: float
    high: float
    labels: int
    population: int
    method: str  # "ppi++", "labels (finite population)", "labels (Wilson)"
    labels_only: tuple[float, float]  # the labels-alone interval, for comparison

    def to_json(self) -> dict[str, Any]:
        return {
            "value": round(self.value, 6),
            "low": round(self.low, 6),
            "high": round(self.high, 6),
            "labels": self.labels,
            "population": self.population,
            "method": self.method,
            "labels_only": [round(x, 6) for x in self.labels_only],
        }


def labels_only_interval(positives: int, n: int, population: int) -> tuple[float, float]:
    """Wilson's 95 % interval of a share of n labels, with a finite-population correction when
    the n are a large share of a population of N (exact when all are labelled)."""
    if n == 0:
        return 0.0, 1.0
    if n >= population:
        share = positives / n
        return share, share
    if n / population < FINITE_SHARE:
        low, high = wilson_interval(positives, n) or (0.0, 1.0)
        return low, high
    # Wilson with the sample size inflated by the finite-population correction (N-1)/(N-n)
    effective = n * (population - 1) / (population - n)
    p = positives / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * effective)) / (1 + z2 / effective)
    half = Z95 * math.sqrt(p * (1 - p) / effective + z2 / (4 * effective**2)) / (1 + z2 / effective)
    return max(0.0, centre - half), min(1.0, centre + half)


def reviewed_rate(
    labels: Sequence[bool],
    labelled_predictions: Sequence[float],
    all_predictions: Sequence[float],
    weights: Sequence[float] | None = None,
) -> ReviewedRate:
    """The rate of hallucinated answers (or claims) among all of a pipeline's, from people's
    `labels` on a random sample, the judge's predictions on those (`labelled_predictions`,
    its flag 0/1 or a score in [0, 1]) and on every answer (`all_predictions`, the labelled
    ones included). `weights`: each labelled answer's inverse inclusion probability (None:
    a uniform sample)."""
    n, population = len(labels), len(all_predictions)
    positives = sum(bool(x) for x in labels)
    alone = labels_only_interval(positives, n, population)
    share = positives / n if n else 0.0
    if n == 0:
        return ReviewedRate(0.0, 0.0, 1.0, 0, population, "no labels", alone)
    if n >= population or n / population >= FINITE_SHARE:
        return ReviewedRate(
            share, alone[0], alone[1], n, population, "labels (finite population)", alone
        )
    if n < MIN_FOR_PPI:
        return ReviewedRate(share, alone[0], alone[1], n, population, "labels (Wilson)", alone)
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    y = np.asarray(labels, dtype=float)
    yhat = np.asarray(labelled_predictions, dtype=float)
    unlabelled = np.asarray(all_predictions, dtype=float)
    w = None if weights is None else np.asarray(weights, dtype=float)
    if np.ptp(yhat) == 0 and np.ptp(unlabelled) == 0:
        # a constant judge tells nothing (and PPI's tuning divides by its variance)
        return ReviewedRate(share, alone[0], alone[1], n, population, "labels (Wilson)", alone)
    if positives in (0, n):
        # every label alike: PPI's variance estimate is the judge's alone; Wilson holds
        return ReviewedRate(share, alone[0], alone[1], n, population, "labels (Wilson)", alone)
    value = float(ppi_mean_pointestimate(y, yhat, unlabelled, w=w)[0])
    low, high = (float(v[0]) for v in ppi_mean_ci(y, yhat, unlabelled, alpha=0.05, w=w))
    if high - low >= alone[1] - alone[0]:
        # the tuning found no help in the judge (its weight estimated on few labels): the
        # labels alone; so the reviewed interval is never wider than theirs
        return ReviewedRate(share, alone[0], alone[1], n, population, "labels (Wilson)", alone)
    return ReviewedRate(
        min(1.0, max(0.0, value)),
        max(0.0, low),
        min(1.0, high),
        n,
        population,
        "ppi++",
        alone,
    )


def judge_agreement(labels: Sequence[bool], flags: Sequence[bool]) -> dict[str, Any]:
    """The judge's sensitivity and specificity on the reviewed answers (Wilson intervals)."""
    positives = sum(labels)
    negatives = len(labels) - positives
    caught = sum(g and f for g, f in zip(labels, flags, strict=True))
    passed = sum(not g and not f for g, f in zip(labels, flags, strict=True))
    return {
        "sensitivity": caught / positives if positives else None,
        "sensitivity_interval": wilson_interval(caught, positives),
        "specificity": passed / negatives if negatives else None,
        "specificity_interval": wilson_interval(passed, negatives),
        "positives": positives,
        "negatives": negatives,
    }


def review_summary(
    labels: Sequence[Any],
    checks: Sequence[dict[str, Any]],
    threshold: float,
    tps: float | None,
    sample: dict[str, Any] | None,
) -> dict[str, Any]:
    """summary.json's `reviewed` of one run: the reviewed answer rate (and claim rate when
    claims were reviewed), the judge's agreement on the review, goodput from the reviewed
    rate, and where the sample came from."""
    claims_of = {str(row["id"]): [Claim.from_json(c) for c in row["claims"]] for row in checks}
    flag = {ident: flagged_at(claims, threshold) for ident, claims in claims_of.items()}
    everyone = [float(f) for f in flag.values()]
    # only the drawn sample makes a rate; labels kept from outside it count in the agreement
    drawn = [label for label in labels if getattr(label, "in_sample", True)]
    gold = [bool(label.hallucinated) for label in drawn]
    answer = reviewed_rate(gold, [float(flag[label.id]) for label in drawn], everyone)
    claim = _claim_rate(drawn, claims_of, threshold)
    used = claim or answer
    agreement = judge_agreement(
        [bool(label.hallucinated) for label in labels], [flag[label.id] for label in labels]
    )
    return {
        "labels": len(drawn),
        "labels_outside_sample": len(labels) - len(drawn),
        "reviewers": reviewers(labels),
        "answer_rate": answer.to_json(),
        "claim_rate": None if claim is None else claim.to_json(),
        "judge_sensitivity": agreement["sensitivity"],
        "judge_sensitivity_interval": agreement["sensitivity_interval"],
        "judge_specificity": agreement["specificity"],
        "judge_specificity_interval": agreement["specificity_interval"],
        "goodput_tps": None if tps is None else tps * (1 - used.value),
        "goodput_tps_interval": None
        if tps is None
        else [tps * (1 - used.high), tps * (1 - used.low)],
        "goodput_from": "claim_rate" if claim is not None else "answer_rate",
        "sample": sample
        or {
            "method": "uniform (assumed)",
            "note": "no review.json beside the run: the labels count as a uniform random sample",
        },
    }


def reviewers(labels: Sequence[Any]) -> list[dict[str, Any]]:
    """Who labelled, how many answers each and when (first and last `labelled_at`): the
    record of who signed a rate. Labels without a name are counted as "(unnamed)"."""
    by_name: dict[str, list[str | None]] = {}
    for label in labels:
        name = getattr(label, "reviewer", None) or "(unnamed)"
        by_name.setdefault(name, []).append(getattr(label, "labelled_at", None))
    found = []
    for name, times in sorted(by_name.items()):
        known = sorted(t for t in times if t)
        found.append(
            {
                "name": name,
                "labels": len(times),
                "first": known[0] if known else None,
                "last": known[-1] if known else None,
            }
        )
    return found


def _claim_rate(
    labels: Sequence[Any], claims_of: dict[str, list[Any]], threshold: float
) -> ReviewedRate | None:
    """The reviewed claim rate where reviewers marked the judge right or wrong per claim: a
    claim is hallucinated when the judge flagged it and was right, or passed it and was
    wrong. Claims of one answer are counted as if independent (a narrower interval than a
    cluster-aware one would give)."""
    marked = [label for label in labels if label.claims]
    if not marked:
        return None
    gold, predicted = [], []
    for label in marked:
        claims = claims_of[label.id]
        for mark in label.claims:
            if mark.index >= len(claims) or claims[mark.index].verdict == "unverifiable":
                continue
            judge_flag = _claim_flag(claims[mark.index], threshold)
            gold.append(judge_flag == mark.judge_right)
            predicted.append(float(judge_flag))
    if not gold:
        return None
    everyone = [
        float(_claim_flag(c, threshold))
        for claims in claims_of.values()
        for c in claims
        if c.verdict != "unverifiable"
    ]
    return reviewed_rate(gold, predicted, everyone)


def _claim_flag(claim: Any, threshold: float) -> bool:
    return flagged_at([claim], threshold)


def reviewed_difference(
    differences: Sequence[float],
    labelled_predictions: Sequence[float],
    all_predictions: Sequence[float],
) -> tuple[float, float, float, str]:
    """A paired difference of two pipelines' reviewed rates over the questions people
    labelled in both: the mean of (label a - label b), narrowed by the judges' (flag a -
    flag b) on every question both answered (PPI++ as for one rate). (value, low, high,
    method)."""
    n, population = len(differences), len(all_predictions)
    y = np.asarray(differences, dtype=float)
    mean = float(y.mean()) if n else 0.0
    sd = float(y.std(ddof=1)) if n > 1 else 1.0
    correction = math.sqrt((population - n) / (population - 1)) if population > 1 else 0.0
    if n >= population or n / population >= FINITE_SHARE:
        half = Z95 * sd / math.sqrt(n) * correction
        return mean, mean - half, mean + half, "labels (finite population)"
    half = Z95 * sd / math.sqrt(max(n, 1))
    alone = (mean, mean - half, mean + half, "labels (normal)")
    yhat = np.asarray(labelled_predictions, dtype=float)
    everyone = np.asarray(all_predictions, dtype=float)
    if n < MIN_FOR_PPI or (np.ptp(yhat) == 0 and np.ptp(everyone) == 0) or np.ptp(y) == 0:
        return alone
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    value = float(ppi_mean_pointestimate(y, yhat, everyone)[0])
    low, high = (float(v[0]) for v in ppi_mean_ci(y, yhat, everyone, alpha=0.05))
    if high - low >= alone[2] - alone[1]:
        return alone
    return value, low, high, "ppi++"
