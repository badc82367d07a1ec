"""Faithfulness, claim by claim: list the answer's claims, check each against its most
similar chunks (one short label per claim and chunk), decide its verdict, probability, sources
and evidence. The prompts live in `extraction` and `entailment`; this module plans the judge
calls with typed keys and reads the replies back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from auditor.config import JudgeConfig
from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey, Claim, JudgeCall
from auditor.verify.claims import align_span, sentence_spans
from auditor.verify.entailment import (
    ChunkJudgement,
    claim_decision,
    entailment_prompt,
    label_probabilities,
)
from auditor.verify.extraction import (
    ExtractedClaims,
    abstains,
    claim_kind,
    claims_prompt,
    claims_schema,
    is_garbage,
    is_question_echo,
    source_sentence,
    uncovered_sentences,
    without_attribution,
)
from auditor.verify.figures import missing_figures

__all__ = [
    "ClaimChecks",
    "apply_quote",
    "claims_call",
    "claims_of",
    "decide",
    "entailment_calls",
    "listed_claims",
    "quote_call",
    "redecide",
    "with_sentences",
]

Embed = Callable[[list[str]], Any]
# per claim index: its entailment calls and the chunk index each one checks
ClaimChecks = dict[int, list[tuple[CallKey, int]]]


def claims_call(item: AnswerItem, config: JudgeConfig) -> tuple[JudgeCall, type[ExtractedClaims]]:
    """The call that lists the answer's claims."""
    prompt = claims_prompt(item.question, item.answer[: config.max_answer_chars])
    return JudgeCall(
        CallKey("claims", item.id), prompt, claims_schema(config.max_claims), 900
    ), ExtractedClaims


def entailment_calls(
    item: AnswerItem,
    claims: list[Claim],
    config: JudgeConfig,
    embed: Embed,
    kb_for_claim: list[list[int]] | None = None,
) -> tuple[list[JudgeCall], ClaimChecks]:
    """One label call per claim and each of its likeliest source chunks (chunk order, so calls
    on one chunk share the prompt prefix).

    The candidates follow `item.sources`: the returned chunks most similar to the claim, the
    knowledge-base chunks retrieved for it (`kb_for_claim`: indices into `item.pool`), or both.
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
            prompt = entailment_prompt(chunk_texts[chunk_index], claim.text, claim.kind)
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
    import numpy as np

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


def claims_of(item: AnswerItem, extracted: list[str], config: JudgeConfig) -> list[Claim]:
    """The answer's claims: the listed ones (`listed_claims`), then each sentence of the answer
    that no listed claim carries, as written (every statement of the answer is checked,
    whatever the judge's list left out)."""
    return with_sentences(item, listed_claims(item, extracted, config), [], config)


def listed_claims(item: AnswerItem, extracted: list[str], config: JudgeConfig) -> list[Claim]:
    """The judge's listed claims: deduplicated, question echoes and debris dropped, with spans
    and kinds. Falls back to the answer's own sentences when the judge found no claim in it."""
    body = item.answer[: config.max_answer_chars]
    texts = [without_attribution(t.strip()) for t in extracted if t.strip()]
    texts = [t for t in texts if not is_garbage(t) and not is_question_echo(t, item.question, body)]
    if not abstains(body):
        # a claim that the sources lack something, from an answer that never says so, is the
        # judge imitating its examples (seen: "The documents do not say who designed it").
        # Rule, error class: abstentions the answer never made; evidence: not isolated.
        texts = [t for t in texts if claim_kind(t) == "fact"]
    if not texts:
        return [
            Claim(text=body[a:b], span=(a, b), kind=claim_kind(body[a:b]), origin="sentence")
            for a, b in sentence_spans(body)
        ][: config.max_claims]
    texts = list(dict.fromkeys(texts))
    return [Claim(text=t, span=align_span(t, item.answer), kind=claim_kind(t)) for t in texts]


def with_sentences(
    item: AnswerItem, kept: list[Claim], dropped: list[Claim], config: JudgeConfig
) -> list[Claim]:
    """`kept` claims, then the answer's sentences to check as written: each sentence no kept
    claim carries, and the sentence each `dropped` claim (a listing error) was taken from."""
    body = item.answer[: config.max_answer_chars]
    texts = [c.text for c in kept]
    sentences = uncovered_sentences(body, texts, item.question)
    for claim in dropped:
        sentence = source_sentence(claim.span, body, item.question)
        if sentence is not None and sentence not in sentences:
            sentences.append(sentence)
    claims = list(kept)
    claims += [
        Claim(text=s, span=align_span(s, item.answer), kind=claim_kind(s), origin="sentence")
        for s in sentences
        if s not in texts
    ]
    return claims[: config.max_claims]


def decide(
    claim: Claim,
    item: AnswerItem,
    pairs: list[tuple[CallKey, int]],
    replies: dict[CallKey, Any],
    config: JudgeConfig,
    embed: Callable[[list[str]], Any],
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
    embed: Callable[[list[str]], Any] | None,
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


def _closest_sentence(claim: str, passage: str, embed: Callable[[list[str]], Any]) -> str:
    """The sentence of the passage most similar to the claim (what a reviewer reads first)."""
    return _closest_sentences(claim, passage, embed, 1)[:400]


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
    quote = _closest_sentences(claim.text, pool[chunk_index][1], embed, 2)
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


def _closest_sentences(
    claim: str, passage: str, embed: Callable[[list[str]], Any], count: int
) -> str:
    """The `count` sentences of the passage most similar to the claim, in reading order."""
    spans = sentence_spans(passage)
    if len(spans) <= count:
        return passage.strip()
    sentences = [passage[a:b] for a, b in spans]
    vectors = embed([claim, *sentences])
    # stable on ties: the earlier sentence wins
    order = (-(vectors[1:] @ vectors[0])).argsort(kind="stable")[:count]
    return " ".join(sentences[i] for i in sorted(int(i) for i in order))
