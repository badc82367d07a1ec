"""`run_pipeline`: retrieve and generate for every question, recording what happened and how fast.

Writes `RUN_DIR/manifest.json` and appends to `RUN_DIR/records.jsonl` as answers complete.
The same call on the same dir resumes: questions already recorded are skipped, so nothing is
duplicated or lost. Each resumed stretch is a session in the manifest, and throughput is
output tokens over the summed generation wall time of all sessions.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor import generate
from auditor.config import SELF_RETRIEVING, PipelineConfig, config_sha256
from auditor.errors import AuditorError, BadInput
from auditor.files import utc_now
from auditor.generate.base import GenRequest, GenResult
from auditor.generate.prompts import build_messages
from auditor.ingest.manifest import MANIFEST_NAME, read_manifest
from auditor.questions import Question, load_questions
from auditor.retrieve import Retriever
from auditor.store import (
    ENGINE_LOG,
    RUN_SCHEMA_VERSION,
    RecordWriter,
    read_records,
    read_run_manifest,
    write_run_manifest,
)
from auditor.timings import StageTimes
from auditor.versions import package_versions

__all__ = ["RunCallbacks", "RunSummary", "plan_run", "run_pipeline", "summarize_records"]


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class RunCallbacks:
    """Progress hooks for the CLI; the defaults do nothing."""

    def stage(self, message: str) -> None:
        """A phase starts (retrieval, model preparation, engine start, generation)."""

    def bytes(self, done: int, total: int) -> None:
        """Model preparation progress."""

    def start_generation(self, total: int) -> None:
        """Generation of `total` requests starts."""

    def result(self, record: dict[str, Any]) -> None:
        """A record was written."""


@dataclass
class RunSummary:
    """Figures printed after a run, computed from all its records."""

    run_dir: Path
    requests: int
    completed: int
    errors: int
    output_tokens: int
    generation_s: float
    tokens_per_s: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    tpot_p50_s: float | None
    e2e_p95_s: float | None
    regime: dict[str, Any] = field(default_factory=dict)
    skipped: int = 0


def _percentile(values: list[float], q: float) -> float | None:
    import numpy as np

    return float(np.percentile(values, q)) if values else None


def summarize_records(
    run_dir: Path, records: list[dict[str, Any]], manifest: dict[str, Any]
) -> RunSummary:
    """Throughput and latency percentiles over the records of a run."""
    ok = [r for r in records if not r.get("error")]
    tokens = sum(int(r.get("output_tokens") or 0) for r in ok)
    wall = sum(float(s.get("generation_s") or 0.0) for s in manifest.get("sessions", []))
    ttft = [float(r["ttft_s"]) for r in ok if r.get("ttft_s") is not None]
    tpot = [float(r["tpot_s"]) for r in ok if r.get("tpot_s") is not None]
    e2e = [float(r["e2e_s"]) for r in ok if r.get("e2e_s") is not None]
    return RunSummary(
        run_dir=run_dir,
        requests=len(records),
        completed=len(ok),
        errors=len(records) - len(ok),
        output_tokens=tokens,
        generation_s=wall,
        tokens_per_s=tokens / wall if wall > 0 else None,
        ttft_p50_s=_percentile(ttft, 50),
        ttft_p95_s=_percentile(ttft, 95),
        tpot_p50_s=_percentile(tpot, 50),
        e2e_p95_s=_percentile(e2e, 95),
        regime=manifest.get("load_regime", {}),
    )


def _host() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
    }


def _totals(summary: RunSummary) -> dict[str, Any]:
    """manifest.json's totals: what records.jsonl holds (`run_shapes.check_totals` holds a run
    dir to them)."""
    return {
        "requests": summary.requests,
        "completed": summary.completed,
        "errors": summary.errors,
        "output_tokens": summary.output_tokens,
        "generation_s": round(summary.generation_s, 6),
        "tokens_per_s": summary.tokens_per_s,
    }


def _close_killed_sessions(manifest: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """A session whose end never ran (killed mid-answer: no "completed") is closed with the
    records it left (those past the totals), marked interrupted, and the totals made those of
    every record: a resumed run's manifest agrees with its records.jsonl again."""
    killed = [s for s in manifest.get("sessions") or [] if s.get("completed") is None]
    if not killed:
        return
    before = int((manifest.get("totals") or {}).get("requests") or 0)
    for session in killed:
        session |= {"completed": max(0, len(records) - before), "interrupted": True}
        before = len(records)
    manifest["totals"] = _totals(summarize_records(Path("."), records, manifest))


