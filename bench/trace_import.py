"""`auditor traces` on a large export: seconds and peak memory at ~1 GB and at a quarter of it.

    nice -n 10 .venv/bin/python bench/trace_import.py [--spans 1000000] [--workdir /tmp]
        [--gzip] [--seed 0] [--name trace-import-...]

A generator writes an OTLP JSON export as the Collector's file exporter does (one
ExportTraceServiceRequest per line, hex ids, int64 as strings), streaming, deterministic from
the seed: two applications' traces over a 7-day window (plus 3 hours either side, outside
it), 13 spans each: OpenInference in a FastAPI app (POST /query > query CHAIN > retrieve
RETRIEVER > embedding > POST, retrieve > POST (the vector store), query > synthesize CHAIN >
llm LLM > POST (vLLM) > llm_request; ASGI receive and send spans) or OTel GenAI (POST /ask >
GET (a redis cache), embeddings > POST, retrieval > POST, chat > POST > llm_request, SET);
4 passages retrieved from a corpus of 20,000 (some far more often than others) and the
prompt holding them again (LlamaIndex's QA template); vLLM's `llm_request` server span sent
by vLLM's own exporter (service "vllm", lines of its own); each service's spans in batches of
up to 512 a line (a BatchSpanProcessor; a batch also goes once its first span is an hour old),
sent as they end. Passages are 220-380 chars so that 1,000,000 spans are ~1 GB: at 600-900,
with the prompt holding them, a span averages ~1.3 KB. Noise: ~2 % traces with content
capture off, ~0.5 % requests failed (the model call timed out: ERROR spans, no answer, no
engine span), ~0.3 % batches sent twice (an exporter's retry), ~0.2 % traces of an unrelated
service (no model span), ~0.2 % engine spans starting 80 ms before their parent (clock skew).

Each export is imported by `python -m auditor traces FILE --out DIR --sample 1000 --seed 0
--since ... --until ...` in a child process: wall seconds, its peak RSS (`os.wait4`'s
ru_maxrss, and /proc polling for the curve), spans/s, MB/s. The same for an export of a
quarter of the spans generated the same way in the same run: bounded memory shows as a peak
RSS ratio near 1, not 4. The import's counts (traces, in window, skipped by reason, duplicate
spans, clock skew, answers) are checked against what the generator wrote; a difference fails
the bench. The exports and run dirs are removed after.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from bench.bundle import lscpu_facts
from bench.harness import REPO, write_result

KESTREL_DOCS = REPO / "corpora" / "kestrel" / "docs"
SINCE = datetime(2026, 11, 23, tzinfo=UTC)  # the window: 7 days
UNTIL = SINCE + timedelta(days=7)
OUTSIDE = timedelta(hours=3)  # traces start this long before and after the window too
SAMPLE = 1000
BATCH = 512  # OTEL_BSP_MAX_EXPORT_BATCH_SIZE's default
FLUSH_NS = 3600 * 10**9  # a service's batch is also sent once its first span is an hour old
CORPUS_CHUNKS = 20_000
# the noise, per trace (per batch for retries)
CAPTURE_OFF = 0.02
FAILED = 0.005
RETRY = 0.003
UNRELATED = 0.002
SKEW = 0.002
OI_SHARE = 0.6  # OpenInference traces; the rest OTel GenAI
SPANS_PER_TRACE = 13  # either shape (12 and 11 when the model call failed)
MS = 1e6
SKEW_NS = 80_000_000  # the engine host's clock behind by 80 ms
EMBEDDER_URL = "http://embedder.internal:8080/embed"
VECTOR_STORE_URL = "http://qdrant.internal:6333/collections/kestrel-docs/points/search"
VLLM_URL = "http://vllm.internal:8000/v1/chat/completions"
APP_OI = "docs-assistant"
APP_GENAI = "support-bot"
ENGINE = "vllm"
OTHER = "auth-gateway"
MODEL = "qwen2.5-7b-instruct"
QA_TEMPLATE = (
    "Context information is below.\n---------------------\n{context}\n---------------------\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Query: {question}\nAnswer: "
)
SYSTEM = "You are the Kestrel support assistant. Answer from the passages given; say so when they do not hold the answer."


# --- text: passages, questions and answers from the Kestrel corpus's words (a bigram walk)


class Text:
    """Varied English-like text from the Kestrel docs' words: a corpus of passages that the
    retriever returns (Zipf-like: some passages come up often), questions and answers."""

    def __init__(self, rng: random.Random, passage_chars: tuple[int, int]) -> None:
        words: list[str] = []
        for path in sorted(KESTREL_DOCS.glob("*")):
            if path.suffix in (".md", ".txt"):
                words += re.findall(
                    r"[A-Za-z][A-Za-z'\-]*[.,;:?]?|\d+[.,%]?", path.read_text("utf-8")
                )
        self.words = words
        follows: dict[str, list[str]] = {}
        for a, b in itertools.pairwise(words):
            follows.setdefault(a, []).append(b)
        self.follows = follows
        self.rng = rng
        low, high = passage_chars
        self.passages = [self.walk(rng.randint(low, high)) for _ in range(CORPUS_CHUNKS)]
        self.sources = [
            f"{p.stem}{p.suffix}" for p in sorted(KESTREL_DOCS.glob("*")) if p.is_file()
        ]
        # Zipf-like popularity: passage n drawn with weight 1 / (n + 10)
        self.cumulative = list(itertools.accumulate(1 / (n + 10) for n in range(CORPUS_CHUNKS)))

    def walk(self, chars: int) -> str:
        rng, words, follows = self.rng, self.words, self.follows
        word = words[rng.randrange(len(words))]
        out = [word.capitalize()]
        size = len(word)
        while size < chars:
            after = follows.get(word)
            word = rng.choice(after) if after and rng.random() < 0.92 else rng.choice(words)
            out.append(word)
            size += len(word) + 1
        return " ".join(out)[:chars].rstrip() + "."

    def retrieved(self, k: int = 4) -> list[int]:
        picked: list[int] = []
        total = self.cumulative[-1]
        while len(picked) < k:
            n = bisect.bisect(self.cumulative, self.rng.random() * total)
            if n not in picked:
                picked.append(n)
        return picked

    def question(self, passage: int) -> str:
        words = self.passages[passage].rstrip(".").split()
        start = self.rng.randrange(max(1, len(words) - 6))
        topic = " ".join(words[start : start + self.rng.randint(3, 7)]).lower().strip(".,;:?")
        form = self.rng.choice(
            (
                "What does the documentation say about {}?",
                "How do I handle {}?",
                "When does {} apply?",
                "Is there a limit on {}?",
                "Why would {} happen?",
                "Can you explain {}?",
            )
        )
        return form.format(topic)

    def answer(self) -> str:
        return " ".join(self.walk(self.rng.randint(80, 200)) for _ in range(self.rng.randint(1, 3)))


# --- OTLP JSON


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        wrapped: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        wrapped = {"intValue": str(value)}
    elif isinstance(value, float):
        wrapped = {"doubleValue": value}
    elif isinstance(value, list):
        wrapped = {"arrayValue": {"values": [{"stringValue": v} for v in value]}}
    else:
        wrapped = {"stringValue": value}
    return {"key": key, "value": wrapped}


@dataclass
class Span:
    """A span as written, with what the check needs: its end (the batch order) and whether
    its trace starts in the window."""

    body: dict[str, Any]
    end_ns: int
    in_window: bool


def span(
    trace_id: str,
    span_id: str,
    parent: str,
    name: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attributes: dict[str, Any],
    error: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "flags": 257,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": [attr(k, v) for k, v in attributes.items() if v is not None],
        "status": {"code": 2, "message": error} if error else {},
    }
    if error:
        body["events"] = [
            {
                "timeUnixNano": str(end_ns),
                "name": "exception",
                "attributes": [
                    attr("exception.type", "openai.APITimeoutError"),
                    attr("exception.message", error),
                ],
            }
        ]
    return body


RESOURCES = {
    APP_OI: ("openinference.instrumentation.llama_index", "3.4.1", "python"),
    APP_GENAI: ("opentelemetry.instrumentation.openai_v2", "2.1b0", "python"),
    ENGINE: ("vllm.tracing", "0.11.0", "python"),
    OTHER: ("io.opentelemetry.spring-webmvc-6.0", "2.10.0-alpha", "java"),
}


def request(service: str, spans: list[dict[str, Any]], host: str) -> dict[str, Any]:
    scope, version, language = RESOURCES[service]
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        attr("service.name", service),
                        attr("service.version", "1.8.2"),
                        attr("deployment.environment.name", "production"),
                        attr("host.name", host),
                        attr("telemetry.sdk.name", "opentelemetry"),
                        attr("telemetry.sdk.language", language),
                        attr("telemetry.sdk.version", "1.38.0"),
                    ]
                },
                "scopeSpans": [
                    {"scope": {"name": scope, "version": version}, "spans": spans},
                ],
                "schemaUrl": "https://opentelemetry.io/schemas/1.37.0",
            }
        ]
    }


# --- the generator


@dataclass
class Expected:
    """What the generator wrote, as the import must count it."""

    spans: int = 0  # span objects written (repeats included)
    lines: int = 0
    bytes: int = 0  # uncompressed
    traces_seen: int = 0
    traces_in_window: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    duplicate_spans: int = 0
    clock_skew: int = 0
    retried_batches: int = 0
    by_shape: Counter[str] = field(default_factory=Counter)

    @property
    def answers(self) -> int:
        return self.traces_in_window - sum(self.skipped.values())


class Writer:
    """Each service's spans batched as a BatchSpanProcessor sends them, each batch a line;
    some batches sent twice (a retry after a timed-out export the collector did take)."""

    def __init__(self, out: IO[bytes], rng: random.Random, expected: Expected) -> None:
        self.out, self.rng, self.expected = out, rng, expected
        self.batches: dict[str, list[Span]] = {}
        self.hosts = {APP_OI: "docs-7f9c", APP_GENAI: "support-2b41", ENGINE: "gpu-a100-03"}

    def add(self, service: str, spans: list[Span]) -> None:
        batch = self.batches.setdefault(service, [])
        for item in sorted(spans, key=lambda s: s.end_ns):  # sent as they end
            if batch and item.end_ns - batch[0].end_ns > FLUSH_NS:
                self.send(service, batch)
                batch.clear()
            batch.append(item)
            if len(batch) >= BATCH:
                self.send(service, batch)
                batch.clear()

    def send(self, service: str, batch: list[Span]) -> None:
        line = orjson.dumps(
            request(service, [s.body for s in batch], self.hosts.get(service, "gw-1"))
        )
        times = 2 if self.rng.random() < RETRY else 1
        for _ in range(times):
            self.out.write(line + b"\n")
            self.expected.lines += 1
            self.expected.bytes += len(line) + 1
            self.expected.spans += len(batch)
        if times == 2:
            self.expected.retried_batches += 1
            self.expected.duplicate_spans += sum(s.in_window for s in batch)

    def close(self) -> None:
        for service, batch in self.batches.items():
            if batch:
                self.send(service, batch)
        self.batches.clear()


class Generator:
    def __init__(self, seed: int, spans: int, passage_chars: tuple[int, int]) -> None:
        self.rng = random.Random(seed)
        self.text = Text(random.Random(seed + 1), passage_chars)
        self.traces = max(1, round(spans / SPANS_PER_TRACE))
        self.begin_ns = int((SINCE - OUTSIDE).timestamp() * 1e9)
        self.end_ns = int((UNTIL + OUTSIDE).timestamp() * 1e9)
        self.since_ns = int(SINCE.timestamp() * 1e9)
        self.until_ns = int(UNTIL.timestamp() * 1e9)

    def ident(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits) or 1:0{bits // 4}x}"

    def write(self, out: IO[bytes]) -> Expected:
        expected = Expected()
        writer = Writer(out, self.rng, expected)
        gap = (self.end_ns - self.begin_ns) / self.traces
        for n in range(self.traces):
            start = self.begin_ns + int((n + self.rng.random()) * gap)
            in_window = self.since_ns <= start < self.until_ns
            expected.traces_seen += 1
            expected.traces_in_window += in_window
            if self.rng.random() < UNRELATED:
                shape, outcome = "unrelated", "no_llm_span"
            else:
                shape = "openinference" if self.rng.random() < OI_SHARE else "genai"
                draw = self.rng.random()
                outcome = (
                    "no_content"
                    if draw < CAPTURE_OFF
                    else "error"
                    if draw < CAPTURE_OFF + FAILED
                    else "answer"
                )
            expected.by_shape[f"{shape}:{outcome}"] += 1
            if in_window and outcome != "answer":
                expected.skipped[outcome] += 1
            trace = Trace(self, self.ident(128), start, in_window)
            if shape == "unrelated":
                writer.add(OTHER, self.unrelated(trace))
                continue
            trace.skew = self.rng.random() < SKEW and outcome != "error"
            expected.clock_skew += trace.skew and in_window
            if shape == "openinference":
                writer.add(APP_OI, self.openinference(trace, outcome))
            else:
                writer.add(APP_GENAI, self.genai(trace, outcome))
            if trace.engine is not None:
                writer.add(ENGINE, [trace.engine])
        writer.close()
        return expected

    def rag(self) -> tuple[list[int], str, str, str]:
        """Passages retrieved, the question, the prompt holding them, the answer."""
        picked = self.text.retrieved()
        question = self.text.question(picked[0])
        context = "\n\n".join(self.text.passages[p] for p in picked)
        prompt = QA_TEMPLATE.format(context=context, question=question)
        return picked, question, prompt, self.text.answer()

    def openinference(self, trace: Trace, outcome: str) -> list[Span]:
        """LlamaIndex in a FastAPI app, as OpenInference, the ASGI and httpx
        instrumentations write it: POST /query > query CHAIN > retrieve RETRIEVER >
        embedding EMBEDDING > POST (the embedder), retrieve > POST (the vector store),
        query > synthesize CHAIN > llm LLM > POST (vLLM) > llm_request (vLLM's own)."""
        rng, text = self.rng, self.text
        picked, question, prompt, answer = self.rag()
        content, failed = outcome != "no_content", outcome == "error"
        error = "Request timed out." if failed else None
        root = trace.server("POST /query")
        query = trace.child(root, "query", 1, 0.4)
        retrieve = trace.child(query, "retrieve", 1, 0.3)
        embedding = trace.child(retrieve, "embedding", 1, 0.3)
        embedder = trace.client(embedding, EMBEDDER_URL, rng.uniform(8, 40))
        embedding.close(embedder.end + MS / 4, {
            "openinference.span.kind": "EMBEDDING",
            "embedding.model_name": "BAAI/bge-small-en-v1.5",
            "embedding.embeddings.0.embedding.text": question if content else None,
        })  # fmt: skip
        store = trace.client(retrieve, VECTOR_STORE_URL, rng.uniform(4, 30), at=embedding.end)
        documents: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
        documents["input.value"] = question if content else None
        for n, p in enumerate(picked):
            documents[f"retrieval.documents.{n}.document.id"] = f"chunk-{p:05d}"
            documents[f"retrieval.documents.{n}.document.score"] = round(0.9 - n * 0.04, 4)
            if content:
                documents[f"retrieval.documents.{n}.document.content"] = text.passages[p]
            documents[f"retrieval.documents.{n}.document.metadata"] = json.dumps(
                {"file_name": text.sources[p % len(text.sources)]}
            )
        retrieve.close(store.end + MS / 4, documents)
        synthesize = trace.child(query, "synthesize", 1, 0.6, at=retrieve.end)
        llm = trace.child(synthesize, "llm", 1, 0.4)
        prompt_tokens, output_tokens = len(prompt) // 4, max(2, len(answer) // 4)
        call = trace.model_call(llm, prompt_tokens, output_tokens, failed)
        attributes: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "llm.model_name": MODEL,
            "llm.provider": "openai",
            "llm.invocation_parameters": '{"temperature": 0.1, "max_tokens": 512}',
        }
        if content:
            attributes |= {
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": SYSTEM,
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": prompt,
            }
        if content and not failed:
            attributes |= {
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": answer,
            }
        if not failed:
            attributes |= {
                "llm.token_count.prompt": prompt_tokens,
                "llm.token_count.completion": output_tokens,
                "llm.token_count.total": prompt_tokens + output_tokens,
            }
        llm.close(call.end + MS / 2, attributes, error)
        chain: dict[str, Any] = {"openinference.span.kind": "CHAIN"}
        if content:
            chain |= {"input.value": question, "input.mime_type": "text/plain"}
        if content and not failed:
            chain |= {"output.value": answer, "output.mime_type": "text/plain"}
        synthesize.close(llm.end + MS / 2, chain, error)
        query.close(synthesize.end + MS / 2, chain, error)
        trace.respond(root, "/query", failed)
        return trace.spans

    def genai(self, trace: Trace, outcome: str) -> list[Span]:
        """An app instrumented with the OTel GenAI conventions (openai-v2, its own retrieval
        and embeddings spans) and FastAPI, httpx, redis: POST /ask > GET (the cache) ,
        embeddings > POST, retrieval > POST, chat > POST (vLLM) > llm_request, SET."""
        rng, text = self.rng, self.text
        picked, question, prompt, answer = self.rag()
        content, failed = outcome != "no_content", outcome == "error"
        root = trace.server("POST /ask")
        trace.redis(root, "GET")
        embeddings = trace.child(root, "embeddings bge-small-en-v1.5", 3, 0.3)
        embedder = trace.client(embeddings, EMBEDDER_URL, rng.uniform(8, 40))
        embeddings.close(embedder.end + MS / 4, {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.request.model": "BAAI/bge-small-en-v1.5",
            "gen_ai.usage.input_tokens": max(1, len(question) // 4),
        })  # fmt: skip
        retrieval = trace.child(root, "retrieval kestrel-docs", 1, 0.3, at=embeddings.end)
        store = trace.client(retrieval, VECTOR_STORE_URL, rng.uniform(4, 30))
        documents = [
            {"id": f"chunk-{p:05d}", "score": round(0.9 - n * 0.04, 4)}
            | ({"content": text.passages[p]} if content else {})
            for n, p in enumerate(picked)
        ]
        retrieval.close(store.end + MS / 4, {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": "kestrel-docs",
            "gen_ai.retrieval.query.text": question if content else None,
            "gen_ai.retrieval.documents": json.dumps(documents),
        })  # fmt: skip
        chat = trace.child(root, f"chat {MODEL}", 3, 0.6, at=retrieval.end)
        prompt_tokens, output_tokens = len(prompt) // 4, max(2, len(answer) // 4)
        call = trace.model_call(chat, prompt_tokens, output_tokens, failed)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": MODEL,
            "gen_ai.request.temperature": 0.1,
            "gen_ai.request.max_tokens": 512,
            "server.address": "vllm.internal",
            "server.port": 8000,
        }
        if not failed:
            attributes |= {
                "gen_ai.response.model": MODEL,
                "gen_ai.response.id": f"chatcmpl-{self.ident(64)}",
                "gen_ai.response.finish_reasons": ["stop"],
                "gen_ai.usage.input_tokens": prompt_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
            }
        if content:
            attributes["gen_ai.input.messages"] = json.dumps(
                [
                    {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
                    {"role": "user", "parts": [{"type": "text", "content": prompt}]},
                ]
            )
        if content and not failed:
            parts = [{"type": "text", "content": answer}]
            attributes["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": parts, "finish_reason": "stop"}]
            )
        chat.close(call.end + MS / 2, attributes, "Request timed out." if failed else None)
        if not failed:
            trace.redis(root, "SET", at=chat.end)
        trace.respond(root, "/ask", failed)
        return trace.spans

    def unrelated(self, trace: Trace) -> list[Span]:
        """A service of no model behind the same collector: a login."""
        root = trace.server("POST /login")
        db = trace.child(root, "SELECT users", 3, 0.5)
        db.close(db.start + self.rng.uniform(1, 20) * MS, {
            "db.system.name": "postgresql",
            "db.operation.name": "SELECT",
            "db.collection.name": "users",
            "server.address": "pg.internal",
        })  # fmt: skip
        trace.respond(root, "/login", False)
        return trace.spans


