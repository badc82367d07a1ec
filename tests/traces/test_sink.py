"""The OTLP/HTTP sink: what the SDK's exporter sends becomes one line of OTLP JSON a request,
as the Collector's file exporter writes it (camelCase, enums as integers, hex ids)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind

from auditor.traces.sink import TraceSink, parse_otlp_json, to_otlp_json

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[TraceSink]:
    with TraceSink(tmp_path / "traces.otlp.jsonl") as running:
        yield running


def _spans() -> list[ReadableSpan]:
    """A parent, a child and a span linked to the parent, made by the SDK."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "sink-test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.sink")
    with tracer.start_as_current_span("parent", kind=SpanKind.SERVER) as parent:
        parent.set_attribute("input.value", "What is Kestrel?")
        with tracer.start_as_current_span("child") as child:
            child.set_attribute("gen_ai.usage.output_tokens", 7)
            child.set_attribute("gen_ai.latency.e2e", 0.25)
    tracer.start_span("linked", links=[Link(parent.get_span_context())]).end()
    provider.shutdown()
    return list(memory.get_finished_spans())


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _flat(line: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        span["name"]: span
        for rs in line["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    }


def test_a_protobuf_request_becomes_one_line_of_otlp_json(sink: TraceSink) -> None:
    spans = _spans()
    body = encode_spans(spans).SerializeToString()
    reply = httpx.post(sink.endpoint, content=body, headers=PROTOBUF)
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/x-protobuf"
    assert ExportTraceServiceResponse.FromString(reply.content) == ExportTraceServiceResponse()

    (line,) = _lines(sink.out)
    assert list(line) == ["resourceSpans"]
    resource = line["resourceSpans"][0]["resource"]["attributes"]
    assert {"key": "service.name", "value": {"stringValue": "sink-test"}} in resource
    got = _flat(line)
    by_name = {s.name: s for s in spans}
    for name, span in got.items():
        made = by_name[name]
        assert span["traceId"] == format(made.context.trace_id, "032x")
        assert span["spanId"] == format(made.context.span_id, "016x")
        assert span["startTimeUnixNano"] == str(made.start_time)  # int64 as a string
    assert got["child"]["parentSpanId"] == got["parent"]["spanId"]
    assert "parentSpanId" not in got["parent"]  # a root has none (empty bytes are left out)
    assert got["parent"]["kind"] == 2  # SPAN_KIND_SERVER, an integer
    assert got["child"]["kind"] == 1
    (link,) = got["linked"]["links"]
    assert (link["traceId"], link["spanId"]) == (got["parent"]["traceId"], got["parent"]["spanId"])
    attributes = {a["key"]: a["value"] for a in got["child"]["attributes"]}
    assert attributes == {
        "gen_ai.usage.output_tokens": {"intValue": "7"},
        "gen_ai.latency.e2e": {"doubleValue": 0.25},
    }
    assert got["parent"]["status"] == {}  # UNSET: the default code is left out


def test_the_sdks_exporter_gzipped_lands_as_it_was_made(tmp_path: Path, sink: TraceSink) -> None:
    """The real OTLP/HTTP exporter, gzip on, through a batch of one export."""
    memory = InMemorySpanExporter()
    exporter = OTLPSpanExporter(endpoint=sink.endpoint, compression=Compression.Gzip)
    provider = TracerProvider(resource=Resource.create({"service.name": "gz"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.sink")
    with tracer.start_as_current_span("request") as span:
        span.set_attribute("output.value", "ünïcode answer")
    provider.shutdown()
    (made,) = memory.get_finished_spans()
    (line,) = _lines(sink.out)
    got = _flat(line)["request"]
    assert got["traceId"] == format(made.context.trace_id, "032x")
    assert got["attributes"] == [
        {"key": "output.value", "value": {"stringValue": "ünïcode answer"}}
    ]
    assert sink.requests == 1


def test_a_json_request_round_trips(sink: TraceSink) -> None:
    """OTLP/HTTP JSON (hex ids) in, the same line out: what the sink wrote is valid OTLP JSON."""
    first = to_otlp_json(encode_spans(_spans()))
    body = gzip.compress(json.dumps(first).encode())
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    reply = httpx.post(sink.endpoint, content=body, headers=headers)
    assert reply.status_code == 200 and reply.json() == {}
    assert _lines(sink.out) == [first]
    assert to_otlp_json(parse_otlp_json(json.dumps(first))) == first


@pytest.mark.parametrize(
    ("path", "headers", "body", "status"),
    [
        ("/v1/metrics", PROTOBUF, b"", 404),
        ("/v1/traces", {"Content-Type": "text/plain"}, b"x", 415),
        ("/v1/traces", PROTOBUF, b"\xff\xfe not protobuf", 400),
        ("/v1/traces", {"Content-Type": "application/json"}, b"[1, 2]", 400),
        ("/v1/traces", {"Content-Type": "application/json"}, b'{"resourceSpans": 3}', 400),
        ("/v1/traces", {**PROTOBUF, "Content-Encoding": "gzip"}, b"not gzip", 400),
        ("/v1/traces", {**PROTOBUF, "Content-Encoding": "br"}, b"", 400),
    ],
)
def test_what_is_not_a_trace_export_is_refused_and_not_written(
    sink: TraceSink, path: str, headers: dict[str, str], body: bytes, status: int
) -> None:
    url = sink.endpoint.replace("/v1/traces", path)
    assert httpx.post(url, content=body, headers=headers).status_code == status
    assert not sink.out.exists() and sink.requests == 0


def test_concurrent_requests_write_whole_lines(sink: TraceSink) -> None:
    body = encode_spans(_spans()).SerializeToString()

    def post() -> None:
        with httpx.Client() as client:
            for _ in range(10):
                assert client.post(sink.endpoint, content=body, headers=PROTOBUF).is_success

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = _lines(sink.out)
    assert len(lines) == 40 == sink.requests
    assert all(line == lines[0] for line in lines)


def test_the_command_serves_until_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "cmd.otlp.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "auditor.traces.sink", "--port", "0", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        endpoint = first.split()[2]
        assert endpoint.startswith("http://127.0.0.1:") and endpoint.endswith("/v1/traces")
        body = encode_spans(_spans()).SerializeToString()
        assert httpx.post(endpoint, content=body, headers=PROTOBUF).status_code == 200
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "1 requests written" in err
    assert len(_lines(out)) == 1
