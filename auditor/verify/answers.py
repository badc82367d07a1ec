"""The answers a check reads: a run dir's records, or answers another system produced."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from auditor.errors import BadInput
from auditor.files import utc_now
from auditor.jsonl import iter_objects, labelled_id
from auditor.retrieve import chunks_by_id
from auditor.review import run_fingerprint
from auditor.run_shapes import check_totals
from auditor.store import (
    MANIFEST,
    RECORDS,
    RecordWriter,
    read_records,
    read_run_manifest,
    torn_note,
    write_run_manifest,
)
from auditor.verify.base import Reference

log = logging.getLogger(__name__)

__all__ = [
    "SOURCE_CHOICES",
    "AnswerItem",
    "AnswersFile",
    "Sources",
    "answers_from_labels",
    "choose_sources",
    "import_answers",
    "items_from_rows",
    "items_from_run",
    "read_answers",
    "refuse_other_answers",
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
    # what the question is called where answers were labelled (judge `examples` match by it)
    source_id: str | None = None
    # what people said of other answers to the question, for the verdict prompt (judge
    # `examples_in = "prompt"`); filled while checking
    reviewed: tuple[Reference, ...] = ()
    shown: tuple[Reference, ...] = ()  # those its verdict prompts showed (closest to its claims)
    # the review fingerprint of the run it is from: an example labelled on that run's review
    # page under the same id is this very answer (never its own example)
    run: str | None = None
    # a traced answer whose trace named its passages by id only (auditor.traces): looked up
    # by id in the knowledge base given to the check (`choose_sources`)
    document_ids: list[str] = field(default_factory=list)

    @property
    def pool(self) -> list[tuple[str, str]]:
        """Every chunk a claim may be checked against: returned ones first, then the KB's."""
        return self.chunks + self.kb_chunks


def items_from_run(run_dir: Path) -> list[AnswerItem]:
    """The answers of a run dir (`auditor run` or `auditor check --answers`)."""
    path = run_dir / "records.jsonl"
    if not path.is_file():
        raise BadInput(f"{path}: missing; run `auditor run ... --out {run_dir}` first")
    manifest = read_run_manifest(run_dir)  # BadInput when corrupt or of another schema version
    torn: list[str] = []
    records = read_records(run_dir, torn=torn.append)
    for where in torn:
        _say_torn(where)
    items = items_from_rows(records, path)
    if manifest is not None:  # as many rows as the manifest says (appended to: refused)
        check_totals(run_dir, manifest, records, [], None, torn)
        fingerprint = run_fingerprint(manifest)
        for item in items:
            item.run = fingerprint
    return items


def _say_torn(where: str) -> None:
    log.warning(torn_note(where))


def items_from_rows(rows: list[dict[str, Any]], source: Path) -> list[AnswerItem]:
    """AnswerItems of records (records.jsonl rows); BadInput naming the file and line of a
    record that lacks a field a check needs, or holds it in another shape."""
    items = []
    for number, row in enumerate(rows, start=1):
        if not _is_record(row):
            raise BadInput(
                f"{source}:{_line_of_record(source, number)}: a record must be a JSON object "
                "with id, question, answer and retrieved (chunks with chunk_id and text); the "
                "file was edited by hand? re-run into a new --out"
            )
        items.append(
            AnswerItem(
                id=str(row["id"]),
                question=row["question"],
                answer=row.get("answer") or "",
                reference=row.get("reference"),
                chunks=[(c["chunk_id"], c["text"]) for c in row.get("retrieved") or []],
                error=row.get("error"),
                contexts_returned=bool(row.get("contexts_returned", True)),
                source_id=None if row.get("source_id") in (None, "") else str(row["source_id"]),
                document_ids=[str(i) for i in row.get("unresolved_documents") or []],
            )
        )
    return items