class Open:
    """A span begun and not yet ended: its id, start and name (ended by `close`)."""

    def __init__(self, trace: Trace, parent: str, name: str, kind: int, start: float) -> None:
        self.trace, self.parent, self.name, self.kind = trace, parent, name, kind
        self.id = trace.gen.ident(64)
        self.start, self.end = start, start

    def close(self, end: float, attributes: dict[str, Any], error: str | None = None) -> Open:
        self.end = end
        body = span(
            self.trace.trace_id,
            self.id,
            self.parent,
            self.name,
            self.kind,
            int(self.start),
            int(end),
            attributes,
            error,
        )
        self.trace.spans.append(Span(body, int(end), self.trace.in_window))
        return self


class Trace:
    """One request's spans, built as they run (times in ns)."""

    def __init__(self, gen: Generator, trace_id: str, start: int, in_window: bool) -> None:
        self.gen, self.trace_id, self.in_window = gen, trace_id, in_window
        self.start = float(start)
        self.spans: list[Span] = []
        self.engine: Span | None = None  # vLLM's span: sent by another exporter
        self.skew = False  # the engine host's clock behind: its span starts before its parent

    def child(
        self, parent: Open, name: str, kind: int, after_ms: float, at: float | None = None
    ) -> Open:
        start = max(parent.start, at if at is not None else parent.start) + after_ms * MS
        return Open(self, parent.id, name, kind, start)

    def server(self, name: str) -> Open:
        root = Open(self, "", name, 2, self.start)
        receive = self.child(root, f"{name} http receive", 1, 0.05)
        receive.close(receive.start + 0.1 * MS, {"asgi.event.type": "http.request"})
        return root

    def respond(self, root: Open, route: str, failed: bool) -> None:
        """The response sent (two ASGI send spans), then the server span ends."""
        status = 500 if failed else 200
        at = float(max(s.end_ns for s in self.spans))
        for event in ("http.response.start", "http.response.body"):
            send = self.child(root, f"{root.name} http send", 1, 0.1, at=at)
            attributes: dict[str, Any] = {"asgi.event.type": event}
            if event == "http.response.start":
                attributes["http.response.status_code"] = status
            send.close(send.start + 0.05 * MS, attributes)
            at = send.end
        root.close(at + 0.1 * MS, {
            "http.request.method": "POST",
            "http.route": route,
            "url.path": route,
            "url.scheme": "https",
            "server.address": "assistant.kestrel.example",
            "network.protocol.version": "1.1",
            "client.address": "10.12.4.7",
            "user_agent.original": "kestrel-web/5.2",
            "http.response.status_code": status,
        }, "Internal Server Error" if failed else None)  # fmt: skip

    def client(self, parent: Open, url: str, took_ms: float, at: float | None = None) -> Open:
        call = self.child(parent, "POST", 3, 0.2, at=at)
        return call.close(call.start + took_ms * MS, _http_client(url, 200))

    def redis(self, parent: Open, command: str, at: float | None = None) -> Open:
        call = self.child(parent, command, 3, 0.2, at=at)
        return call.close(call.start + self.gen.rng.uniform(0.2, 1.5) * MS, {
            "db.system.name": "redis",
            "db.operation.name": command,
            "db.namespace": "0",
            "server.address": "redis.internal",
            "server.port": 6379,
        })  # fmt: skip

    def model_call(
        self, parent: Open, prompt_tokens: int, output_tokens: int, failed: bool
    ) -> Open:
        """The HTTP call to vLLM (httpx's span; its traceparent reaches vLLM) and vLLM's
        llm_request span under it; a call that timed out has no engine span."""
        rng = self.gen.rng
        call = self.child(parent, "POST", 3, 0.3)
        if failed:
            took = rng.uniform(30, 60) * 1e9
            attributes = _http_client(VLLM_URL, None) | {"error.type": "httpx.ReadTimeout"}
            return call.close(call.start + took, attributes, "ReadTimeout")
        queue = rng.uniform(0.001, 0.05)
        ttft = queue + rng.uniform(0.04, 0.4)
        e2e = ttft + output_tokens * rng.uniform(0.012, 0.03)
        begin = call.start + rng.uniform(1, 4) * MS - (SKEW_NS if self.skew else 0)
        attributes = {
            "gen_ai.response.model": MODEL,
            "gen_ai.request.id": f"chatcmpl-{self.gen.ident(64)}",
            "gen_ai.request.temperature": 0.1,
            "gen_ai.request.top_p": 1.0,
            "gen_ai.request.max_tokens": 512,
            "gen_ai.request.n": 1,
            "gen_ai.usage.prompt_tokens": prompt_tokens,
            "gen_ai.usage.completion_tokens": output_tokens,
            "gen_ai.latency.time_in_queue": round(queue, 6),
            "gen_ai.latency.time_to_first_token": round(ttft, 6),
            "gen_ai.latency.e2e": round(e2e, 6),
            "gen_ai.latency.time_in_scheduler": round(queue * 0.3, 6),
            "gen_ai.latency.time_in_model_forward": round(e2e * 0.8, 6),
            "gen_ai.latency.time_in_model_execute": round(e2e * 0.85, 6),
            "gen_ai.latency.time_in_model_prefill": round(ttft - queue, 6),
            "gen_ai.latency.time_in_model_decode": round(e2e - ttft, 6),
            "gen_ai.latency.time_in_model_inference": round(e2e - queue, 6),
        }
        end = begin + e2e * 1e9
        body = span(
            self.trace_id, self.gen.ident(64), call.id, "llm_request", 2, int(begin), int(end),
            attributes,
        )  # fmt: skip
        self.engine = Span(body, int(end), self.in_window)
        return call.close(end + rng.uniform(0.5, 3) * MS, _http_client(VLLM_URL, 200))


