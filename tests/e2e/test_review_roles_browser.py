"""The review page's roles in a real headless Chromium, on a run of the fake judge (issue 48):
the adjudicator's file picker only in the adjudicate role (before a reload and after), a
second-review share of 0.5 of 6 drawn answers showing 3 of them to the second reviewer, an
adjudicator who made one of the two reviews unable to settle it, and a review.json edited
away from the draw of its seed shown as a problem with none of its answers to label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from tests.browser import open_report
from tests.test_review import _checked

pytestmark = pytest.mark.e2e


def _visible(page: Any) -> list[str]:
    return page.evaluate(
        "Array.from(document.querySelectorAll('article.review-item'))"
        ".filter(a => !a.hidden && a.offsetParent !== null).map(a => a.dataset.id)"
    )


def _report(run: Path, out: Path) -> Path:
    args = ["report", str(run), "--out", str(out), "--history", str(out.parent / "h.db")]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    return out


def test_the_adjudicators_picker_shows_only_to_adjudicate_and_not_on_their_own_review(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    args = ["review", str(run), "--sample", "6", "--second-review", "0.5"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    review = json.loads((run / "review.json").read_text())
    sample = [e["id"] for e in review["sample"]]
    second = [i for i in sample if i in set(review["second_review"]["ids"])]
    assert len(second) == 3  # round(0.5 x 6)
    apart = second[0]
    files = tmp_path / "files"
    files.mkdir()
    lines = {
        "labels.jsonl": [{"id": i, "hallucinated": False, "reviewer": "Ada"} for i in sample],
        "labels-second.jsonl": [
            {"id": i, "hallucinated": i == apart, "reviewer": "Bea", "role": "second"}
            for i in second
        ],
    }
    for name, rows in lines.items():
        text = "".join(json.dumps(r | {"pipeline": "run"}) + "\n" for r in rows)
        (files / name).write_text(text, encoding="utf-8")
    report = _report(run, tmp_path / "report.html")

    with open_report(report) as (page, log):
        picker = page.locator("#review-adjudicate")
        heading = page.locator("#review-0 h3").inner_text()
        assert (
            "6 of 12 answers drawn" in heading and "3 of them for a blind second review" in heading
        )
        assert page.locator("#review-role").input_value() == "first"
        assert not picker.is_visible() and _visible(page) == sample
        page.locator("#review-reviewer").fill("Bea")
        page.select_option("#review-role", "second")
        assert not picker.is_visible() and _visible(page) == second
        page.reload()
        page.wait_for_load_state("load")
        assert page.locator("#review-role").input_value() == "second"
        assert not picker.is_visible()
        page.select_option("#review-role", "adjudicator")
        assert picker.is_visible() and page.locator("#review-adjudicate-files").is_visible()
        page.set_input_files(
            "#review-adjudicate-files", [str(files / name) for name in sorted(lines)]
        )
        page.locator("#review-adjudicate-summary").filter(has_text="1 disagrees").wait_for()
        assert _visible(page) == [apart]
        article = page.locator(f"article.review-item[data-id='{apart}']")
        # Ada made the first review: under her name (any case) the page will not settle it
        page.locator("#review-reviewer").fill("ADA")
        article.locator("button[data-mark='yes']").click()
        assert (
            "nobody adjudicates their own disagreement"
            in page.locator("#review-message").inner_text()
        )
        assert article.locator("button[aria-pressed='true']").count() == 0
        assert page.locator("#review-download").is_disabled()
        page.locator("#review-reviewer").fill("Cy")
        article.locator("button[data-mark='yes']").click()
        assert page.locator("#review-message").inner_text() == ""
        assert article.locator("button[aria-pressed='true']").count() == 1
        page.select_option("#review-role", "first")
        assert not picker.is_visible()
    assert log.console_errors == [] and log.page_errors == [] and log.dialogs == []


def test_a_review_file_that_is_not_the_draw_of_its_seed_is_shown_as_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    done = CliRunner().invoke(cli, ["review", str(run), "--sample", "4", "--seed", "7"])
    assert done.exit_code == 0, done.output
    review = json.loads((run / "review.json").read_text())
    review["seed"] = 8  # the same four answers, said to be another seed's
    (run / "review.json").write_text(json.dumps(review), encoding="utf-8")
    report = _report(run, tmp_path / "report.html")
    with open_report(report) as (page, log):
        assert page.locator("article.review-item").count() == 0
        problem = page.locator(".review-problem").inner_text()
        assert '"sample" is not the draw of seed 8' in problem
        assert "the review of run is not shown" in problem
    assert log.console_errors == [] and log.page_errors == []
