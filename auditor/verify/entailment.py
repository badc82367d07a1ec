"""Does this passage state this claim? One short label per (claim, chunk), read as probabilities.

Design (measured in the README's agreement section):
- One claim against one retrieved chunk at a time (as MiniCheck does): a small judge is far
  more reliable on one short passage than on several, and the chunk that decides is the
  claim's source by construction.
- The judge answers one word, `true` / `false` / `unknown`, and the verdict is read from the
  log-probabilities of its first token, not from the sampled word: `p_true` is the judge's
  probability that the passage states the claim. A claim is supported when its best chunk's
  `p_true` reaches the judge's threshold, a setting chosen on labelled data
  (`bench/agreement.py --cv`), because a small judge's probabilities are biased, not useless.
- Instructions and the chunk come first and the claim last, so every claim checked against
  the same chunk shares the prompt prefix: vLLM's prefix cache computes the chunk once.
- A figure of the claim that the chunk does not contain vetoes support by that chunk whatever
  the judge says (a wrong number is the commonest subtle error; small judges miss it;
  `auditor/verify/figures.py`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from auditor.claim_rows import ClaimKind, Verdict

__all__ = [
    "ChunkJudgement",
    "claim_decision",
    "entailment_prompt",
    "label_probabilities",
]

LABELS = ("true", "false", "unknown")

_FACT_INSTRUCTIONS = """You check whether a passage states a claim.
Answer with one word:
- true: the passage states the claim. Every detail of the claim (numbers, dates, names, \
products, amounts, conditions, yes or no) matches the passage.
- false: the passage says something different about the same thing: another number, date, \
name, product, amount or condition, or the opposite.
- unknown: the passage does not say whether the claim is true.
Use only the passage, not what you know."""

_ABSTENTION_INSTRUCTIONS = """You check a statement about what a passage does NOT say.
Answer with one word:
- true: the passage indeed does not give the information the statement says is missing.
- false: the passage does give that information.
Use only the passage, not what you know."""


def entailment_prompt(
    passage: str, claim: str, kind: ClaimKind = "fact", reviewed: str = ""
) -> str:
    """The prompt asking whether `passage` states `claim` (passage first: shared prefix).

    `reviewed`: what people said of other answers to the same question (`examples.
    reviewed_block`), for facts only; it goes before the passage, so every call of one answer
    shares it in the prefix cache."""
    if kind == "abstention":
        instructions = _ABSTENTION_INSTRUCTIONS
    elif reviewed:
        instructions = f"{_FACT_INSTRUCTIONS}\n\n{reviewed.strip()}"
    else:
        instructions = _FACT_INSTRUCTIONS
    return f"{instructions}\n\nPassage:\n{passage.strip()}\n\nClaim: {claim.strip()}\nAnswer:"


def label_probabilities(
    top_logprobs: Mapping[str, float] | None, text: str
) -> tuple[dict[str, float] | None, str | None]:
    """({label: probability}, label the judge wrote) from the first token's top log-probabilities.

    Tokens are matched to labels case- and space-insensitively by prefix ("True", " true",
    "unk"); probabilities are renormalised over the three labels. None when the server gave no
    log-probabilities or none of the top tokens is a label.
    """
    written = _label_of(text)
    if not top_logprobs:
        return None, written
    mass = dict.fromkeys(LABELS, 0.0)
    for token, logprob in top_logprobs.items():
        label = _label_of(token)
        if label is not None and math.isfinite(logprob):
            mass[label] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0.0:
        return None, written
    return {label: value / total for label, value in mass.items()}, written


def _label_of(token: str) -> str | None:
    word = token.strip().strip('"').lower()
    if len(word) < 2:
        return None
    for label in LABELS:
        if label.startswith(word) or word.startswith(label):
            return label
    return {"yes": "true", "no": "false"}.get(word)


@dataclass
class ChunkJudgement:
    """The judge's word on one claim against one chunk."""

    chunk_id: str
    probabilities: dict[str, float] | None  # over LABELS; None without log-probabilities
    written: str | None  # the label the judge wrote
    vetoed: list[str]  # figures of the claim the chunk lacks
    # figures the chunk gives another subject: the figure-binding guard, removed in verdict
    # logic 2026-12-05.2 (never computed now; kept so stored checks read back the same)
    misbound: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        probabilities = (
            None
            if self.probabilities is None
            else {label: round(value, 4) for label, value in self.probabilities.items()}
        )
        return {
            "chunk": self.chunk_id,
            "probabilities": probabilities,
            "written": self.written,
            "vetoed": self.vetoed,
            "misbound": self.misbound,
        }

    @property
    def p_true(self) -> float | None:
        """The probability that this chunk states the claim (0 when a figure guard vetoes it);
        None without log-probabilities."""
        if self.probabilities is None:
            return None
        return 0.0 if self.vetoed or self.misbound else self.probabilities["true"]

    @property
    def says_true(self) -> bool:
        """The judge's decision without a threshold (the written label)."""
        return not self.vetoed and not self.misbound and self.written == "true"

    @property
    def says_false(self) -> bool:
        """The chunk contradicts the claim: it gives the claim's figure to another subject, or
        the judge finds `false` the likeliest label."""
        if self.misbound:
            return True
        if self.probabilities is not None:
            return self.probabilities["false"] > max(
                self.probabilities["unknown"], self.probabilities["true"]
            )
        return self.written == "false"


def claim_decision(
    judgements: Sequence[ChunkJudgement], kind: ClaimKind, threshold: float
) -> tuple[Verdict, float | None, list[str], list[str]]:
    """(verdict, p_supported, supporting chunk ids, contradicting chunk ids) for one claim.

    A fact is supported by the chunks whose `p_true` reaches `threshold` (without
    log-probabilities: whose written label is true); p_supported is the best chunk's. Not
    supported, it is contradicted where a chunk says false, else unsupported.
    An abstention ("the documents do not say X") holds unless a chunk gives X: p_supported is
    the lowest chunk's probability that it does not give X, and a chunk more likely than not
    to give X contradicts it.
    """
    if not judgements:
        return "unverifiable", None, [], []
    if kind == "abstention":
        # decided at even odds: the threshold is tuned for facts, not for this question.
        # Rule, error class: a correct abstention flagged as a hallucination; not isolated.
        holds = [_p_holds(j) for j in judgements]
        against = [j.chunk_id for j, h in zip(judgements, holds, strict=True) if h < 0.5]
        p = min(holds) if all(j.probabilities is not None for j in judgements) else None
        return ("contradicted" if against else "supported"), p, [], against
    values = [j.p_true for j in judgements]
    known = [v for v in values if v is not None]
    p = max(known) if known else None
    if len(known) == len(values):
        supporting = [
            j.chunk_id
            for j, v in zip(judgements, values, strict=True)
            if v is not None and v >= threshold
        ]
    else:
        supporting = [j.chunk_id for j in judgements if j.says_true]
    contradicting = [j.chunk_id for j in judgements if j.says_false]
    if supporting:
        return "supported", p, supporting, [c for c in contradicting if c not in supporting]
    if contradicting:
        return "contradicted", p, [], contradicting
    return "unsupported", p, [], []


def _p_holds(judgement: ChunkJudgement) -> float:
    """For an abstention: the probability that this chunk does not give what it says is missing."""
    if judgement.probabilities is None:
        return 0.0 if judgement.written == "false" else 1.0
    return 1.0 - judgement.probabilities["false"]
