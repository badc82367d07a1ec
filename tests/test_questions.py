"""Question sets: the bundled one validates; bad lines are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.errors import BadInput
from auditor.questions import load_questions
from tests.conftest import KESTREL


def test_bundled_question_set() -> None:
    """The Kestrel set has 30-50 questions with references, some unanswerable, docs that exist."""
    questions = load_questions(KESTREL / "questions.jsonl")
    assert 30 <= len(questions) <= 50
    assert all(q.reference for q in questions)
    unanswerable = [q for q in questions if not q.metadata["documents"]]
    assert 3 <= len(unanswerable) < len(questions) // 2
    for q in questions:
        for doc in q.metadata["documents"]:
            assert (KESTREL / "docs" / doc).is_file(), (q.id, doc)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "question": "q"}\n{"id": "b", "question": \n', r":2: not valid JSON"),
        ('{"id": "a", "question": "q"}\n[1, 2]\n', r":2: expected a JSON object"),
        ('{"question": "q"}\n', r":1: missing or empty \"id\""),
        ('{"id": "a", "question": "  "}\n', r":1: missing or empty \"question\""),
        ('{"id": "a", "question": "q", "reference": 3}\n', r":1: \"reference\" must be a string"),
        (
            '{"id": "a", "question": "q"}\n\n{"id": "a", "question": "r"}\n',
            r":3: duplicate id 'a' \(first on line 1\)",
        ),
        ("\n\n", r"no questions"),
    ],
    ids=[
        "bad-json",
        "not-object",
        "no-id",
        "blank-question",
        "bad-reference",
        "duplicate",
        "empty",
    ],
)
def test_bad_question_lines(tmp_path: Path, content: str, message: str) -> None:
    """Each malformed line is named by file and line number with what to fix."""
    path = tmp_path / "q.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BadInput, match=message):
        load_questions(path)


def test_line_separators_inside_json_strings_are_text(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are legal raw inside JSON strings: they do not end a line."""
    path = tmp_path / "q.jsonl"
    rows = [
        {"id": "a", "question": "Warranty?\u2028Which one?"},
        {"id": "b", "question": "Returns\u2029policy\u0085today?"},
    ]
    path.write_text(
        "\r\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\r\n", encoding="utf-8"
    )
    questions = load_questions(path)
    assert [q.question for q in questions] == [row["question"] for row in rows]
