"""Rates from people's review of a random sample of answers, with the judge narrowing them.

A person labels n of a pipeline's N checked answers (hallucinated or not), drawn uniformly at
random without replacement. The rate is theirs: valid whatever the judge, because the sample
is random. Every interval knows the population is finite (N answers, all of them checked by
the judge) and says which it is in its `method`:

- **labels (Wilson, finite population)**: the labels alone, Wilson's score interval at the
  effective sample size n (N - 1) / (N - n), the variance of a share drawn without
  replacement (exact, zero width, when all N are labelled).
- **difference (finite population)**: the judge's prediction f (its flag 0/1 or a score in
  [0, 1]) is known on all N answers, so for any fixed weight lambda the residuals
  e = y - lambda f form a fixed population and

      theta = lambda mean_N(f) + mean_n(e)

  is unbiased for the rate mean_N(y) (the first term is known exactly, the second is a
  simple random sample's mean of e), with variance (1 - n/N) S2_e / n, S2_e the residuals'
  population variance, estimated without bias by their sample variance (Cochran 1977,
  Theorem 2.2). lambda is the sample's regression slope cov(y, f) / S2_f (S2_f known from
  all N), the weight that minimises S2_e: PPI++'s power tuning (Angelopoulos, Duchi and Zrnic,
  arXiv 2311.01453) without its (1 + n/N) factor and its variance term for mean_N(f), which
  is not estimated here but known. Fitting lambda makes theta the regression estimator
  (Sarndal, Swensson and Wretman 1992, 6.5), with the same variance to first order; the
  residual variance divides by n - 2 for the fitted slope, and lambda is clipped to [0, 1]
  (0: the judge is not used). `ppi_py`'s PPI++ has no finite-population correction and counts
  mean_N(f) as a random sample's: on the 150 RAGTruth QA dev answers, 1,000 reviews of 40,
  it was 0.287 wide (coverage 0.975), this estimator 0.242 with the verdict (0.952) and
  0.233 with the answer score (0.957); a draw stratified on the score was no narrower at
  equal coverage (bench/results/review-estimators-2026-12-07.json).

  The interval is Wilson's at the effective sample size p (1 - p) / v (p = theta, v its
  variance; Kish's design effect, as Korn and Graubard 1998 use for survey proportions)
  rather than theta +- z sqrt(v), which under-covers small skewed samples (simulated: 0.90-0.92
  instead of 0.94 at 20 of 150 answers with a 15-30 % rate). The residual variance is
  floored at d (1 - d), d = (z^2/2) / (n + z^2): the Agresti-Coull rate of a judge error
  never seen in n labels, so a judge that agreed on every labelled answer does not give a
  zero-width interval (a 98 %-accurate judge, 40 labels of 200: coverage 0.73 without the
  floor, 0.99 with it). The labels alone are used instead with fewer than `MIN_FOR_JUDGE`
  labels, labels all alike, a constant judge, lambda = 0, or when the judge's interval is no
  narrower: so the interval is never wider than the labels' alone.
- **ppi++ (weighted, infinite population)**: a sample with unequal inclusion probabilities
  (`weights`): `ppi_py`'s PPI++ with inverse-probability weights, as before.

Each rate carries the variance per label behind its width (`residual_variance`), from which
`labels_needed` tells how many labels in all bring the half width to +-0.05 or +-0.10:
n = 1 / (h^2 / (z^2 S2) + 1/N).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from auditor.agreement import reviewer_agreement
from auditor.calibration import wilson_interval
from auditor.claim_rows import Claim, flagged_at, hallucination_score

__all__ = [
    "HALF_WIDTHS",
    "MIN_FOR_JUDGE",
    "ReviewedRate",
    "judge_agreement",
    "labels_advice",
    "labels_for_half_width",
    "labels_needed",
    "labels_only_interval",
    "reviewed_difference",
    "reviewed_rate",
    "reviewers",
    "wilson_at",
]

MIN_FOR_JUDGE = 10  # fewer labels: the judge's weight cannot be estimated, the labels alone
Z95 = 1.959963984540054
HALF_WIDTHS = (0.05, 0.10)  # the half widths `labels_for` advises on


@dataclass(frozen=True)
class ReviewedRate:
    """A reviewed rate with its 95 % interval, the labels behind it and how it was made."""

    value: float
    low: float
    high: float
    labels: int
    population: int
    method: str  # "difference (finite population)", "labels (Wilson, finite population)", ...
    labels_only: tuple[float, float]  # the labels-alone interval, for comparison
    # the variance per label behind the width, S2 in v = (1 - n/N) S2 / n (labels_needed)
    residual_variance: float = 0.25
    judge_weight: float | None = None  # lambda of the difference estimator (None: not used)

    def labels_for(self) -> dict[str, int | None]:
        """How many labels in all bring the half width to each of `HALF_WIDTHS`."""
        return {f"{h:.2f}": labels_needed(self, h) for h in HALF_WIDTHS}

    def to_json(self) -> dict[str, Any]:
        return {
            "value": round(self.value, 6),
            "low": round(self.low, 6),
            "high": round(self.high, 6),
            "labels": self.labels,
            "population": self.population,
            "method": self.method,
            "labels_only": [round(x, 6) for x in self.labels_only],
            "residual_variance": round(self.residual_variance, 6),
            "judge_weight": None if self.judge_weight is None else round(self.judge_weight, 6),
            "labels_for": self.labels_for(),
        }


def wilson_at(share: float, effective: float) -> tuple[float, float]:
    """Wilson's 95 % score interval of a share at an effective sample size."""
    z2 = Z95 * Z95
    centre = (share + z2 / (2 * effective)) / (1 + z2 / effective)
    half = (
        Z95
        * math.sqrt(share * (1 - share) / effective + z2 / (4 * effective**2))
        / (1 + z2 / effective)
    )
    return max(0.0, centre - half), min(1.0, centre + half)


