"""The quote check: a supported-looking fact claim asked again against its quote alone.

Step 5 of the claim check (`pipeline`, `quote_check`): the two sentences of the best-judged
chunk closest to the claim, one label call, folded into p_supported.
"""

from __future__ import annotations

from auditor.claim_rows import Claim
from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey, JudgeCall
from auditor.verify.entailment import entailment_prompt
from auditor.verify.evidence import Embed, closest_sentences

__all__ = ["apply_quote", "quote_call"]


def quote_call(
    claim: Claim, index: int, item: AnswerItem, embed: Embed
) -> tuple[JudgeCall, str, str] | None:
    """The focused second question for a fact claim: does its quote state it?
    (call, quote, chunk id)

    The quote is the two sentences of the best-judged chunk closest to the claim, in reading
    order: on a long chunk a small judge approves a claim whose own evidence gives another
    figure or entity (seen: "up to 6 sensors on the T9 and up to 10 on the T9 Pro" approving
    "6 on the T9 Pro"); on the quote alone the mismatch is in plain view.
    """
    if claim.kind != "fact" or not claim.judgements:
        return None
    usable = [
        j
        for j in claim.judgements
        if not j["vetoed"] and not j.get("misbound") and j["probabilities"] is not None
    ]
    if not usable:
        return None
    best = max(usable, key=lambda j: j["probabilities"]["true"])
    pool = item.pool
    chunk_index = [chunk_id for chunk_id, _ in pool].index(best["chunk"])
    quote = closest_sentences(claim.text, pool[chunk_index][1], embed, 2)
    key = CallKey("quote", item.id, (index, chunk_index))
    prompt = entailment_prompt(quote, claim.text, "fact")
    return JudgeCall(key, prompt, None, 1, logprobs=20), quote, best["chunk"]


def apply_quote(
    claim: Claim,
    quote: str,
    chunk_id: str,
    probabilities: dict[str, float] | None,
    written: str | None,
    threshold: float,
) -> None:
    """Fold the quote's answer into the claim: p_supported x (1 - p(quote says otherwise))."""
    claim.quote = {
        "chunk": chunk_id,
        "text": quote,
        "probabilities": None
        if probabilities is None
        else {label: round(value, 4) for label, value in probabilities.items()},
        "written": written,
    }
    if probabilities is None or claim.p_supported is None:
        return
    p = round(claim.p_supported * (1.0 - probabilities["false"]), 4)
    claim.p_supported = p
    if claim.verdict == "supported" and p < threshold:
        says_false = probabilities["false"] > max(probabilities["true"], probabilities["unknown"])
        claim.verdict = "contradicted" if says_false else "unsupported"
        claim.supporting_chunks = []
        if says_false:
            claim.contradicting_chunks = [chunk_id]
            claim.evidence = quote
            claim.reason = "the quoted evidence says otherwise"
        else:
            claim.reason = "the quoted evidence does not state it"