def _is_record(row: Any) -> bool:
    """Whether a records.jsonl row holds what a check reads, in the shapes it reads them."""
    if not isinstance(row, dict):
        return False
    retrieved = row.get("retrieved") or []
    return (
        row.get("id") is not None
        and isinstance(row.get("question"), str)
        and isinstance(row.get("answer"), str | None)
        and isinstance(row.get("error"), str | None)
        and isinstance(retrieved, list)
        and all(
            isinstance(chunk, dict) and "chunk_id" in chunk and isinstance(chunk.get("text"), str)
            for chunk in retrieved
        )
    )


def _line_of_record(path: Path, number: int) -> int:
    """The line of a JSONL file that holds its `number`th record (blank lines hold none)."""
    filled = [n for n, line in enumerate(path.read_bytes().split(b"\n"), start=1) if line.strip()]
    return filled[number - 1] if number <= len(filled) else number


@dataclass(frozen=True)
class AnswersFile:
    """Answers produced elsewhere, read and validated (nothing written yet)."""

    path: Path
    sha256: str
    rows: list[dict[str, Any]]  # as records.jsonl holds them


def read_answers(answers_path: Path) -> AnswersFile:
    """Read and validate an answers file (id, question, contexts, answer, reference?); BadInput
    naming file and line on the first problem."""
    rows = []
    seen: dict[str, int] = {}
    # read first: a FIFO or a device is refused before anything else reads it
    for where, data in iter_objects(answers_path, "id, question, contexts, answer"):
        ident = labelled_id(where, data, seen)  # PIPELINE/ID for a review page's labels
        question, contexts = data.get("question"), data.get("contexts")
        answer, reference = data.get("answer"), data.get("reference")
        if not isinstance(question, str) or not isinstance(answer, str):
            raise BadInput(f'{where}: "question" and "answer" must be strings')
        if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
            raise BadInput(f'{where}: "contexts" must be a list of strings')
        if reference is not None and not isinstance(reference, str):
            raise BadInput(f'{where}: "reference" must be a string when present')
        source = data.get("source_id")
        rows.append(
            _answer_row(
                ident,
                question,
                contexts,
                answer,
                reference,
                None if source in (None, "") else str(source),
            )
        )
    return _answers_file(answers_path, _digest(answers_path), rows)


def answers_from_labels(path: Path, labels: Sequence[Any]) -> AnswersFile:
    """The labelled answers of a labels file (`auditor.labels`, settled: one per answer) as
    answers to check (`calibrate`), under their labelled ids."""
    rows = [
        _answer_row(
            label.labelled_id,
            label.question,
            list(label.contexts),
            label.answer,
            None,
            label.source_id,
        )
        for label in labels
    ]
    return _answers_file(path, _digest(path), rows)


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read answers file ({exc.strerror})") from exc


def _answer_row(
    ident: str,
    question: str,
    contexts: list[str],
    answer: str,
    reference: str | None,
    source: str | None,
) -> dict[str, Any]:
    """An answer as records.jsonl holds it."""
    return {
        "id": ident,
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
    } | ({"source_id": source} if source is not None else {})


def _answers_file(answers_path: Path, digest: str, rows: list[dict[str, Any]]) -> AnswersFile:
    if not rows:
        raise BadInput(f"{answers_path}: no answers")
    return AnswersFile(answers_path, digest, rows)


def _new_rows(answers: AnswersFile, out_dir: Path) -> list[dict[str, Any]]:
    """The rows of `answers` that `out_dir` does not hold yet (read only). A dir written from
    another file is refused unless that file's answers are all here unchanged: a labels or
    answers file that grew resumes into the same dir."""
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"{out_dir}: not a directory; give --out a dir to write")
    existing = read_run_manifest(out_dir)
    if existing is None:
        if (out_dir / RECORDS).exists():
            raise BadInput(f"{out_dir}: holds records.jsonl but no manifest; use another --out")
        return answers.rows
    manifest = out_dir / MANIFEST
    if existing.get("kind") != "answers":
        raise BadInput(
            f"{manifest}: this dir holds a run of pipeline "
            f"{existing.get('pipeline', {}).get('name')!r}, not imported answers; use another --out"
        )
    # every held row compared, the same file's too: an import cut short (or a last line torn)
    # resumes with the rows it lacks
    held = {str(row["id"]): row for row in read_records(out_dir)}
    given = {row["id"]: row for row in answers.rows}
    for ident, row in held.items():
        if ident not in given:
            raise BadInput(
                f"{manifest}: this dir holds answer {ident!r}, which {answers.path} lacks "
                "(answers from another file); use another --out"
            )
        # a dir written before answers kept their source_id holds the same answer without it
        if _without_source_id(given[ident], row) != row:
            raise BadInput(
                f"{manifest}: answer {ident!r} differs between this dir and {answers.path} "
                "(answers from another file); use another --out"
            )
    return [row for row in answers.rows if row["id"] not in held]