def labels_only_interval(positives: int, n: int, population: int) -> tuple[float, float]:
    """Wilson's 95 % interval of a share of n labels drawn without replacement from N, at the
    effective sample size n (N - 1) / (N - n) (exact when all are labelled)."""
    if n == 0:
        return 0.0, 1.0
    if n >= population:
        share = positives / n
        return share, share
    return wilson_at(positives / n, n * (population - 1) / (population - n))


def _unseen_error_variance(n: int) -> float:
    """d (1 - d) at d = (z^2/2) / (n + z^2): the Agresti-Coull rate of something not seen in n
    draws. The floor of an estimated variance per label."""
    d = (Z95 * Z95 / 2) / (n + Z95 * Z95)
    return d * (1 - d)


def _labels_variance(positives: int, n: int) -> float:
    """p (1 - p) of the labels at the Agresti-Coull share (x + z^2/2) / (n + z^2): never 0,
    so an all-clean sample does not claim that one more label settles the rate."""
    p = (positives + Z95 * Z95 / 2) / (n + Z95 * Z95)
    return p * (1 - p)


def _difference(
    y: np.ndarray, f: np.ndarray, everyone: np.ndarray, bounded: bool, window: int | None = None
) -> tuple[float, float, float, float, float] | None:
    """The difference estimator (module doc): (theta, low, high, S2 of the residuals, lambda),
    or None where the judge is not used (lambda 0). `bounded`: a share in [0, 1] (Wilson at
    the effective sample size), else a difference (theta +- z sqrt(v))."""
    n, population = len(y), len(everyone)
    spread = float(everyone.var(ddof=1))
    if spread <= 0 or n < 3:
        return None
    covariance = float(((y - y.mean()) * (f - f.mean())).sum() / (n - 1))
    weight = min(1.0, max(0.0, covariance / spread))
    if weight <= 1e-9:  # no weight (rounding's 1e-17 of a zero covariance is none either)
        return None
    residuals = y - weight * f
    value = float(weight * everyone.mean() + residuals.mean())
    residual = float(((residuals - residuals.mean()) ** 2).sum() / (n - 2))
    residual = max(residual, _unseen_error_variance(n))
    variance = (1 - n / population) * residual / n
    if window is not None and window > population:
        # two-phase: the checked answers are themselves a uniform sample of the window's
        # (Cochran 1977, 12.6): their mean's own variance joins, at the labels' spread
        positives = round(float(y.sum()))
        variance += _labels_variance(positives, n) * (1 / population - 1 / window)
    if not bounded:
        half = Z95 * math.sqrt(variance)
        return value, value - half, value + half, residual, weight
    share = min(1.0, max(0.0, value))
    if share in (0.0, 1.0):
        return None
    low, high = wilson_at(share, share * (1 - share) / variance)
    return value, low, high, residual, weight


