"""The review section in a real headless Chromium: the reviewer's name asked before the first
mark; answers marked with keys and clicks (a claim mark, a note), kept across a reload by the
run's fingerprint, downloaded as labels.jsonl by the browser with everything other commands
need, and that file read back by `auditor report --labels`, `calibrate` and `--examples`'s
readers; flagged claims first, the evidence marked in its open chunk, `u` to the next
unmarked answer, answer ids `__proto__` and `constructor`, and the provisional rate equal to
`reviewed_rate` on the same labels (under 10 labels and with the judge's difference
estimator)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.claim_rows import Claim, flagged_at, hallucination_score
from auditor.cli import cli
from auditor.results import RunArtifacts, load_run
from auditor.review import check_fingerprint, run_fingerprint
from auditor.reviewed import reviewed_rate
from tests.browser import open_report
from tests.test_review import _checked
from tests.verify.test_calibrate import _fakes, _labelled

pytestmark = pytest.mark.e2e

SAMPLE = 8
LABELS_ALONE, WITH_JUDGE = "labels (Wilson, finite population)", "difference (finite population)"
KEYS = {"id", "pipeline", "fingerprint", "hallucinated", "reviewer", "labelled_at", "question"}
KEYS |= {"answer", "contexts", "source_id", "spans", "check_fingerprint", "role"}


def _threshold(run: RunArtifacts) -> float:
    judge = (run.check_manifest or {}).get("judge", {}).get("config", {})
    return float(judge.get("support_threshold", 0.5))


def _flags(run: RunArtifacts) -> dict[str, bool]:
    """The judge's flag on each checked answer, as `review_summary` computes it."""
    return {
        str(row["id"]): flagged_at([Claim.from_json(c) for c in row["claims"]], _threshold(run))
        for row in run.checks
    }


def _check_label(label: dict[str, Any], run: RunArtifacts, reviewer: str, since: str) -> None:
    """Every key a label needs, each equal to the run's own: its record's question, answer
    and contexts, and spans by the rule (a claim marked right that the judge flagged, or
    marked wrong that it passed; only on a hallucinated answer)."""
    assert set(label) - {"claims", "note"} == KEYS, label
    record = next(r for r in run.records if str(r["id"]) == label["id"])
    check = next(r for r in run.checks if str(r["id"]) == label["id"])
    assert label["pipeline"] == run.name
    assert label["fingerprint"] == run_fingerprint(run.manifest)
    assert label["check_fingerprint"] == check_fingerprint(run.check_manifest)
    assert label["role"] == "first"  # the page's first review, its default role
    assert label["question"] == record["question"] and label["answer"] == record["answer"]
    assert label["contexts"] == [c["text"] for c in record["retrieved"]]
    assert label["source_id"] == label["id"] and label["reviewer"] == reviewer
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", label["labelled_at"])
    assert since <= label["labelled_at"] <= _now()
    right = {m["index"]: m["judge_right"] for m in label.get("claims", [])}
    spans = {
        tuple(c["span"])
        for k, c in enumerate(check["claims"])
        if k in right
        and c["span"]
        and right[k] == flagged_at([Claim.from_json(c)], _threshold(run))
    }
    expected = [{"start": s, "end": e} for s, e in sorted(spans)] if label["hallucinated"] else []
    assert label["spans"] == expected, label