def _http_client(url: str, status: int | None) -> dict[str, Any]:
    host, _, port = url.split("/")[2].partition(":")
    return {
        "http.request.method": "POST",
        "url.full": url,
        "server.address": host,
        "server.port": int(port or 443),
        "network.protocol.version": "1.1",
        "http.response.status_code": status,
    }


def generate(
    path: Path, spans: int, seed: int, passage_chars: tuple[int, int], compress: bool
) -> tuple[Expected, float]:
    """Write the export (streaming); what it holds, and the seconds it took."""
    started = time.perf_counter()
    generator = Generator(seed, spans, passage_chars)
    with path.open("wb") as raw:
        out: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) if compress else raw  # type: ignore[assignment]
        expected = generator.write(out)
        if compress:
            out.close()
    return expected, time.perf_counter() - started


# --- the measurement


@dataclass
class Measured:
    seconds: float
    peak_rss_mb: float
    curve: list[tuple[float, float]]  # (seconds, RSS MB), polled
    rc: int
    stdout: str
    stderr: str


def measure(command: list[str], workdir: Path, poll_s: float = 0.25) -> Measured:
    """Run `command` in a child; its wall seconds and peak RSS (wait4's ru_maxrss: the
    child's own high-water mark, not the max over every child this process waited for)."""
    out, err = workdir / "child.out", workdir / "child.err"
    env = os.environ | {"PYTHONPATH": str(REPO)}
    with out.open("wb") as stdout, err.open("wb") as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=REPO, env=env, stdout=stdout, stderr=stderr)
        curve: list[tuple[float, float]] = []
        done = threading.Event()

        def poll() -> None:
            status = Path(f"/proc/{child.pid}/status")
            while not done.is_set():
                try:
                    for line in status.read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            curve.append(
                                (time.perf_counter() - started, int(line.split()[1]) / 1024)
                            )
                except OSError:
                    break
                done.wait(poll_s)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        done.set()
        poller.join()
        child.returncode = os.waitstatus_to_exitcode(status)
    return Measured(
        seconds,
        usage.ru_maxrss / 1024,  # KiB on Linux
        curve,
        child.returncode,
        out.read_text(),
        err.read_text(),
    )