def _check_compatible(existing: dict[str, Any], fresh: dict[str, Any], run_dir: Path) -> None:
    """A resumed run must be the same audit: same config, index and question set."""
    for key, label in (
        ("pipeline.sha256", "pipeline config"),
        ("index.manifest_sha256", "index"),
        ("questions.sha256", "question set"),
    ):
        section, _, name = key.partition(".")
        if existing.get(section, {}).get(name) != fresh[section][name]:
            raise BadInput(
                f"{run_dir / 'manifest.json'}: this run dir holds a run with another {label}; "
                "use another --out dir to audit a changed setup (or delete this one)"
            )


def _record(
    question: Question, hits: list[Any] | None, request: GenRequest, result: GenResult
) -> dict[str, Any]:
    """One records.jsonl line. `hits` is None for a target that retrieves itself: then
    `retrieved` holds the contexts it returned (`retrieval: "target"`), or none."""
    if hits is None:
        retrieved = list(result.contexts or [])
    else:
        retrieved = [
            {
                "chunk_id": hit.chunk.chunk_id,
                "document": hit.chunk.document,
                "page": hit.chunk.page,
                "score": round(hit.score, 6),
                "text": hit.chunk.text,
            }
            for hit in hits
        ]
    return {
        "id": question.id,
        "question": question.question,
        "reference": question.reference,
        "retrieval": "auditor" if hits is not None else "target",
        "contexts_returned": hits is not None or result.contexts is not None,
        "retrieved": retrieved,
        "messages": list(request.messages),
        "prompt": result.prompt_text,
        "answer": result.text,
        "prompt_tokens": result.prompt_tokens,
        "output_tokens": result.output_tokens,
        "finish_reason": result.finish_reason,
        "arrival_time": result.arrival_time,
        "first_token_time": result.first_token_time,
        "last_token_time": result.last_token_time,
        "ttft_s": result.ttft_s,
        "tpot_s": result.tpot_s,
        "e2e_s": result.e2e_s,
        "itl_s": result.itl_s,
        "error": result.error,
        "attempts": result.attempts,
        "endpoint": result.endpoint,
        "engine": result.engine,
    }


def plan_run(
    config: PipelineConfig,
    questions_path: Path,
    index_dir: Path,
    run_dir: Path,
    limit: int | None = None,
) -> tuple[list[Question], dict[str, Any]]:
    """The questions to answer and the run manifest to write, every input validated and
    nothing written: `run` and `audit` call it before any engine or cluster starts.

    Raises:
        BadInput: no generator in the config, bad question file, missing or incompatible
            index, or a run dir that holds another audit.
    """
    if config.generator is None:
        raise BadInput(
            f"pipeline {config.name!r} has no [generator] table; add one (see pipelines/*.toml)"
        )
    questions = load_questions(questions_path)
    if limit is not None:
        questions = questions[:limit]
    index_manifest = read_manifest(index_dir)
    wanted = config.ingest.embedder.model
    if wanted not in (index_manifest.embedder.name, index_manifest.embedder.source):
        raise BadInput(
            f"{index_dir / MANIFEST_NAME}: index built with embedder {index_manifest.embedder.name}, "
            f"pipeline {config.name!r} expects {wanted}; ingest with this pipeline "
            f"(auditor ingest CORPUS --index DIR --pipeline ...)"
        )
    fresh: dict[str, Any] = {
        "schema_version": RUN_SCHEMA_VERSION,
        "run_id": run_dir.name,
        "pipeline": {
            "name": config.name,
            "sha256": config_sha256(config),
            "config": config.model_dump(mode="json"),
        },
        "index": {
            "path": str(index_dir),
            "manifest_sha256": _sha256_file(index_dir / MANIFEST_NAME),
            "generation": index_manifest.generation,
            "embedder": index_manifest.embedder.model_dump(),
            "documents": index_manifest.totals["documents"],
            "chunks": index_manifest.totals["chunks"],
        },
        "questions": {
            "path": str(questions_path),
            "sha256": _sha256_file(questions_path),
            "count": len(questions),
        },
        "seed": config.generator.sampling.seed,
        "host": _host(),
        "packages": package_versions(),
    }
    if run_dir.exists() and not run_dir.is_dir():
        raise BadInput(f"{run_dir}: not a directory; choose another --out dir")
    manifest: dict[str, Any] | None = read_run_manifest(run_dir) if run_dir.is_dir() else None
    if manifest is None:
        if run_dir.is_dir() and any(p.name != ENGINE_LOG for p in run_dir.iterdir()):
            raise BadInput(f"{run_dir}: not empty and not a run dir; choose another --out dir")
        manifest = fresh | {"started_at": utc_now(), "status": "running", "sessions": []}
    else:
        _check_compatible(manifest, fresh, run_dir)
        manifest["packages"] = fresh["packages"]
    return questions, manifest


