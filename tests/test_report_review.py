"""The report's review section: the answers `auditor review` drew, in the order drawn,
with their questions, sources, claims and verdicts; mark buttons; the run's fingerprint for
the labels; injected markup shown as text; one line on how to draw a sample when none was."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.review import run_fingerprint
from tests.test_review import _checked
from tests.verify.test_calibrate import _fakes, _labelled

INJECTED = "<script>alert(1)</script> and <img src=x onerror=alert(2)>"


def _report(tmp_path: Path, *runs: Path) -> str:
    out = tmp_path / "report.html"
    done = CliRunner().invoke(
        cli,
        ["report", *map(str, runs), "--out", str(out), "--history", str(tmp_path / "h.db")],
    )
    assert done.exit_code == 0, done.output
    return out.read_text(encoding="utf-8")


def _review(run: Path, size: int, seed: int = 0) -> list[str]:
    done = CliRunner().invoke(cli, ["review", str(run), "--sample", str(size), "--seed", str(seed)])
    assert done.exit_code == 0, done.output
    return [s["id"] for s in json.loads((run / "review.json").read_text())["sample"]]


def _section(html: str) -> str:
    """The review section's markup, from its heading to the definitions."""
    start = html.index('<h2 id="review">')
    return html[start : html.index('<h2 id="definitions">', start)]


class _Items(HTMLParser):
    """The review items' data-id, the runs' data-fingerprint and every script's text."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.fingerprints: list[str] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "article" and "review-item" in (found.get("class") or ""):
            self.ids.append(str(found["data-id"]))
        if tag == "section" and "review-run" in (found.get("class") or ""):
            self.fingerprints.append(str(found["data-fingerprint"]))
        if tag == "script":
            self._script = found
            self.scripts.append((found, ""))

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None


def _parse(html: str) -> _Items:
    parser = _Items()
    parser.feed(html)
    return parser


def test_the_section_lists_exactly_the_sampled_answers_in_the_order_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch)
    sample = _review(run, 8, seed=5)
    assert sample != sorted(sample)  # the order drawn, not the ids' order
    html = _report(tmp_path, run)
    section = _section(html)
    parsed = _parse(section)
    assert parsed.ids == sample
    fingerprint = run_fingerprint(json.loads((run / "manifest.json").read_text()))
    assert parsed.fingerprints == [fingerprint] and re.fullmatch(r"[0-9a-f]{16}", fingerprint)
    assert 'id="review-progress-0"' in section and "0 of 8 reviewed" in section
    assert "8 of 30 answers drawn (uniform, seed 5)" in section
    assert "Download labels" in section
    # each item: its question, its sources, the answer's claims with verdicts and mark buttons
    first = section[section.index('id="rv-0-0"') : section.index('id="rv-0-1"')]
    row = next(r for r in _labelled(30, wrong_every=3) if r["id"] == sample[0])
    assert row["question"] in first and row["contexts"][0] in first
    assert 'class="review-claim" data-claim="0"' in first and 'class="badge v-' in first
    assert 'data-mark="yes"' in first and 'data-mark="no"' in first and "review-note" in first
    assert first.count('data-judge="right"') == first.count('class="review-claim"') >= 1
    # a wrong answer shows its contradicted claim, as the judge gave it
    wrong = [i for i in sample if int(i[1:]) % 3 == 0]
    assert wrong and section.count("v-contradicted") >= len(wrong)


def test_injected_markup_in_answers_and_questions_stays_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fakes(monkeypatch)
    rows = _labelled(6, wrong_every=3)
    rows[0]["answer"] = f"{INJECTED} {rows[0]['answer']}"
    rows[1]["question"] = f"{INJECTED}?"
    rows[2]["contexts"][0] = f"{INJECTED} {rows[2]['contexts'][0]}"
    rows[3]["id"] = 'a3"><img src=x onerror=alert(3)>'
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = tmp_path / "run"
    done = CliRunner().invoke(cli, ["check", "--answers", str(answers), "--out", str(run), "-q"])
    assert done.exit_code == 0, done.output
    sample = _review(run, 6)
    html = _report(tmp_path, run)
    section = _section(html)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert section.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3  # answer, question, source
    assert "&lt;img src=x onerror=alert(2)&gt;" in section
    parsed = _parse(html)
    assert parsed.ids == sample and rows[3]["id"] in parsed.ids  # the id round-trips as data
    # the only executable script is ours, admitted by the CSP's hash
    code = [text for attrs, text in parsed.scripts if attrs.get("type") is None]
    assert len(code) == 1 and "alert" not in code[0]
    digest = base64.b64encode(hashlib.sha256(code[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in html
    assert "auditor-review:" in code[0] and "labels.jsonl" in code[0]


def test_without_a_review_file_the_section_says_how_to_draw_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=6)
    section = _section(_report(tmp_path, run))
    assert "auditor review RUN_DIR --sample 40" in section and 'id="review-none"' in section
    assert "review-item" not in section and "Download labels" not in section
    # with two runs, one of them drawn: its items, and one line naming the other
    other = _checked(tmp_path, monkeypatch, count=6, name="other")
    sample = _review(other, 3)
    section = _section(_report(tmp_path, run, other))
    assert _parse(section).ids == sample and 'id="review-1"' in section
    assert 'id="review-unsampled"' in section and "No answers drawn for run:" in section


def test_a_damaged_review_file_is_one_line_and_the_report_is_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=6)
    (run / "review.json").write_text("{not json", encoding="utf-8")
    section = _section(_report(tmp_path, run))
    assert section.count('class="fail review-problem"') == 1 and "review.json" in section
    assert "review-item" not in section


def test_a_sample_drawn_for_another_run_is_flagged_and_not_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """review.json of another run: one line naming it, and none of its answers to label
    (their labels would be refused)."""
    run = _checked(tmp_path, monkeypatch, count=6)
    _review(run, 4)
    review: dict[str, Any] = json.loads((run / "review.json").read_text())
    review["fingerprint"] = "0123456789abcdef"
    (run / "review.json").write_text(json.dumps(review), encoding="utf-8")
    section = _section(_report(tmp_path, run))
    assert _parse(section).ids == []
    assert "drawn on another run (fingerprint 0123456789abcdef" in section
    assert section.count('class="fail review-problem"') == 1


def test_a_sample_naming_an_answer_the_run_does_not_have_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drawn id that is not among the run's checked answers is said to be that (not "has
    no label"), on the page and by `report --labels`."""
    run = _checked(tmp_path, monkeypatch, count=6)
    sample = _review(run, 4)
    review: dict[str, Any] = json.loads((run / "review.json").read_text())
    review["sample"][0]["id"] = "gone"
    (run / "review.json").write_text(json.dumps(review), encoding="utf-8")
    section = _section(_report(tmp_path, run))
    assert _parse(section).ids == []
    said = "names answer &#39;gone&#39;, which is not among"
    assert said in section and "6 checked answers" in section
    labels = tmp_path / "l.jsonl"
    labels.write_text(
        "".join(json.dumps({"id": i, "hallucinated": False}) + "\n" for i in sample[1:]),
        encoding="utf-8",
    )
    args = ["report", str(run), "--labels", str(labels), "--history", str(tmp_path / "h.db")]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2
    assert "\"sample\" names answer 'gone', which is not among" in done.stderr
    assert "has no label" not in done.stderr
