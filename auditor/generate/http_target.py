"""A team's own RAG service behind HTTP, audited as a black box (`kind = "http"`).

The auditor sends the question in the configured JSON body, reads the answer (and the contexts
the service says it used) from the reply with JMESPath, and measures what a client can see:
end-to-end latency always; TTFT, inter-token times and TPOT when the reply streams (server-sent
events or JSON lines). Loading, retries and endpoint choice are the `openai` backend's
(`auditor/generate/scheduler.py`). A fault never raises: the record carries the error.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import jmespath

from auditor.config import HttpGeneratorConfig
from auditor.errors import AuditorError, BadInput
from auditor.generate.base import GenerationStats, GenRequest, GenResult, OnResult, tpot
from auditor.generate.scheduler import (
    ERROR_BODY_CHARS,
    Failure,
    LoadShape,
    error_message,
    http_failure,
    one_line,
    run_requests,
)

__all__ = ["HttpTargetGenerator", "fill_template", "read_contexts"]

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0


def fill_template(value: Any, question: str, request_id: str) -> Any:
    """The request body with {question} and {id} filled into every string value (JSON escaping
    is the encoder's job, so any question text is safe)."""
    if isinstance(value, str):
        return value.replace("{question}", question).replace("{id}", request_id)
    if isinstance(value, dict):
        return {k: fill_template(v, question, request_id) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_template(v, question, request_id) for v in value]
    return value


def _compiled(expression: str | None) -> Any:
    return None if expression is None else jmespath.compile(expression)


def read_contexts(found: Any, cfg: HttpGeneratorConfig) -> list[dict[str, Any]]:
    """The service's contexts as retrieved-chunk records: strings, or objects read with the
    context_* expressions. Entries without text are skipped."""
    if found is None:
        return []
    items = found if isinstance(found, list) else [found]
    paths = [_compiled(e) for e in (cfg.context_id, cfg.context_source, cfg.context_score)]
    text_path = jmespath.compile(cfg.context_text)
    contexts: list[dict[str, Any]] = []
    for number, item in enumerate(items, 1):
        if isinstance(item, str):
            text, chunk_id, source, score = item, None, None, None
        else:
            text = text_path.search(item)
            chunk_id, source, score = (None if p is None else p.search(item) for p in paths)
        if not isinstance(text, str) or not text.strip():
            continue
        contexts.append(
            {
                "chunk_id": str(chunk_id) if chunk_id is not None else f"returned-{number}",
                "document": str(source) if source is not None else None,
                "page": None,
                "score": float(score) if isinstance(score, int | float) else None,
                "text": text,
            }
        )
    return contexts


@dataclass
class _Reply:
    """What one successful attempt delivered (perf_counter times)."""

    sent: float
    end: float = 0.0
    answer: str | None = None  # the `answer` mapping's match
    contexts: Any = None  # the `contexts` mapping's match
    output_tokens: int | None = None
    pieces: list[str] = field(default_factory=list)  # streamed answer text
    piece_times: list[float] = field(default_factory=list)
    last_body: bytes = b""  # the last reply or event read (for a mapping error)


class HttpTargetGenerator:
    """Questions to a deployed RAG service; answers, contexts and client-side timings back."""

    def __init__(self, cfg: HttpGeneratorConfig, headers: dict[str, str]) -> None:
        self.cfg = cfg
        self.endpoints = list(cfg.endpoints)
        self._headers = headers
        self._healthy: list[str] | None = None
        self._expressions = {
            name: jmespath.compile(getattr(cfg, name))
            for name in ("answer", "contexts", "output_tokens", "stream_token")
            if getattr(cfg, name)
        }
        self._count_tokens: Callable[[str], list[int]] | None = None

    @classmethod
    def from_config(cls, cfg: HttpGeneratorConfig) -> HttpTargetGenerator:
        """Build from config; secret headers are read from the named environment variables."""
        headers = dict(cfg.headers)
        for header, variable in cfg.headers_env.items():
            value = os.environ.get(variable, "")
            if not value:
                raise BadInput(
                    f"generator.headers_env.{header}: environment variable {variable} is not "
                    "set or empty; export it or remove the header"
                )
            headers[header] = value
        return cls(cfg, headers)

    def _probe(self) -> None:
        """Open a TCP connection to every endpoint; keep those that accept (fail fast if none)."""
        healthy: list[str] = []
        down: list[tuple[str, str]] = []
        for endpoint in self.endpoints:
            parts = urlsplit(endpoint)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                with socket.create_connection((parts.hostname or "", port), PROBE_TIMEOUT_S):
                    healthy.append(endpoint)
            except OSError as exc:
                reason = (
                    "connection refused"
                    if isinstance(exc, ConnectionRefusedError)
                    else (one_line(str(exc) or type(exc).__name__, 120))
                )
                down.append((endpoint, reason))
        if not healthy:
            listed = "; ".join(f"{e} ({r})" for e, r in down)
            raise AuditorError(
                f"service not reachable: {listed}; start it or fix generator.endpoints"
            )
        for endpoint, reason in down:
            logger.warning("%s: skipped, not reachable (%s)", endpoint, reason)
        self._healthy = healthy

    def identity(self) -> dict[str, Any]:
        if self._healthy is None:
            self._probe()
        return {
            "name": f"http service at {self.endpoints[0]}",
            "backend": "http",
            "endpoints": list(self.endpoints),
            "stream": self.cfg.stream,
        }

    def generate(self, requests: Sequence[GenRequest], on_result: OnResult) -> GenerationStats:
        """Send every question to the reachable endpoints; `on_result` as each one ends."""
        self._probe()
        assert self._healthy is not None
        cfg = self.cfg
        shape = LoadShape.of(cfg)
        start = time.perf_counter()
        run_requests(
            shape,
            list(self._healthy),
            requests,
            on_result,
            headers=self._headers,
            attempt=self._attempt,
            succeed=self._success,
        )
        regime: dict[str, Any] = {
            "mode": "server",
            "concurrency": cfg.concurrency,
            "request_rate": cfg.request_rate,
            "endpoints": list(self._healthy),
            "stream": cfg.stream,
        }
        return GenerationStats(wall_s=time.perf_counter() - start, regime=regime)

    def close(self) -> None:
        """Nothing to free: each generate() opens and closes its own connections."""

    # -- one attempt -----------------------------------------------------------------------

    async def _attempt(
        self, client: httpx.AsyncClient, endpoint: str, request: GenRequest
    ) -> _Reply:
        cfg = self.cfg
        body = fill_template(cfg.body, request.question or "", request.request_id)
        sending: dict[str, Any] = {"params": body} if cfg.method == "GET" else {"json": body}
        reply = _Reply(sent=time.perf_counter())
        async with client.stream(cfg.method, endpoint, **sending) as response:
            if not 200 <= response.status_code < 300:
                payload = await response.aread()
                raise http_failure(response.status_code, error_message(payload))
            if cfg.stream == "none":
                payload = await response.aread()
                reply.end = time.perf_counter()
                self._take(reply, _json_of(payload, "reply"), reply.end, whole=payload)
            else:
                await self._read_stream(response, reply)
                reply.end = time.perf_counter()
        if reply.answer is None and not reply.pieces:
            raise Failure(
                "answer mapping matched nothing",
                f"{cfg.stream_token if cfg.stream != 'none' else cfg.answer!r} in "
                f"{one_line(reply.last_body.decode('utf-8', 'replace'), ERROR_BODY_CHARS)}",
                retryable=False,
            )
        return reply

    async def _read_stream(self, response: httpx.Response, reply: _Reply) -> None:
        cfg = self.cfg
        done = False
        async for line in response.aiter_lines():
            now = time.perf_counter()
            if cfg.stream == "sse":
                if not line.startswith("data:"):
                    continue  # blank separators, comments, `event:` / `id:` lines
                data = line[5:].strip()
                if cfg.stream_done is not None and data == cfg.stream_done:
                    done = True
                    break
            else:
                data = line.strip()
                if not data:
                    continue
            self._take(reply, _json_of(data.encode(), "stream event"), now, whole=data.encode())
        if cfg.stream == "sse" and cfg.stream_done is not None and not done:
            raise Failure("stream broken", f"ended without {cfg.stream_done}")

    def _take(self, reply: _Reply, event: Any, now: float, whole: bytes) -> None:
        """Read one JSON reply or stream event into the reply."""
        reply.contexts = self._search("contexts", event, reply.contexts)
        tokens = self._search("output_tokens", event, None)
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            reply.output_tokens = tokens
        piece = self._search("stream_token", event, None) if self.cfg.stream != "none" else None
        if isinstance(piece, str) and piece:
            reply.pieces.append(piece)
            reply.piece_times.append(now)
        answer = self._search("answer", event, None)
        if isinstance(answer, str):
            reply.answer = answer
        elif answer is not None and self.cfg.stream == "none":
            raise Failure(
                "answer mapping is not text",
                f"{self.cfg.answer!r} gave {type(answer).__name__} in "
                f"{one_line(whole.decode('utf-8', 'replace'))}",
                retryable=False,
            )
        reply.last_body = whole

    def _search(self, name: str, event: Any, default: Any) -> Any:
        expression = self._expressions.get(name)
        if expression is None:
            return default
        found = expression.search(event)
        return default if found is None else found

    def _success(
        self,
        request: GenRequest,
        endpoint: str,
        reply: _Reply,
        attempts: int,
        failures: list[str],
        wall: Callable[[float], float],
    ) -> GenResult:
        streamed = bool(reply.pieces)
        text = "".join(reply.pieces) if streamed else (reply.answer or "")
        engine: dict[str, Any] = {}
        if reply.output_tokens is not None:
            output_tokens = reply.output_tokens
            engine["output_tokens_source"] = "service"
        else:
            output_tokens = len(self._tokens(text))
            engine["output_tokens_source"] = "cl100k_base count of the answer"
        if failures:
            engine["failed_attempts"] = failures
        times = reply.piece_times
        first = wall(times[0]) if times else None
        last = wall(times[-1]) if times else None
        return GenResult(
            request_id=request.request_id,
            text=text,
            output_tokens=output_tokens,
            finish_reason="stop",
            arrival_time=wall(reply.sent),
            first_token_time=first,
            last_token_time=last,
            ttft_s=times[0] - reply.sent if times else None,
            tpot_s=tpot(first, last, output_tokens) if times else None,
            e2e_s=reply.end - reply.sent,
            itl_s=[round(b - a, 6) for a, b in itertools.pairwise(times)] if times else None,
            attempts=attempts,
            endpoint=endpoint,
            engine=engine,
            contexts=read_contexts(reply.contexts, self.cfg) if self.cfg.contexts else None,
        )

    def _tokens(self, text: str) -> list[int]:
        if self._count_tokens is None:
            # cl100k_base, shipped inside llama-index-core: no download
            from llama_index.core.utils import get_tokenizer

            self._count_tokens = get_tokenizer()
        return self._count_tokens(text)


def _json_of(payload: bytes, what: str) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        raise Failure(
            f"{what} is not JSON", one_line(payload.decode("utf-8", "replace")), retryable=False
        ) from None
