"""Two reviewers and an adjudicator in a real headless Chromium: `auditor review --sample 12
--second-review 0.5` (6 of the 12 for the second review), a first reviewer marking every drawn
answer, a second reviewer in the same browser who sees only the answers drawn for the second
review, in the order drawn, and none of the first's marks or notes (blind, also after a
reload), and an adjudicator who loads both downloaded files from disk (the file picker shown in
that role only) and settles the answers they disagree on. The three downloads,
concatenated untouched, go to `auditor report --labels`: summary.json and the report carry
Cohen's kappa, the disagreements settled by the adjudicator and the reviewed rate."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.agreement import reviewer_agreement
from auditor.cli import cli
from auditor.results import load_run
from auditor.review import check_fingerprint, run_fingerprint
from tests.browser import open_report
from tests.test_review import _checked
from tests.verify.test_calibrate import _labelled

pytestmark = pytest.mark.e2e

COUNT, SAMPLE = 20, 12
NOTE = 'the <b>date</b> is "wrong"'
KEYS = {"id", "pipeline", "fingerprint", "check_fingerprint", "role", "hallucinated"}
KEYS |= {"reviewer", "labelled_at", "question", "answer", "contexts", "source_id", "spans"}


class _Label:
    """A downloaded line as `reviewer_agreement` reads a label."""

    def __init__(self, line: dict[str, Any]) -> None:
        self.id = line["id"]
        self.hallucinated = line["hallucinated"]
        self.role = line.get("role", "first")
        self.reviewer = line.get("reviewer")
        self.where = ""


def _visible(page: Any) -> list[str]:
    return page.evaluate(
        "Array.from(document.querySelectorAll('article.review-item'))"
        ".filter(a => !a.hidden && a.offsetParent !== null).map(a => a.dataset.id)"
    )


def _shown_marks(page: Any) -> list[list[Any]]:
    """Per answer (shown or not): its pressed buttons, its marked colour, its note's text."""
    return page.evaluate(
        """Array.from(document.querySelectorAll('article.review-item')).map(a => [
            a.dataset.id,
            a.querySelectorAll('button[aria-pressed="true"]').length,
            a.classList.contains('marked-yes') || a.classList.contains('marked-no'),
            a.querySelector('input.review-note').value])"""
    )


def _download(page: Any, to: Path) -> list[dict[str, Any]]:
    with page.expect_download() as caught:
        page.locator("#review-download").click()
    download = caught.value
    download.save_as(to / download.suggested_filename)
    text = (to / download.suggested_filename).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def _mark_shown_by_keys(page: Any, marks: list[bool]) -> None:
    """From the first answer shown, y or n on each, j to the next shown one."""
    page.locator("article.review-item:visible").first.locator("h4").click()
    for mark in marks:
        page.keyboard.press("y" if mark else "n")
        page.keyboard.press("j")


