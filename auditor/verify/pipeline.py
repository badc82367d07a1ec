"""The claim check of one batch of answers, in the order the work happens.

    0. each answer's outcome        claims.answer_outcome (checked, refusal, no_context, ...)
    1. list the claims              listing.claims_call, listed_claims      judge: claims
       (claims = "sentences": the answer's sentences, listing.sentence_claims; no judge call)
    2. keep the claims it makes     premise.premise_call, stated            judge: claims vs answer
       + sentences no claim carries listing.with_sentences (a refusal: extraction.refusal_claims)
       (claims = "sentences": nothing to check, no judge call)
    3. choose the evidence          evidence.rank_chunks, entailment_calls  judge: claim-chunk labels
    4. decide                       verdicts.decide
    5. check the quote (optional)   quotes.quote_call, apply_quote          judge: quote labels
    6. one row per answer           record.check_row

Every stage is one judge batch over all answers of the batch, so the engine stays full; the
RAGAS metrics other than faithfulness (`metrics`) ride along in the batches of steps 1 and 3.
`check.check_items` writes the rows and resumes; this module holds no state between batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from auditor.claim_rows import Claim
from auditor.config import JudgeConfig
from auditor.verify.answers import AnswerItem
from auditor.verify.asker import Asker, OnStageCalls
from auditor.verify.base import CallKey, Judge, JudgeUsage
from auditor.verify.claims import answer_outcome
from auditor.verify.entailment import label_probabilities
from auditor.verify.evidence import ClaimChecks, Embed, entailment_calls
from auditor.verify.examples import prompt_references, reviewed_block
from auditor.verify.extraction import refusal_claims, source_sentence, written_in
from auditor.verify.kb import KnowledgeBase, attach_kb_chunks
from auditor.verify.listing import claims_call, listed_claims, sentence_claims, with_sentences
from auditor.verify.metrics import METRIC_FIELDS, Planned, RagasMetric, metrics_for
from auditor.verify.premise import premise_call, stated
from auditor.verify.quotes import apply_quote, quote_call
from auditor.verify.record import check_row
from auditor.verify.verdicts import decide

__all__ = ["check_batch", "failed_row"]

# what a listing error records: the dropped claim and what the judge said of it
ListingError = dict[str, Any]
# the outcomes whose claims are checked against the sources
_CLAIMS_CHECKED = frozenset({"checked", "truncated", "no_context"})


def check_batch(
    batch: list[AnswerItem],
    config: JudgeConfig,
    judge: Judge,
    embed: Embed,
    on_calls: OnStageCalls | None = None,
    kb: KnowledgeBase | None = None,
) -> list[dict[str, Any]]:
    """The checks.jsonl rows of `batch`, one per answer, in order."""
    usage = {item.id: JudgeUsage() for item in batch}
    asker = Asker(judge, config.retries, usage, on_calls)
    metrics = metrics_for(config)
    faithfulness = "faithfulness" in config.metrics
    listing = faithfulness and config.claims == "listed"
    premise = listing and config.premise_check
    stages = _stage_labels(2 + premise + config.quote_check)
    failures: dict[str, list[str]] = {item.id: [] for item in batch}

    outcomes = {item.id: _outcome(item, config) for item in batch}
    first = list_claims(batch, outcomes, config, metrics, asker, next(stages), listing)
    if listing:
        listed = read_claim_lists(batch, first, config, failures)
    else:
        listed = {
            item.id: sentence_claims(item, config)
            for item in batch
            if faithfulness and outcomes[item.id] in _CLAIMS_CHECKED
        }
    claims, listing_errors = keep_stated_claims(
        batch, outcomes, listed, config, asker, next(stages) if premise else None, faithfulness
    )
    replies, checks = label_against_chunks(
        batch, claims, first, config, metrics, asker, next(stages), embed, kb
    )
    for item in batch:
        for index, pairs in checks.get(item.id, {}).items():
            decide(claims[item.id][index], item, pairs, replies, config, embed, failures[item.id])
    if config.quote_check:
        check_quotes(batch, claims, config, asker, next(stages), embed, failures)

    rows = []
    for item in batch:
        fields: dict[str, Any] = dict(METRIC_FIELDS)
        for metric in metrics:
            fields |= metric.score(item, replies, failures[item.id], embed)
        row = check_row(
            item, outcomes[item.id], claims[item.id], fields, usage[item.id], failures[item.id]
        )
        if premise:
            row["listed_claims"] = sum(c.origin == "judge" for c in listed.get(item.id, []))
            row["listing_errors"] = listing_errors[item.id]
        row["sources"] = item.sources
        if item.reviewed:
            row["reviewed"] = [ref.to_json() for ref in item.shown]
        if item.kb_chunks:
            meta = kb.meta if kb is not None else {}
            row["kb_chunks"] = [
                {"chunk_id": chunk_id, **meta.get(chunk_id, {}), "text": text}
                for chunk_id, text in item.kb_chunks
            ]
        rows.append(row)
    return rows


def failed_row(item: AnswerItem, why: str) -> dict[str, Any]:
    """The record of an answer whose check itself failed (not its claims): `judge_failed`, no
    claims, `why` in judge_failures; counted like any other record, so a re-run skips it."""
    row = check_row(item, "judge_failed", [], dict(METRIC_FIELDS), JudgeUsage(), [why])
    row["sources"] = item.sources
    return row


def _outcome(item: AnswerItem, config: JudgeConfig) -> str:
    """Step 0: whether the answer is checked, declines, has no context, or failed."""
    if item.error:
        return "generation_error"
    # claims checked against the knowledge base only need no returned context
    contexts = [t for _, t in item.chunks] or (["kb"] if item.sources == "kb" else [])
    return answer_outcome(item.answer, contexts, config.max_answer_chars)


def list_claims(
    batch: list[AnswerItem],
    outcomes: dict[str, str],
    config: JudgeConfig,
    metrics: list[RagasMetric],
    asker: Asker,
    stage: str,
    listing: bool,
) -> dict[CallKey, Any]:
    """Step 1: the judge lists each answer's claims (`listing`); every metric's independent
    calls ride along. Returns every reply of the stage."""
    calls: list[Planned] = []
    for item in batch:
        outcome = outcomes[item.id]
        if listing and outcome in _CLAIMS_CHECKED:
            calls.append(claims_call(item, config))
        for metric in metrics:
            calls.extend(metric.plan(item, outcome))
    return asker.ask(calls, f"{stage}: claims")


def read_claim_lists(
    batch: list[AnswerItem],
    first: dict[CallKey, Any],
    config: JudgeConfig,
    failures: dict[str, list[str]],
) -> dict[str, list[Claim]]:
    """Step 1, read back: each answer's listed claims, cleaned (`listing.listed_claims`)."""
    listed: dict[str, list[Claim]] = {}
    for item in batch:
        key = CallKey("claims", item.id)
        if key in first and first[key] is None:
            failures[item.id].append("claims: no valid judge output after retries")
        elif key in first:
            listed[item.id] = listed_claims(item, first[key].claims, config)
    return listed