def _span(claim: dict[str, Any]) -> dict[str, int]:
    return {"start": claim["span"][0], "end": claim["span"][1]}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_review_five_answers_reload_download_and_report_the_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name is asked before the first mark; the file's labels carry it and are read by
    `report --labels` and the calibrate and examples readers."""
    from auditor.calibrate import read_labels
    from auditor.verify.examples import read_examples

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
    since = _now()

    with open_report(report) as (page, log):
        items = page.locator("article.review-item")
        assert items.count() == SAMPLE
        assert [items.nth(k).get_attribute("data-id") for k in range(SAMPLE)] == sample
        progress = page.locator("#review-progress-0")
        assert progress.inner_text() == f"0 of {SAMPLE} reviewed"
        assert page.locator("#review-download").is_disabled()
        # no name yet: a mark asks for it (focused, said on the page) and records nothing
        page.locator("#review").scroll_into_view_if_needed()
        page.keyboard.press("y")
        assert "Type your name first" in page.locator("#review-message").inner_text()
        assert page.locator("#review-message").is_visible()
        assert page.evaluate("document.activeElement.id") == "review-reviewer"
        assert progress.inner_text() == f"0 of {SAMPLE} reviewed"
        items.nth(0).locator("button[data-mark='no']").click()
        assert progress.inner_text() == f"0 of {SAMPLE} reviewed"
        page.locator("#review-reviewer").fill("Ada Lovelace")
        assert page.locator("#review-message").inner_text() == ""
        items.nth(0).locator("h4").click()  # out of the name field: keys mark again
        # keys: the first answer is current; y marks it, j moves on, n marks the second
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
        fifth.locator("li.review-claim").first.locator("button[data-judge='right']").click()
        # a key typed into the note marks nothing
        fifth.locator("input.review-note").press("End")
        fifth.locator("input.review-note").press("n")
        assert progress.inner_text() == f"5 of {SAMPLE} reviewed"

        page.reload()
        page.wait_for_load_state("load")
        items = page.locator("article.review-item")
        assert page.locator("#review-reviewer").input_value() == "Ada Lovelace"
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
    artifacts = load_run(run)
    for label in labels:
        _check_label(label, artifacts, "Ada Lovelace", since)
    # the fifth: hallucinated, the judge right on its flagged claim: that claim's span
    fifth_check = next(r for r in artifacts.checks if r["id"] == sample[4])["claims"][0]
    assert _flags(artifacts)[sample[4]] and labels[4]["spans"] == [_span(fifth_check)]

    done = runner.invoke(cli, ["report", str(run), "--labels", str(saved), "--history", history])
    assert done.exit_code == 0, done.output
    summary = json.loads((run / "summary.json").read_text())
    assert summary["reviewed"]["labels"] == 5
    assert len(read_labels(saved)) == 5 and len(read_examples(saved)) == 5


def _tricky(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run of six answers whose ids include `__proto__` and `constructor`; every other one
    makes a right claim, then a wrong one (flagged: listed first on the page) decided by a
    sentence in the middle of a three-sentence chunk."""
    _fakes(monkeypatch)
    rows = []
    for k, ident in enumerate(["__proto__", "constructor", "m2", "m3", "m4", "m5"]):
        n, days = k + 2, 30 + k
        good = f"The T{n} thermostat warranty lasts {n} years from the delivery date."
        chunks = [
            good,
            f"Returns are free of charge. Unopened thermostats can be returned within {days} "
            "days of delivery. Opened ones cannot.",
        ]
        wrong = f"Unopened thermostats can be returned within {days + 60} days of delivery."
        answer = f"{good} {wrong}" if k % 2 == 0 else good
        rows.append(
            {"id": ident, "question": f"What are the terms of the T{n}?", "contexts": chunks}
            | {"answer": answer}
        )
    answers = tmp_path / "tricky.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = tmp_path / "tricky"
    done = CliRunner().invoke(cli, ["check", "--answers", str(answers), "--out", str(run), "-q"])
    assert done.exit_code == 0, done.output
    return run


def _rate(page: Any, index: int) -> dict[str, Any]:
    found = page.locator(f"#review-rate-{index}")
    data = {k: found.get_attribute(f"data-{k}") for k in ("value", "low", "high", "labels")}
    return {k: float(v) for k, v in data.items() if v is not None} | {
        "method": found.get_attribute("data-method"),
        "text": found.inner_text(),
    }


def _scores(run: RunArtifacts) -> dict[str, float]:
    """The judge's score on each checked answer, as `review_summary` leans on it."""
    return {
        str(row["id"]): hallucination_score([Claim.from_json(c) for c in row["claims"]])
        for row in run.checks
    }


def _same_rate(shown: dict[str, Any], labels: list[bool], ids: list[str], run: RunArtifacts) -> str:
    """The page's rate is `reviewed_rate` on the same labels and the judge's scores."""
    scores = _scores(run)
    expected = reviewed_rate(labels, [scores[i] for i in ids], list(scores.values()))
    assert shown["method"] == expected.method and shown["labels"] == len(labels)
    for key in ("value", "low", "high"):
        assert shown[key] == pytest.approx(getattr(expected, key), abs=1e-9), key
    shown_value = re.match(r"provisional: ([0-9.]+) % \(", shown["text"])
    assert shown_value and float(shown_value[1]) == pytest.approx(100 * expected.value, abs=0.051)
    return expected.method


