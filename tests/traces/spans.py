"""OTLP JSON spans built by hand, in the shapes the instrumentations write (for the fast
tests of the import's own logic; tests/e2e/test_traces_real.py reads real instrumentation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BASE_NS = 1_796_000_000_000_000_000  # 2026-11-30T...


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        wrapped: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        wrapped = {"intValue": str(value)}
    elif isinstance(value, float):
        wrapped = {"doubleValue": value}
    else:
        wrapped = {"stringValue": value}
    return {"key": key, "value": wrapped}


def span(
    trace: int,
    span_id: int,
    name: str,
    attributes: dict[str, Any],
    *,
    parent: int | None = None,
    start_ms: float = 0.0,
    end_ms: float = 100.0,
    error: str | None = None,
    events: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "traceId": f"{trace:032x}",
        "spanId": f"{span_id:016x}",
        "parentSpanId": "" if parent is None else f"{parent:016x}",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(BASE_NS + int(start_ms * 1e6)),
        "endTimeUnixNano": str(BASE_NS + int(end_ms * 1e6)),
        "attributes": [attr(k, v) for k, v in attributes.items()],
        "status": {"code": 2, "message": error} if error else {},
    }
    if events:
        body["events"] = events
    return body


def request(service: str, spans: list[dict[str, Any]]) -> dict[str, Any]:
    """One ExportTraceServiceRequest of one service."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attr("service.name", service)]},
                "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}],
            }
        ]
    }


def openinference_trace(
    trace: int,
    question: str = "When was the Kestrel bridge opened?",
    answer: str = "It opened in 1931.",
    passages: tuple[str, ...] = ("The Kestrel bridge opened in 1931.", "It spans the river."),
    start_ms: float = 0.0,
    content: bool = True,
) -> list[dict[str, Any]]:
    """A LlamaIndex query as OpenInference writes it: CHAIN > RETRIEVER, CHAIN > LLM."""
    root = trace * 100
    chain = {"openinference.span.kind": "CHAIN"}
    if content:
        chain |= {"input.value": question, "output.value": answer}
    retriever: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for n, text in enumerate(passages):
        retriever[f"retrieval.documents.{n}.document.id"] = f"node-{trace}-{n}"
        retriever[f"retrieval.documents.{n}.document.content"] = text
        retriever[f"retrieval.documents.{n}.document.score"] = 0.9 - n / 10
        retriever[f"retrieval.documents.{n}.document.metadata"] = json.dumps(
            {"file_path": "bridge.md"}
        )
    llm: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "smollm2-135m-instruct",
        "llm.token_count.prompt": 120,
        "llm.token_count.completion": 9,
    }
    if content:
        llm |= {
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": f"Context...\n{question}",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
        }
    s = start_ms
    return [
        span(trace, root + 1, "query", chain, start_ms=s, end_ms=s + 900),
        span(
            trace, root + 2, "retrieve", retriever, parent=root + 1, start_ms=s + 5, end_ms=s + 40
        ),
        span(trace, root + 3, "llm", llm, parent=root + 1, start_ms=s + 50, end_ms=s + 880),
    ]


def vllm_span(
    trace: int, parent: int, start_ms: float = 60.0, ttft: float = 0.2, e2e: float = 0.8
) -> dict[str, Any]:
    """vLLM's llm_request server span."""
    return span(
        trace,
        trace * 100 + 9,
        "llm_request",
        {
            "gen_ai.response.model": "smollm2",
            "gen_ai.request.id": f"chatcmpl-{trace}",
            "gen_ai.usage.prompt_tokens": 118,
            "gen_ai.usage.completion_tokens": 9,
            "gen_ai.latency.time_in_queue": 0.01,
            "gen_ai.latency.time_to_first_token": ttft,
            "gen_ai.latency.e2e": e2e,
        },
        parent=parent,
        start_ms=start_ms,
        end_ms=start_ms + e2e * 1000,
    )


def genai_trace(
    trace: int,
    question: str = "How long is the Kestrel bridge?",
    answer: str = "It is 410 metres long.",
    documents: list[dict[str, Any]] | None = None,
    start_ms: float = 0.0,
) -> list[dict[str, Any]]:
    """An app with GenAI spans: request > retrieval, request > chat."""
    root = trace * 100
    documents = documents or [{"id": "c1", "content": "The bridge is 410 metres long."}]
    s = start_ms
    return [
        span(trace, root + 1, "POST /ask", {"http.route": "/ask"}, start_ms=s, end_ms=s + 1200),
        span(
            trace,
            root + 2,
            "retrieval kestrel",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": question,
                "gen_ai.retrieval.documents": json.dumps(documents),
            },
            parent=root + 1,
            start_ms=s + 2,
            end_ms=s + 30,
        ),
        span(
            trace,
            root + 3,
            "chat smollm2",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "smollm2",
                "gen_ai.usage.input_tokens": 90,
                "gen_ai.usage.output_tokens": 11,
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": f"ctx\n{question}"}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": answer}],
                            "finish_reason": "stop",
                        }
                    ]
                ),
            },
            parent=root + 1,
            start_ms=s + 35,
            end_ms=s + 1150,
        ),
    ]


def write_export(path: Path, requests: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    return path
