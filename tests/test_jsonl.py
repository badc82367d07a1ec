"""JSONL inputs people write: a byte-order mark is read past, bad bytes are named by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import BadInput
from auditor.jsonl import iter_objects
from auditor.questions import load_questions
from auditor.testing import FakeEmbedder, FakeJudge

BOM = "\ufeff".encode()


def test_a_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    """A file saved by Excel or Notepad (UTF-8 with BOM) reads as the same objects, and the
    mark does not shift the line a non-UTF-8 byte is named on."""
    path = tmp_path / "q.jsonl"
    path.write_bytes(BOM + b'{"id": "q1", "question": "How long?"}\n')
    assert list(iter_objects(path, "id and question")) == [
        (f"{path}:1", {"id": "q1", "question": "How long?"})
    ]
    assert [q.id for q in load_questions(path)] == ["q1"]
    path.write_bytes(BOM + b'{"id": "q1", "question": "a"}\n{"id": "q2", "question": "caf\xe9"}\n')
    with pytest.raises(BadInput) as refused:
        list(iter_objects(path, "id and question"))
    assert str(refused.value) == f"{path}:2: not UTF-8; convert it, e.g. iconv -f latin1 -t utf-8"


def test_answers_with_a_byte_order_mark_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check --answers` on an answers file with a BOM checks it (it refused line 1 before)."""
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    answers = tmp_path / "answers.jsonl"
    row = {"id": "a1", "question": "q?", "contexts": ["Thirty days."], "answer": "30 days."}
    answers.write_bytes(BOM + json.dumps(row).encode() + b"\n")
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["check", "--answers", str(answers), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert [
        json.loads(line)["id"] for line in (out / "records.jsonl").read_text().splitlines()
    ] == ["a1"]
