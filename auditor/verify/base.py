"""Claim verification types: judge calls, claims, verdicts (nothing heavy imported)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "VERDICTS",
    "Claim",
    "Judge",
    "JudgeCall",
    "JudgeReply",
    "JudgeUsage",
    "Verdict",
]

Verdict = Literal["supported", "unsupported", "contradicted", "unverifiable"]
VERDICTS: tuple[Verdict, ...] = ("supported", "unsupported", "contradicted", "unverifiable")


@dataclass(frozen=True)
class JudgeCall:
    """One prompt whose answer must be JSON matching `schema`."""

    key: str
    prompt: str
    schema: dict[str, Any]
    max_tokens: int = 512


@dataclass
class JudgeReply:
    """The judge's raw JSON text for one call, with what it cost."""

    key: str
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


class Judge(Protocol):
    """A model that answers many JSON-constrained prompts, batched."""

    def identity(self) -> dict[str, Any]:
        """Model identity recorded with the checks."""
        ...

    def complete(self, calls: Sequence[JudgeCall]) -> list[JudgeReply]:
        """One reply per call, in order; a failed call has `error` set, never raises."""
        ...

    def close(self) -> None:
        """Free the engine."""
        ...


@dataclass
class JudgeUsage:
    """Judge cost for one answer: calls, tokens, and its share of the wall time."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failures: int = 0  # calls whose output was unusable (error or invalid JSON), retries included
    stages: dict[str, dict[str, int]] = field(default_factory=dict)  # the same, per stage

    def add(self, reply: JudgeReply, stage: str) -> None:
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        counts = self.stages.setdefault(
            stage, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        counts["calls"] += 1
        counts["prompt_tokens"] += reply.prompt_tokens
        counts["completion_tokens"] += reply.completion_tokens


@dataclass
class Claim:
    """A statement made by an answer, where it sits, and what the sources say about it."""

    text: str
    span: tuple[int, int] | None  # character offsets in the answer (best-matching sentence)
    verdict: Verdict = "unverifiable"
    reason: str = ""
    supporting_chunks: list[str] = field(default_factory=list)
    contradicting_chunks: list[str] = field(default_factory=list)
    checked_chunks: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["span"] = list(self.span) if self.span else None
        return data