def import_command(export: Path, run: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "auditor",
        "traces",
        str(export),
        "--out",
        str(run),
        "--sample",
        str(SAMPLE),
        "--seed",
        "0",
        "--since",
        SINCE.isoformat(),
        "--until",
        UNTIL.isoformat(),
        "--json",
    ]


def check_counts(expected: Expected, run: Path, said: dict[str, Any]) -> dict[str, Any]:
    """The import's counts against the generator's; raises on a difference."""
    population = json.loads((run / "manifest.json").read_text())["population"]
    records = sum(1 for _ in (run / "records.jsonl").open())
    got = {
        "traces_seen": population["traces_seen"],
        "traces_in_window": population["traces_in_window"],
        "traces_imported": population["traces_imported"],
        "answers": population["answers"],
        "skipped": population["skipped"],
        "duplicate_spans": population["duplicate_spans"],
        "clock_skew": population["clock_skew"],
        "services": population["services"],
        "records": records,
    }
    want = {
        "traces_seen": expected.traces_seen,
        "traces_in_window": expected.traces_in_window,
        "traces_imported": expected.answers,
        "answers": expected.answers,
        "skipped": dict(sorted(expected.skipped.items())),
        "duplicate_spans": expected.duplicate_spans,
        "clock_skew": expected.clock_skew,
        "services": sorted(
            {APP_OI, APP_GENAI, ENGINE}
            | ({OTHER} if expected.by_shape.get("unrelated:no_llm_span") else set())
        ),
        "records": min(SAMPLE, expected.answers),
    }
    wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    if said.get("answers") != want["answers"] or said.get("records") != want["records"]:
        wrong["--json"] = (said, {"answers": want["answers"], "records": want["records"]})
    if wrong:
        raise SystemExit(f"the import's counts differ from the export's (got, wanted): {wrong}")
    return got


