"""The generator protocol and the records a backend returns.

A backend measures what it can observe and never guesses: a field it cannot measure is None.
Times are Unix seconds (wall clock); durations are seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

__all__ = ["GenRequest", "GenResult", "GenerationStats", "Generator", "OnResult", "tpot"]


@dataclass(frozen=True)
class GenRequest:
    """One chat request: the messages sent to the model, verbatim.

    The optional fields override the pipeline's sampling for this request (the judge uses
    them): an output length, a JSON schema the output must match, and how many top
    log-probabilities to return for each generated token.
    """

    request_id: str
    messages: tuple[dict[str, str], ...]
    max_tokens: int | None = None
    json_schema: dict[str, Any] | None = None
    logprobs: int = 0
    question: str | None = None  # the bare question, for targets that retrieve themselves


@dataclass
class GenResult:
    """What happened to one request, as measured by the backend."""

    request_id: str
    text: str = ""
    prompt_text: str | None = None  # the rendered chat template, when the backend knows it
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens served from the prefix cache
    output_tokens: int = 0
    finish_reason: str | None = None  # "stop" | "length" | "abort" | None when it failed
    arrival_time: float | None = None  # request issued (client) / arrived (engine)
    first_token_time: float | None = None
    last_token_time: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None  # mean time per output token after the first
    e2e_s: float | None = None
    itl_s: list[float] | None = None  # inter-token latencies seen by a streaming client
    error: str | None = None
    attempts: int = 1
    endpoint: str | None = None
    engine: dict[str, Any] = field(default_factory=dict)  # backend-specific raw figures
    # {token: log-probability} of the most likely first output tokens, when asked for
    top_logprobs: dict[str, float] | None = None
    # the contexts a self-retrieving target said it used (retrieved-chunk records); None when
    # the target returns none
    contexts: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


OnResult = Callable[[GenResult], None]


@dataclass(frozen=True)
class GenerationStats:
    """The generation phase as a whole: throughput means nothing without its load regime."""

    wall_s: float
    regime: dict[str, Any]  # {"mode": "offline-batch", ...} or {"mode": "server", ...}


class Generator(Protocol):
    """Generates answers; calls `on_result` as each request completes (success or error)."""

    def identity(self) -> dict[str, Any]:
        """Model identity recorded in the run manifest (name, source, weights hash, ...)."""
        ...

    def generate(self, requests: Sequence[GenRequest], on_result: OnResult) -> GenerationStats:
        """Run every request; never raises for a single failed request (it becomes an error)."""
        ...

    def close(self) -> None:
        """Free the engine or connections."""
        ...


def tpot(
    first_token_time: float | None, last_token_time: float | None, output_tokens: int
) -> float | None:
    """Mean time per output token after the first (vLLM's definition); None below 2 tokens."""
    if first_token_time is None or last_token_time is None or output_tokens < 2:
        return None
    return (last_token_time - first_token_time) / (output_tokens - 1)
