"""The answers a check reads: a run dir's records, or answers another system produced."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from auditor.errors import BadInput
from auditor.ingest.manifest import utc_now
from auditor.jsonl import iter_objects
from auditor.store import RecordWriter, read_jsonl, read_run_manifest

__all__ = ["AnswerItem", "import_answers", "items_from_run"]


@dataclass
class AnswerItem:
    """One answer to check, with the chunks it was given."""

    id: str
    question: str
    answer: str
    reference: str | None
    chunks: list[tuple[str, str]]  # (chunk id, text), in rank order
    error: str | None = None


def items_from_run(run_dir: Path) -> list[AnswerItem]:
    """The answers of a run dir (`auditor run` or `auditor check --answers`)."""
    path = run_dir / "records.jsonl"
    if not path.is_file():
        raise BadInput(f"{path}: missing; run `auditor run ... --out {run_dir}` first")
    read_run_manifest(run_dir)  # BadInput when corrupt or of another schema version
    items = []
    for row in read_jsonl(path):
        items.append(
            AnswerItem(
                id=str(row["id"]),
                question=row["question"],
                answer=row.get("answer") or "",
                reference=row.get("reference"),
                chunks=[(c["chunk_id"], c["text"]) for c in row.get("retrieved", [])],
                error=row.get("error"),
            )
        )
    return items


def import_answers(answers_path: Path, out_dir: Path) -> list[AnswerItem]:
    """Answers produced elsewhere (id, question, contexts, answer, reference?) as a run dir.

    Writes OUT/records.jsonl and OUT/manifest.json (kind "answers", no timings) once, so the
    check resumes like any run and the report renders it with throughput "not measured".
    """
    import hashlib

    from auditor.store import read_run_manifest, write_run_manifest

    try:
        digest = hashlib.sha256(answers_path.read_bytes()).hexdigest()
    except OSError as exc:
        raise BadInput(f"{answers_path}: cannot read answers file ({exc.strerror})") from exc
    rows = []
    seen: set[str] = set()
    for where, data in iter_objects(answers_path, "id, question, contexts, answer"):
        ident, question, contexts = data.get("id"), data.get("question"), data.get("contexts")
        answer, reference = data.get("answer"), data.get("reference")
        if not isinstance(ident, str | int) or str(ident) in seen:
            raise BadInput(f'{where}: missing or duplicate "id"')
        if not isinstance(question, str) or not isinstance(answer, str):
            raise BadInput(f'{where}: "question" and "answer" must be strings')
        if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
            raise BadInput(f'{where}: "contexts" must be a list of strings')
        if reference is not None and not isinstance(reference, str):
            raise BadInput(f'{where}: "reference" must be a string when present')
        seen.add(str(ident))
        rows.append(
            {
                "id": str(ident),
                "question": question,
                "reference": reference,
                "retrieved": [
                    {
                        "chunk_id": f"context-{k}",
                        "document": None,
                        "page": None,
                        "score": None,
                        "text": text,
                    }
                    for k, text in enumerate(contexts, start=1)
                ],
                "answer": answer,
                "error": None,
            }
        )
    if not rows:
        raise BadInput(f"{answers_path}: no answers")
    out_dir.mkdir(parents=True, exist_ok=True)
    existing = read_run_manifest(out_dir)
    if existing is not None:
        if existing.get("source", {}).get("sha256") != digest:
            raise BadInput(
                f"{out_dir / 'manifest.json'}: this dir holds answers from another file; use another --out"
            )
    else:
        if (out_dir / "records.jsonl").exists():
            raise BadInput(f"{out_dir}: holds records.jsonl but no manifest; use another --out")
        with RecordWriter(out_dir) as writer:
            for row in rows:
                writer.write(row)
        write_run_manifest(
            out_dir,
            {
                "schema_version": 1,
                "kind": "answers",
                "run_id": out_dir.name,
                "source": {"path": str(answers_path), "sha256": digest, "count": len(rows)},
                "started_at": utc_now(),
                "status": "complete",
                "load_regime": {"mode": "not measured"},
            },
        )
    return items_from_run(out_dir)