def reviewed_rate(
    labels: Sequence[bool],
    labelled_predictions: Sequence[float],
    all_predictions: Sequence[float],
    weights: Sequence[float] | None = None,
    window: int | None = None,
) -> ReviewedRate:
    """The rate of hallucinated answers (or claims) among all of a pipeline's, from people's
    `labels` on a uniform random sample, the judge's predictions on those
    (`labelled_predictions`: its flag 0/1 or a score in [0, 1], higher for hallucinated) and
    on every answer (`all_predictions`, the labelled ones included). `weights`: each
    labelled answer's inverse inclusion probability (None or all equal: a uniform sample).
    `window`: the answers were checked on a uniform sample of a window's `window` answers
    (imported traces): the rate is the window's, its interval with both phases' variance."""
    n, checked = len(labels), len(all_predictions)
    population = window if window is not None and window > checked else checked
    two_phase = population > checked
    positives = sum(bool(x) for x in labels)
    alone = labels_only_interval(positives, n, population)  # an SRS of an SRS is one of N
    share = positives / n if n else 0.0
    of = f", two-phase: {checked} checked of {population}" if two_phase else ""

    def by_labels(method: str = "labels (Wilson, finite population)") -> ReviewedRate:
        spread = 0.0 if n >= population else _labels_variance(positives, n)
        return ReviewedRate(share, alone[0], alone[1], n, population, method + of, alone, spread)

    if n == 0:
        return ReviewedRate(0.0, 0.0, 1.0, 0, population, "no labels", alone)
    if n >= population:
        return by_labels("labels (all reviewed)")
    if n >= checked:  # every checked answer labelled: the labels are the sample of the window
        return by_labels()
    weighted = weights is not None and np.ptp(np.asarray(weights, dtype=float)) > 0
    if n < MIN_FOR_JUDGE or positives in (0, n):
        # too few labels to weigh the judge; or every label alike (no residual variance seen)
        return by_labels()
    if weighted:
        assert weights is not None
        ppi = _weighted_ppi(labels, labelled_predictions, all_predictions, weights)
        if ppi is None or ppi[2] - ppi[1] >= alone[1] - alone[0]:
            return by_labels()
        spread = ((ppi[2] - ppi[1]) / (2 * Z95)) ** 2 * n
        method = "ppi++ (weighted, infinite population)"
        return ReviewedRate(*ppi, n, population, method, alone, spread)
    y = np.asarray(labels, dtype=float)
    f = np.asarray(labelled_predictions, dtype=float)
    everyone = np.asarray(all_predictions, dtype=float)
    found = _difference(y, f, everyone, bounded=True, window=population)
    if found is None or found[2] - found[1] >= alone[1] - alone[0]:
        return by_labels()  # the judge no help: the labels alone, never wider than theirs
    value, low, high, residual, weight = found
    return ReviewedRate(
        min(1.0, max(0.0, value)),
        low,
        high,
        n,
        population,
        "difference (finite population)" + of,
        alone,
        residual,
        weight,
    )


