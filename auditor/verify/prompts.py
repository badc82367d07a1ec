"""Our claim-verification prompt (pure): claims checked against one chunk at a time.

The judge must quote its evidence; a "true" whose quote is not in the passage (small judges
invent passage content) is not accepted as support.

Why not RAGAS's NLI prompt over the joined contexts: it cannot say which source supports a
claim, and a small judge gives every statement of an answer the same verdict when it sees
everything at once. Checking a few claims against one passage, reason first and the label
last, with the claim echoed, is what held up on these machines (see the CPU notes). The
instructions and the passage come first, so answers that share a retrieved chunk share the
prompt prefix (vLLM's prefix cache computes it once).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

__all__ = [
    "LABELS",
    "ClaimResult",
    "ClaimResults",
    "evidence_in_passage",
    "verification_prompt",
    "verification_schema",
]

LABELS = ("true", "false", "unknown")

_INSTRUCTIONS = """You check claims against a single passage.
For each claim, first copy as evidence the one sentence of the passage that states the claim, \
word for word, or write none if no sentence states it. Then give a label:
- "true": the evidence sentence states the claim. Every detail of the claim (numbers, dates, \
names, amounts, conditions, qualifiers) must be in the passage.
- "false": the passage contradicts the claim, for example it gives a different number, \
date, name or condition.
- "unknown": the passage does not state the claim, or states only part of it.
Use only the passage, not what you know. Answer for every claim, in the order given."""


def verification_prompt(passage: str, claims: Sequence[str]) -> str:
    """The prompt for checking `claims` against `passage`."""
    numbered = "\n".join(f"{n}. {claim}" for n, claim in enumerate(claims, start=1))
    return f"{_INSTRUCTIONS}\n\nPassage:\n{passage}\n\nClaims:\n{numbered}\n"


def verification_schema(count: int, max_length: int = 200) -> dict[str, Any]:
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

    Word-level: the longest run of the quote's words found contiguously in the passage must
    cover `threshold` of the quote (the judge may drop punctuation or cut a long sentence).
    """
    quote, words = _normalise(evidence), _normalise(passage)
    if len(quote) < 3:
        return False
    from difflib import SequenceMatcher

    match = SequenceMatcher(None, quote, words, autojunk=False).find_longest_match(
        0, len(quote), 0, len(words)
    )
    return match.size >= threshold * len(quote)
