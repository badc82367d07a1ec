"""A claim's verdict, p_supported, sources, evidence and reason from its chunk labels.

Step 4 of the claim check (`pipeline`): `decide` reads the label replies of a claim's chunks,
applies the figure guard (`figures`) and the decision rule (`entailment.claim_decision`).
`redecide` does the same from stored judgements, judging nothing (the benches measure a change
of rule this way).
"""

from __future__ import annotations

from typing import Any

from auditor.claim_rows import Claim
from auditor.config import JudgeConfig
from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey
from auditor.verify.entailment import ChunkJudgement, claim_decision, label_probabilities
from auditor.verify.evidence import Embed, closest_sentences
from auditor.verify.figures import missing_figures

__all__ = ["decide", "redecide"]


def decide(
    claim: Claim,
    item: AnswerItem,
    pairs: list[tuple[CallKey, int]],
    replies: dict[CallKey, Any],
    config: JudgeConfig,
    embed: Embed,
    failures: list[str],
) -> None:
    """The claim's verdict, probability, sources and evidence from its chunk judgements."""
    judgements = []
    pool = item.pool
    for key, chunk_index in pairs:
        chunk_id, text = pool[chunk_index]
        reply = replies.get(key)
        if reply is None:
            failures.append(f"entailment {chunk_id}: no valid judge output after retries")
            continue
        probabilities, written = label_probabilities(reply.top_logprobs, reply.text)
        judgements.append(_guarded(claim, item, chunk_id, text, probabilities, written))
    claim.checked_chunks = [pool[i][0] for _, i in pairs]
    returned = len(item.chunks)
    claim.chunk_sources = {pool[i][0]: "returned" if i < returned else "kb" for _, i in pairs}
    _settle(claim, item, judgements, config, embed)


def redecide(claim: Claim, item: AnswerItem, config: JudgeConfig) -> None:
    """Decide a stored claim again from its chunk judgements with today's figure guards and
    decision rule, judging nothing (the benches measure a change of rule this way; valid while
    the prompts are unchanged). The evidence sentence is kept."""
    chunks = dict(item.pool)
    judgements = [
        _guarded(claim, item, j["chunk"], chunks[j["chunk"]], j["probabilities"], j["written"])
        for j in claim.judgements
    ]
    _settle(claim, item, judgements, config, None)


def _guarded(
    claim: Claim,
    item: AnswerItem,
    chunk_id: str,
    text: str,
    probabilities: dict[str, float] | None,
    written: str | None,
) -> ChunkJudgement:
    """The judge's word on one chunk with the figure guards applied."""
    vetoed: list[str] = []
    if claim.kind == "fact":
        # figures the question gave are its premises, not facts the chunk must state
        vetoed = missing_figures(claim.text, text + "\n" + item.question)
    return ChunkJudgement(chunk_id, probabilities, written, vetoed)


def _settle(
    claim: Claim,
    item: AnswerItem,
    judgements: list[ChunkJudgement],
    config: JudgeConfig,
    embed: Embed | None,
) -> None:
    """Verdict, probability, sources, evidence and reason from the guarded judgements."""
    claim.judgements = [judgement.to_json() for judgement in judgements]
    verdict, p, supporting, contradicting = claim_decision(
        judgements, claim.kind, config.support_threshold
    )
    claim.verdict, claim.p_supported = verdict, None if p is None else round(p, 4)
    claim.supporting_chunks, claim.contradicting_chunks = supporting, contradicting
    deciding = supporting or contradicting
    if deciding and embed is not None:
        text = dict(item.pool)[deciding[0]]
        claim.evidence = _closest_sentence(claim.text, text, embed)
    claim.reason = _reason(claim, judgements)


def _reason(claim: Claim, judgements: list[ChunkJudgement]) -> str:
    """One line saying why, in the terms a reviewer checks."""
    if claim.verdict == "unverifiable":
        return "judge failed on every check of this claim"
    vetoed = [j for j in judgements if j.vetoed]
    if claim.kind == "abstention":
        if claim.verdict == "supported":
            return "the answer says the sources lack this, and the checked chunks do not give it"
        return "the answer says the sources lack this, but a checked chunk gives it"
    if claim.verdict == "supported":
        return "the evidence states the claim"
    if claim.verdict == "contradicted":
        return "a checked chunk says otherwise"
    if vetoed and len(vetoed) == len(judgements):
        return f"the checked chunks never mention {', '.join(vetoed[0].vetoed[:3])}"
    return "the checked chunks do not state it"


def _closest_sentence(claim: str, passage: str, embed: Embed) -> str:
    """The sentence of the passage most similar to the claim (what a reviewer reads first)."""
    return closest_sentences(claim, passage, embed, 1)[:400]