def keep_stated_claims(
    batch: list[AnswerItem],
    outcomes: dict[str, str],
    listed: dict[str, list[Claim]],
    config: JudgeConfig,
    asker: Asker,
    stage: str | None,
    faithfulness: bool,
) -> tuple[dict[str, list[Claim]], dict[str, list[ListingError]]]:
    """Step 2: each listed claim against its own answer (`stage` None: premise check off);
    a claim the answer does not make is a listing error, dropped, and its sentence checked
    as written instead, with every sentence no kept claim carries. A refusal's claims are its
    own sentences. Returns (claims to check, listing errors) per answer."""
    replies: dict[CallKey, Any] = {}
    if stage is not None:
        calls: list[Planned] = [
            (premise_call(item.id, index, item.question, _body(item, config), claim), None)
            for item in batch
            if outcomes[item.id] != "refusal"
            for index, claim in enumerate(listed.get(item.id, []))
            if _needs_premise_check(claim, item, config)
        ]
        replies = asker.ask(calls, f"{stage}: claims vs answer")
    claims: dict[str, list[Claim]] = {}
    listing_errors: dict[str, list[ListingError]] = {item.id: [] for item in batch}
    for item in batch:
        claims[item.id] = []
        if outcomes[item.id] == "refusal" and faithfulness:
            # a declining answer claims only what is missing: its sentences, as written
            claims[item.id] = refusal_claims(item)
            continue
        if item.id not in listed:
            continue
        kept: list[Claim] = []
        dropped: list[tuple[Claim, dict[str, Any]]] = []
        for index, claim in enumerate(listed[item.id]):
            # no reply (not asked, or no valid output after retries): the claim is kept
            reply = replies.get(CallKey("premise", item.id, (index,)))
            keep, said = (True, {}) if reply is None else stated(reply.top_logprobs, reply.text)
            if keep:
                kept.append(claim)
            else:
                dropped.append((claim, said))
        claims[item.id] = with_sentences(item, kept, [c for c, _ in dropped], config)
        checked = {c.text for c in claims[item.id]}
        for claim, said in dropped:
            instead = source_sentence(claim.span, _body(item, config), item.question)
            listing_errors[item.id].append(
                {
                    "text": claim.text,
                    "span": list(claim.span) if claim.span else None,
                    **said,
                    "checked_instead": instead if instead in checked else None,
                }
            )
    return claims, listing_errors


