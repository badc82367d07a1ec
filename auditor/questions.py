"""Question sets: JSONL with `id`, `question` and an optional `reference` per line."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.errors import BadInput

__all__ = ["Question", "load_questions"]


@dataclass(frozen=True)
class Question:
    """One question to put to the pipeline; extra fields are kept as metadata."""

    id: str
    question: str
    reference: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def load_questions(path: Path) -> list[Question]:
    """Read and validate a question set; BadInput naming file and line on the first problem."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise BadInput(f"{path}: no such question file") from exc
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8; convert it, e.g. iconv -f latin1 -t utf-8") from exc
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(
                f"{where}: not valid JSON ({exc.msg}); one JSON object per line"
            ) from exc
        if not isinstance(row, dict):
            raise BadInput(f"{where}: expected a JSON object with id and question")
        qid, text, reference = (
            row.pop("id", None),
            row.pop("question", None),
            row.pop("reference", None),
        )
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        if not isinstance(qid, str) or not qid.strip():
            raise BadInput(f'{where}: missing or empty "id" (a string unique in the file)')
        if not isinstance(text, str) or not text.strip():
            raise BadInput(f'{where}: missing or empty "question" (a string)')
        if reference is not None and not isinstance(reference, str):
            raise BadInput(f'{where}: "reference" must be a string when present')
        if qid in seen:
            raise BadInput(
                f"{where}: duplicate id {qid!r} (first on line {seen[qid]}); ids must be unique"
            )
        seen[qid] = number
        questions.append(Question(id=qid, question=text.strip(), reference=reference, metadata=row))
    if not questions:
        raise BadInput(f"{path}: no questions; one JSON object per line with id and question")
    return questions
