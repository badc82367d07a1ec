"""How requests reach a served target, whatever its protocol: arrivals, concurrency, endpoint
choice, retries with backoff and per-attempt timeouts.

A backend gives one `attempt(client, endpoint, request)` coroutine that raises `Failure` (or an
httpx transport error, or times out) and a `succeed(...)` that turns a finished attempt into a
`GenResult`; the scheduler does the rest. The `openai` and `http` backends share it, so a
deployed service is loaded exactly as a vLLM server is.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from auditor.config import HttpGeneratorConfig, OpenAIGeneratorConfig
from auditor.generate.base import GenRequest, GenResult, OnResult

__all__ = [
    "Failure",
    "LoadShape",
    "arrival_offsets",
    "error_message",
    "one_line",
    "run_requests",
    "transport_reason",
]

ERROR_BODY_CHARS = 200
Attempt = TypeVar("Attempt")


class Failure(Exception):
    """One failed attempt: `kind` is what went wrong, `detail` what the server said."""

    def __init__(self, kind: str, detail: str = "", retryable: bool = True) -> None:
        super().__init__(kind, detail)
        self.kind = kind
        self.detail = detail
        self.retryable = retryable

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


@dataclass(frozen=True)
class LoadShape:
    """How hard and how patiently a target is driven (the fields every served backend has)."""

    concurrency: int
    request_rate: float | None
    timeout_s: float
    max_retries: int
    retry_backoff_s: float
    seed: int | None

    @classmethod
    def of(cls, cfg: OpenAIGeneratorConfig | HttpGeneratorConfig) -> LoadShape:
        """The load settings of a served target's config (`openai` or `http`)."""
        return cls(
            cfg.concurrency,
            cfg.request_rate,
            cfg.timeout_s,
            cfg.max_retries,
            cfg.retry_backoff_s,
            cfg.sampling.seed,
        )


def one_line(text: str, limit: int = ERROR_BODY_CHARS) -> str:
    return " ".join(text.split())[:limit]


def error_message(body: bytes) -> str:
    """The message inside a JSON error body (OpenAI's `{"error": {"message": ...}}`, FastAPI's
    `{"detail": ...}`, or a plain `{"message": ...}`), else the body's first characters."""
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        return one_line(text)
    if isinstance(data, dict):
        for key in ("error", "detail", "message", "msg"):
            value = data.get(key)
            if isinstance(value, str):
                return one_line(value)
            if isinstance(value, dict):
                for inner in ("message", "detail", "msg"):
                    if isinstance(value.get(inner), str):
                        return one_line(value[inner])
    return one_line(text)


def transport_reason(exc: BaseException) -> str:
    """A short human reason for a transport-level failure."""
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        return (
            "connection refused"
            if "refused" in text.lower()
            else f"cannot connect ({one_line(text, 120)})"
        )
    return one_line(text, 120)


def http_failure(status: int, message: str) -> Failure:
    """An HTTP error status: 5xx and 429 are worth retrying, other 4xx are the request's fault."""
    return Failure(f"HTTP {status}", message, retryable=status >= 500 or status == 429)


def arrival_offsets(count: int, request_rate: float | None, seed: int | None) -> list[float]:
    """When each request is sent, in seconds from the start: all at once without a rate, else a
    Poisson process as in `vllm bench serve` (the first at 0, then exponential gaps), seeded."""
    offsets = [0.0] * count
    if request_rate is not None:
        rng = random.Random(seed)
        for i in range(1, count):
            offsets[i] = offsets[i - 1] + rng.expovariate(request_rate)
    return offsets