def label_against_chunks(
    batch: list[AnswerItem],
    claims: dict[str, list[Claim]],
    first: dict[CallKey, Any],
    config: JudgeConfig,
    metrics: list[RagasMetric],
    asker: Asker,
    stage: str,
    embed: Embed,
    kb: KnowledgeBase | None,
) -> tuple[dict[CallKey, Any], dict[str, ClaimChecks]]:
    """Step 3: each claim against each of its likeliest source chunks, one label call per
    pair, with the metric calls that need the claims. A claim with no context at all is
    unsupported without a call. Returns (every reply so far, which calls check which claim)."""
    calls: list[Planned] = []
    checks: dict[str, ClaimChecks] = {}
    for item in batch:
        found = claims[item.id]
        for metric in metrics:
            calls.extend(metric.plan_after_claims(item, [c.text for c in found], first))
        looks_up_kb = item.sources != "returned" and kb is not None
        if found and not item.chunks and not looks_up_kb:
            for claim in found:
                claim.verdict, claim.reason = "unsupported", "no retrieved context to support it"
        elif found:
            kb_for_claim = (
                attach_kb_chunks(item, found, kb, config.chunks_per_claim)
                if looks_up_kb and kb is not None
                else None
            )
            entailment, checks[item.id] = entailment_calls(
                item, found, config, embed, kb_for_claim, _reviewed(item, found, config, embed)
            )
            calls.extend((call, None) for call in entailment)
    return first | asker.ask(calls, f"{stage}: claim-chunk labels"), checks


def _reviewed(item: AnswerItem, claims: list[Claim], config: JudgeConfig, embed: Embed) -> str:
    """The verdict prompts' block of what people said of other answers to the question (judge
    `examples_in = "prompt"`); the statements shown are kept on the item for its row."""
    if not item.reviewed:
        return ""
    facts = [c.text for c in claims if c.kind == "fact"]
    shown = prompt_references(facts, item.reviewed, embed, config.examples_prompt_chars)
    item.shown = tuple(shown)
    return reviewed_block(shown)


def check_quotes(
    batch: list[AnswerItem],
    claims: dict[str, list[Claim]],
    config: JudgeConfig,
    asker: Asker,
    stage: str,
    embed: Embed,
    failures: dict[str, list[str]],
) -> None:
    """Step 5 (quote_check): each supported-looking fact claim against its quote alone."""
    calls: list[Planned] = []
    asked: dict[CallKey, tuple[Claim, str, str]] = {}
    for item in batch:
        for index, claim in enumerate(claims[item.id]):
            planned = quote_call(claim, index, item, embed)
            if planned is not None:
                call, quote, chunk_id = planned
                calls.append((call, None))
                asked[call.key] = (claim, quote, chunk_id)
    answered = asker.ask(calls, f"{stage}: quote labels")
    for key, (claim, quote, chunk_id) in asked.items():
        reply = answered.get(key)
        if reply is None:
            failures[key.item].append(f"quote {chunk_id}: no valid judge output after retries")
            continue
        probabilities, written = label_probabilities(reply.top_logprobs, reply.text)
        apply_quote(claim, quote, chunk_id, probabilities, written, config.support_threshold)


def _stage_labels(stages: int) -> Iterator[str]:
    """ "stage 1/3", "stage 2/3", ...: how progress names the judge batches of one batch."""
    return (f"stage {n}/{stages}" for n in range(1, stages + 1))


def _body(item: AnswerItem, config: JudgeConfig) -> str:
    return item.answer[: config.max_answer_chars]


def _needs_premise_check(claim: Claim, item: AnswerItem, config: JudgeConfig) -> bool:
    """Listed fact claims not written word for word in the answer. The listing errors the
    premise check exists for (a claim from the question, a flipped meaning, an abstention
    turned into a fact) are all facts; a listed abstention the answer never made is already
    dropped (`listed_claims`)."""
    return (
        claim.origin == "judge"
        and claim.kind == "fact"
        and not written_in(claim.text, _body(item, config))
    )
