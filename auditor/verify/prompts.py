"""Our claim-verification prompt (pure): claims checked against their most similar passages.

The judge must quote its evidence; a "true" whose quote is not in the passages (small judges
invent passage content) is not accepted as support, and the passages that hold the quote are
the claim's sources -- that is how a verdict names the chunk that supports it.

Why not RAGAS's NLI prompt over the joined contexts: it cannot say which source supports a
claim, and a small judge gives every statement of an answer the same verdict when it sees
everything at once. Checking a few claims against the two passages most similar to them,
evidence first and the label last, with the claim echoed, is what held up on these machines
(see the README's agreement figures). The instructions and the passages come first, so calls
that share a retrieved chunk share the prompt prefix (vLLM's prefix cache computes it once).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any, Literal

from pydantic import BaseModel

__all__ = [
    "LABELS",
    "ClaimResult",
    "ClaimResults",
    "evidence_in_passage",
    "evidence_sources",
    "verification_prompt",
    "verification_schema",
]

LABELS = ("true", "false", "unknown")

_INSTRUCTIONS = """You check claims against the passages below.
For each claim, first copy as evidence the sentence of the passages that states the claim, \
word for word (two sentences if the claim needs both), or write none if no sentence states \
it. Then give a label:
- "true": the evidence states the claim. Every detail of the claim (numbers, dates, names, \
amounts, conditions, qualifiers) must be in the passages.
- "false": the passages contradict the claim, for example they give a different number, \
date, name or condition.
- "unknown": the passages do not state the claim, or state only part of it.
Use only the passages, not what you know. Answer for every claim, in the order given."""


def verification_prompt(passages: Sequence[str], claims: Sequence[str]) -> str:
    """The prompt for checking `claims` against `passages` (in retrieval rank order)."""
    shown = "\n\n".join(f"Passage {n}:\n{text}" for n, text in enumerate(passages, start=1))
    numbered = "\n".join(f"{n}. {claim}" for n, claim in enumerate(claims, start=1))
    return f"{_INSTRUCTIONS}\n\n{shown}\n\nClaims:\n{numbered}\n"


def verification_schema(count: int, max_length: int = 240) -> dict[str, Any]:
    """Exactly `count` results, each echoing its claim, a bounded reason, then the label."""
    return {
        "type": "object",
        "properties": {
            "results": {
                "type": "array",
                "minItems": count,
                "maxItems": count,
                "items": {
                    "type": "object",
                    "properties": {
                        "claim": {"type": "string", "maxLength": max_length},
                        "evidence": {"type": "string", "maxLength": max_length},
                        "label": {"type": "string", "enum": list(LABELS)},
                    },
                    "required": ["claim", "evidence", "label"],
                },
            }
        },
        "required": ["results"],
    }


class ClaimResult(BaseModel):
    """The judge's word on one claim against one passage."""

    claim: str
    evidence: str
    label: Literal["true", "false", "unknown"]


class ClaimResults(BaseModel):
    """The judge's reply to one verification prompt."""

    results: list[ClaimResult]


def _normalise(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def evidence_in_passage(evidence: str, passage: str, threshold: float = 0.8) -> bool:
    """Whether a quoted evidence sentence really occurs in the passage.

    Word-level, in order: the quote's words matched in the passage, in order, must cover
    `threshold` of it (the judge may drop punctuation, a word, or cut a long sentence), and one
    contiguous run at least half of it (scattered common words are not a quote), and every
    figure of the quote must be in the passage.
    """
    quote, words = _normalise(_PASSAGE_LABEL.sub(" ", evidence)), _normalise(passage)
    if len(quote) < 3:
        return False
    matcher = SequenceMatcher(None, quote, words, autojunk=False)
    blocks = matcher.get_matching_blocks()
    longest = max((block.size for block in blocks), default=0)
    figures_found = {w for w in quote if w.isdigit()} <= set(words)  # a changed figure is no quote
    return (
        figures_found
        and sum(block.size for block in blocks) >= threshold * len(quote)
        and longest >= 0.5 * len(quote)
    )


# judges often label their quote with where it came from: "Passage 2: ..."
_PASSAGE_LABEL = re.compile(r"\bpassages?\s*\d+\s*[:.)-]?", re.IGNORECASE)


_QUOTED_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


def evidence_sources(evidence: str, passages: Sequence[str]) -> list[int] | None:
    """Indices of the passages the quoted evidence comes from; None when any of it is invented.

    The evidence may be two sentences from two passages: each sentence of three words or more
    must occur in some passage. Evidence with no such sentence ("none") has no source.
    """
    unlabelled = _PASSAGE_LABEL.sub(" ", evidence)
    sentences = [s for s in _QUOTED_SENTENCE.findall(unlabelled) if len(_normalise(s)) >= 3]
    if not sentences:
        return None
    sources: list[int] = []
    for sentence in sentences:
        found = [i for i, passage in enumerate(passages) if evidence_in_passage(sentence, passage)]
        if not found:
            return None
        sources.extend(i for i in found if i not in sources)  # overlapping chunks both hold it
    return sorted(sources)
