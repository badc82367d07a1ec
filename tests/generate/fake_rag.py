"""A scripted fake RAG service (JSON over HTTP) for fast tests of the `http` target backend.

The question says how the server behaves, so concurrent requests each have their own script;
attempts are counted per question:
- `ok` (or anything unknown): the answer, its sources and a token count
- `html`: 200 with an HTML page (not JSON)
- `nomatch`: 200 with JSON that has no `data.answer`
- `fail500:N` / `fail429:N`: that status for the first N attempts, then ok
- `bad400`: HTTP 400 with a JSON `detail`
- `slow`: sleeps SLOW_S before answering (longer than the tests' client timeout)
- `cut:N`: streamed, for the first N attempts: 2 events, then the body ends without [DONE]
Paths: `/ask` one JSON body; `/sse` server-sent events (`data: {"token": ...}` then a final
`data: {"sources": [...]}` and `data: [DONE]`); `/jsonl` the same events as JSON lines.
The server notes, per request, when it wrote the first token (its own TTFT measurement).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER_PIECES = ("Paris", " is the", " capital", " of France.")
ANSWER = "".join(ANSWER_PIECES)
SOURCES = [
    {"id": "geo-1", "doc": "geo.md", "score": 0.91, "text": "Paris is the capital of France."},
    {"id": "geo-2", "doc": "geo.md", "score": 0.40, "text": ""},  # no text: skipped
    {"id": "geo-3", "doc": "travel.md", "score": 0.33, "text": "Lyon is in France."},
]
OUTPUT_TOKENS = 7
PIECE_SLEEP_S = 0.03
FIRST_TOKEN_DELAY_S = 0.08
SLOW_S = 1.5


class FakeRag:
    """State shared by the handler threads: what was asked and what the server measured."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.server_ttft_s: dict[str, float] = {}  # question -> the server's own TTFT
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def start(self) -> FakeRag:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _make_handler(state: FakeRag) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # the question as a query parameter
            from urllib.parse import parse_qs, urlsplit

            query = parse_qs(urlsplit(self.path).query)
            with state.lock:
                state.bodies.append({k: v[0] for k, v in query.items()})
            answer = {"data": {"answer": ANSWER, "sources": SOURCES}, "usage": {"tokens": 7}}
            self._json(200, answer)

        def do_POST(self) -> None:
            received = time.perf_counter()
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            question = str(body.get("query", ""))
            with state.lock:
                state.bodies.append(body)
                state.headers.append(dict(self.headers.items()))
                state.attempts[question] += 1
                attempt = state.attempts[question]
            script, _, count = question.partition(":")
            limit = int(count) if count.isdigit() else 10**6
            if script in ("fail500", "fail429") and attempt <= limit:
                self._json(int(script[4:]), {"detail": f"scripted {script[4:]}"})
                return
            if script == "bad400":
                self._json(400, {"detail": "query must not be empty"})
                return
            if script == "slow":
                time.sleep(SLOW_S)
            if script == "html":
                self._raw(200, b"<html><body>Service temporarily moved</body></html>", "text/html")
                return
            if script == "nomatch":
                self._json(200, {"result": {"text": ANSWER}})
                return
            if self.path == "/ask":
                time.sleep(FIRST_TOKEN_DELAY_S)
                self._json(
                    200,
                    {"data": {"answer": ANSWER, "sources": SOURCES}, "usage": {"tokens": 7}},
                )
                return
            cut = script == "cut" and attempt <= limit
            self._stream(question, received, sse=self.path == "/sse", cut=cut)

        def _json(self, status: int, payload: Any) -> None:
            self._raw(status, json.dumps(payload).encode(), "application/json")

        def _raw(self, status: int, data: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, question: str, received: float, *, sse: bool, cut: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if sse else "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def send(event: Any) -> None:
                text = event if isinstance(event, str) else json.dumps(event)
                line = (f"data: {text}\n\n" if sse else f"{text}\n").encode()
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()

            time.sleep(FIRST_TOKEN_DELAY_S)
            for number, piece in enumerate(ANSWER_PIECES):
                if number == 0:
                    with state.lock:
                        state.server_ttft_s[question] = time.perf_counter() - received
                send({"token": piece})
                if cut and number == 1:
                    break
                time.sleep(PIECE_SLEEP_S)
            if not cut:
                send({"sources": SOURCES, "usage": {"tokens": OUTPUT_TOKENS}})
                if sse:
                    send("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
