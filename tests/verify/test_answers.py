"""The answers a check reads: a damaged record is named by file and line, in words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import BadInput
from auditor.testing import FakeEmbedder, FakeJudge
from auditor.verify.answers import items_from_rows, items_from_run
from tests.test_faults_inputs import _good_run, _tree

RECORD = {
    "id": "q1",
    "question": "How long?",
    "answer": "30 days.",
    "retrieved": [{"chunk_id": "c1", "text": "Thirty days."}],
}
SHAPE = (
    "a record must be a JSON object with id, question, answer and retrieved (chunks with "
    "chunk_id and text); the file was edited by hand? re-run into a new --out"
)


@pytest.mark.parametrize(
    "damaged",
    [
        RECORD | {"retrieved": ["Thirty days."]},
        {k: v for k, v in RECORD.items() if k != "question"},
        RECORD | {"question": ["How long?"]},
        RECORD | {"id": None},
        RECORD | {"answer": 30},
        RECORD | {"retrieved": [{"chunk_id": "c1"}]},
        [1, 2],
    ],
    ids=[
        "chunks-as-strings",
        "no-question",
        "question-not-text",
        "null-id",
        "answer-not-text",
        "chunk-without-text",
        "not-an-object",
    ],
)
def test_a_damaged_record_is_named_by_its_line(tmp_path: Path, damaged: object) -> None:
    """The line counts blank lines (records do not); the message says what a record holds.
    Good records read as written (an integer id, the empty answer of a failed request)."""
    failed = RECORD | {"id": 7, "answer": None, "error": "timeout"}
    (item, unanswered) = items_from_rows([RECORD, failed], tmp_path / "good.jsonl")
    assert (item.id, item.question, item.answer) == ("q1", "How long?", "30 days.")
    assert item.chunks == [("c1", "Thirty days.")]
    assert (unanswered.id, unanswered.answer, unanswered.error) == ("7", "", "timeout")
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(RECORD) + "\n\n" + json.dumps(damaged) + "\n", encoding="utf-8")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    with pytest.raises(BadInput) as refused:
        items_from_rows(rows, path)
    assert str(refused.value) == f"{path}:3: {SHAPE}"


def test_check_refuses_a_run_whose_chunks_are_strings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`auditor check RUN` on a hand-edited record: one line, exit 2, nothing written (it said
    "record 1 lacks string indices must be integers, not 'str'" before)."""
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    run = _good_run(tmp_path)
    records = run / "records.jsonl"
    row = json.loads(records.read_text()) | {"retrieved": ["Thirty days."]}
    records.write_text(json.dumps(row) + "\n")
    (run / "checks.jsonl").unlink()
    before = _tree(tmp_path)
    result = CliRunner().invoke(cli, ["check", str(run)])
    assert result.exit_code == 2, result.output
    said = '"retrieved.0" must be an object, not str; the file was edited by hand? re-run into a new --out'
    assert result.stderr == f"Error: {records}:1: {said}\n"
    assert _tree(tmp_path) == before
    with pytest.raises(BadInput):
        items_from_run(run)
