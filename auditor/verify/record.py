"""One checks.jsonl record: an answer's outcome, claims, verdict counts, metrics and cost."""

from __future__ import annotations

from typing import Any

from auditor.claim_rows import VERDICTS, Claim, faithfulness, support_score
from auditor.verify.answers import AnswerItem
from auditor.verify.base import JudgeUsage

__all__ = ["check_row", "claim_fields"]


def check_row(
    item: AnswerItem,
    outcome: str,
    claims: list[Claim],
    fields: dict[str, Any],
    usage: JudgeUsage,
    failures: list[str],
) -> dict[str, Any]:
    """One checks.jsonl record."""
    if outcome == "checked" and failures and not claims:
        outcome = "judge_failed"
    return {
        "id": item.id,
        "outcome": outcome,
        **claim_fields(claims, outcome),
        **fields,
        "judge": {
            "calls": usage.calls,
            "prompt_tokens": usage.prompt_tokens,
            "cached_tokens": usage.cached_tokens,
            "completion_tokens": usage.completion_tokens,
            "seconds": round(usage.seconds, 4),
            "failures": usage.failures,
            "stages": usage.stages,
        },
        "judge_failures": failures,
    }


def claim_fields(claims: list[Claim], outcome: str) -> dict[str, Any]:
    """The fields of a record that follow from its claims' verdicts."""
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    hallucinated = counts["unsupported"] + counts["contradicted"]
    return {
        "claims": [c.to_json() for c in claims],
        "claim_counts": counts,
        "faithfulness": faithfulness(claims),
        "support_score": support_score(claims),
        "hallucinated": (hallucinated > 0)
        if counts["supported"] + hallucinated
        else (False if outcome == "refusal" else None),
    }