def _weighted_ppi(
    labels: Sequence[bool],
    labelled_predictions: Sequence[float],
    all_predictions: Sequence[float],
    weights: Sequence[float],
) -> tuple[float, float, float] | None:
    """A sample of unequal inclusion probabilities: `ppi_py`'s PPI++ with inverse-probability
    weights, no finite-population correction (value, low, high); None for a constant judge."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    y = np.asarray(labels, dtype=float)
    yhat = np.asarray(labelled_predictions, dtype=float)
    unlabelled = np.asarray(all_predictions, dtype=float)
    w = np.asarray(weights, dtype=float)
    if np.ptp(yhat) == 0 and np.ptp(unlabelled) == 0:
        return None
    value = float(ppi_mean_pointestimate(y, yhat, unlabelled, w=w)[0])
    low, high = (float(v[0]) for v in ppi_mean_ci(y, yhat, unlabelled, alpha=0.05, w=w))
    return min(1.0, max(0.0, value)), max(0.0, low), min(1.0, high)


def labels_for_half_width(variance: float, population: int, half_width: float) -> int:
    """Labels in all for a 95 % half width of `half_width` when each label carries `variance`
    (S2 in v = (1 - n/N) S2 / n): n = 1 / (h^2 / (z^2 S2) + 1/N), at most N."""
    if variance <= 0:
        return 1
    needed = 1 / (half_width**2 / (Z95 * Z95 * variance) + 1 / population)
    return min(population, math.ceil(needed - 1e-9))


def labels_needed(rate: ReviewedRate, half_width: float) -> int | None:
    """How many labels in all (the ones made included) bring `rate`'s half width to
    `half_width`, at the variance per label estimated so far (the labels alone with no
    labels: 0.25, the widest). None for an empty population."""
    if rate.population <= 0:
        return None
    if rate.labels >= rate.population:
        return rate.population
    return labels_for_half_width(rate.residual_variance, rate.population, half_width)


def labels_advice(rate: ReviewedRate, name: str | None = None) -> str:
    """One line on how far the labels are from +-5 and +-10 points, for `auditor review`:
    e.g. "run: 40 labels of 150, +-11.7 points; +-10 at 52 (12 more), +-5 at 104 (64 more)"."""
    lead = f"{name}: " if name else ""
    half = (rate.high - rate.low) / 2
    now = f"{lead}{rate.labels} label{'' if rate.labels == 1 else 's'} of {rate.population}"
    if rate.labels:
        now += f", +-{100 * half:.1f} points ({rate.method})"
    parts = []
    for h in sorted(HALF_WIDTHS, reverse=True):
        needed = labels_needed(rate, h)
        if needed is None:
            continue
        if needed <= rate.labels or half <= h:
            parts.append(f"+-{100 * h:.0f} reached")
        else:
            parts.append(f"+-{100 * h:.0f} at about {needed} ({needed - rate.labels} more)")
    return now + ("; " + ", ".join(parts) if parts else "")


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
    window: int | None = None,
) -> dict[str, Any]:
    """summary.json's `reviewed` of one run (`window`: imported traces, the window's number
    of answers the checked ones were drawn from), from its settled labels (`review.assign_labels`):
    the reviewed answer rate from the labels that count (the drawn order's labelled prefix),
    the claim rate where every counted label marks every judged claim of its answer (else the
    answer rate makes goodput, and `claim_rate_withheld` says why), the judge's agreement on
    every label, two reviewers' agreement, goodput from the reviewed rate, and where the
    sample came from."""
    claims_of = {str(row["id"]): [Claim.from_json(c) for c in row["claims"]] for row in checks}
    flag = {ident: flagged_at(claims, threshold) for ident, claims in claims_of.items()}
    # the judge's continuous score narrows the rate more than its flag (measured:
    # bench/results/review-estimators-2026-12-07.json)
    score = {ident: hallucination_score(claims) for ident, claims in claims_of.items()}
    everyone = list(score.values())
    # only the drawn order's labelled prefix makes a rate; labels kept from outside the
    # sample, or past a drawn answer nobody labelled, count in the agreement only
    counted = [label for label in labels if getattr(label, "counted", True)]
    gold = [bool(label.hallucinated) for label in counted]
    # no label counts (every one outside the drawn sample, kept for the judge's agreement):
    # no reviewed figure at all, as without labels; not a rate of 0 % over no labels
    answer = (
        reviewed_rate(gold, [score[label.id] for label in counted], everyone, window=window)
        if counted
        else None
    )
    withheld = _claims_unmarked(counted, claims_of) if counted else "no label counts in a rate"
    claim = None if withheld else _claim_rate(counted, claims_of, threshold)
    used = claim or answer
    agreement = judge_agreement(
        [bool(label.hallucinated) for label in labels], [flag[label.id] for label in labels]
    )
    reviews = [review for label in labels for review in (getattr(label, "reviews", ()) or (label,))]
    return {
        "labels": len(counted),
        "labels_outside_sample": sum(not getattr(x, "in_sample", True) for x in labels),
        "labels_past_gap": sum(
            getattr(x, "in_sample", True) and not getattr(x, "in_prefix", True) for x in labels
        ),
        "reviewers": reviewers(reviews),
        "answer_rate": None if answer is None else answer.to_json(),
        "rate_withheld": None if answer is not None else _no_rate(labels),
        "claim_rate": None if claim is None else claim.to_json(),
        "claim_rate_withheld": withheld,
        "judge_sensitivity": agreement["sensitivity"],
        "judge_sensitivity_interval": agreement["sensitivity_interval"],
        "judge_specificity": agreement["specificity"],
        "judge_specificity_interval": agreement["specificity_interval"],
        "agreement": reviewer_agreement(reviews),
        "goodput_tps": None if tps is None or used is None else tps * (1 - used.value),
        "goodput_tps_interval": None
        if tps is None or used is None
        else [tps * (1 - used.high), tps * (1 - used.low)],
        "goodput_from": None
        if used is None
        else ("claim_rate" if claim is not None else "answer_rate"),
        "sample": sample
        or {
            "method": "uniform (assumed)",
            "note": "no review.json beside the run: the labels count as a uniform random sample",
        },
    }


def _no_rate(labels: Sequence[Any]) -> str:
    """Why labels make no reviewed rate: none of them counts."""
    outside = sum(not getattr(x, "in_sample", True) for x in labels)
    past = sum(getattr(x, "in_sample", True) and not getattr(x, "in_prefix", True) for x in labels)
    parts = [f"{outside} outside the drawn sample"] if outside else []
    parts += [f"{past} past the first unlabelled drawn answer"] if past else []
    return f"no label counts in a rate ({', '.join(parts) or 'none given'})"


def _claims_unmarked(labels: Sequence[Any], claims_of: dict[str, list[Any]]) -> str | None:
    """Why there is no reviewed claim rate (None: every counted label marks every judged
    claim of its answer, so the claim rate is of the same answers as the answer rate). A
    claim rate from a few marked claims would stand for answers nobody looked at claim by
    claim."""
    if not any(label.claims for label in labels):
        return "no claims marked"
    partial = [
        label
        for label in labels
        if {m.index for m in label.claims}
        < {k for k, c in enumerate(claims_of[label.id]) if c.verdict != "unverifiable"}
    ]
    if partial:
        return (
            f"{len(partial)} of {len(labels)} counted labels leave claims unmarked (first: "
            f"{partial[0].id!r}); the answer rate makes goodput"
        )
    return None


def reviewers(labels: Sequence[Any]) -> list[dict[str, Any]]:
    """Who labelled, in which role, how many answers each and when (first and last
    `labelled_at`, compared as times): the record of who signed a rate. Labels without a name
    are counted as "(unnamed)"."""
    by_name: dict[tuple[str, str], list[str | None]] = {}
    for label in labels:
        name = getattr(label, "reviewer", None) or "(unnamed)"
        role = getattr(label, "role", "first")
        by_name.setdefault((name, role), []).append(getattr(label, "labelled_at", None))
    found = []
    for (name, role), times in sorted(by_name.items()):
        known = sorted((t for t in times if t), key=_moment)
        found.append(
            {
                "name": name,
                "role": role,
                "labels": len(times),
                "first": known[0] if known else None,
                "last": known[-1] if known else None,
            }
        )
    return found


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


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
    labelled in both (a uniform sample of the N both answered): the mean of (label a - label
    b), narrowed by the judges' (flag a - flag b) on all N with the difference estimator of
    the module doc (theta +- z sqrt(v), finite population). (value, low, high, method)."""
    n, population = len(differences), len(all_predictions)
    y = np.asarray(differences, dtype=float)
    mean = float(y.mean()) if n else 0.0
    if n == 0:
        return 0.0, -1.0, 1.0, "no labels"
    if n >= population:
        return mean, mean, mean, "labels (all reviewed)"
    spread = max(float(y.var(ddof=1)) if n > 1 else 1.0, _unseen_error_variance(n))
    half = Z95 * math.sqrt((1 - n / population) * spread / n)
    alone = (mean, mean - half, mean + half, "labels (normal, finite population)")
    yhat = np.asarray(labelled_predictions, dtype=float)
    everyone = np.asarray(all_predictions, dtype=float)
    if n < MIN_FOR_JUDGE or np.ptp(y) == 0:
        return alone
    found = _difference(y, yhat, everyone, bounded=False)
    if found is None or found[2] - found[1] >= alone[2] - alone[1]:
        return alone
    value, low, high, _, _ = found
    return value, low, high, "difference (finite population)"
