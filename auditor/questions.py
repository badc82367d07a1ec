"""Question sets: JSONL with `id`, `question` and an optional `reference` per line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.errors import BadInput
from auditor.jsonl import iter_objects, unique_id

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
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for where, row in iter_objects(path, "id and question"):
        qid = unique_id(where, row.pop("id", None), seen)
        text, reference = row.pop("question", None), row.pop("reference", None)
        if not isinstance(text, str) or not text.strip():
            raise BadInput(f'{where}: missing or empty "question" (a string)')
        if reference is not None and not isinstance(reference, str):
            raise BadInput(f'{where}: "reference" must be a string when present')
        questions.append(Question(id=qid, question=text.strip(), reference=reference, metadata=row))
    if not questions:
        raise BadInput(f"{path}: no questions; one JSON object per line with id and question")
    return questions
