"""Generator for any OpenAI-compatible chat server (first of all `vllm serve`), streamed.

Latency is measured at the client from the SSE stream, the way `vllm bench serve` does:
TTFT is the first chunk with content, ITL the gaps between content chunks, token counts
come from the server's final usage chunk. Faults (refused connections, timeouts, 5xx/429,
broken streams) are retried with exponential backoff; a request that still fails becomes
a `GenResult` with `error` set, never an exception.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from auditor.config import OpenAIGeneratorConfig
from auditor.errors import AuditorError, BadInput
from auditor.generate.base import GenerationStats, GenRequest, GenResult, OnResult, tpot
from auditor.generate.scheduler import (
    Failure,
    LoadShape,
    error_message,
    http_failure,
    run_requests,
    transport_reason,
)

__all__ = [
    "OpenAIServerGenerator",
    "histogram_sum_count",
    "parse_prometheus",
    "scrape_prometheus",
]

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0


@dataclass
class _Stream:
    """What one successful streamed attempt delivered (perf_counter times)."""

    sent: float
    end: float = 0.0
    pieces: list[str] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    finish_time: float | None = None
    usage: dict[str, Any] | None = None
    done: bool = False
    first_logprobs: dict[str, float] | None = None  # top log-probabilities of the first token


def _first_logprobs(logprobs: Any) -> dict[str, float] | None:
    """{token: log-probability} of the first token's alternatives in an OpenAI logprobs object."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    found: dict[str, float] = {}
    for entry in content[0].get("top_logprobs") or [content[0]]:
        token, logprob = entry.get("token"), entry.get("logprob")
        if isinstance(token, str) and isinstance(logprob, int | float):
            found.setdefault(token, float(logprob))
    return found or None


