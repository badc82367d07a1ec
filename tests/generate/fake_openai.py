"""A scripted fake OpenAI-compatible chat server for fast tests of the streaming client.

The last message of a request says how the server behaves, so concurrent requests can each
have their own script; attempts are counted per message text:
- `ok` (or anything unknown): stream CHUNKS with small sleeps, a usage chunk, then [DONE]
- `nousage`: the same without the usage chunk
- `fail500:N`: HTTP 500 for the first N attempts, then ok (`fail500` alone: always 500)
- `fail429:N`: HTTP 429 for the first N attempts, then ok
- `slow`: sleep SLOW_S before answering (longer than the tests' client timeout)
- `break:N`: for the first N attempts, send 2 chunks then close the socket mid-body
- `cut:N`: for the first N attempts, send 2 chunks then end the body cleanly without
  [DONE] or a finish_reason
- `bad400`: HTTP 400 with an OpenAI-style JSON error
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHUNKS = ("Hello", " world", ",", " friend!")
PROMPT_TOKENS = 11
COMPLETION_TOKENS = 6  # differs from len(CHUNKS): the client must take usage, not count chunks
CHUNK_SLEEP_S = 0.02
SLOW_S = 1.5
BAD_REQUEST_MESSAGE = "This model's maximum context length is 2048 tokens."


class FakeOpenAI:
    """State shared by the handler threads: what was asked, and how busy it got."""

    def __init__(self, models: tuple[str, ...] = ("fake-model",)) -> None:
        self.models = models
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.chat_requests = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def running_fake(models: tuple[str, ...] = ("fake-model",)) -> Iterator[FakeOpenAI]:
    """A started fake server, stopped on exit."""
    fake = FakeOpenAI(models).start()
    try:
        yield fake
    finally:
        fake.stop()


def free_port_url() -> str:
    """A /v1 URL on which nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _make_handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked bodies, like uvicorn

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output quiet

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                data = [
                    {"id": m, "object": "model", "root": f"/models/{m}", "max_model_len": 2048}
                    for m in fake.models
                ]
                self._json(200, {"object": "list", "data": data})
            else:
                self._json(404, {"error": {"message": "not found", "code": 404}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            with fake.lock:
                fake.bodies.append(body)
                fake.auth_headers.append(self.headers.get("Authorization"))
                fake.chat_requests += 1
                fake.in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                script = body["messages"][-1]["content"]
                fake.attempts[script] += 1
                attempt = fake.attempts[script]
            try:
                self._chat(body, script, attempt)
            except OSError:
                pass  # the client went away (timeout tests)
            finally:
                with fake.lock:
                    fake.in_flight -= 1

        def _chat(self, body: dict[str, Any], script: str, attempt: int) -> None:
            mode, _, count = script.partition(":")
            times = int(count) if count else 10**9
            if body.get("model") not in fake.models:
                self._json(404, {"error": {"message": f"model {body.get('model')} not found"}})
            elif mode == "fail500" and attempt <= times:
                self._json(500, {"error": {"message": "engine crashed", "code": 500}})
            elif mode == "fail429" and attempt <= times:
                self._json(429, {"error": {"message": "too many requests", "code": 429}})
            elif mode == "bad400":
                self._json(400, {"error": {"message": BAD_REQUEST_MESSAGE, "code": 400}})
            elif mode == "slow":
                time.sleep(SLOW_S)
                self._stream(usage=True)
            elif mode == "break" and attempt <= times:
                self._stream(usage=True, stop_after=2, close=True)
            elif mode == "cut" and attempt <= times:
                self._stream(usage=True, stop_after=2, close=False)
            else:
                self._stream(usage=mode != "nousage")

        def _chunk(self, data: str) -> None:
            payload = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        def _stream(self, usage: bool, stop_after: int | None = None, close: bool = False) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": fake.models[0]}
            role = {"index": 0, "delta": {"role": "assistant", "content": ""}}
            self._chunk(json.dumps({**base, "choices": [role]}))
            for i, piece in enumerate(CHUNKS):
                if stop_after is not None and i == stop_after:
                    if close:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                    else:
                        self.wfile.write(b"0\r\n\r\n")
                    return
                time.sleep(CHUNK_SLEEP_S)
                choice = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
                self._chunk(json.dumps({**base, "choices": [choice]}))
            final = {"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}
            self._chunk(json.dumps({**base, "choices": [final]}))
            if usage:
                counts = {
                    "prompt_tokens": PROMPT_TOKENS,
                    "completion_tokens": COMPLETION_TOKENS,
                    "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
                }
                self._chunk(json.dumps({**base, "choices": [], "usage": counts}))
            self._chunk("[DONE]")
            self.wfile.write(b"0\r\n\r\n")

    return Handler
