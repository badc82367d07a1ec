"""A minimal OTLP/HTTP trace receiver that writes what it receives as the Collector's `file`
exporter does: one `ExportTraceServiceRequest` a line, in OTLP JSON.

For tests, and for making trace exports where no OpenTelemetry Collector runs. It accepts
`POST /v1/traces` with `Content-Type: application/x-protobuf` (what the SDK's OTLP/HTTP
exporter and vLLM's `http/protobuf` exporter send) or `application/json` (OTLP/HTTP JSON),
either optionally gzip- or deflate-compressed, and answers 200 with an empty
`ExportTraceServiceResponse`. Each request becomes one line: protobuf's JSON mapping with
lowerCamelCase field names, enums as integers, int64 as strings, and the trace and span ids
as lowercase hex (the OTLP JSON encoding; protobuf's own JSON mapping would write base64).

    python -m auditor.traces.sink --port 4318 --out traces.otlp.jsonl

or in process::

    with TraceSink(path) as sink:
        exporter = OTLPSpanExporter(endpoint=sink.endpoint)
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import signal
import sys
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["TRACES_PATH", "TraceSink", "main", "parse_otlp_json", "to_otlp_json"]

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ID_KEYS = ("traceId", "spanId", "parentSpanId")
MAX_BODY = 64 * 1024 * 1024  # a request larger than this is refused (413)


def _spans_and_links(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every span of an OTLP JSON request, and every link of those spans (the objects that
    hold trace and span ids)."""
    for resource_spans in request.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                yield span
                yield from span.get("links", ())


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """The request as the Collector's file exporter writes it: protobuf's JSON mapping
    (camelCase, enums as integers, int64 as strings) with the ids as lowercase hex."""
    data: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
    for item in _spans_and_links(data):
        for key in _ID_KEYS:
            if item.get(key):
                item[key] = base64.b64decode(item[key]).hex()
    return data


def parse_otlp_json(body: bytes | str) -> ExportTraceServiceRequest:
    """An OTLP/HTTP JSON request (ids as hex, as the OTLP spec encodes them) as a message.

    Raises ValueError on anything that is not such a request."""
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("an OTLP JSON request is an object")
    for item in _spans_and_links(data):
        for key in _ID_KEYS:
            if item.get(key):
                item[key] = base64.b64encode(bytes.fromhex(item[key])).decode("ascii")
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, request)
    except json_format.ParseError as err:
        raise ValueError(str(err)) from err
    return request


def _decompress(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDK's exporter reuses its connection
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            self._reply(413, JSON, b'{"message": "request too large"}')
            return
        body = self.rfile.read(length)
        if self.path.split("?", 1)[0] != TRACES_PATH:
            self._reply(404, JSON, b'{"message": "only POST /v1/traces"}')
            return
        kind = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if kind not in (PROTOBUF, JSON):
            self._reply(415, JSON, b'{"message": "application/x-protobuf or application/json"}')
            return
        try:
            raw = _decompress(body, self.headers.get("Content-Encoding") or "")
            if kind == PROTOBUF:
                request = ExportTraceServiceRequest.FromString(raw)
            else:
                request = parse_otlp_json(raw)
        except Exception as err:  # a malformed request is the sender's error, not ours
            message = json.dumps({"message": f"{type(err).__name__}: {err}"})
            self._reply(400, JSON, message.encode())
            return
        self.server.sink.write(request)
        if kind == PROTOBUF:
            self._reply(200, PROTOBUF, ExportTraceServiceResponse().SerializeToString())
        else:
            self._reply(200, JSON, b"{}")

    def _reply(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: one line per export would drown a test's output


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sink: TraceSink


class TraceSink:
    """The receiver on `host:port` (port 0: a free one), appending to `out`.

    Appends are serialised by a lock, one line per request, flushed as written, so a reader
    sees whole lines. `requests` counts the requests written."""

    def __init__(self, out: Path | str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.out = Path(out)
        self.host = host
        self.requests = 0
        self._lock = threading.Lock()
        self._file: TextIO | None = None
        self._server = _Server((host, port), _Handler)
        self._server.sink = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def endpoint(self) -> str:
        """The URL to give an OTLP/HTTP exporter (the full traces path)."""
        return f"http://{self.host}:{self.port}{TRACES_PATH}"

    def write(self, request: ExportTraceServiceRequest) -> None:
        line = json.dumps(to_otlp_json(request), separators=(",", ":"), ensure_ascii=False)
        with self._lock:
            if self._file is None:
                self.out.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.out.open("a", encoding="utf-8")
            self._file.write(line + "\n")
            self._file.flush()
            self.requests += 1

    def start(self) -> TraceSink:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-sink", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until `stop` (from another thread or a signal handler)."""
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving and close the file (requests in flight finish first)."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> TraceSink:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m auditor.traces.sink",
        description="Receive OTLP/HTTP traces; append each request as a line of OTLP JSON.",
    )
    parser.add_argument("--out", required=True, type=Path, help="the JSON-lines file to append")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4318, help="0: a free port (printed)")
    args = parser.parse_args(argv)
    sink = TraceSink(args.out, args.host, args.port)

    # stop() waits for serve_forever to return: a signal handler calls it off this thread
    stopping = threading.Thread(target=sink.stop, name="otlp-sink-stop", daemon=True)

    def stop(signum: int, frame: object) -> None:
        if stopping.ident is None:
            stopping.start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"OTLP/HTTP traces: {sink.endpoint} -> {args.out}", flush=True)
    sink.serve_forever()
    stopping.join(timeout=30)
    print(f"{sink.requests} requests written to {args.out}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
