"""Which chunks each claim is checked against, and the label calls that check it.

Step 3 of the claim check (`pipeline`): for each claim, its likeliest source chunks
(`rank_chunks`: returned chunks by figures then sentence similarity, knowledge-base chunks
retrieved for the claim), and one short label call per claim and chunk (`entailment_calls`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from auditor.claim_rows import Claim
from auditor.config import JudgeConfig
from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey, JudgeCall
from auditor.verify.claims import sentence_spans
from auditor.verify.entailment import entailment_prompt
from auditor.verify.figures import missing_figures

__all__ = ["ClaimChecks", "Embed", "closest_sentences", "entailment_calls", "rank_chunks"]

Embed = Callable[[list[str]], Any]
# per claim index: its entailment calls and the chunk index each one checks
ClaimChecks = dict[int, list[tuple[CallKey, int]]]


def entailment_calls(
    item: AnswerItem,
    claims: list[Claim],
    config: JudgeConfig,
    embed: Embed,
    kb_for_claim: list[list[int]] | None = None,
    reviewed: str = "",
) -> tuple[list[JudgeCall], ClaimChecks]:
    """One label call per claim and each of its likeliest source chunks (chunk order, so calls
    on one chunk share the prompt prefix).

    The candidates follow `item.sources`: the returned chunks most similar to the claim, the
    knowledge-base chunks retrieved for it (`kb_for_claim`: indices into `item.pool`), or both.
    `reviewed`: what people said of other answers to the question, shown in every fact's prompt.
    """
    chunk_texts = [text for _, text in item.pool]
    returned = [text for _, text in item.chunks] if item.sources != "kb" else []
    if returned:
        ranked = rank_chunks(
            embed, [c.text for c in claims], returned, item.question, config.chunks_per_claim
        )
    else:
        ranked = [[] for _ in claims]
    if kb_for_claim is not None:
        ranked = [
            top + [k for k in kb if k not in top]
            for top, kb in zip(ranked, kb_for_claim, strict=True)
        ]
    calls: list[JudgeCall] = []
    checks: ClaimChecks = {}
    for index, (claim, chunk_indices) in enumerate(zip(claims, ranked, strict=True)):
        pairs = checks[index] = []
        for chunk_index in sorted(chunk_indices):
            key = CallKey("entailment", item.id, (index, chunk_index))
            prompt = entailment_prompt(chunk_texts[chunk_index], claim.text, claim.kind, reviewed)
            # max_tokens 1: the label is read from the first token's log-probabilities
            calls.append(JudgeCall(key, prompt, None, 1, logprobs=20))
            pairs.append((key, chunk_index))
    return calls, checks


def rank_chunks(
    embed: Embed, claims: list[str], chunks: list[str], question: str, top: int
) -> list[list[int]]:
    """For each claim, the indices of the `top` chunks likeliest to be its source.

    A chunk that writes every figure of the claim comes first (a figure is the sharpest sign of
    where a fact came from); then the chunk with the sentence closest to the claim. Sentences,
    not whole chunks, are compared: the embedder reads only a chunk's first 256 word pieces.
    Rule, error class: a claim checked against chunks that are not its source. Evidence for
    the count: every chunk instead of the 2 likeliest lowered RAGTruth CV 0.753 -> 0.707
    (README Evidence); the figure-first order is not isolated.
    """
    sentences: list[str] = []
    owners: list[int] = []
    for index, chunk in enumerate(chunks):
        spans = sentence_spans(chunk) or [(0, len(chunk))]
        sentences.extend(chunk[a:b] for a, b in spans)
        owners.extend([index] * len(spans))
    vectors = embed(claims + sentences)
    sims = vectors[: len(claims)] @ vectors[len(claims) :].T
    ranked = []
    for claim, row in zip(claims, sims, strict=True):
        best = np.full(len(chunks), -np.inf)
        for owner, sim in zip(owners, row, strict=True):
            best[owner] = max(best[owner], float(sim))
        has_figures = [not missing_figures(claim, chunk + "\n" + question) for chunk in chunks]
        order = sorted(range(len(chunks)), key=lambda i: (not has_figures[i], -best[i]))
        ranked.append(order[:top])
    return ranked


def closest_sentences(claim: str, passage: str, embed: Embed, count: int) -> str:
    """The `count` sentences of the passage most similar to the claim, in reading order."""
    spans = sentence_spans(passage)
    if len(spans) <= count:
        return passage.strip()
    sentences = [passage[a:b] for a, b in spans]
    vectors = embed([claim, *sentences])
    # stable on ties: the earlier sentence wins
    order = (-(vectors[1:] @ vectors[0])).argsort(kind="stable")[:count]
    return " ".join(sentences[i] for i in sorted(int(i) for i in order))