class _Scheduler(Generic[Attempt]):
    def __init__(
        self,
        shape: LoadShape,
        endpoints: list[str],
        attempt: Callable[[httpx.AsyncClient, str, GenRequest], Awaitable[Attempt]],
        succeed: Callable[..., GenResult],
    ) -> None:
        self.shape = shape
        self.endpoints = endpoints
        self.attempt = attempt
        self.succeed = succeed
        self.outstanding = dict.fromkeys(endpoints, 0)
        self.next_rr = 0
        # perf_counter for durations, anchored once to the wall clock for reported times
        self.anchor_wall, self.anchor_perf = time.time(), time.perf_counter()

    def wall(self, t: float) -> float:
        return self.anchor_wall + (t - self.anchor_perf)

    def pick(self) -> str:
        """Least outstanding requests; ties go round-robin."""
        n = len(self.endpoints)
        order = [self.endpoints[(self.next_rr + k) % n] for k in range(n)]
        chosen = min(order, key=lambda e: self.outstanding[e])
        self.next_rr = (self.endpoints.index(chosen) + 1) % n
        self.outstanding[chosen] += 1
        return chosen

    async def run(
        self, requests: Sequence[GenRequest], on_result: OnResult, headers: dict[str, str]
    ) -> None:
        shape = self.shape
        offsets = arrival_offsets(len(requests), shape.request_rate, shape.seed)
        semaphore = asyncio.Semaphore(shape.concurrency)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=shape.concurrency)
        timeout = httpx.Timeout(shape.timeout_s, connect=min(shape.timeout_s, 10.0))
        async with httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout) as client:

            async def one(index: int, request: GenRequest) -> None:
                delay = self.anchor_perf + offsets[index] - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                async with semaphore:
                    result = await self._with_retries(client, request)
                on_result(result)

            tasks = [asyncio.create_task(one(i, r)) for i, r in enumerate(requests)]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                # on_result failed (e.g. disk full) or we were interrupted: stop the rest
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    async def _with_retries(self, client: httpx.AsyncClient, request: GenRequest) -> GenResult:
        shape = self.shape
        failures: list[str] = []
        attempt = 0
        while True:
            attempt += 1
            endpoint = self.pick()
            try:
                async with asyncio.timeout(shape.timeout_s):
                    done = await self.attempt(client, endpoint, request)
            except TimeoutError:
                failure = Failure(f"timed out (limit {shape.timeout_s:g} s)")
            except httpx.TransportError as exc:
                stream_broken = isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError)
                kind = "stream broken" if stream_broken else transport_reason(exc)
                failure = Failure(kind, one_line(str(exc), 120) if stream_broken else "")
            except Failure as exc:
                failure = exc
            else:
                return self.succeed(request, endpoint, done, attempt, failures, self.wall)
            finally:
                self.outstanding[endpoint] -= 1
            failures.append(f"{endpoint}: {failure}")
            if not failure.retryable or attempt > shape.max_retries:
                tried = f" after {attempt} attempts" if attempt > 1 else ""
                detail = f": {failure.detail}" if failure.detail else ""
                return GenResult(
                    request_id=request.request_id,
                    error=f"{endpoint}: {failure.kind}{tried}{detail}",
                    finish_reason=None,
                    attempts=attempt,
                    endpoint=endpoint,
                    engine={"failed_attempts": failures},
                )
            await asyncio.sleep(shape.retry_backoff_s * 2 ** (attempt - 1))


def run_requests(
    shape: LoadShape,
    endpoints: list[str],
    requests: Sequence[GenRequest],
    on_result: OnResult,
    *,
    headers: dict[str, str],
    attempt: Callable[[httpx.AsyncClient, str, GenRequest], Awaitable[Any]],
    succeed: Callable[..., GenResult],
) -> None:
    """Send every request to the endpoints under `shape`; `on_result` as each one ends.

    `succeed(request, endpoint, attempt_result, attempts, failed_attempts, wall)` builds the
    result of a successful attempt (`wall` maps perf_counter times to Unix times).
    """
    scheduler: _Scheduler[Any] = _Scheduler(shape, endpoints, attempt, succeed)
    asyncio.run(scheduler.run(requests, on_result, headers))
