"""Rates corrected for the judge's error: the Rogan-Gladen estimate on hand-computed cases, the
degenerate calibrations, and a simulation in which the corrected interval covers the true rate
at about its nominal level while the judged rate's interval does not."""

from __future__ import annotations

import numpy as np
import pytest

from auditor.calibration import (
    JudgeAccuracy,
    corrected_rate,
    corrected_rate_interval,
    rogan_gladen,
)


def test_rogan_gladen_on_hand_computed_cases() -> None:
    # se 0.8, sp 0.7, true rate 0.1 -> judged 0.1*0.8 + 0.9*0.3 = 0.35 -> back to 0.1
    assert rogan_gladen(0.35, 0.8, 0.7) == pytest.approx(0.1)
    assert rogan_gladen(0.5, 1.0, 1.0) == pytest.approx(0.5)  # a perfect judge changes nothing
    assert rogan_gladen(0.1, 0.8, 0.7) == 0.0  # below the false-alarm floor: clamped
    assert rogan_gladen(0.95, 0.8, 0.7) == 1.0
    assert rogan_gladen(0.3, 0.5, 0.5) is None  # chance: no correction exists
    assert rogan_gladen(0.3, 0.3, 0.4) is None


def test_judge_accuracy_and_its_degenerate_cases() -> None:
    accuracy = JudgeAccuracy(true_positives=60, positives=75, true_negatives=63, negatives=75)
    assert accuracy.sensitivity == pytest.approx(0.8) and accuracy.specificity == pytest.approx(
        0.84
    )
    assert accuracy.informative
    assert corrected_rate(35, 100, accuracy) == pytest.approx((0.35 + 0.84 - 1) / 0.64)
    no_clean = JudgeAccuracy(true_positives=5, positives=10, true_negatives=0, negatives=0)
    assert no_clean.specificity is None and not no_clean.informative
    assert corrected_rate(3, 10, no_clean) is None
    assert corrected_rate_interval(3, 10, no_clean) is None
    weak = JudgeAccuracy(true_positives=5, positives=10, true_negatives=5, negatives=10)
    assert corrected_rate_interval(3, 10, weak) is None
    # barely informative on few items: many draws fall to chance, so no interval is claimed
    shaky = JudgeAccuracy(true_positives=6, positives=10, true_negatives=5, negatives=10)
    assert shaky.informative and corrected_rate_interval(3, 10, shaky) is None
    assert corrected_rate(0, 0, accuracy) is None
    with pytest.raises(ValueError):
        JudgeAccuracy(true_positives=11, positives=10, true_negatives=0, negatives=1)


def test_the_interval_widens_with_a_smaller_calibration() -> None:
    big = JudgeAccuracy(true_positives=400, positives=500, true_negatives=350, negatives=500)
    small = JudgeAccuracy(true_positives=40, positives=50, true_negatives=35, negatives=50)
    low_b, high_b = corrected_rate_interval(350, 1000, big) or (0, 0)
    low_s, high_s = corrected_rate_interval(350, 1000, small) or (0, 0)
    assert low_b <= 0.1 <= high_b and high_s - low_s > 1.5 * (high_b - low_b)


def test_simulated_audits_the_corrected_interval_covers_the_true_rate() -> None:
    """Answers drawn with a known true rate, a judge with known error rates: over many audits
    the corrected 95 % interval covers the true rate at about 95 %; the judged rate's own
    interval (binomial, judge taken at its word) almost never does."""
    rng = np.random.default_rng(7)
    true_rate, se, sp = 0.15, 0.8, 0.75
    audit_items, positives, negatives = 300, 75, 75
    trials, covered, judged_covered = 300, 0, 0
    for trial in range(trials):
        accuracy = JudgeAccuracy(
            true_positives=int(rng.binomial(positives, se)),
            positives=positives,
            true_negatives=int(rng.binomial(negatives, sp)),
            negatives=negatives,
        )
        hallucinated = int(rng.binomial(audit_items, true_rate))
        flagged = int(rng.binomial(hallucinated, se)) + int(
            rng.binomial(audit_items - hallucinated, 1 - sp)
        )
        interval = corrected_rate_interval(flagged, audit_items, accuracy, rounds=2000, seed=trial)
        assert interval is not None
        covered += interval[0] <= true_rate <= interval[1]
        judged = flagged / audit_items
        half = 1.96 * (judged * (1 - judged) / audit_items) ** 0.5
        judged_covered += judged - half <= true_rate <= judged + half
    assert 0.90 <= covered / trials <= 0.99, covered / trials
    assert judged_covered / trials < 0.05
