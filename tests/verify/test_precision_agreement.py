"""The comparison of two ways of rating context precision (bench/context_precision.py): the
per-chunk agreement and kappa with each disagreement counted, and the per-answer difference
with its interval from a bootstrap over questions."""

from __future__ import annotations

import pytest

from auditor.verify.precision_agreement import score_differences, verdict_agreement


def test_agreement_counts_each_disagreement_and_kappa_corrects_for_chance() -> None:
    # 3 both useful, 1 useful by the first way only, 2 by the second only, 4 by neither
    pairs = [(True, True)] * 3 + [(True, False)] + [(False, True)] * 2 + [(False, False)] * 4
    found = verdict_agreement(pairs)
    assert found == {
        "chunks": 10,
        "agreement": 0.7,
        # p_o 0.7; p_e (4 * 5 + 6 * 5) / 100 = 0.5; kappa (0.7 - 0.5) / 0.5
        "kappa": 0.4,
        "both_useful": 3,
        "neither_useful": 4,
        "useful_by_first_only": 1,
        "useful_by_second_only": 2,
    }


def test_kappa_is_undefined_when_both_give_every_chunk_one_verdict() -> None:
    found = verdict_agreement([(True, True)] * 5)
    assert found["agreement"] == 1.0 and found["kappa"] is None
    assert verdict_agreement([])["agreement"] is None
    # perfect agreement over both verdicts: kappa 1; opposite verdicts: -1
    assert verdict_agreement([(True, True), (False, False)])["kappa"] == 1.0
    assert verdict_agreement([(True, False), (False, True)])["kappa"] == -1.0


def test_the_mean_difference_weighs_answers_and_the_interval_resamples_questions() -> None:
    by_question = {"q1": [0.5, 0.5, 0.5], "q2": [-0.5]}
    found = score_differences(by_question, rounds=4000)
    assert found["answers"] == 4 and found["questions"] == 2
    assert found["mean_difference"] == pytest.approx(0.25)  # over answers, not questions
    assert found["mean_absolute_difference"] == pytest.approx(0.5)
    low, high = found["mean_difference_ci95"]
    # a resample holds q1 twice (0.5), q2 twice (-0.5) or each once (0.25)
    assert low == pytest.approx(-0.5) and high == pytest.approx(0.5)
    assert score_differences(by_question, rounds=4000) == found  # seeded


def test_no_difference_has_a_zero_width_interval_and_none_without_answers() -> None:
    found = score_differences({"q1": [0.0, 0.0], "q2": [0.0]})
    assert found["mean_difference"] == 0.0 and found["mean_difference_ci95"] == [0.0, 0.0]
    empty = score_differences({"q1": []})
    assert empty["answers"] == 0 and empty["mean_difference"] is None
    assert empty["mean_difference_ci95"] is None
