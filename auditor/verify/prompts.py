"""Our claim-verification prompt (pure): claims checked against one chunk at a time.

Why not RAGAS's NLI prompt over the joined contexts: it cannot say which source supports a
claim, and a small judge gives every statement of an answer the same verdict when it sees
everything at once. Checking a few claims against one passage, reason first and the label
last, with the claim echoed, is what held up on these machines (see the CPU notes). The
instructions and the passage come first, so answers that share a retrieved chunk share the
prompt prefix (vLLM's prefix cache computes it once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

__all__ = ["LABELS", "ClaimResult", "ClaimResults", "verification_prompt", "verification_schema"]

LABELS = ("true", "false", "unknown")

_INSTRUCTIONS = """You check claims against a single passage.
For each claim, first write a short reason based only on the passage, then a label:
- "true": the passage states the claim or directly implies it. Numbers, dates, names, \
amounts and conditions must match the passage exactly.
- "false": the passage contradicts the claim, for example it gives a different number, \
date, name or condition.
- "unknown": the passage does not say whether the claim is right.
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
                        "reason": {"type": "string", "maxLength": max_length},
                        "label": {"type": "string", "enum": list(LABELS)},
                    },
                    "required": ["claim", "reason", "label"],
                },
            }
        },
        "required": ["results"],
    }


class ClaimResult(BaseModel):
    """The judge's word on one claim against one passage."""

    claim: str
    reason: str
    label: Literal["true", "false", "unknown"]


class ClaimResults(BaseModel):
    """The judge's reply to one verification prompt."""

    results: list[ClaimResult]