def test_first_second_blind_and_adjudicator_through_the_page_to_kappa_and_the_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=COUNT)
    runner = CliRunner()
    done = runner.invoke(
        cli, ["review", str(run), "--sample", str(SAMPLE), "--second-review", "0.5"]
    )
    assert done.exit_code == 0, done.output
    review = json.loads((run / "review.json").read_text())
    sample = [s["id"] for s in review["sample"]]
    assert review["second_review"]["share"] == 0.5
    second_ids = [i for i in sample if i in set(review["second_review"]["ids"])]
    assert len(second_ids) == 6, second_ids  # round(0.5 x 12) of the drawn answers
    history = str(tmp_path / "h.db")
    done = runner.invoke(cli, ["report", str(run), "--history", history])
    assert done.exit_code == 0, done.output
    report = run / "report.html"
    artifacts = load_run(run)
    fingerprint = run_fingerprint(artifacts.manifest)
    checked_on = check_fingerprint(artifacts.check_manifest)
    assert checked_on

    truth = {r["id"]: r["hallucinated"] for r in _labelled(COUNT, wrong_every=3)}
    first = {i: truth[i] for i in sample}
    # the second reviewer disagrees on the first two answers drawn for the second review
    apart = second_ids[:2]
    second = {i: first[i] != (i in apart) for i in second_ids}
    # the adjudicator sides with the second on the first of them, with the first on the other
    settled = {apart[0]: second[apart[0]], apart[1]: first[apart[1]]}
    downloads = tmp_path / "downloads"

    with open_report(report) as (page, log):
        # the first review: every drawn answer, in the order drawn
        assert page.locator("#review-role").input_value() == "first"
        assert _visible(page) == sample
        assert not page.locator("#review-adjudicate").is_visible()  # only to adjudicate
        page.locator("#review-reviewer").fill("Ada")
        _mark_shown_by_keys(page, [first[i] for i in sample])
        noted = page.locator(f"article.review-item[data-id='{apart[0]}']")
        noted.locator("input.review-note").fill(NOTE)
        assert page.locator("#review-progress-0").inner_text() == f"{SAMPLE} of {SAMPLE} reviewed"
        first_lines = _download(page, downloads)
        assert (downloads / "labels.jsonl").exists()

        # the second review, blind: only its answers, in the order drawn, none of Ada's marks
        page.locator("#review-reviewer").fill("Bea")
        page.select_option("#review-role", "second")
        for _ in range(2):  # as chosen, then after a reload (name and role kept)
            assert _visible(page) == second_ids
            assert all(
                pressed == 0 and not coloured and note == ""
                for _, pressed, coloured, note in _shown_marks(page)
            ), _shown_marks(page)
            progress = page.locator("#review-progress-0").inner_text()
            assert progress == f"0 of {len(second_ids)} reviewed"
            assert not page.locator("#review-rate-0").is_visible()
            assert page.locator("#review-download").is_disabled()
            assert "Ada" not in page.locator("#review").inner_text()
            assert not page.locator("#review-adjudicate").is_visible()
            page.reload()
            page.wait_for_load_state("load")
        assert page.locator("#review-role").input_value() == "second"
        assert page.locator("#review-reviewer").input_value() == "Bea"
        _mark_shown_by_keys(page, [second[i] for i in second_ids])
        done_text = page.locator("#review-progress-0").inner_text()
        assert done_text == f"{len(second_ids)} of {len(second_ids)} reviewed"
        second_lines = _download(page, downloads)
        assert (downloads / "labels-second.jsonl").exists()

        # back to the first review under Ada's name: her marks are all there
        page.locator("#review-reviewer").fill("Ada")
        page.select_option("#review-role", "first")
        assert page.locator("#review-progress-0").inner_text() == f"{SAMPLE} of {SAMPLE} reviewed"
        assert noted.locator("input.review-note").input_value() == NOTE

        # the adjudicator loads both files (from disk, in the browser) and settles the two
        page.locator("#review-reviewer").fill("Cy")
        page.select_option("#review-role", "adjudicator")
        assert _visible(page) == []
        assert page.locator("#review-adjudicate").is_visible()
        page.set_input_files(
            "#review-adjudicate-files",
            [str(downloads / "labels.jsonl"), str(downloads / "labels-second.jsonl")],
        )
        summary_line = page.locator("#review-adjudicate-summary")
        summary_line.filter(has_text="disagree").wait_for()
        text = summary_line.inner_text()
        assert "first review by Ada" in text and "second review by Bea" in text, text
        assert f"{len(second_ids)} answers reviewed by both, 2 disagree" in text, text
        assert _visible(page) == apart  # in the order drawn
        for ident in apart:
            article = page.locator(f"article.review-item[data-id='{ident}']")
            both = article.locator(".review-both").inner_text()
            said = ["not hallucinated", "hallucinated"]
            assert f"First review (Ada): {said[first[ident]]}" in both, both
            assert f"Second review (Bea): {said[second[ident]]}" in both, both
            assert (f"Note: {NOTE}" in both) == (ident == apart[0])  # as text, not markup
            assert article.locator("button[aria-pressed='true']").count() == 0
            mark = "yes" if settled[ident] else "no"
            article.locator(f"button[data-mark='{mark}']").click()
        assert page.locator("#review-progress-0").inner_text() == "2 of 2 reviewed"
        adjudicator_lines = _download(page, downloads)
        assert (downloads / "labels-adjudicator.jsonl").exists()
    assert log.console_errors == [] and log.page_errors == [] and log.dialogs == []
    assert set(log.requests) == {report.resolve().as_uri()}, "the report fetched something"

    for lines, role, who in (
        (first_lines, "first", "Ada"),
        (second_lines, "second", "Bea"),
        (adjudicator_lines, "adjudicator", "Cy"),
    ):
        for line in lines:
            assert set(line) - {"claims", "note"} == KEYS, line
            assert line["role"] == role and line["reviewer"] == who
            assert line["fingerprint"] == fingerprint and line["check_fingerprint"] == checked_on
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", line["labelled_at"])
    assert [(x["id"], x["hallucinated"]) for x in first_lines] == list(first.items())
    assert [(x["id"], x["hallucinated"]) for x in second_lines] == list(second.items())
    assert [(x["id"], x["hallucinated"]) for x in adjudicator_lines] == list(settled.items())
    assert next(x for x in first_lines if x["id"] == apart[0])["note"] == NOTE

    # the three files as downloaded, one after the other
    every = tmp_path / "all.jsonl"
    every.write_bytes(
        b"".join(
            (downloads / name).read_bytes()
            for name in ("labels.jsonl", "labels-second.jsonl", "labels-adjudicator.jsonl")
        )
    )

    def reviewed_by(labels: Path) -> dict[str, Any]:
        args = ["report", str(run), "--labels", str(labels), "--history", history]
        done = runner.invoke(cli, args)
        assert done.exit_code == 0, done.output
        found: dict[str, Any] = json.loads((run / "summary.json").read_text())["reviewed"]
        return found

    # the rate as if the first review had said what was settled: one label per answer
    settled_first = tmp_path / "settled.jsonl"
    settled_first.write_text(
        "".join(
            json.dumps(x | {"hallucinated": settled.get(x["id"], x["hallucinated"])}) + "\n"
            for x in first_lines
        ),
        encoding="utf-8",
    )
    as_settled = reviewed_by(settled_first)["answer_rate"]
    first_only = reviewed_by(downloads / "labels.jsonl")["answer_rate"]
    reviewed = reviewed_by(every)
    expected = reviewer_agreement(
        [_Label(x) for x in [*first_lines, *second_lines, *adjudicator_lines]]
    )
    assert expected is not None
    agreement = reviewed["agreement"]
    assert agreement["double_reviewed"] == len(second_ids)
    assert agreement["kappa"] == pytest.approx(expected["kappa"], abs=1e-6)
    assert agreement["table"] == expected["table"]
    assert agreement["disagreements"] == [
        {
            "id": ident,
            "first": first[ident],
            "second": second[ident],
            "adjudicated": settled[ident],
            "adjudicator": "Cy",
        }
        for ident in apart
    ]
    assert agreement["reviewers"] == {"first": ["Ada"], "second": ["Bea"], "adjudicator": ["Cy"]}
    # the rate: the adjudicator's label where there is one, else the first review's (the
    # adjudicator sided with the second reviewer once: not the first review's rate)
    rate = reviewed["answer_rate"]
    assert rate["labels"] == SAMPLE and rate["population"] == COUNT
    assert rate == as_settled and rate["value"] != first_only["value"]

    html = (run / "report.html").read_text(encoding="utf-8")
    block = html[html.index('id="agreement-0"') :]
    block = block[: block.index("</div>")]
    assert "Cohen's kappa" in block
    assert f"{len(second_ids)} answers reviewed by both" in block
    assert block.count("adjudicated by Cy") == 2 and "not settled" not in block
    for ident in apart:
        assert f"<td>{ident}</td>" in block