def _without_source_id(given: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
    return given if "source_id" in held else {k: v for k, v in given.items() if k != "source_id"}


def refuse_other_answers(answers: AnswersFile, out_dir: Path) -> None:
    """BadInput when `import_answers` would refuse `out_dir`, without writing anything."""
    _new_rows(answers, out_dir)


def import_answers(answers: AnswersFile | Path, out_dir: Path) -> list[AnswerItem]:
    """Answers produced elsewhere as a run dir.

    Writes OUT/records.jsonl and OUT/manifest.json (kind "answers", no timings), so the check
    resumes like any run and the report renders it with throughput "not measured". A file that
    grew (the same answers and more) appends the new ones.
    """
    if isinstance(answers, Path):
        answers = read_answers(answers)
    new = _new_rows(answers, out_dir)
    existing = read_run_manifest(out_dir) if out_dir.is_dir() else None
    source = {"path": str(answers.path), "sha256": answers.sha256, "count": len(answers.rows)}
    if existing is None or new or existing.get("source") != source:
        out_dir.mkdir(parents=True, exist_ok=True)
        manifest = (existing or {"started_at": utc_now()}) | {
            "schema_version": 1,
            "kind": "answers",
            "run_id": out_dir.name,
            "source": source,
            "status": "running",
            "load_regime": {"mode": "not measured"},
        }
        # "running" before the first row: an import cut short holds fewer rows than
        # source.count, never more (run_shapes.check_totals); "complete" once all are in
        write_run_manifest(out_dir, manifest)
        read_records(out_dir, repair=True)  # a torn last line cut off: appending goes on after it
        with RecordWriter(out_dir) as writer:
            for row in new:
                writer.write(row)
        write_run_manifest(out_dir, manifest | {"status": "complete"})
    return items_from_run(out_dir)


def run_retrieval(run_dir: Path) -> str:
    """Who retrieved a run's contexts: "auditor" (its own pipeline), "target" (a service that
    retrieves itself) or "answers" (imported from logs)."""
    manifest = read_run_manifest(run_dir) or {}
    if manifest.get("kind") in ("answers", "traces"):
        return str(manifest["kind"])
    for row in read_records(run_dir):
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
    if retrieval == "traces" and choice == "auto":
        _trace_sources(items, run_dir, kb_index)
        return
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


def _trace_sources(items: list[AnswerItem], run_dir: Path, kb_index: Path | None) -> None:
    """Traced answers (auto): each checked against the passages its trace recorded, those it
    named by id only looked up in the knowledge base; one left with none (no retriever span,
    or ids the knowledge base does not hold) against the knowledge base by retrieval, which
    then must be given."""
    named = [item for item in items if item.document_ids]
    if named and kb_index is not None:  # passages named by id: the knowledge base's own
        texts = chunks_by_id(kb_index, [i for item in named for i in item.document_ids])
        for item in named:
            item.chunks += [(i, texts[i]) for i in item.document_ids if i in texts]
    bare = [item for item in items if not item.chunks]
    if bare and kb_index is None:
        raise BadInput(
            f"{run_dir}: {len(bare)} of {len(items)} traced answers hold no passages (their "
            f"traces recorded none, or document ids only: {bare[0].id!r}); give --index KB_DIR "
            "(the trusted knowledge base) to check them against it"
        )
    for item in items:
        item.sources = "returned" if item.chunks else "kb"
