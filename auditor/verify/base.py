"""The judge's protocol and its calls: what a verdict costs and how it is asked (nothing heavy
imported). What a claim row holds is `auditor.claim_rows`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "CallKey",
    "Judge",
    "JudgeCall",
    "JudgeReply",
    "JudgeUsage",
    "Reference",
]


@dataclass(frozen=True, order=True)
class CallKey:
    """Which judge call this is: its stage, the answer it serves, and the part of it.

    `part` says what the call covers within the answer, e.g. (chunk rank,) for context
    precision or (claim index, chunk index) for an entailment check.
    """

    stage: str
    item: str
    part: tuple[int, ...] = ()


@dataclass(frozen=True)
class JudgeCall:
    """One prompt: JSON matching `schema`, or (schema None) a short label read with logprobs."""

    key: CallKey
    prompt: str
    schema: dict[str, Any] | None
    max_tokens: int = 512
    logprobs: int = 0  # top log-probabilities wanted for each generated token


@dataclass
class JudgeReply:
    """The judge's raw text for one call, with what it cost.

    `top_logprobs` holds, for the first generated token, the most likely tokens and their
    log-probabilities (None when the call asked for none or the server returned none).
    """

    key: CallKey
    text: str = ""
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the prefix cache, not computed
    completion_tokens: int = 0
    top_logprobs: dict[str, float] | None = None
    error: str | None = None


class Judge(Protocol):
    """A model that answers many JSON-constrained prompts, batched."""

    def identity(self) -> dict[str, Any]:
        """Model identity recorded with the checks."""
        ...

    def complete(
        self, calls: Sequence[JudgeCall], on_reply: Callable[[], None] | None = None
    ) -> list[JudgeReply]:
        """One reply per call, in order; a failed call has `error` set, never raises.
        `on_reply` is called as each reply arrives (progress)."""
        ...

    def close(self) -> None:
        """Free the engine."""
        ...


@dataclass
class JudgeUsage:
    """Judge cost for one answer: calls, tokens, and its share of the wall time."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failures: int = 0  # calls whose output was unusable (error or invalid JSON), retries included
    stages: dict[str, dict[str, int]] = field(default_factory=dict)  # the same, per stage

    def add(self, reply: JudgeReply, stage: str) -> None:
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.cached_tokens += reply.cached_tokens
        self.completion_tokens += reply.completion_tokens
        counts = self.stages.setdefault(
            stage, {"calls": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0}
        )
        counts["calls"] += 1
        counts["prompt_tokens"] += reply.prompt_tokens
        counts["cached_tokens"] += reply.cached_tokens
        counts["completion_tokens"] += reply.completion_tokens


@dataclass(frozen=True)
class Reference:
    """A sentence of an example: accepted by people, or holding a span they marked."""

    example_id: str
    text: str
    marked: bool
    span_text: str = ""  # the marked words, for the report

    def to_json(self) -> dict[str, Any]:
        marked = self.span_text if self.marked else None
        return {"example": self.example_id, "sentence": self.text, "marked": marked}
