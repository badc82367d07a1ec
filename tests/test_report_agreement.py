"""Two reviewers in the report's data: the review page's answers for the blind second review
(marked, in the order drawn) and the check's fingerprint each label carries; the reviewed
block's agreement (kappa, its interval or why none, positive and negative agreement, who
reviewed in which role, each disagreement and how it was settled), its names escaped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.agreement import reviewer_agreement
from auditor.cli import cli
from auditor.report import _agreement_view, _review_views, _second_review
from auditor.results import RunArtifacts, load_run
from auditor.review import check_fingerprint
from tests.test_review import _checked
from tests.verify.test_calibrate import _labelled

INJECTED = "<img src=x onerror=alert(1)>"


@dataclass(frozen=True)
class _Label:
    id: str
    hallucinated: bool
    role: str
    reviewer: str | None
    where: str = ""


def _run_with(agreement: dict[str, Any] | None) -> RunArtifacts:
    summary = {"reviewed": {"agreement": agreement}} if agreement is not None else {}
    return RunArtifacts(Path("run"), {"pipeline": {"name": "p"}}, [], [], None, summary)


def test_the_agreement_view_says_kappa_the_roles_and_how_each_disagreement_was_settled() -> None:
    labels = [
        *(_Label(f"q{k}", k < 3, "first", "Ada") for k in range(6)),
        *(_Label(f"q{k}", k < 2 or k == 4, "second", "Bea") for k in range(6)),
        _Label("q2", False, "adjudicator", "Cy"),
    ]
    agreement = reviewer_agreement(labels, rounds=200)
    assert agreement is not None
    view = _agreement_view(_run_with(agreement), 1)
    assert view is not None
    assert view["name"] == "p" and view["pipeline_index"] == 1 and view["double_reviewed"] == 6
    # a 2, b 1 (q2), c 1 (q4), d 2: p_o 4/6, p_e 0.5, kappa 1/3
    assert view["kappa"] == pytest.approx(1 / 3, abs=1e-6)
    assert view["observed"] == pytest.approx(4 / 6, abs=1e-6)
    assert view["positive"] == pytest.approx(4 / 6, abs=1e-6)
    assert view["negative"] == pytest.approx(4 / 6, abs=1e-6)
    assert view["table"] == {"a": 2, "b": 1, "c": 1, "d": 2}
    assert view["reviewers"] == {"first": ["Ada"], "second": ["Bea"], "adjudicator": ["Cy"]}
    assert view["disagreements"] == [
        {
            "id": "q2",
            "first": "hallucinated",
            "second": "not hallucinated",
            "settled": True,
            "outcome": "not hallucinated",
            "adjudicator": "Cy",
        },
        {
            "id": "q4",
            "first": "not hallucinated",
            "second": "hallucinated",
            "settled": False,
            "outcome": None,
            "adjudicator": "(unnamed)",
        },
    ]
    assert view["unsettled"] == 1
    assert view["kappa_interval"] == agreement["kappa_interval"] or view["kappa_undefined"]


def test_no_agreement_view_without_answers_reviewed_twice() -> None:
    assert _agreement_view(_run_with(None), 0) is None
    assert _agreement_view(_run_with({"double_reviewed": 0}), 0) is None
    one_class = reviewer_agreement(
        [_Label("a", True, "first", "A"), _Label("a", True, "second", "B")]
    )
    view = _agreement_view(_run_with(one_class), 0)
    assert (
        view is not None and view["kappa"] is None and "kappa undefined" in view["kappa_undefined"]
    )


def test_the_second_review_is_listed_in_the_order_drawn_whatever_the_files_order() -> None:
    sample = [{"id": i, "inclusion_probability": 0.5} for i in ("c", "a", "d", "b")]
    review = {"sample": sample, "second_review": {"share": 0.5, "ids": ["b", "c"]}}
    assert _second_review(review) == {"share": 0.5, "ids": ["c", "b"]}
    assert _second_review({"sample": sample}) is None
    assert _second_review({"sample": sample, "second_review": None}) is None
    assert _second_review({"sample": sample, "second_review": {"ids": "c"}}) is None


def _drawn_with_a_second_review(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = _checked(tmp_path, monkeypatch, count=20)
    done = CliRunner().invoke(cli, ["review", str(run), "--sample", "10", "--second-review", "0.5"])
    assert done.exit_code == 0, done.output
    return run


def test_the_page_marks_the_answers_of_the_second_review_and_carries_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _drawn_with_a_second_review(tmp_path, monkeypatch)
    review = json.loads((run / "review.json").read_text())
    sample = [e["id"] for e in review["sample"]]
    chosen = set(review["second_review"]["ids"])
    assert chosen and chosen < set(sample)
    artifacts = load_run(run)
    view = _review_views([artifacts])["reviews"][0]
    assert [item["id"] for item in view["drawn"]] == sample  # the order drawn, not re-sorted
    assert sample != sorted(sample)
    assert [item["id"] for item in view["drawn"] if item["second"]] == [
        i for i in sample if i in chosen
    ]
    assert view["second_review"] == {
        "share": 0.5,
        "ids": [i for i in sample if i in chosen],
    }
    assert view["check_fingerprint"] == check_fingerprint(artifacts.check_manifest)
    assert view["check_fingerprint"]

    out = tmp_path / "report.html"
    args = ["report", str(run), "--out", str(out), "--history", str(tmp_path / "h.db")]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    html = out.read_text(encoding="utf-8")
    assert f'data-check-fingerprint="{view["check_fingerprint"]}"' in html
    assert 'data-second-review="true"' in html
    assert html.count('data-second="true"') == len(chosen)
    assert f"{len(chosen)} of them for a blind second review" in html
    assert 'id="review-role"' in html and 'id="review-adjudicate-files"' in html


def test_the_reviewed_block_shows_kappa_and_the_settled_disagreements_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _drawn_with_a_second_review(tmp_path, monkeypatch)
    review = json.loads((run / "review.json").read_text())
    sample = [e["id"] for e in review["sample"]]
    second = [i for i in sample if i in set(review["second_review"]["ids"])]
    truth = {r["id"]: r["hallucinated"] for r in _labelled(20, wrong_every=3)}
    apart = second[0]
    lines = [
        *({"id": i, "hallucinated": truth[i], "reviewer": "Ada"} for i in sample),
        *(
            {"id": i, "hallucinated": truth[i] != (i == apart), "role": "second"}
            | {"reviewer": INJECTED}
            for i in second
        ),
        {"id": apart, "hallucinated": truth[apart], "role": "adjudicator", "reviewer": "Cy"},
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    out = tmp_path / "report.html"
    args = ["report", str(run), "--labels", str(labels), "--out", str(out)]
    done = CliRunner().invoke(cli, [*args, "--history", str(tmp_path / "h.db")])
    assert done.exit_code == 0, done.output
    html = out.read_text(encoding="utf-8")
    block = html[html.index('id="agreement-0"') :]
    block = block[: block.index("</div>")]
    assert f"{len(second)} answer{'s' if len(second) > 1 else ''} reviewed by both" in block
    assert "Cohen's kappa" in block
    assert "first review by <span" in block and "Ada" in block
    assert INJECTED not in html and "&lt;img src=x onerror=alert(1)&gt;" in block
    assert f"<td>{apart}</td>" in block and "adjudicated by Cy" in block
    assert "positive agreement" in block and "negative agreement" in block
