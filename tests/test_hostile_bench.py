"""The hostile pass's machinery (tests/hostile.py, which bench/hostile_review.py runs in full)
on a handful of its cases, so the bench does not rot: the base builds with the fakes, a clean
input is honest by the bench's own arithmetic, a tampered bundle and a bad label are refused in
one line with nothing written, and a silent wrong and a hang are told apart from a refusal.
The cases whose outcome depends on fixes under way are only checked to be classified."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile import (
    CASES,
    OUTCOMES,
    Base,
    Call,
    Case,
    Workspace,
    hostile_base,
    report_call,
    run_case,
    same_review,
)

# outcome today and after every fix the hostile pass asks for
STABLE = {
    "lb-clean": "honest",
    "lb-gap": "honest",
    "lb-outside-refused": "refused",
    "lb-role-unknown": "refused",
    "bn-clean": "honest",
    "bn-member-removed": "refused",
    "out-labels": "refused",
    # silent wrongs of the first pass (issue 48), one or more of each class, now refused or
    # honest
    "rj-swap-passed": "refused",
    "rj-seed": "refused",
    "lb-adjudicator-agreed": "refused",
    "lb-second-case": "refused",
    "lb-second-hangul-filler": "refused",
    "lb-labelled-at-before-run": "refused",
    "rd-threshold-edited": "refused",
    "gt-report-zero-counted": "refused",
    "bn-report-edited": "refused",
    "bn-reviewers-edited": "refused",
    "bn-signature-duplicated": "refused",
    "sg-symlink": "honest",
    "sg-figures-do-not-recompute": "refused",
}
# classified, whatever the code does with them
ANY = ("bn-gates-dropped",)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Base]:
    with hostile_base(tmp_path_factory.mktemp("hostile"), answers=20, audit=False) as made:
        yield made


def _case(ident: str) -> Case:
    return next(case for case in CASES if case.id == ident)


def test_the_bench_has_its_cases() -> None:
    assert len(CASES) >= 150
    assert len({case.id for case in CASES}) == len(CASES)
    assert {case.expected for case in CASES} == {"refused", "honest"}
    # every refusal the pass expects says what it must name
    assert all(case.words for case in CASES if case.expected == "refused")


@pytest.mark.parametrize("ident", list(STABLE))
def test_stable_cases_keep_their_outcome(base: Base, tmp_path: Path, ident: str) -> None:
    entry = run_case(_case(ident), base, tmp_path)
    assert entry["outcome"] == STABLE[ident], entry
    if entry["outcome"] == "refused":
        assert entry["stderr_first_line"].startswith("Error: ")


@pytest.mark.parametrize("ident", ANY)
def test_cases_under_repair_are_classified(base: Base, tmp_path: Path, ident: str) -> None:
    entry = run_case(_case(ident), base, tmp_path)
    assert entry["outcome"] in OUTCOMES, entry
    assert entry["seconds"] < 60


def test_a_changed_figure_is_silent_wrong_and_a_hang_a_loud_defect(
    base: Base, tmp_path: Path
) -> None:
    """The classification itself: a report whose labels were flipped after the honest figure
    was fixed is silent-wrong; a command past its limit is a loud defect."""

    def flipped(ws: Workspace) -> Call:
        rows = ws.rows()
        for row in rows:
            row["hallucinated"] = not row["hallucinated"]
        return report_call(ws, ws.labels(rows), honest=same_review())

    wrong = Case("self-flipped", "self", "report --labels", "honest", flipped)
    assert run_case(wrong, base, tmp_path)["outcome"] == "silent-wrong"

    def hangs(ws: Workspace) -> Call:
        # `report --labels` on a FIFO nobody writes, in process, under a 2 s limit
        import os

        os.mkfifo(ws.p("fifo.jsonl"))
        return Call(ws.report(ws.p("fifo.jsonl")), same_review(), timeout=2)

    stuck = Case("self-hang", "self", "report --labels", "refused", hangs, ("fifo",))
    entry = run_case(stuck, base, tmp_path)
    assert entry["outcome"] in ("loud-defect", "refused"), entry
    if entry["outcome"] == "loud-defect":
        assert entry["detail"].startswith("hang"), entry


def test_the_base_labels_are_the_review_pages(base: Base) -> None:
    """Two reviewers and an adjudicator on each run, every label in the drawn prefix."""
    rows = [json.loads(line) for line in (base.root / "labels.jsonl").read_text().splitlines()]
    for pipeline in ("first", "second"):
        mine = [r for r in rows if r["pipeline"] == pipeline]
        assert {r["role"] for r in mine} == {"first", "second", "adjudicator"}
        assert {r["id"] for r in mine} <= set(base.prefix(pipeline))
