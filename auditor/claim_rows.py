"""A claim as a run dir's checks.jsonl holds it: the verdict vocabulary, the `Claim` row, and the
answer-level rules every figure applies to a row's claims (flagged at a threshold, the ranking
score, faithfulness).

It sits beside the readers (`run_shapes`, `store`), below the judge: the report, the reviewed
rates and calibration read claims from files through it, and `auditor.verify` writes them with
it, so nothing that renders or counts from artifacts reaches into the judge's room.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "VERDICTS",
    "Claim",
    "ClaimKind",
    "ClaimOrigin",
    "Verdict",
    "faithfulness",
    "flagged_at",
    "hallucination_score",
    "ranking_score",
    "support_score",
]

Verdict = Literal["supported", "unsupported", "contradicted", "unverifiable"]
VERDICTS: tuple[Verdict, ...] = ("supported", "unsupported", "contradicted", "unverifiable")
# "abstention": the answer says the sources lack something (true unless the sources state it)
ClaimKind = Literal["fact", "abstention"]
ClaimOrigin = Literal["judge", "sentence"]


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


def support_score(claims: Sequence[Claim]) -> float | None:
    """The answer's score: its least supported claim's p_supported (an answer is only as
    faithful as its worst claim). None without judged claims or without probabilities.
    Evidence: RAGTruth AUROC 0.809 for the minimum vs 0.738-0.808 for the mean, the two lowest,
    the geometric mean and a length-adjusted minimum (README Evidence, 2026-12-04)."""
    judged = [c.p_supported for c in claims if c.verdict != "unverifiable"]
    if not judged or any(p is None for p in judged):
        return None
    return min(p for p in judged if p is not None)


def flagged_at(claims: Sequence[Claim], threshold: float) -> bool:
    """Whether the answer is flagged at this support threshold (the check's own rule).

    A fact counts against the answer when its p_supported is below the threshold (without a
    probability: when its verdict is not supported); an abstention when a chunk gives what it
    says is missing. Unverifiable claims count neither way.
    """
    for claim in claims:
        if claim.verdict == "unverifiable":
            continue
        if claim.kind == "abstention":
            if claim.verdict == "contradicted":
                return True
        elif claim.p_supported is None:
            if claim.verdict != "supported":
                return True
        elif claim.p_supported < threshold:
            return True
    return False


def ranking_score(claims: Sequence[Claim]) -> float:
    """A score for every answer (lower: more likely hallucinated), for ROC curves:
    support_score, with a claim lacking a probability counted by its verdict (1 or 0) and an
    answer with no judged claim counted as fully supported."""
    values = [
        c.p_supported if c.p_supported is not None else (1.0 if c.verdict == "supported" else 0.0)
        for c in claims
        if c.verdict != "unverifiable"
    ]
    return min(values, default=1.0)


def faithfulness(claims: Sequence[Claim]) -> float | None:
    """Supported claims / judged claims (unverifiable ones are not judged); None with none."""
    judged = [c for c in claims if c.verdict != "unverifiable"]
    if not judged:
        return None
    return sum(c.verdict == "supported" for c in judged) / len(judged)


def hallucination_score(claims: Sequence[Claim]) -> float:
    """The judge's continuous score of an answer being hallucinated, in [0, 1]: 1 - its
    ranking score (its least supported judged claim). What a reviewed rate leans on: the
    difference estimator narrows more with it than with the 0/1 flag."""
    return 1.0 - ranking_score(claims)
