"""The review section in a real headless Chromium: five answers marked with keys and clicks (a
claim mark, a note), kept across a reload by the run's fingerprint, downloaded as
labels.jsonl by the browser, and that file read back by `auditor report --labels`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.review import run_fingerprint
from tests.browser import open_report
from tests.test_review import _checked

pytestmark = pytest.mark.e2e

SAMPLE = 8


def test_review_five_answers_reload_download_and_report_the_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    runner = CliRunner()
    assert runner.invoke(cli, ["review", str(run), "--sample", str(SAMPLE)]).exit_code == 0
    sample = [s["id"] for s in json.loads((run / "review.json").read_text())["sample"]]
    history = str(tmp_path / "h.db")
    done = runner.invoke(cli, ["report", str(run), "--history", history])
    assert done.exit_code == 0, done.output
    report = run / "report.html"
    fingerprint = run_fingerprint(json.loads((run / "manifest.json").read_text()))
    saved = tmp_path / "downloaded" / "labels.jsonl"

    with open_report(report) as (page, log):
        items = page.locator("article.review-item")
        assert items.count() == SAMPLE
        assert [items.nth(k).get_attribute("data-id") for k in range(SAMPLE)] == sample
        progress = page.locator("#review-progress-0")
        assert progress.inner_text() == f"0 of {SAMPLE} reviewed"
        assert page.locator("#review-download").is_disabled()
        # keys: the first answer is current; y marks it, j moves on, n marks the second
        page.locator("#review").scroll_into_view_if_needed()
        page.keyboard.press("y")
        page.keyboard.press("j")
        page.keyboard.press("n")
        page.keyboard.press("j")
        page.keyboard.press("j")
        page.keyboard.press("k")  # back to the third
        page.keyboard.press("y")
        # clicks: the fourth is not hallucinated, the judge wrong on its first claim, a note
        fourth, fifth = items.nth(3), items.nth(4)
        fourth.locator("button[data-mark='no']").click()
        fourth.locator("li.review-claim").first.locator("button[data-judge='wrong']").click()
        fifth.locator("input.review-note").fill('cites <b>the</b> wrong "page"')
        fifth.locator("button[data-mark='yes']").click()
        # a key typed into the note marks nothing
        fifth.locator("input.review-note").press("End")
        fifth.locator("input.review-note").press("n")
        assert progress.inner_text() == f"5 of {SAMPLE} reviewed"

        page.reload()
        page.wait_for_load_state("load")
        items = page.locator("article.review-item")
        assert page.locator("#review-progress-0").inner_text() == f"5 of {SAMPLE} reviewed"
        pressed = [
            [
                items.nth(k).locator(f"button[data-mark='{m}']").get_attribute("aria-pressed")
                for m in ("yes", "no")
            ]
            for k in range(SAMPLE)
        ]
        yes_no = [["true", "false"], ["false", "true"]]
        assert pressed[:5] == [yes_no[0], yes_no[1], yes_no[0], yes_no[1], yes_no[0]]
        assert pressed[5:] == [["false", "false"]] * (SAMPLE - 5)
        wrong = items.nth(3).locator("li.review-claim").first.locator("button[data-judge='wrong']")
        assert wrong.get_attribute("aria-pressed") == "true"
        note = items.nth(4).locator("input.review-note").input_value()
        assert note == 'cites <b>the</b> wrong "page"n'

        with page.expect_download() as caught:
            page.locator("#review-download").click()
        download = caught.value
        assert download.suggested_filename == "labels.jsonl"
        download.save_as(saved)
        assert "5 labels saved as labels.jsonl" in page.locator("#review-total").inner_text()
    assert log.console_errors == [] and log.page_errors == [] and log.dialogs == []
    assert log.requests == [report.resolve().as_uri()] * 2, "the report fetched something"

    labels = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines()]
    assert [label["id"] for label in labels] == sample[:5]
    assert [label["hallucinated"] for label in labels] == [True, False, True, False, True]
    assert {label["pipeline"] for label in labels} == {"run"}
    assert {label["fingerprint"] for label in labels} == {fingerprint}
    assert labels[3]["claims"] == [{"index": 0, "judge_right": False}]
    assert labels[4]["note"] == note and "claims" not in labels[0] and "note" not in labels[0]

    done = runner.invoke(cli, ["report", str(run), "--labels", str(saved), "--history", history])
    assert done.exit_code == 0, done.output
    summary = json.loads((run / "summary.json").read_text())
    assert summary["reviewed"]["labels"] == 5
