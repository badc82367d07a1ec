"""One trace's spans, joined into the answers it gave (records) or the reason it gave none.

A trace is one user request. Its **answering spans** are the top-most spans that hold an
answer: an OpenInference CHAIN (or a GenAI invoke_agent / invoke_workflow span) with an
output; where none does, each LLM / chat span with an output (a trace with two is two
turns: two records, `turn` 1 and 2 of `turns` 2, ids `TRACE-1`, `TRACE-2`). Each answer is
joined with:
- its passages: the retriever spans under it (else, one answer, every retriever of the
  trace; several, the retrievers outside every answer, each to the first answer ending
  after it began);
- its question: the CHAIN's input, else its retriever's query, else the chat's last user
  message;
- its engine span (vLLM `llm_request`): the one under it, else, one answer, the trace's
  last to end.
Timings say where each came from (`timing_sources`): end-to-end is the request's own span
(the trace's root when it holds one answer: what the user waited), time to first token the
client's `gen_ai.response.time_to_first_chunk` or else the engine's, TPOT the engine's
(e2e - TTFT) / (tokens - 1). A timing nobody recorded is absent, never zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from auditor.traces.conventions import SpanFacts

__all__ = ["SKIP_REASONS", "Assembled", "Skip", "assemble"]

# reason -> what the terminal and the report say of it
SKIP_REASONS = {
    "no_content": (
        "without an answer recorded (content capture off: set "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true; OpenInference: unset "
        "OPENINFERENCE_HIDE_OUTPUTS)"
    ),
    "no_llm_span": "with no LLM or chain span (not a question answered by a model)",
    "no_question": "without the question recorded",
    "error": "whose answering span ended in an error",
    "conflicting_spans": "with two different spans under one span id",
    "content_over_limit": "with an attribute over 1 MiB",
}


@dataclass(frozen=True)
class Skip:
    """A trace (or one turn of it) not imported, and why (a key of SKIP_REASONS)."""

    trace_id: str
    reason: str
    detail: str = ""
    span_id: str = ""

    def to_json(self) -> dict[str, Any]:
        row = {"trace_id": self.trace_id, "reason": self.reason}
        if self.span_id:
            row["span_id"] = self.span_id
        return row | ({"detail": self.detail} if self.detail else {})


@dataclass
class Assembled:
    """What one trace gave: its records, its skips, its start, and what was noticed."""

    trace_id: str
    start_s: float
    services: set[str]
    records: list[dict[str, Any]] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    duplicate_spans: int = 0
    clock_skew: bool = False


def assemble(trace_id: str, spans: Sequence[SpanFacts]) -> Assembled:
    """The records of one trace (every span of it, in any order, duplicates included)."""
    unique, duplicates, conflict = _dedupe(spans)
    by_id = {span.span_id: span for span in unique}
    # the request's root: the span without a parent; where the export lacks it, the earliest
    # span whose parent is missing (a span of another service may hang under an unexported one)
    roots = [s for s in unique if not s.parent_id] or [
        s for s in unique if s.parent_id not in by_id
    ]
    start_ns = min(s.start_ns for s in roots or unique)
    done = Assembled(
        trace_id,
        start_ns / 1e9,
        {s.service for s in unique},
        duplicate_spans=duplicates,
        clock_skew=any(
            s.parent_id in by_id and s.start_ns < by_id[s.parent_id].start_ns for s in unique
        ),
    )
    if conflict:
        done.skips.append(Skip(trace_id, "conflicting_spans", f"span {conflict}", conflict))
        return done
    oversized = next((s for s in unique if s.oversized), None)
    if oversized is not None:
        done.skips.append(
            Skip(trace_id, "content_over_limit", str(oversized.oversized), oversized.span_id)
        )
        return done
    answers = _answering(unique, by_id)
    if not answers:
        # model spans that hold no answer: the request failed before one was given (a model
        # span ended in an error: the top-most is named), else its content was not captured
        models = [s for s in unique if s.role in ("llm", "chain")]
        failed = min(
            (s for s in models if s.error), key=lambda s: (s.start_ns, s.span_id), default=None
        )
        if failed is not None:
            done.skips.append(Skip(trace_id, "error", failed.error or "", failed.span_id))
        else:
            done.skips.append(Skip(trace_id, "no_content" if models else "no_llm_span"))
        return done
    root = min(roots, key=lambda s: s.start_ns) if roots else None
    for turn, answer in enumerate(answers, start=1):
        ident = trace_id if len(answers) == 1 else f"{trace_id}-{turn}"
        failed = next((s for s in _lineage(answer, by_id) if s.error), None)
        if failed is not None:
            done.skips.append(Skip(ident, "error", failed.error or "", failed.span_id))
            continue
        record = _record(ident, answer, answers, unique, by_id, root)
        if not record["question"]:
            done.skips.append(Skip(ident, "no_question", "", answer.span_id))
            continue
        if len(answers) > 1:
            record |= {"turn": turn, "turns": len(answers)}
        done.records.append(record)
    return done


def _dedupe(spans: Sequence[SpanFacts]) -> tuple[list[SpanFacts], int, str | None]:
    """Spans once each (an exporter's retry sends a batch again), how many repeats were
    dropped, and the id of a span sent twice with different contents (None if none)."""
    seen: dict[str, SpanFacts] = {}
    duplicates = 0
    for span in spans:
        held = seen.get(span.span_id)
        if held is None:
            seen[span.span_id] = span
        elif held.to_json() == span.to_json():
            duplicates += 1
        else:
            return list(seen.values()), duplicates, span.span_id
    return list(seen.values()), duplicates, None


def _lineage(span: SpanFacts, by_id: dict[str, SpanFacts]) -> list[SpanFacts]:
    """The span and its ancestors (a cycle of parents, from damaged ids, stops)."""
    found, seen = [span], {span.span_id}
    while found[-1].parent_id in by_id and found[-1].parent_id not in seen:
        seen.add(found[-1].parent_id)
        found.append(by_id[found[-1].parent_id])
    return found


def _under(span: SpanFacts, ancestor: SpanFacts, by_id: dict[str, SpanFacts]) -> bool:
    return any(s.span_id == ancestor.span_id for s in _lineage(span, by_id)[1:])


def _answering(spans: list[SpanFacts], by_id: dict[str, SpanFacts]) -> list[SpanFacts]:
    """The top-most chains with an answer; else each LLM span with an answer; by start."""
    for role in ("chain", "llm"):
        holding = [s for s in spans if s.role == role and s.answer]
        top = [s for s in holding if not any(_under(s, other, by_id) for other in holding)]
        if top:
            return sorted(top, key=lambda s: (s.start_ns, s.span_id))
    return []


def _record(
    ident: str,
    answer: SpanFacts,
    answers: list[SpanFacts],
    spans: list[SpanFacts],
    by_id: dict[str, SpanFacts],
    root: SpanFacts | None,
) -> dict[str, Any]:
    alone = len(answers) == 1
    retrievers = _belonging(answer, answers, [s for s in spans if s.role == "retriever"], by_id)
    engines = _belonging(answer, answers, [s for s in spans if s.role == "server"], by_id)
    llms = [s for s in spans if s.role == "llm" and (s is answer or _under(s, answer, by_id))]
    # the model calls: LLM spans with no LLM span under them (OpenInference nests LlamaIndex's
    # LLM.predict over the LLM's own complete, which alone holds the token counts)
    calls = [s for s in llms if not any(o is not s and _under(o, s, by_id) for o in llms)]
    engine = max(engines, key=lambda s: s.end_ns) if engines else None
    llm = max(calls, key=lambda s: s.end_ns) if calls else None
    question = answer.question if answer.role == "chain" else None
    question = question or next((r.question for r in retrievers if r.question), None)
    question = question or (llm.question if llm is not None else None)
    timings, sources = _timings(answer, engine, llm, root if alone else None, by_id)
    model = next((s.model for s in (engine, llm, answer) if s is not None and s.model), None)
    documents = [d for r in sorted(retrievers, key=lambda s: s.start_ns) for d in r.documents]
    retrieved = [
        {
            "chunk_id": document["id"] or f"{retriever_id(retrievers, document)}-{n}",
            "text": document["text"],
            "document": document["document"],
            "score": document["score"],
        }
        for n, document in enumerate(documents, start=1)
    ]
    unresolved = [r["chunk_id"] for r in retrieved if r["text"] is None]
    started = (root if alone and root is not None else answer).start_ns
    conventions = sorted(
        {s.convention for s in (answer, engine, llm, *retrievers) if s and s.convention}
    )
    record: dict[str, Any] = {
        "id": ident,
        "trace_id": answer.trace_id,
        "span_id": answer.span_id,
        "service": answer.service,
        "question": question or "",
        "answer": answer.answer,
        "reference": None,
        "retrieved": [r for r in retrieved if r["text"] is not None],
        "retrieval": "traces",
        "contexts_returned": bool(retrieved) and not unresolved,
        "model": model,
        "started_at": _iso(started),
        "arrival_time": started / 1e9,
        "llm_calls": max(len(engines), len(calls)),
        "conventions": conventions,
        "timing_sources": sources,
        "error": None,
        **timings,
    }
    if unresolved:
        record["unresolved_documents"] = unresolved
    return record


def retriever_id(retrievers: list[SpanFacts], document: dict[str, Any]) -> str:
    """The span id of the retriever a passage came from (names a passage without an id)."""
    return next((r.span_id for r in retrievers if any(d is document for d in r.documents)), "doc")


def _belonging(
    answer: SpanFacts,
    answers: list[SpanFacts],
    candidates: list[SpanFacts],
    by_id: dict[str, SpanFacts],
) -> list[SpanFacts]:
    """The candidates under `answer`; else, of those under no answer, the ones that began
    before `answer` ended and after the previous answer ended (all of them for one answer)."""
    under = [c for c in candidates if _under(c, answer, by_id)]
    if under:
        return under
    free = [c for c in candidates if not any(_under(c, a, by_id) for a in answers)]
    if len(answers) == 1:
        return free
    position = answers.index(answer)
    after = answers[position - 1].end_ns if position else None
    last = position == len(answers) - 1
    return [
        c
        for c in free
        if (after is None or c.start_ns >= after) and (last or c.start_ns < answer.end_ns)
    ]


def _timings(
    answer: SpanFacts,
    engine: SpanFacts | None,
    llm: SpanFacts | None,
    root: SpanFacts | None,
    by_id: dict[str, SpanFacts],
) -> tuple[dict[str, Any], dict[str, str]]:
    """TTFT, end-to-end, TPOT, tokens and queue time, and where each came from."""
    timings: dict[str, Any] = {}
    sources: dict[str, str] = {}
    request = (
        root if root is not None and (root is answer or _under(answer, root, by_id)) else answer
    )
    if request.end_ns > request.start_ns:
        timings["e2e_s"] = (request.end_ns - request.start_ns) / 1e9
        sources["e2e_s"] = f"span duration: {request.name} ({request.service})"
    if llm is not None and llm.ttft_s is not None:
        timings["ttft_s"] = llm.ttft_s
        sources["ttft_s"] = f"gen_ai.response.time_to_first_chunk: {llm.name} ({llm.service})"
    elif engine is not None and engine.ttft_s is not None:
        timings["ttft_s"] = engine.ttft_s
        sources["ttft_s"] = f"gen_ai.latency.time_to_first_token: {engine.name} ({engine.service})"
    for key, spans in (
        ("output_tokens", (engine, llm, answer)),
        ("prompt_tokens", (engine, llm, answer)),
    ):
        for span in spans:
            value = getattr(span, key) if span is not None else None
            if value is not None and span is not None:
                timings[key] = value
                sources[key] = f"{span.convention}: {span.name} ({span.service})"
                break
    if engine is not None:
        if engine.queue_s is not None:
            timings["queue_s"] = engine.queue_s
            sources["queue_s"] = f"gen_ai.latency.time_in_queue: {engine.name} ({engine.service})"
        tokens = engine.output_tokens
        if engine.engine_e2e_s is not None and engine.ttft_s is not None and tokens and tokens > 1:
            timings["tpot_s"] = max(0.0, engine.engine_e2e_s - engine.ttft_s) / (tokens - 1)
            sources["tpot_s"] = (
                f"(gen_ai.latency.e2e - time_to_first_token) / (completion_tokens - 1): "
                f"{engine.name} ({engine.service})"
            )
    return timings, sources


def _iso(nanos: int) -> str:
    return datetime.fromtimestamp(nanos / 1e9, UTC).isoformat(timespec="microseconds")