def _base_url(endpoint: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (where vLLM serves /metrics and /health)."""
    url = endpoint.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\S+)?$")


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format -> {"name{labels}": value}; comments and bad lines are skipped."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, raw = match.groups()
        try:
            samples[name + (labels or "")] = float(raw)
        except ValueError:
            continue
    return samples


def scrape_prometheus(
    endpoint_base_url: str, timeout_s: float = PROBE_TIMEOUT_S
) -> dict[str, float]:
    """GET the server's `/metrics` (an endpoint's URL with or without /v1) and parse it."""
    response = httpx.get(f"{_base_url(endpoint_base_url)}/metrics", timeout=timeout_s)
    response.raise_for_status()
    return parse_prometheus(response.text)


def histogram_sum_count(metrics: dict[str, float], name: str) -> tuple[float, float]:
    """(sum, count) of histogram `name`, added over all its label sets."""
    total = count = 0.0
    for key, value in metrics.items():
        bare = key.split("{", 1)[0]
        if bare == f"{name}_sum":
            total += value
        elif bare == f"{name}_count":
            count += value
    return total, count


class OpenAIServerGenerator:
    """Streams chat completions from one or more OpenAI-compatible endpoints."""

    def __init__(self, cfg: OpenAIGeneratorConfig, api_key: str | None = None) -> None:
        self.cfg = cfg
        self.endpoints = [e.rstrip("/") for e in cfg.endpoints]
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._healthy: list[str] | None = None
        self._served: dict[str, Any] | None = None
        self._probe_client: httpx.Client | None = None

    @classmethod
    def from_config(cls, cfg: OpenAIGeneratorConfig) -> OpenAIServerGenerator:
        """Build from config; the API key is read from `cfg.api_key_env`, never from the file."""
        api_key: str | None = None
        if cfg.api_key_env:
            api_key = os.environ.get(cfg.api_key_env, "")
            if not api_key:
                raise BadInput(
                    f"generator.api_key_env: environment variable {cfg.api_key_env} is not set "
                    "or empty; export it or remove api_key_env"
                )
        return cls(cfg, api_key)

    # -- endpoint checks ---------------------------------------------------------------

    def _probe(self) -> None:
        """GET /models on every endpoint; keep those that answer and serve `cfg.model`."""
        if self._probe_client is None:
            self._probe_client = httpx.Client(headers=self._headers, timeout=PROBE_TIMEOUT_S)
        healthy: list[str] = []
        down: list[tuple[str, str]] = []
        served: dict[str, Any] | None = None
        for endpoint in self.endpoints:
            try:
                response = self._probe_client.get(f"{endpoint}/models")
            except httpx.HTTPError as exc:
                down.append((endpoint, transport_reason(exc)))
                continue
            if response.status_code != 200:
                reason = f"GET /models answered HTTP {response.status_code}: {error_message(response.content)}"
                down.append((endpoint, reason))
                continue
            try:
                entries = [m for m in response.json().get("data", []) if isinstance(m, dict)]
            except (ValueError, AttributeError):
                down.append((endpoint, "GET /models did not return an OpenAI model list"))
                continue
            entry = next((m for m in entries if m.get("id") == self.cfg.model), None)
            if entry is None:
                # A replica serving another model would mix two models in one audit.
                names = ", ".join(str(m.get("id")) for m in entries) or "none"
                raise AuditorError(
                    f"{endpoint}: model {self.cfg.model!r} is not served; it serves: {names} "
                    "(fix generator.model or --served-model-name)"
                )
            if served is None:
                served = {k: entry[k] for k in ("id", "root", "max_model_len") if k in entry}
            healthy.append(endpoint)
        if not healthy:
            if len(down) == 1:
                endpoint, reason = down[0]
                if reason.startswith("GET /models"):
                    raise AuditorError(f"{endpoint}: {reason}")
                raise AuditorError(
                    f"{endpoint}: server not reachable ({reason}); start it or fix generator.endpoints"
                )
            listed = "; ".join(f"{e} ({r})" for e, r in down)
            raise AuditorError(
                f"no endpoint reachable: {listed}; start the servers or fix generator.endpoints"
            )
        for endpoint, reason in down:
            logger.warning("%s: skipped, not usable (%s)", endpoint, reason)
        self._healthy = healthy
        self._served = served

    def headers(self) -> dict[str, str]:
        """HTTP headers every request carries (the API key, when there is one)."""
        return dict(self._headers)

    def identity(self) -> dict[str, Any]:
        if self._healthy is None:
            self._probe()
        return {
            "name": self.cfg.model,
            "backend": "openai",
            "endpoints": list(self.endpoints),
            "served": self._served,
        }

    # -- generation ----------------------------------------------------------------------

    def generate(self, requests: Sequence[GenRequest], on_result: OnResult) -> GenerationStats:
        """Run every request against the healthy endpoints; call `on_result` as each ends."""
        self._probe()
        assert self._healthy is not None
        endpoints = list(self._healthy)
        start = time.perf_counter()
        cfg = self.cfg
        shape = LoadShape.of(cfg)
        run_requests(
            shape,
            endpoints,
            requests,
            on_result,
            headers=self._headers,
            attempt=self._attempt,
            succeed=self._success,
        )
        wall_s = time.perf_counter() - start
        regime: dict[str, Any] = {
            "mode": "server",
            "concurrency": self.cfg.concurrency,
            "request_rate": self.cfg.request_rate,
            "endpoints": endpoints,
        }
        return GenerationStats(wall_s=wall_s, regime=regime)

    def close(self) -> None:
        if self._probe_client is not None:
            self._probe_client.close()
            self._probe_client = None

    async def _attempt(
        self, client: httpx.AsyncClient, endpoint: str, request: GenRequest
    ) -> _Stream:
        sampling = self.cfg.sampling
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": [dict(m) for m in request.messages],
            "max_tokens": request.max_tokens or sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "seed": sampling.seed,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.json_schema},
            }
        if request.logprobs:
            body |= {"logprobs": True, "top_logprobs": min(request.logprobs, 20)}
        stream = _Stream(sent=time.perf_counter())
        async with client.stream("POST", f"{endpoint}/chat/completions", json=body) as response:
            if response.status_code != 200:
                payload = await response.aread()
                status = response.status_code
                raise http_failure(status, error_message(payload))
            async for line in response.aiter_lines():
                now = time.perf_counter()
                if not line.startswith("data:"):
                    continue  # blank separators, comments, `event:` lines
                data = line[5:].strip()
                if data == "[DONE]":
                    stream.done = True
                    break
                self._take_chunk(stream, data, now)
        stream.end = time.perf_counter()
        if not stream.done and stream.finish_reason is None:
            raise Failure("stream broken", "ended without [DONE] or a finish_reason")
        return stream

    @staticmethod
    def _take_chunk(stream: _Stream, data: str, now: float) -> None:
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise Failure("stream broken", f"bad SSE payload {data[:80]!r}") from exc
        if not isinstance(chunk, dict):
            raise Failure("stream broken", f"bad SSE payload {data[:80]!r}")
        if "error" in chunk:
            err = chunk["error"]
            code = err.get("code") if isinstance(err, dict) else None
            message = error_message(json.dumps(chunk).encode())
            retryable = not isinstance(code, int) or code >= 500 or code == 429
            raise Failure("error in stream", message, retryable=retryable)
        if isinstance(chunk.get("usage"), dict):
            stream.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if stream.first_logprobs is None:
                stream.first_logprobs = _first_logprobs(choice.get("logprobs"))
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                stream.pieces.append(content)
                stream.chunk_times.append(now)
            if choice.get("finish_reason"):
                stream.finish_reason = choice["finish_reason"]
                stream.finish_time = now

    def _success(
        self,
        request: GenRequest,
        endpoint: str,
        stream: _Stream,
        attempts: int,
        failures: list[str],
        wall: Callable[[float], float],
    ) -> GenResult:
        times = stream.chunk_times
        usage = stream.usage or {}
        engine: dict[str, Any] = {}
        if isinstance(usage.get("completion_tokens"), int):
            output_tokens = int(usage["completion_tokens"])
            engine["output_tokens_source"] = "usage"
        else:
            # Several tokens can share a chunk, so this undercounts: say so
            output_tokens = len(times)
            engine["output_tokens_source"] = "content_chunks"
        prompt_tokens = usage.get("prompt_tokens")
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if failures:
            engine["failed_attempts"] = failures
        first = wall(times[0]) if times else None
        last_time = times[-1] if times else None
        if (
            last_time is not None
            and stream.finish_time is not None
            and output_tokens > len(times)
            and stream.finish_time > last_time
        ):
            # The final token (EOS) carries no text: it arrives with the finish_reason chunk,
            # and the engine's last-token time (and its TPOT) counts it.
            last_time = stream.finish_time
        last = wall(last_time) if last_time is not None else None
        return GenResult(
            request_id=request.request_id,
            text="".join(stream.pieces),
            prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
            cached_tokens=cached if isinstance(cached, int) else None,
            output_tokens=output_tokens,
            finish_reason=stream.finish_reason,
            arrival_time=wall(stream.sent),
            first_token_time=first,
            last_token_time=last,
            ttft_s=times[0] - stream.sent if times else None,
            tpot_s=tpot(first, last, output_tokens),
            e2e_s=stream.end - stream.sent,
            itl_s=[round(b - a, 6) for a, b in itertools.pairwise(times)],
            attempts=attempts,
            endpoint=endpoint,
            engine=engine,
            top_logprobs=stream.first_logprobs,
        )
