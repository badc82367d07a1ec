"""Two reviewers' agreement: Cohen's kappa on textbook 2x2 tables, positive and negative
agreement by hand, the bootstrap interval the same for a seed (and recomputed here in a plain
loop), the degenerate tables (one class only: no kappa, said why), the disagreements with
their adjudications, and the labels that make no pair."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from auditor.agreement import kappa_of, reviewer_agreement
from auditor.errors import BadInput


@dataclass(frozen=True)
class _Label:
    id: str
    hallucinated: bool
    role: str = "first"
    reviewer: str | None = None
    where: str = ""


def _pairs(a: int, b: int, c: int, d: int) -> list[_Label]:
    """Labels of a + b + c + d answers: a both hallucinated, b the first only, c the second
    only, d both clean; the first review by Ada, the second by Bea."""
    cells = [(True, True)] * a + [(True, False)] * b + [(False, True)] * c + [(False, False)] * d
    labels = []
    for k, (first, second) in enumerate(cells):
        labels.append(_Label(f"q{k}", first, "first", "Ada", f"first.jsonl:{k + 1}"))
        labels.append(_Label(f"q{k}", second, "second", "Bea", f"second.jsonl:{k + 1}"))
    return labels


@pytest.mark.parametrize(
    ("table", "kappa", "observed", "positive", "negative"),
    [
        # Wikipedia, Cohen's kappa, "simple example": 50 proposals, p_o 0.7, p_e 0.5
        ((20, 5, 10, 15), 0.4, 0.7, 40 / 55, 30 / 45),
        # the same page: p_o 0.6 both, p_e 0.54 and 0.46: kappa 0.1304 and 0.2593
        ((45, 15, 25, 15), (0.6 - 0.54) / 0.46, 0.6, 90 / 130, 30 / 70),
        ((25, 35, 5, 35), (0.6 - 0.46) / 0.54, 0.6, 50 / 90, 70 / 110),
    ],
    ids=["simple", "marginals-alike", "marginals-apart"],
)
def test_kappa_and_agreement_on_textbook_tables(
    table: tuple[int, int, int, int],
    kappa: float,
    observed: float,
    positive: float,
    negative: float,
) -> None:
    found = reviewer_agreement(_pairs(*table))
    assert found is not None
    assert found["kappa"] == pytest.approx(kappa, abs=1e-6)
    assert kappa_of(*table) == pytest.approx(kappa)
    assert found["observed_agreement"] == pytest.approx(observed)
    assert found["positive_agreement"] == pytest.approx(positive, abs=1e-6)
    assert found["negative_agreement"] == pytest.approx(negative, abs=1e-6)
    assert found["table"] == dict(zip("abcd", table, strict=True))
    assert found["double_reviewed"] == sum(table)
    assert found["kappa_undefined"] is None
    low, high = found["kappa_interval"]
    assert low < found["kappa"] < high
    assert found["reviewers"] == {"first": ["Ada"], "second": ["Bea"], "adjudicator": []}
    assert len(found["disagreements"]) == table[1] + table[2] == found["unsettled"]


def test_the_simple_tables_kappa_by_hand() -> None:
    """20 + 15 of 50 agree (0.7); the first says yes to 25, the second to 30: chance
    (25 * 30 + 25 * 20) / 50^2 = 0.5; kappa (0.7 - 0.5) / (1 - 0.5) = 0.4."""
    assert kappa_of(20, 5, 10, 15) == pytest.approx(0.4)
    assert kappa_of(10, 0, 0, 10) == pytest.approx(1.0)  # perfect agreement
    assert kappa_of(0, 10, 10, 0) == pytest.approx(-1.0)  # every answer the other way
    assert kappa_of(0, 0, 0, 0) is None
    assert kappa_of(7, 0, 0, 0) is None and kappa_of(0, 0, 0, 7) is None


def _loop_interval(labels: list[_Label], seed: int, rounds: int) -> tuple[float, float]:
    """The percentile bootstrap, one resample at a time: the same draws, counted in Python."""
    first = {x.id: x.hallucinated for x in labels if x.role == "first"}
    second = [(x.id, x.hallucinated) for x in labels if x.role == "second"]
    n = len(second)
    picks = np.random.default_rng(seed).integers(0, n, size=(rounds, n))
    kappas = []
    for row in picks:
        cells = [(first[second[k][0]], second[k][1]) for k in row]
        a = sum(f and s for f, s in cells)
        b = sum(f and not s for f, s in cells)
        c = sum(s and not f for f, s in cells)
        found = kappa_of(a, b, c, n - a - b - c)
        if found is not None:
            kappas.append(found)
    low, high = np.percentile(kappas, [2.5, 97.5])
    return float(low), float(high)


def test_the_bootstrap_interval_is_fixed_by_its_seed() -> None:
    labels = _pairs(20, 5, 10, 15)
    once = reviewer_agreement(labels, seed=3, rounds=500)
    again = reviewer_agreement(labels, seed=3, rounds=500)
    other = reviewer_agreement(labels, seed=4, rounds=500)
    assert once is not None and again is not None and other is not None
    assert once == again
    assert once["kappa_interval"] != other["kappa_interval"]
    assert once["kappa"] == other["kappa"]  # only the interval is drawn
    assert once["kappa_interval"] == pytest.approx(_loop_interval(labels, 3, 500), abs=1e-6)
    assert once["bootstrap"] == {"rounds": 500, "seed": 3, "undefined": 0}
    # about kappa's large-sample standard error on 50 answers (0.13): some 0.5 wide
    low, high = once["kappa_interval"]
    assert 0.3 < high - low < 0.7


@pytest.mark.parametrize("hallucinated", [True, False])
def test_one_class_only_leaves_kappa_undefined_and_says_why(hallucinated: bool) -> None:
    cells = (6, 0, 0, 0) if hallucinated else (0, 0, 0, 6)
    found = reviewer_agreement(_pairs(*cells))
    assert found is not None
    assert found["kappa"] is None and found["kappa_interval"] is None
    assert "every one of the 6 answers" in found["kappa_undefined"]
    assert ("not hallucinated" in found["kappa_undefined"]) is not hallucinated
    assert found["observed_agreement"] == 1.0
    # the class nobody used has no agreement of its own
    assert found["positive_agreement"] == (1.0 if hallucinated else None)
    assert found["negative_agreement"] == (None if hallucinated else 1.0)
    assert found["disagreements"] == []


def test_opposite_labels_on_every_answer_make_kappa_zero_not_undefined() -> None:
    """The first says yes to all, the second no to all: chance agreement 0, observed 0."""
    found = reviewer_agreement(_pairs(0, 4, 0, 0))
    assert found is not None
    assert found["kappa"] == 0.0 and found["kappa_interval"] == [0.0, 0.0]
    assert found["positive_agreement"] == 0.0 and found["negative_agreement"] == 0.0


def test_a_rare_class_gives_kappa_without_an_interval() -> None:
    """One disagreement among ten clean answers: a third of the resamples miss it and have one
    class only, far past the share that an interval can stand."""
    found = reviewer_agreement(_pairs(0, 1, 0, 9), rounds=400)
    assert found is not None
    assert found["kappa"] == 0.0  # p_o 0.9, p_e 0.9
    assert found["kappa_interval"] is None
    assert "bootstrap resamples have one class only" in found["kappa_undefined"]
    assert 80 < found["bootstrap"]["undefined"] < 200  # 400 * 0.9^10 = 139 expected


def test_disagreements_say_how_each_was_settled() -> None:
    labels = [
        _Label("a", True, "first", "Ada"),
        _Label("b", False, "first", "Ada"),
        _Label("c", True, "first", "Cy"),
        _Label("d", False, "first", "Cy"),  # no second review: not counted
        _Label("c", False, "second", "Bea"),
        _Label("a", False, "second", "Bea"),
        _Label("b", False, "second", "Bea"),
        _Label("a", True, "adjudicator", "Dee"),
        _Label("e", True, "second", "Bea"),  # no first review: not counted
    ]
    found = reviewer_agreement(labels)
    assert found is not None
    assert found["double_reviewed"] == 3
    assert found["table"] == {"a": 0, "b": 2, "c": 0, "d": 1}
    # in the second review's order
    assert found["disagreements"] == [
        {"id": "c", "first": True, "second": False, "adjudicated": None, "adjudicator": None},
        {"id": "a", "first": True, "second": False, "adjudicated": True, "adjudicator": "Dee"},
    ]
    assert found["unsettled"] == 1
    assert found["reviewers"] == {
        "first": ["Ada", "Cy"],
        "second": ["Bea"],
        "adjudicator": ["Dee"],
    }


def test_no_answer_reviewed_twice_gives_none() -> None:
    assert reviewer_agreement([]) is None
    assert reviewer_agreement([_Label("a", True), _Label("b", False)]) is None
    only_second = [_Label("a", True), _Label("b", False, "second")]
    assert reviewer_agreement(only_second) is None


def test_labels_without_a_role_or_a_name_count_as_the_first_review_unnamed() -> None:
    @dataclass(frozen=True)
    class Bare:
        id: str
        hallucinated: bool

    found = reviewer_agreement([Bare("a", True), _Label("a", True, "second", None)])
    assert found is not None and found["double_reviewed"] == 1
    assert found["reviewers"]["first"] == ["(unnamed)"] == found["reviewers"]["second"]


def test_one_answer_labelled_twice_in_a_role_differently_is_refused_naming_both() -> None:
    same = [_Label("a", True, "second", "Bea", "s.jsonl:1")] * 2 + [_Label("a", True)]
    assert reviewer_agreement(same) is not None  # the same label twice: kept once
    labels = [
        _Label("a", True, "second", "Bea", "s.jsonl:1"),
        _Label("a", False, "second", "Bea", "s.jsonl:4"),
    ]
    with pytest.raises(BadInput, match=r"s\.jsonl:4: answer 'a' .*second.*s\.jsonl:1"):
        reviewer_agreement(labels)
    with pytest.raises(BadInput, match="role 'third'"):
        reviewer_agreement([_Label("a", True, "third", where="x.jsonl:2")])