def test_flagged_first_evidence_marked_next_unmarked_odd_ids_and_the_provisional_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One report of two runs: a tricky one (ids `__proto__`, `constructor`; two claims per
    wrong answer) and one of 40 answers with 20 drawn, marked by keys to 5 labels (Wilson)
    and to 12 (the judge's difference estimator) while the page's rate follows `reviewed_rate`."""
    tricky = _tricky(tmp_path, monkeypatch)
    big = _checked(tmp_path, monkeypatch, count=40)
    runner = CliRunner()
    assert runner.invoke(cli, ["review", str(tricky), "--sample", "6"]).exit_code == 0
    assert runner.invoke(cli, ["review", str(big), "--sample", "20"]).exit_code == 0
    report = tmp_path / "report.html"
    args = ["report", str(tricky), str(big), "--out", str(report)]
    done = runner.invoke(cli, [*args, "--history", str(tmp_path / "h.db")])
    assert done.exit_code == 0, done.output
    odd, many = load_run(tricky), load_run(big)
    drawn = [s["id"] for s in json.loads((tricky / "review.json").read_text())["sample"]]
    sample = [s["id"] for s in json.loads((big / "review.json").read_text())["sample"]]
    truth = _flags(many)  # the fake judge is right on every answer
    # the first 12 drawn, as a person would mark them: two where the judge is wrong
    marks = [truth[i] != (k in (0, 3)) for k, i in enumerate(sample[:12])]
    saved = tmp_path / "labels.jsonl"
    since = _now()

    with open_report(report) as (page, log):
        # marks kept by the page's first version (an object keyed by id): not read, no error
        old = {"version": 1, "answers": {sample[0]: {"hallucinated": True, "claims": {}}}}
        key = f"auditor-review:{run_fingerprint(many.manifest)}"
        # set before the page's script on the reload: a setItem just before a reload can reach
        # the browser's storage after the reloaded page read it (seen once on a loaded machine)
        page.add_init_script(
            f"localStorage.setItem({json.dumps(key)}, {json.dumps(json.dumps(old))})"
        )
        page.reload()
        page.wait_for_load_state("load")
        assert page.locator("#review-progress-1").inner_text() == "0 of 20 reviewed"
        assert "older version" in page.locator("#review-storage").inner_text()
        page.locator("#review-reviewer").fill("Grace")
        section = page.locator("#review-0")
        articles = {a: section.locator(f"article[data-id='{a}']") for a in drawn}
        for ident, article in articles.items():
            check = next(r for r in odd.checks if r["id"] == ident)
            claims = article.locator("li.review-claim")
            order = [claims.nth(k).get_attribute("data-claim") for k in range(claims.count())]
            chunks = article.locator("details.review-chunk")
            opened = [chunks.nth(k).evaluate("d => d.open") for k in range(chunks.count())]
            if len(check["claims"]) == 2:  # right, then wrong: the wrong one first
                assert order == ["1", "0"]
                assert claims.first.get_attribute("data-flagged") == "true"
                deciding = article.locator("details.review-chunk[data-chunk='context-2']")
                evidence = check["claims"][1]["evidence"]
                assert deciding.locator("mark").inner_text() == evidence
                record = next(r for r in odd.records if r["id"] == ident)
                assert deciding.locator("blockquote").inner_text() == record["retrieved"][1]["text"]
                assert opened == [False, True]  # the chunk of the right claim folded
            else:
                assert order == ["0"] and opened == [False, False]

        # __proto__: hallucinated, the judge right on the wrong claim; constructor: clean;
        # m2: hallucinated, the judge wrong on the right claim and right on the wrong one
        articles["__proto__"].locator("button[data-mark='yes']").click()
        articles["__proto__"].locator("li[data-claim='1'] button[data-judge='right']").click()
        articles["constructor"].locator("button[data-mark='no']").click()
        articles["m2"].locator("button[data-mark='yes']").click()
        articles["m2"].locator("li[data-claim='0'] button[data-judge='wrong']").click()
        articles["m2"].locator("li[data-claim='1'] button[data-judge='right']").click()
        assert page.locator("#review-progress-0").inner_text() == "3 of 6 reviewed"
        # only the drawn order's labelled prefix counts, as in `report --labels`
        prefix = next(
            (k for k, a in enumerate(drawn) if a not in {"__proto__", "constructor", "m2"}), 6
        )
        expected = "labels (Wilson, finite population)" if prefix else "no labels"
        assert _rate(page, 0)["method"] == expected  # a prefix of the 3 of 6 labelled

        # u: from the first drawn answer to the next one not marked
        current = page.locator("article.review-item.current")
        articles[drawn[0]].locator("h4").click()
        marked = {"__proto__", "constructor", "m2"}
        page.keyboard.press("u")
        after = next(a for a in drawn[1:] if a not in marked)
        assert current.get_attribute("data-id") == after

        # the 40-answer run: five labels by keys (Wilson), then twelve (with the judge)
        big_items = page.locator("#review-1 article.review-item")
        big_items.first.locator("h4").click()
        for k, label in enumerate(marks):
            page.keyboard.press("y" if label else "n")
            page.keyboard.press("j")
            if k == 4:
                rate = _rate(page, 1)
                assert _same_rate(rate, marks[:5], sample[:5], many) == LABELS_ALONE
        rate = _rate(page, 1)
        assert _same_rate(rate, marks, sample[:12], many) == WITH_JUDGE
        assert rate["text"].endswith(f", 12 labels, {WITH_JUDGE}")
        assert current.get_attribute("data-id") == sample[12]

        # u wraps around: the last answer marked, it goes back to the tricky run's first
        big_items.last.locator("h4").click()
        page.keyboard.press("y")
        page.keyboard.press("u")
        first_open = next(a for a in drawn if a not in marked)
        assert current.get_attribute("data-id") == first_open

        page.reload()
        page.wait_for_load_state("load")
        assert page.locator("#review-progress-0").inner_text() == "3 of 6 reviewed"
        assert page.locator("#review-progress-1").inner_text() == "13 of 20 reviewed"
        proto = page.locator("#review-0 article[data-id='__proto__']")
        assert proto.locator("button[data-mark='yes']").get_attribute("aria-pressed") == "true"
        constructor = page.locator("#review-0 article[data-id='constructor']")
        assert constructor.locator("button[data-mark='no']").get_attribute("aria-pressed") == "true"
        assert page.evaluate(
            "Object.keys(Object.prototype).length === 0 && !('hallucinated' in {})"
        )
        with page.expect_download() as caught:
            page.locator("#review-download").click()
        caught.value.save_as(saved)
    assert log.console_errors == [] and log.page_errors == [] and log.dialogs == []

    labels = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines()]
    by_id = {(label["pipeline"], label["id"]): label for label in labels}
    assert len(labels) == 16
    for label in labels:
        _check_label(label, odd if label["pipeline"] == "tricky" else many, "Grace", since)
    proto_claims = next(r for r in odd.checks if r["id"] == "__proto__")["claims"]
    assert by_id["tricky", "__proto__"]["spans"] == [_span(proto_claims[1])]
    assert by_id["tricky", "__proto__"]["claims"] == [{"index": 1, "judge_right": True}]
    assert by_id["tricky", "constructor"]["hallucinated"] is False
    m2 = next(r for r in odd.checks if r["id"] == "m2")["claims"]
    assert by_id["tricky", "m2"]["spans"] == [
        _span(c) for c in m2
    ]  # the passed claim marked wrong, the flagged one marked right
    ordered = [by_id["run", i]["hallucinated"] for i in sample[:12]]
    assert ordered == marks


def test_the_downloaded_file_works_untouched_with_report_examples_and_calibrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One file for the loop: 24 answers labelled by keys in the page, the download given as it
    is to `report --labels`, `check --examples` (another run's answers to the same questions:
    each gets this run's label of its question as an example) and `calibrate --labels`."""
    count = 24
    run = _checked(tmp_path, monkeypatch, count=count)
    runner = CliRunner()
    assert runner.invoke(cli, ["review", str(run), "--sample", str(count)]).exit_code == 0
    sample = [s["id"] for s in json.loads((run / "review.json").read_text())["sample"]]
    truth = {r["id"]: r["hallucinated"] for r in _labelled(count, wrong_every=3)}
    history = str(tmp_path / "h.db")
    assert runner.invoke(cli, ["report", str(run), "--history", history]).exit_code == 0
    saved = tmp_path / "downloaded" / "labels.jsonl"
    with open_report(run / "report.html") as (page, log):
        page.locator("#review-reviewer").fill("Grace Hopper")
        page.locator("article.review-item").first.locator("h4").click()
        for ident in sample:
            page.keyboard.press("y" if truth[ident] else "n")
            page.keyboard.press("j")
        assert page.locator("#review-progress-0").inner_text() == f"{count} of {count} reviewed"
        with page.expect_download() as caught:
            page.locator("#review-download").click()
        caught.value.save_as(saved)
    assert log.console_errors == [] and log.page_errors == []

    reported = runner.invoke(
        cli, ["report", str(run), "--labels", str(saved), "--history", history]
    )
    assert reported.exit_code == 0, reported.output
    reviewed = json.loads((run / "summary.json").read_text())["reviewed"]
    assert reviewed["labels"] == count and reviewed["reviewers"][0]["name"] == "Grace Hopper"

    # another pipeline's answers to the same questions (other words, the same ids)
    answers = tmp_path / "answers.jsonl"
    rows = [r | {"answer": r["answer"] + " Ask us."} for r in _labelled(count, wrong_every=3)]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    other = tmp_path / "other"
    checked = runner.invoke(
        cli,
        ["check", "--answers", str(answers), "--out", str(other), "--examples", str(saved), "-q"],
    )
    assert checked.exit_code == 0, checked.output
    examples = {
        r["id"]: r.get("examples") for r in map(json.loads, (other / "checks.jsonl").open())
    }
    assert examples == {ident: [f"run/{ident}"] for ident in truth}, checked.stderr

    calibrated = runner.invoke(
        cli, ["calibrate", "--labels", str(saved), "--out", str(tmp_path / "cal"), "-q"]
    )
    assert calibrated.exit_code == 0, calibrated.output
    calibration = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert calibration["answers"] == count
    assert calibration["hallucinated"] == sum(truth.values())