def run_pipeline(
    config: PipelineConfig,
    questions_path: Path,
    index_dir: Path,
    run_dir: Path,
    *,
    limit: int | None = None,
    callbacks: RunCallbacks | None = None,
    generator_factory: Callable[..., Any] | None = None,
    times: StageTimes | None = None,
) -> RunSummary:
    """Run (or resume) the pipeline over the question set; see the module docstring.

    With `times`, the wall seconds of retrieval, the engine's start (the generator factory:
    model preparation included unless the caller prepared the model), generation and the
    engine's stop are added to its rows for this pipeline.

    Raises:
        BadInput: no generator in the config, bad question file, missing or incompatible
            index, or a run dir that holds another audit.
        AuditorError: every request failed.
    """

    callbacks = callbacks or RunCallbacks()

    def timed(stage: str) -> AbstractContextManager[Any]:
        return nullcontext() if times is None else times.time(stage, config.name)

    questions, manifest = plan_run(config, questions_path, index_dir, run_dir, limit)
    assert config.generator is not None  # plan_run refused a pipeline without one
    run_dir.mkdir(parents=True, exist_ok=True)
    records = read_records(run_dir, repair=True)
    _close_killed_sessions(manifest, records)
    done = {r["id"] for r in records}
    todo = [q for q in questions if q.id not in done]
    if not todo:  # every question answered: the totals are those of every record
        summary = summarize_records(run_dir, records, manifest)
        manifest["status"] = "complete"
        manifest["totals"] = _totals(summary)
        write_run_manifest(run_dir, manifest)
        summary.skipped = len(questions)
        return summary
    write_run_manifest(run_dir, manifest)

    prepared: dict[str, tuple[Question, list[Any] | None, GenRequest]] = {}
    if config.generator.kind in SELF_RETRIEVING:
        # the target retrieves and prompts itself: it gets the bare question
        for question in todo:
            request = GenRequest(question.id, (), question=question.question)
            prepared[question.id] = (question, None, request)
    else:
        callbacks.stage(f"retrieving top-{config.retrieval.top_k} chunks for {len(todo)} questions")
        with timed("retrieval"):
            retriever = Retriever.open(index_dir, device=config.ingest.embedder.device)
            for question in todo:
                hits = retriever.search(question.question, k=config.retrieval.top_k)
                messages = build_messages(config.prompt, question.question, hits)
                request = GenRequest(question.id, messages, question=question.question)
                prepared[question.id] = (question, hits, request)
            del retriever

    factory = generator_factory or generate.make_generator
    with timed("engine start"):
        generator = factory(config.generator, on_stage=callbacks.stage, on_bytes=callbacks.bytes)
    manifest["model"] = generator.identity()
    # generation_s from the start: a session stopped before generating is written with 0 s.
    # The session is in the manifest before its first record: one killed mid-answer (its end
    # never runs) is told by its missing "completed", and records.jsonl may hold up to its
    # `requests` rows past the totals (run_shapes.check_totals); the next resume closes it.
    session: dict[str, Any] = {"started_at": utc_now(), "requests": len(todo), "generation_s": 0.0}
    manifest["sessions"].append(session)
    manifest["status"] = "running"
    write_run_manifest(run_dir, manifest)
    new_records: list[dict[str, Any]] = []
    try:
        callbacks.start_generation(len(todo))
        with RecordWriter(run_dir) as writer:

            def on_result(result: GenResult) -> None:
                question, hits, request = prepared[result.request_id]
                record = _record(question, hits, request, result)
                writer.write(record)
                new_records.append(record)
                callbacks.result(record)

            started = time.perf_counter()
            try:
                with timed("generation"):
                    stats = generator.generate([p[2] for p in prepared.values()], on_result)
                session["generation_s"] = stats.wall_s
                manifest["load_regime"] = stats.regime
            except BaseException:
                # interrupted: the records written so far stand; count their time too
                session["generation_s"] = time.perf_counter() - started
                session["interrupted"] = True
                raise
    finally:
        session["finished_at"] = utc_now()
        session["completed"] = len(new_records)
        with timed("engine stop"):
            generator.close()
        all_records = records + new_records
        complete = {r["id"] for r in all_records} >= {q.id for q in questions}
        manifest["status"] = "complete" if complete else "partial"
        manifest["finished_at"] = utc_now()
        summary = summarize_records(run_dir, all_records, manifest)
        manifest["totals"] = _totals(summary)
        write_run_manifest(run_dir, manifest)
    if new_records and all(r.get("error") for r in new_records):
        first = new_records[0]["error"]
        raise AuditorError(f"every request failed ({len(new_records)}); first error: {first}")
    summary.skipped = len(questions) - len(todo)
    return summary
