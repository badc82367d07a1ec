"""Claim verification types: judge calls, claims, verdicts (nothing heavy imported)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Protocol

__all__ = [
    "VERDICTS",
    "CallKey",
    "Claim",
    "Judge",
    "JudgeCall",
    "JudgeReply",
    "JudgeUsage",
    "Reference",
    "Verdict",
]

Verdict = Literal["supported", "unsupported", "contradicted", "unverifiable"]
VERDICTS: tuple[Verdict, ...] = ("supported", "unsupported", "contradicted", "unverifiable")
# "abstention": the answer says the sources lack something (true unless the sources state it)
ClaimKind = Literal["fact", "abstention"]
ClaimOrigin = Literal["judge", "sentence"]


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


@dataclass
class Claim:
    """A statement made by an answer, where it sits, and what the sources say about it."""

    text: str
    span: tuple[int, int] | None  # character offsets in the answer (best-matching sentence)
    verdict: Verdict = "unverifiable"
    kind: ClaimKind = "fact"
    # "judge": listed by the judge; "sentence": a sentence of the answer no listed claim carries
    origin: ClaimOrigin = "judge"
    # the judge's probability that the sources state the claim (None: no log-probabilities)
    p_supported: float | None = None
    reason: str = ""
    evidence: str = ""  # the sentence of the deciding chunk closest to the claim
    supporting_chunks: list[str] = field(default_factory=list)
    contradicting_chunks: list[str] = field(default_factory=list)
    checked_chunks: list[str] = field(default_factory=list)
    # where each checked chunk came from: "returned" (by the pipeline) or "kb" (retrieved by
    # the auditor from the trusted knowledge base for this claim)
    chunk_sources: dict[str, str] = field(default_factory=dict)
    # per checked chunk: the judge's label probabilities, the label it wrote, vetoed figures
    judgements: list[dict[str, Any]] = field(default_factory=list)
    # the focused second question (judge quote_check): the quote and the judge's word on it
    quote: dict[str, Any] | None = None
    # what labelled examples of the question said of sentences like it (judge `examples`):
    # the closest accepted and marked sentence, and the judge's own p_supported before them
    memory: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["span"] = list(self.span) if self.span else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Claim:
        """A claim as checks.jsonl holds it, back as a Claim (fields it does not know ignored)."""
        names = {f.name for f in fields(cls)}
        claim = cls(**{k: v for k, v in data.items() if k in names and k != "span"}, span=None)
        span = data.get("span")
        claim.span = (int(span[0]), int(span[1])) if span else None
        return claim


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
