"""Judged rates corrected for the judge's own error (Rogan-Gladen), with honest intervals.

A judge with sensitivity `se` (share of hallucinated items it flags) and specificity `sp`
(share of clean items it passes) turns a true rate `p` into an expected judged rate
`p * se + (1 - p) * (1 - sp)`. Solving for `p` gives the Rogan-Gladen estimate

    p = (judged + sp - 1) / (se + sp - 1),   clamped to [0, 1],

defined only when `se + sp > 1` (a judge no better than chance tells nothing). `se` and `sp`
come from a calibration (answers people labelled, checked by the same judge); the interval of
the corrected rate carries the uncertainty of both samples: a parametric bootstrap draws the
audit's judged count and the calibration's true-positive and true-negative counts from their
binomials, corrects each draw, and takes percentiles.

The correction assumes that the judge errs on the audited answers as it did on the
calibration answers: a calibration on another domain (news passages for a product manual)
is a weaker fit than a team's own 50-100 labelled answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "JudgeAccuracy",
    "corrected_rate",
    "corrected_rate_interval",
    "rogan_gladen",
    "wilson_interval",
]

ROUNDS = 4000
# more draws than this with se + sp <= 1 and the calibration cannot support an interval
MAX_UNDEFINED_SHARE = 0.025


@dataclass(frozen=True)
class JudgeAccuracy:
    """How the judge did on labelled items: flagged hallucinated ones, passed clean ones."""

    true_positives: int  # hallucinated and flagged
    positives: int  # hallucinated
    true_negatives: int  # clean and not flagged
    negatives: int  # clean

    def __post_init__(self) -> None:
        if not 0 <= self.true_positives <= self.positives:
            raise ValueError("true_positives must lie in [0, positives]")
        if not 0 <= self.true_negatives <= self.negatives:
            raise ValueError("true_negatives must lie in [0, negatives]")

    @property
    def sensitivity(self) -> float | None:
        return self.true_positives / self.positives if self.positives else None

    @property
    def specificity(self) -> float | None:
        return self.true_negatives / self.negatives if self.negatives else None

    @property
    def informative(self) -> bool:
        """Whether the judge beats chance on this data (se + sp > 1): the correction exists."""
        se, sp = self.sensitivity, self.specificity
        return se is not None and sp is not None and se + sp > 1.0


def rogan_gladen(judged: float, sensitivity: float, specificity: float) -> float | None:
    """The true rate behind a judged rate, clamped to [0, 1]; None when se + sp <= 1."""
    youden = sensitivity + specificity - 1.0
    if youden <= 0.0:
        return None
    return min(1.0, max(0.0, (judged + specificity - 1.0) / youden))


def corrected_rate(flagged: int, items: int, accuracy: JudgeAccuracy) -> float | None:
    """The corrected rate of an audit in which the judge flagged `flagged` of `items`."""
    se, sp = accuracy.sensitivity, accuracy.specificity
    if not items or se is None or sp is None:
        return None
    return rogan_gladen(flagged / items, se, sp)


def corrected_rate_interval(
    flagged: int,
    items: int,
    accuracy: JudgeAccuracy,
    *,
    rounds: int = ROUNDS,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Bootstrap interval of the corrected rate over the audit's and the calibration's
    sampling; None when the calibration cannot support one (undefined se or sp, or too many
    draws where the judge is no better than chance)."""
    se, sp = accuracy.sensitivity, accuracy.specificity
    if not items or se is None or sp is None or not accuracy.informative:
        return None
    rng = np.random.default_rng(seed)
    judged = rng.binomial(items, flagged / items, rounds) / items
    se_draws = rng.binomial(accuracy.positives, se, rounds) / accuracy.positives
    sp_draws = rng.binomial(accuracy.negatives, sp, rounds) / accuracy.negatives
    youden = se_draws + sp_draws - 1.0
    defined = youden > 0.0
    if 1.0 - defined.mean() > MAX_UNDEFINED_SHARE:
        return None
    corrected = np.clip((judged[defined] + sp_draws[defined] - 1.0) / youden[defined], 0.0, 1.0)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(corrected, [tail, 1.0 - tail])
    return float(low), float(high)


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval of a proportion (sound at 0 and 1, unlike the normal one)."""
    if trials <= 0:
        return None
    share = successes / trials
    denominator = 1.0 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
