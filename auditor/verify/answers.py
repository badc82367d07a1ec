"""The answers a check reads: a run dir's records, or answers another system produced."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from auditor.errors import BadInput
from auditor.files import utc_now
from auditor.jsonl import iter_objects
from auditor.store import RecordWriter, read_jsonl, read_run_manifest, write_run_manifest

__all__ = [
    "SOURCE_CHOICES",
    "AnswerItem",
    "Sources",
    "choose_sources",
    "import_answers",
    "items_from_run",
    "run_retrieval",
]


Sources = Literal["returned", "kb", "both"]


@dataclass
class AnswerItem:
    """One answer to check, with the chunks it was given.

    `sources` says what its claims are checked against: the chunks the pipeline returned
    (`chunks`), chunks the auditor retrieves from the trusted knowledge base for each claim
    (`kb_chunks`, filled while checking), or both.
    """

    id: str
    question: str
    answer: str
    reference: str | None
    chunks: list[tuple[str, str]]  # (chunk id, text) the pipeline used, in rank order
    error: str | None = None
    contexts_returned: bool = True  # False: a target that returns no contexts
    sources: Sources = "returned"
    kb_chunks: list[tuple[str, str]] = field(default_factory=list)

    @property
    def pool(self) -> list[tuple[str, str]]:
        """Every chunk a claim may be checked against: returned ones first, then the KB's."""
        return self.chunks + self.kb_chunks


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
                contexts_returned=bool(row.get("contexts_returned", True)),
            )
        )
    return items


def import_answers(answers_path: Path, out_dir: Path) -> list[AnswerItem]:
    """Answers produced elsewhere (id, question, contexts, answer, reference?) as a run dir.

    Writes OUT/records.jsonl and OUT/manifest.json (kind "answers", no timings) once, so the
    check resumes like any run and the report renders it with throughput "not measured".
    """
    import hashlib

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


def run_retrieval(run_dir: Path) -> str:
    """Who retrieved a run's contexts: "auditor" (its own pipeline), "target" (a service that
    retrieves itself) or "answers" (imported from logs)."""
    manifest = read_run_manifest(run_dir) or {}
    if manifest.get("kind") == "answers":
        return "answers"
    for row in read_jsonl(run_dir / "records.jsonl"):
        return str(row.get("retrieval", "auditor"))
    return "auditor"


SOURCE_CHOICES = ("auto", "returned", "kb", "both")


def choose_sources(
    items: list[AnswerItem], run_dir: Path, choice: str, kb_index: Path | None
) -> None:
    """Set what each answer's claims are checked against, from `--sources` (see README).

    auto: the returned chunks for the auditor's own pipelines and imported answers (they came
    from the trusted index, or are all there is); for a target that retrieves itself, both its
    returned contexts and the knowledge base, or the knowledge base alone when it returned none.
    """
    retrieval = run_retrieval(run_dir)
    returned_any = any(item.contexts_returned and item.chunks for item in items)
    if choice == "auto":
        choice = ("both" if returned_any else "kb") if retrieval == "target" else "returned"
        if choice != "returned" and kb_index is None:
            reason = "returns no contexts" if choice == "kb" else "retrieves for itself"
            raise BadInput(
                f"{run_dir}: the target {reason}; give --index KB_DIR (the trusted knowledge "
                "base) to check its claims against it, or --sources returned"
                + ("" if choice == "kb" else " to trust its contexts")
            )
    if choice in ("kb", "both") and kb_index is None:
        raise BadInput(f"--sources {choice} needs --index KB_DIR (the trusted knowledge base)")
    if choice == "returned" and retrieval == "target" and not returned_any:
        raise BadInput(
            f"{run_dir}: the target returned no contexts; check against the knowledge base "
            "with --sources kb --index KB_DIR"
        )
    for item in items:
        sources: Sources = choice  # type: ignore[assignment]
        if sources == "both" and not item.contexts_returned:
            sources = "kb"
        item.sources = sources
