"""Real traces from real instrumentation, as an OpenTelemetry Collector's file exporter writes
them (`auditor.traces.sink`): the bundled LlamaIndex example instrumented with OpenInference,
and an application calling `vllm serve` traced with the OpenTelemetry GenAI conventions, vLLM's
own `llm_request` span joining the application's trace through `traceparent`.

The export is read back with plain Python (tests/e2e/traced_apps.py's `read_spans`) and
compared with what the applications returned. The trace-making code is traced_apps.py's,
shared with scripts/make_trace_export.py (which made corpora/kestrel/traces/).

Cost (bfloat16 AMD EPYC, 2 cores, one single-threaded job beside it, 2026-12-08): the
OpenInference test 62 s of its own beyond the session's engine pool start (83 s with the
index, shared with the other engine tests); the vLLM test 7.5 s beyond the session's `vllm
serve` start (90 s, shared with the served tests); both alone 245 s. On a CPU without bf16
not measured: about 1.6x (the engines' float32 factor).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.config import load_judge
from auditor.traces import import_traces
from auditor.traces.sink import TraceSink
from tests.conftest import KESTREL
from tests.e2e.conftest import EnginePool
from tests.e2e.servers import MODEL_NAME
from tests.e2e.traced_apps import (
    ask_llamaindex,
    ask_served,
    example_llm,
    llamaindex_traced,
    read_spans,
    wait_for_spans,
)

pytestmark = pytest.mark.e2e

QUESTIONS = [
    json.loads(line)["question"]
    for line in (KESTREL / "questions.jsonl").read_text(encoding="utf-8").splitlines()
]
SERVER, CLIENT = 2, 3  # OTLP SpanKind


@pytest.fixture(scope="session", autouse=True)
def _instrumentation_importable() -> Iterator[None]:
    """Both instrumentations import, checked before the session's engines start (session
    fixtures of this module, autouse, come first)."""
    for module in (
        "openinference.instrumentation.llama_index._handler",
        "opentelemetry.instrumentation.openai_v2",
        "opentelemetry.instrumentation.httpx",
    ):
        importlib.import_module(module)
    yield


def _by_trace(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        traces.setdefault(span["traceId"], []).append(span)
    return traces


def _a_tree(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """The trace's one root; every other span's parent is in the trace (the hex ids join)."""
    ids = {span["spanId"] for span in trace}
    assert len(ids) == len(trace)
    (root,) = [span for span in trace if not span.get("parentSpanId")]
    assert all(span["parentSpanId"] in ids for span in trace if span is not root)
    return root


def test_openinference_spans_of_the_llamaindex_example(
    kestrel_index: Path,
    light_judge: Path,
    engine_pool: EnginePool,
    smollm2_dir: Path,
    tmp_path: Path,
) -> None:
    """The example's query engine, OpenInference-instrumented, on the pool's SmolLM2 engine:
    per question one trace whose CHAIN root holds the question and the answer the engine
    returned, whose RETRIEVER span holds the passages of the response's source nodes, and an
    LLM span with its token counts."""
    cfg = load_judge(light_judge).generator
    engine = engine_pool.lend(cfg)
    llm = example_llm(smollm2_dir, engine=engine.llm, context_window=cfg.max_model_len)
    out = tmp_path / "traces.otlp.jsonl"
    with TraceSink(out) as sink, llamaindex_traced(sink.endpoint, "kestrel-assistant"):
        answered = ask_llamaindex(kestrel_index, llm, QUESTIONS[:2])

    traces = _by_trace(read_spans(out))
    assert len(traces) == len(answered)
    for asked in answered:
        assert asked.answer.strip() and len(asked.contexts) == 4
        (trace,) = [
            t for t in traces.values() if _a_tree(t)["attributes"]["input.value"] == asked.question
        ]
        root = _a_tree(trace)
        assert {span["service"] for span in trace} == {"kestrel-assistant"}
        kinds = {span["attributes"].get("openinference.span.kind") for span in trace}
        assert {"CHAIN", "RETRIEVER", "LLM"} <= kinds
        assert root["attributes"]["openinference.span.kind"] == "CHAIN"
        assert root["name"] == "BaseQueryEngine.query"
        assert root["attributes"]["output.value"] == asked.answer

        (retrieved,) = [
            span["attributes"]
            for span in trace
            if "retrieval.documents.0.document.content" in span["attributes"]
        ]
        assert retrieved["openinference.span.kind"] == "RETRIEVER"
        assert retrieved["input.value"] == asked.question
        contents = [
            retrieved[f"retrieval.documents.{i}.document.content"]
            for i in range(len(asked.contexts))
        ]
        assert contents == asked.contexts
        assert f"retrieval.documents.{len(asked.contexts)}.document.content" not in retrieved
        scores = [retrieved[f"retrieval.documents.{i}.document.score"] for i in range(4)]
        assert scores == sorted(scores, reverse=True)

        counted = [
            span["attributes"]
            for span in trace
            if span["attributes"].get("openinference.span.kind") == "LLM"
            and "llm.token_count.completion" in span["attributes"]
        ]
        assert counted and all(a["llm.token_count.completion"] > 0 for a in counted)
        assert all(a["output.value"].strip() in asked.answer for a in counted)

    # the import joins each trace into one record: this question, answer, passages, tokens
    found = import_traces([out], tmp_path / "run")
    assert (found.traces_in_window, found.answers) == (len(answered), len(answered))
    records = {r["question"]: r for r in _records(tmp_path / "run")}
    for asked in answered:
        record = records[asked.question]
        assert record["answer"] == asked.answer
        assert [c["text"] for c in record["retrieved"]] == asked.contexts
        assert record["conventions"] == ["openinference"] and record["llm_calls"] == 1
        assert record["output_tokens"] > 0 and record["e2e_s"] > 0
        assert "ttft_s" not in record  # nothing in these spans records it: absent


def test_vllms_server_span_joins_the_applications_trace(
    kestrel_index: Path, vllm_server: str, otlp_sink: TraceSink, tmp_path: Path
) -> None:
    """An application traced with the GenAI conventions calls the session's traced `vllm
    serve`: vLLM's `llm_request` span is in the application's trace, under the HTTP client
    span whose `traceparent` it received, with its server-side latencies; the workflow, the
    retrieval and the chat spans hold the question, the passages and the answer."""
    answered = ask_served(
        kestrel_index, vllm_server, MODEL_NAME, QUESTIONS[2:4], otlp_sink.endpoint
    )
    spans = wait_for_spans(otlp_sink.out, {str(asked.trace_id) for asked in answered})
    traces = _by_trace(spans)
    for asked in answered:
        assert asked.answer.strip() and asked.trace_id
        trace = traces[asked.trace_id]
        root = _a_tree(trace)
        by_operation = {
            span["attributes"].get("gen_ai.operation.name", span["name"]): span for span in trace
        }
        assert set(by_operation) == {"invoke_workflow", "retrieval", "chat", "POST", "llm_request"}
        assert root is by_operation["invoke_workflow"]
        assert {s["service"] for s in trace if s is not by_operation["llm_request"]} == {
            "kestrel-rag-service"
        }
        workflow = root["attributes"]
        assert _text(workflow["gen_ai.input.messages"]) == asked.question
        assert _text(workflow["gen_ai.output.messages"]) == asked.answer

        retrieval = by_operation["retrieval"]
        assert retrieval["parentSpanId"] == root["spanId"]
        assert retrieval["attributes"]["gen_ai.retrieval.query.text"] == asked.question
        documents = json.loads(retrieval["attributes"]["gen_ai.retrieval.documents"])
        assert [d["content"] for d in documents] == asked.contexts
        assert all(d["id"] and d["score"] > 0 for d in documents)

        chat = by_operation["chat"]
        assert chat["parentSpanId"] == root["spanId"] and chat["kind"] == CLIENT
        assert chat["attributes"]["gen_ai.request.model"] == MODEL_NAME
        assert _text(chat["attributes"]["gen_ai.output.messages"]) == asked.answer
        assert asked.question in _text(chat["attributes"]["gen_ai.input.messages"])

        http = by_operation["POST"]
        assert http["parentSpanId"] == chat["spanId"] and http["kind"] == CLIENT

        served = by_operation["llm_request"]
        assert served["service"] == "vllm-server" and served["kind"] == SERVER
        assert served["parentSpanId"] == http["spanId"]  # the traceparent the client sent
        latency = served["attributes"]
        ttft = latency["gen_ai.latency.time_to_first_token"]
        e2e = latency["gen_ai.latency.e2e"]
        assert 0 < ttft <= e2e
        assert (
            latency["gen_ai.usage.completion_tokens"]
            == (chat["attributes"]["gen_ai.usage.output_tokens"])
        )
        assert (
            latency["gen_ai.usage.prompt_tokens"]
            == (chat["attributes"]["gen_ai.usage.input_tokens"])
        )
        # the server's span lies within the client's request
        assert int(http["startTimeUnixNano"]) <= int(served["startTimeUnixNano"])
        assert int(served["endTimeUnixNano"]) <= int(http["endTimeUnixNano"])

    # the import joins the application's spans and vLLM's: the record's timings are vLLM's
    run = tmp_path / "run"
    import_traces([otlp_sink.out], run, service="kestrel-rag-service")
    records = {r["id"]: r for r in _records(run)}
    for asked in answered:
        assert asked.trace_id is not None
        record = records[asked.trace_id]
        latency = next(
            s["attributes"] for s in traces[asked.trace_id] if s["name"] == "llm_request"
        )
        assert (record["question"], record["answer"]) == (asked.question, asked.answer)
        assert [c["text"] for c in record["retrieved"]] == asked.contexts
        assert record["model"] == MODEL_NAME and record["conventions"] == ["genai", "vllm"]
        assert record["ttft_s"] == latency["gen_ai.latency.time_to_first_token"]
        assert record["timing_sources"]["ttft_s"].endswith("llm_request (vllm-server)")
        assert record["output_tokens"] == latency["gen_ai.usage.completion_tokens"]
        assert record["e2e_s"] >= latency["gen_ai.latency.e2e"]  # the request's, not vLLM's


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def _text(messages: str) -> str:
    """The text of a GenAI messages attribute holding one message of one text part."""
    (message,) = json.loads(messages)
    (part,) = message["parts"]
    assert part["type"] == "text"
    content: str = part["content"]
    return content
