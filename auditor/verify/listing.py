"""The answer's claims as the judge lists them, then every sentence the list left out.

Step 1 of the claim check (`pipeline`): `claims_call` asks the judge to list the claims;
`listed_claims` cleans the list (question echoes, debris, abstentions the answer never made);
after the premise check (`premise`) `with_sentences` adds each answer sentence no kept claim
carries, and the sentence of each dropped claim, checked as written.
"""

from __future__ import annotations

from auditor.claim_rows import Claim
from auditor.config import JudgeConfig
from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey, JudgeCall
from auditor.verify.claims import align_span, sentence_spans
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

__all__ = ["claims_call", "claims_of", "listed_claims", "sentence_claims", "with_sentences"]


def claims_call(item: AnswerItem, config: JudgeConfig) -> tuple[JudgeCall, type[ExtractedClaims]]:
    """The call that lists the answer's claims."""
    prompt = claims_prompt(item.question, item.answer[: config.max_answer_chars])
    return JudgeCall(
        CallKey("claims", item.id), prompt, claims_schema(config.max_claims), 900
    ), ExtractedClaims


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
    sentences = uncovered_sentences(body, texts, item.question, config.short_clauses)
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


def claims_of(item: AnswerItem, extracted: list[str], config: JudgeConfig) -> list[Claim]:
    """The answer's claims: the listed ones (`listed_claims`), then each sentence of the answer
    that no listed claim carries, as written (every statement of the answer is checked,
    whatever the judge's list left out)."""
    return with_sentences(item, listed_claims(item, extracted, config), [], config)


def sentence_claims(item: AnswerItem, config: JudgeConfig) -> list[Claim]:
    """The answer's statements as written (`claims = "sentences"`): every sentence and clause,
    cleaned as `with_sentences` cleans the sentences a claim list left out (list markers,
    citations and attributions removed; headers, questions, question echoes and fragments
    skipped); the bare sentences when none is left."""
    return with_sentences(item, [], [], config) or listed_claims(item, [], config)