def one_size(label: str, spans: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Generate, import in a child, check, remove: the figures of one export size."""
    suffix = ".jsonl.gz" if args.gzip else ".jsonl"
    export, run = workdir / f"export-{label}{suffix}", workdir / f"run-{label}"
    try:
        print(f"[{label}] generating ~{spans:,} spans -> {export}", flush=True)
        expected, gen_s = generate(
            export, spans, args.seed, (args.passage_min, args.passage_max), args.gzip
        )
        size = export.stat().st_size
        print(
            f"[{label}] wrote {expected.bytes / 1e6:,.1f} MB ({size / 1e6:,.1f} MB on disk), "
            f"{expected.spans:,} spans, {expected.traces_seen:,} traces, {expected.lines:,} lines "
            f"in {gen_s:.1f} s",
            flush=True,
        )
        measured = measure(import_command(export, run), workdir)
        if measured.rc != 0:
            raise SystemExit(
                f"[{label}] the import failed (rc {measured.rc}):\n{measured.stderr[-4000:]}"
            )
        said = json.loads(measured.stdout.strip().splitlines()[-1])
        counts = check_counts(expected, run, said)
        mb = expected.bytes / 1e6
        figures = {
            "export_bytes": expected.bytes,
            "file_bytes": size,
            "gzip": args.gzip,
            "lines": expected.lines,
            "spans": expected.spans,
            "traces": expected.traces_seen,
            "shapes": dict(sorted(expected.by_shape.items())),
            "retried_batches": expected.retried_batches,
            "generate_s": round(gen_s, 1),
            "import_s": round(measured.seconds, 1),
            "spans_per_s": round(expected.spans / measured.seconds),
            "mb_per_s": round(mb / measured.seconds, 2),
            "s_per_gb": round(measured.seconds / (expected.bytes / 1e9), 1),
            "peak_rss_mb": round(measured.peak_rss_mb, 1),
            "rss_curve_mb": _thin(measured.curve, 60),
            "counts": counts,
            "terminal": measured.stderr.strip().splitlines()[-12:],
        }
        print(
            f"[{label}] imported in {measured.seconds:.1f} s: {figures['spans_per_s']:,} spans/s, "
            f"{figures['mb_per_s']} MB/s ({figures['s_per_gb']} s per GB); peak RSS "
            f"{measured.peak_rss_mb:.0f} MB; counts match ({counts['answers']:,} answers, "
            f"skipped {counts['skipped']}, {counts['duplicate_spans']:,} repeated spans)",
            flush=True,
        )
        return figures
    finally:
        export.unlink(missing_ok=True)
        shutil.rmtree(run, ignore_errors=True)


def _thin(curve: list[tuple[float, float]], points: int) -> list[list[float]]:
    step = max(1, len(curve) // points)
    kept = curve[::step] + ([curve[-1]] if curve and (len(curve) - 1) % step else [])
    return [[round(t, 1), round(mb, 1)] for t, mb in kept]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000, help="Spans of the large export.")
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()), help="Where exports go."
    )
    parser.add_argument("--gzip", action="store_true", help="Write the exports gzipped.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passage-min", type=int, default=220, help="Passage chars, least.")
    parser.add_argument("--passage-max", type=int, default=380, help="Passage chars, most.")
    parser.add_argument("--quarter-only", action="store_true", help="Only the 1/4-size export.")
    parser.add_argument("--shared", default="", help="Other jobs on the machine (the note).")
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    args = parser.parse_args()

    need = 3.2 * args.spans * 1100 * (0.25 if args.quarter_only else 1)
    args.workdir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(args.workdir).free
    if free < need:
        raise SystemExit(
            f"{args.workdir}: {free / 1e9:.1f} GB free, the bench needs ~{need / 1e9:.1f} GB "
            "(the export, its spill and the run dir); give --workdir elsewhere"
        )
    workdir = Path(tempfile.mkdtemp(prefix="bench-trace-import-", dir=args.workdir))
    try:
        baseline = measure([sys.executable, "-m", "auditor", "traces", "--help"], workdir)
        print(f"`auditor traces --help`: peak RSS {baseline.peak_rss_mb:.0f} MB", flush=True)
        sizes = {"quarter": args.spans // 4} | ({} if args.quarter_only else {"full": args.spans})
        figures: dict[str, Any] = {"startup_peak_rss_mb": round(baseline.peak_rss_mb, 1)}
        for label, spans in sizes.items():
            figures[label] = one_size(label, spans, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if "full" in figures:
        full, quarter = figures["full"], figures["quarter"]
        figures["peak_rss_ratio_full_to_quarter"] = round(
            full["peak_rss_mb"] / quarter["peak_rss_mb"], 2
        )
        figures["bytes_ratio_full_to_quarter"] = round(
            full["export_bytes"] / quarter["export_bytes"], 2
        )
        print(
            f"peak RSS {full['peak_rss_mb']:.0f} MB at {full['export_bytes'] / 1e9:.2f} GB, "
            f"{quarter['peak_rss_mb']:.0f} MB at {quarter['export_bytes'] / 1e9:.2f} GB: ratio "
            f"{figures['peak_rss_ratio_full_to_quarter']} for {figures['bytes_ratio_full_to_quarter']}x "
            f"the bytes; {full['s_per_gb']} s per GB",
            flush=True,
        )
    if args.name:
        write_result(
            args.name,
            "trace_import",
            figures,
            note=(
                f"generated OTLP JSON exports (seed {args.seed}), imported by `auditor traces "
                f"--sample {SAMPLE} --seed 0 --since {SINCE.date()} --until {UNTIL.date()}` in a "
                "child process; peak RSS is the child's ru_maxrss"
                + (f"; machine shared: {args.shared}" if args.shared else "")
            ),
            command=" ".join(["bench/trace_import.py", *sys.argv[1:]]),
            **lscpu_facts(),
        )


if __name__ == "__main__":
    main()
