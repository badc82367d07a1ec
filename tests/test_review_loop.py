"""The review loop's rules, with the fake judge: only the drawn sample makes a rate, a sample
only grows, labels are checked against what they label (claims, runs, questions) before
anything starts, who reviewed is recorded, and one labels file (the review page's) serves
`report --labels`, `check|audit --examples` and `calibrate --labels`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.files import utc_now
from auditor.review import check_fingerprint, run_fingerprint
from auditor.verify.examples import ExampleBook
from tests.test_audit import DOCS, QUESTIONS
from tests.test_review import _checked, _labels
from tests.verify.test_calibrate import _labelled


def _fingerprint(run: Path) -> str:
    return run_fingerprint(json.loads((run / "manifest.json").read_text()))


def _drawn(run: Path, size: int) -> list[str]:
    done = CliRunner().invoke(cli, ["review", str(run), "--sample", str(size)])
    assert done.exit_code == 0, done.output
    return [s["id"] for s in json.loads((run / "review.json").read_text())["sample"]]


def _check_fingerprint(run: Path) -> str | None:
    return check_fingerprint(json.loads((run / "check.json").read_text()))


def _page_label(run: Path, ident: str, hallucinated: bool, **extra: Any) -> dict[str, Any]:
    """A label line as the review page writes it (the fields `report` reads)."""
    return {
        "id": ident,
        "pipeline": "run",
        "fingerprint": _fingerprint(run),
        "check_fingerprint": _check_fingerprint(run),
        "hallucinated": hallucinated,
        "reviewer": "Ana",
        "labelled_at": utc_now(),
    } | extra


def test_labels_outside_the_drawn_sample_are_refused_or_kept_out_of_the_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=30)
    drawn = _drawn(run, 12)
    outside = sorted({f"a{k}" for k in range(30)} - set(drawn))[:3]
    truth = {r["id"]: r["hallucinated"] for r in _labelled(30, wrong_every=3)}
    when = utc_now()
    rows = [_page_label(run, i, truth[i], labelled_at=when) for i in drawn + outside]
    labels = _labels(tmp_path / "labels.jsonl", rows)
    history = str(tmp_path / "h.db")
    runner = CliRunner()
    refused = runner.invoke(
        cli, ["report", str(run), "--labels", str(labels), "--history", history]
    )
    assert refused.exit_code == 2
    assert "3 labels of run for answers outside its drawn review sample" in refused.stderr
    assert f"labels.jsonl:{len(drawn) + 1}:" in refused.stderr
    assert not (run / "summary.json").exists(), "nothing written on a refusal"

    kept = runner.invoke(
        cli,
        [
            *("report", str(run), "--labels", str(labels), "--history", history),
            *("--labels-outside-sample", "keep"),
        ],
    )
    assert kept.exit_code == 0, kept.output
    reviewed = json.loads((run / "summary.json").read_text())["reviewed"]
    assert reviewed["labels"] == len(drawn) and reviewed["labels_outside_sample"] == 3
    assert reviewed["answer_rate"]["labels"] == len(drawn)
    # the agreement counts every label: 3 more answers than the rate
    agreement = reviewed["judge_sensitivity"], reviewed["judge_specificity"]
    assert agreement == (1.0, 1.0)
    assert reviewed["reviewers"] == [
        {
            "name": "Ana",
            "role": "first",
            "labels": 15,
            "first": when.replace("+00:00", "Z"),
            "last": when.replace("+00:00", "Z"),
        }
    ]
    assert (
        "reviewed by" in (run / "report.html").read_text()
        and "Ana (15" in (run / "report.html").read_text()
    )


def test_a_sample_only_grows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    drawn = _drawn(run, 8)
    shrunk = CliRunner().invoke(cli, ["review", str(run), "--sample", "3"])
    assert shrunk.exit_code == 2
    assert "8 answers are drawn; a sample only grows: give --sample 8 or more" in shrunk.stderr
    assert [s["id"] for s in json.loads((run / "review.json").read_text())["sample"]] == drawn
    assert _drawn(run, 10)[:8] == drawn


def test_a_mark_on_a_claim_the_answer_does_not_have_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    drawn = _drawn(run, 4)
    claims = {
        row["id"]: len(row["claims"])
        for row in map(json.loads, (run / "checks.jsonl").read_text().splitlines())
    }
    marked = {"index": claims[drawn[0]], "judge_right": False}  # one past the last claim
    labels = _labels(tmp_path / "l.jsonl", [_page_label(run, drawn[0], True, claims=[marked])])
    done = CliRunner().invoke(
        cli, ["report", str(run), "--labels", str(labels), "--history", str(tmp_path / "h")]
    )
    assert done.exit_code == 2
    assert f"l.jsonl:1: claim {claims[drawn[0]]} of answer {drawn[0]!r} is marked" in done.stderr


def test_audit_labels_are_checked_before_any_engine_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_corpus: Any, use_fake_embedder: Any
) -> None:
    from auditor.config import IngestConfig
    from auditor.generate.vllm_offline import VLLMGenerator
    from auditor.ingest import ingest_corpus

    def no_engine(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an engine started")

    monkeypatch.setattr(VLLMGenerator, "from_config", classmethod(no_engine))
    monkeypatch.setattr("auditor.verify.judges.make_judge", no_engine)
    index = tmp_path / "index"
    ingest_corpus(write_corpus(DOCS), index, IngestConfig(), use_fake_embedder)
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        'name = "p"\n[ingest.embedder]\nmodel = "fake-words"\n[generator]\nkind = "vllm"\n'
        'model = "smollm2-135m-instruct"\n',
        "utf-8",
    )
    out = tmp_path / "audit"
    base = [
        *("audit", "--pipeline", str(pipeline), "--questions", str(questions)),
        *("--index", str(index), "--out", str(out), "--history", str(tmp_path / "h.db"), "-q"),
    ]
    cases = [
        ({"id": "q9", "hallucinated": True}, "answer 'q9' is not among the questions this audit"),
        ({"id": "q1", "hallucinated": True, "pipeline": "x"}, "pipeline 'x' is not in"),
        (
            {"id": "q1", "hallucinated": True, "fingerprint": "0123abcd0123abcd"},
            "labelled on the review page of another run (fingerprint 0123abcd0123abcd, ",
        ),
        (  # the run begins after this: a label made before cannot be of its answers
            {"id": "q1", "hallucinated": True, "labelled_at": "2026-12-01T09:00:00Z"},
            '"labelled_at" 2026-12-01T09:00:00Z is before ',
        ),
    ]
    for row, message in cases:
        labels = _labels(tmp_path / "labels.jsonl", [row])
        done = CliRunner().invoke(cli, [*base, "--labels", str(labels)])
        assert done.exit_code == 2, done.output
        assert message in done.stderr and "labels.jsonl:1:" in done.stderr
        assert not out.exists(), "refused before anything is written"


def test_calibrate_refuses_a_span_past_the_end_of_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.verify.test_calibrate import _run

    rows = _labelled(24)
    rows[3]["spans"] = [{"start": 0, "end": len(rows[3]["answer"]) + 1}]
    result, out = _run(tmp_path, rows, monkeypatch)
    assert result.exit_code == 2
    assert 'labels.jsonl:4: each of "spans" must be' in result.stderr
    assert f"<= the answer's length ({len(rows[3]['answer'])})" in result.stderr
    assert not (out / "checks.jsonl").exists()


def test_examples_from_a_review_page_skip_only_the_answer_they_label(tmp_path: Path) -> None:
    """Two pipelines' answers to question q1 labelled on their pages share the id q1: checking
    pipeline a's run, a's own label is left out and b's is an example (and the other way)."""
    rows = [
        {
            "id": "q1", "pipeline": name, "fingerprint": run, "hallucinated": name == "b",
            "question": "How long is the warranty?", "answer": f"Answer of {name}.",
            "contexts": ["The warranty lasts 2 years."], "source_id": "q1", "spans": [],
        }
        for name, run in (("a", "run-a"), ("b", "run-b"))
    ]  # fmt: skip
    book = ExampleBook.load(_labels(tmp_path / "labels.jsonl", rows))
    assert [e.id for e in book.examples] == ["a/q1", "b/q1"]
    of_a = book.for_answer("q1", "How long is the warranty?", None, run="run-a")
    assert [e.id for e in of_a] == ["b/q1"]
    of_b = book.for_answer("q1", "How long is the warranty?", None, run="run-b")
    assert [e.id for e in of_b] == ["a/q1"]
    # a run nobody reviewed: both are examples; an answer whose run is unknown: its words
    # decide (the same words are the same answer), and without them the id
    assert len(book.for_answer("q1", "How long is the warranty?", None, run="run-c")) == 2
    same = book.for_answer("q1", "How long is the warranty?", None, answer="Answer of a.")
    assert [e.id for e in same] == ["b/q1"]
    other = book.for_answer("q1", "How long is the warranty?", None, answer="Another answer.")
    assert len(other) == 2
    assert book.for_answer("q1", "How long is the warranty?", None) == []
    # the labels file as calibrate's answers (ids PIPELINE/ID): each skips only itself
    assert [e.id for e in book.for_answer("a/q1", "How long is the warranty?", "q1")] == ["b/q1"]
