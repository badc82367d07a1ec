"""`check_run`: every claim of every answer verified against its sources -> checks.jsonl.

Stages for each batch of answers (one judge batch each, so the engine stays full):
  1. the claims of each answer (`faithfulness`), and the calls of every other metric that
     needs nothing else (`metrics`: RAGAS context precision, relevancy, recall);
  2. each claim against each of its most similar chunks, one short label per pair, and the
     calls that need the claims (answer correctness).
Unparseable judge output is re-asked a bounded number of times, then recorded: an affected
claim is `unverifiable`, never NaN, never dropped. checks.jsonl grows by one batch at a time
and an interrupted check resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from auditor.config import EmbedderConfig, JudgeConfig, config_sha256, without_engine_only
from auditor.errors import BadInput
from auditor.files import utc_now, write_json_atomic
from auditor.ingest import embed as embedders
from auditor.store import RecordWriter, read_jsonl
from auditor.verify import judges
from auditor.verify.answers import AnswerItem, import_answers, items_from_run
from auditor.verify.base import (
    VERDICTS,
    CallKey,
    Claim,
    Judge,
    JudgeCall,
    JudgeReply,
    JudgeUsage,
)
from auditor.verify.claims import answer_outcome, faithfulness, support_score
from auditor.verify.entailment import label_probabilities
from auditor.verify.extraction import refusal_claims, source_sentence, written_in
from auditor.verify.faithfulness import (
    ClaimChecks,
    apply_quote,
    claims_call,
    decide,
    entailment_calls,
    listed_claims,
    quote_call,
    with_sentences,
)
from auditor.verify.kb import KnowledgeBase, attach_kb_chunks
from auditor.verify.metrics import METRIC_FIELDS, Planned, metrics_for
from auditor.verify.premise import premise_call, stated
from auditor.versions import package_versions

__all__ = [
    "CHECKS",
    "AnswerItem",
    "CheckSummary",
    "OnStageCalls",
    "check_items",
    "check_run",
    "import_answers",
    "items_from_run",
]

CHECKS = "checks.jsonl"
CHECK_MANIFEST = "check.json"
CHECK_SCHEMA_VERSION = 1
# The verdict logic's version (prompts, claim rules, decision): recorded with every check and
# part of a calibration's fingerprint. Bump it whenever a change can move a verdict or
# p_supported, and re-make auditor/calibrations/ (bench/agreement.py --write-calibration).
VERDICT_LOGIC = "2026-12-05.2"  # + listed facts checked against their answer; kinds by subject


@dataclass
class CheckSummary:
    """Totals printed after a check."""

    out_dir: Path
    answers: int = 0
    claims: int = 0
    supported: int = 0
    unsupported: int = 0
    contradicted: int = 0
    unverifiable: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    judge_calls: int = 0
    judge_prompt_tokens: int = 0
    judge_cached_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_seconds: float = 0.0
    skipped: int = 0
    listed_claims: int = 0  # claims the judge listed and the premise check saw
    listing_errors: int = 0  # of them, claims the answer does not make (dropped)

    @property
    def hallucination_rate(self) -> float | None:
        judged = self.supported + self.unsupported + self.contradicted
        return (self.unsupported + self.contradicted) / judged if judged else None

    @property
    def judge_failed_throughout(self) -> bool:
        """No claim got a verdict and the judge is why (not: nothing needed checking)."""
        judged = self.supported + self.unsupported + self.contradicted
        return judged == 0 and self.unverifiable + self.outcomes.get("judge_failed", 0) > 0


def _parse(reply: JudgeReply, model: type[BaseModel]) -> BaseModel | None:
    if reply.error or not reply.text:
        return None
    try:
        return model.model_validate_json(reply.text)
    except ValidationError:
        return None


OnStageCalls = Callable[[str, int, int], None]
"""Progress of one judge stage: (stage label, calls answered, calls in the stage)."""


class _Asker:
    """Sends judge calls in one batch, re-asks unparseable ones, and books usage per answer."""

    def __init__(
        self,
        judge: Judge,
        retries: int,
        usage: dict[str, JudgeUsage],
        on_calls: OnStageCalls | None = None,
    ) -> None:
        self.judge, self.retries, self.usage = judge, retries, usage
        self.on_calls = on_calls

    def ask(
        self, calls: Sequence[tuple[JudgeCall, type[BaseModel] | None]], stage: str
    ) -> dict[CallKey, Any]:
        """{call key: parsed response (a label call: its reply) or None after all retries}."""
        results: dict[CallKey, Any] = {}
        pending = list(calls)
        for attempt in range(self.retries + 1):
            if not pending:
                break
            label = stage if attempt == 0 else f"{stage} (re-asking {len(pending)})"
            on_reply = _counter(self.on_calls, label, len(pending))
            started = time.perf_counter()
            replies = self.judge.complete([call for call, _ in pending], on_reply)
            elapsed = time.perf_counter() - started
            total_tokens = sum(r.prompt_tokens + r.completion_tokens for r in replies) or 1
            retry = []
            for (call, model), reply in zip(pending, replies, strict=True):
                usage = self.usage[call.key.item]
                usage.add(reply, _STAGES.get(call.key.stage, call.key.stage))
                usage.seconds += (
                    elapsed * (reply.prompt_tokens + reply.completion_tokens) / total_tokens
                )
                parsed = _parse(reply, model) if model is not None else _label_reply(reply)
                results[call.key] = parsed
                if parsed is None:
                    usage.failures += 1
                    retry.append((call, model))
            pending = retry
        return results


def _counter(on_calls: OnStageCalls | None, label: str, total: int) -> Callable[[], None] | None:
    """A per-reply callback that reports `label`'s progress (reported at 0 at once)."""
    if on_calls is None:
        return None
    answered = 0
    on_calls(label, 0, total)

    def on_reply() -> None:
        nonlocal answered
        answered += 1
        on_calls(label, answered, total)

    return on_reply


# the usage stage each call stage is booked under
_STAGES = {
    "cp-answer": "context_precision",
    "cp-reference": "context_precision_with_reference",
    "relevancy": "answer_relevancy",
    "recall": "context_recall",
    "refstatements": "answer_correctness",
    "correctness": "answer_correctness",
}


def _label_reply(reply: JudgeReply) -> JudgeReply | None:
    """A label call's reply, or None when it failed (no text and no log-probabilities)."""
    if reply.error or not (reply.text.strip() or reply.top_logprobs):
        return None
    return reply


def _same_judge(previous: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether checks made by `previous` may be resumed by `current`: the same settings, engine
    speed settings (CPU threads, KV cache size, ...) aside."""
    if previous.get("sha256") == current["sha256"]:
        return True
    if "config" not in previous:
        return False
    return bool(without_engine_only(previous["config"]) == without_engine_only(current["config"]))


def check_items(
    items: list[AnswerItem],
    out_dir: Path,
    config: JudgeConfig,
    judge: Judge,
    embed: Callable[[list[str]], Any],
    *,
    on_batch: Callable[[int], None] | None = None,
    on_calls: OnStageCalls | None = None,
    kb: KnowledgeBase | None = None,
) -> CheckSummary:
    """Check every item not yet in `out_dir/checks.jsonl`; append results batch by batch."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done = {row["id"] for row in read_jsonl(out_dir / CHECKS, repair=True)}
    todo = [item for item in items if item.id not in done]
    manifest_path = out_dir / CHECK_MANIFEST
    manifest: dict[str, Any] = {
        "schema_version": CHECK_SCHEMA_VERSION,
        "judge": {"config": config.model_dump(mode="json"), "sha256": config_sha256(config)},
        "sources": sorted({item.sources for item in items}),
        "started_at": utc_now(),
    }
    if kb is not None and any(item.sources != "returned" for item in items):
        manifest["kb"] = kb.identity()
    if manifest_path.exists():
        previous = json.loads(manifest_path.read_text(encoding="utf-8"))
        if done and not _same_judge(previous.get("judge", {}), manifest["judge"]):
            raise BadInput(
                f"{manifest_path}: checks here were made by another judge configuration; "
                f"remove {out_dir / CHECKS} to re-judge, or check into another dir"
            )
        if done:
            _refuse_other_sources(out_dir, items)
        manifest["started_at"] = previous.get("started_at", manifest["started_at"])
    manifest["judge"]["identity"] = judge.identity()
    manifest["judge"]["verdict_logic"] = VERDICT_LOGIC
    manifest["packages"] = package_versions()
    manifest["status"] = "running"
    write_json_atomic(manifest_path, manifest)

    summary = CheckSummary(out_dir=out_dir, skipped=len(items) - len(todo))
    size = config.answers_per_batch
    with RecordWriter(out_dir, CHECKS) as writer:
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            for row in _check_batch(batch, config, judge, embed, on_calls, kb):
                writer.write(row)
                _count(summary, row)
            if on_batch:
                on_batch(len(batch))
    for row in read_jsonl(out_dir / CHECKS):
        if row["id"] in done:
            _count(summary, row)
    manifest |= {"status": "complete", "finished_at": utc_now()}
    if config.premise_check and "faithfulness" in config.metrics:
        # listed claims the answer does not make, dropped and checked as written instead
        manifest["listing"] = {
            "listed_claims": summary.listed_claims,
            "listing_errors": summary.listing_errors,
        }
    write_json_atomic(manifest_path, manifest)
    return summary


def check_run(
    targets: Sequence[tuple[Path, list[AnswerItem]]],
    config: JudgeConfig,
    *,
    judge_factory: Callable[[JudgeConfig], Judge] | None = None,
    embed: Callable[[list[str]], Any] | None = None,
    on_stage: Callable[[str], None] = lambda message: None,
    on_check_start: Callable[[str, int], None] = lambda name, total: None,
    on_batch: Callable[[int], None] | None = None,
    on_calls: OnStageCalls | None = None,
    kb_index: Path | None = None,
) -> list[CheckSummary]:
    """Check the answers of several dirs with one embedder and one judge (`check` and `audit`).

    The embedder and the judge engine start only when some dir has answers left to check,
    and the engine is freed at the end, whatever happens. One summary per target, in order.
    """
    for out_dir, items in targets:
        _refuse_other_sources(out_dir, items)
        if kb_index is None and any(item.sources != "returned" for item in items):
            raise BadInput(f"{out_dir}: checking against the knowledge base needs --index KB_DIR")
    pending = [(d, items) for d, items in targets if {i.id for i in items} - _checked_ids(d)]
    summaries: dict[Path, CheckSummary] = {}
    if pending:
        if embed is None:
            on_stage("loading the embedder (claim-to-chunk similarity)")
            embed = embedders.load_embedder(EmbedderConfig()).embed
        if judge_factory is None:
            judge_factory = judges.make_judge
        kb = None
        if kb_index is not None and any(i.sources != "returned" for _, its in pending for i in its):
            on_stage(f"opening the knowledge base {kb_index}")
            kb = KnowledgeBase(kb_index)
        on_stage(f"starting judge {config.name}")
        judge = judge_factory(config)
        try:
            for out_dir, items in pending:
                on_check_start(out_dir.name, len(items))
                summaries[out_dir] = check_items(
                    items,
                    out_dir,
                    config,
                    judge,
                    embed,
                    on_batch=on_batch,
                    on_calls=on_calls,
                    kb=kb,
                )
        finally:
            judge.close()
    for out_dir, items in targets:
        if out_dir not in summaries:
            summary = summaries[out_dir] = CheckSummary(out_dir=out_dir, skipped=len(items))
            wanted = {item.id for item in items}
            for row in read_jsonl(out_dir / CHECKS):
                if row["id"] in wanted:
                    _count(summary, row)
    return [summaries[out_dir] for out_dir, _ in targets]


def _refuse_other_sources(out_dir: Path, items: list[AnswerItem]) -> None:
    """Stored checks made against other sources are not this check's: refuse to reuse them."""
    manifest_path = out_dir / CHECK_MANIFEST
    if not manifest_path.exists() or not _checked_ids(out_dir):
        return
    previous = json.loads(manifest_path.read_text(encoding="utf-8")).get("sources", ["returned"])
    wanted = sorted({item.sources for item in items})
    if previous != wanted:
        raise BadInput(
            f"{manifest_path}: checks here were made against sources {'/'.join(previous)}, "
            f"not {'/'.join(wanted)}; remove {out_dir / CHECKS} to re-check, or check into "
            "another dir"
        )


def _checked_ids(out_dir: Path) -> set[str]:
    path = out_dir / CHECKS
    return {row["id"] for row in read_jsonl(path, repair=True)} if path.exists() else set()


def _count(summary: CheckSummary, row: dict[str, Any]) -> None:
    summary.answers += 1
    summary.outcomes[row["outcome"]] = summary.outcomes.get(row["outcome"], 0) + 1
    for claim in row["claims"]:
        summary.claims += 1
        setattr(summary, claim["verdict"], getattr(summary, claim["verdict"]) + 1)
    judge = row["judge"]
    summary.judge_calls += judge["calls"]
    summary.judge_prompt_tokens += judge["prompt_tokens"]
    summary.judge_cached_tokens += judge.get("cached_tokens", 0)
    summary.judge_completion_tokens += judge["completion_tokens"]
    summary.judge_seconds += judge["seconds"]
    summary.listed_claims += row.get("listed_claims", 0)
    summary.listing_errors += len(row.get("listing_errors", []))


def _check_batch(
    batch: list[AnswerItem],
    config: JudgeConfig,
    judge: Judge,
    embed: Callable[[list[str]], Any],
    on_calls: OnStageCalls | None = None,
    kb: KnowledgeBase | None = None,
) -> list[dict[str, Any]]:
    usage = {item.id: JudgeUsage() for item in batch}
    asker = _Asker(judge, config.retries, usage, on_calls)
    metrics = metrics_for(config)
    checks_faithfulness = "faithfulness" in config.metrics
    outcomes = {
        item.id: (
            "generation_error"
            if item.error
            else answer_outcome(
                item.answer,
                # claims checked against the knowledge base only need no returned context
                [t for _, t in item.chunks] or (["kb"] if item.sources == "kb" else []),
                config.max_answer_chars,
            )
        )
        for item in batch
    }

    # Stage 1: the claims of each answer, and every metric's independent calls.
    calls: list[Planned] = []
    for item in batch:
        outcome = outcomes[item.id]
        if checks_faithfulness and outcome in {"checked", "truncated", "no_context"}:
            calls.append(claims_call(item, config))
        for metric in metrics:
            calls.extend(metric.plan(item, outcome))
    premise = checks_faithfulness and config.premise_check
    stages = 2 + premise + config.quote_check
    stage = iter(range(1, stages + 1))
    first = asker.ask(calls, f"stage {next(stage)}/{stages}: claims")

    # Stage 2 (premise_check): each listed claim against its own answer (does it make it?).
    claims: dict[str, list[Claim]] = {}
    listed: dict[str, list[Claim]] = {}
    failures: dict[str, list[str]] = {item.id: [] for item in batch}
    for item in batch:
        key = CallKey("claims", item.id)
        if key in first and first[key] is None:
            failures[item.id].append("claims: no valid judge output after retries")
        elif key in first:
            listed[item.id] = listed_claims(item, first[key].claims, config)
    listing_errors: dict[str, list[dict[str, Any]]] = {item.id: [] for item in batch}
    premise_replies: dict[CallKey, Any] = {}
    if premise:
        premise_calls: list[Planned] = [
            (premise_call(item.id, index, item.question, _body(item, config), claim), None)
            for item in batch
            if outcomes[item.id] != "refusal"
            for index, claim in enumerate(listed.get(item.id, []))
            if _needs_premise_check(claim, item, config)
        ]
        premise_replies = asker.ask(
            premise_calls, f"stage {next(stage)}/{stages}: claims vs answer"
        )
    for item in batch:
        claims[item.id] = []
        if outcomes[item.id] == "refusal" and checks_faithfulness:
            # a declining answer claims only what is missing: its sentences, as written
            claims[item.id] = refusal_claims(item)
            continue
        if item.id not in listed:
            continue
        kept: list[Claim] = []
        dropped: list[tuple[Claim, dict[str, Any]]] = []
        for index, claim in enumerate(listed[item.id]):
            # no reply (not asked, or no valid output after retries): the claim is kept
            reply = premise_replies.get(CallKey("premise", item.id, (index,)))
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

    # Next: each claim against each of its most similar chunks; calls that need the claims.
    second_calls: list[Planned] = []
    checks: dict[str, ClaimChecks] = {}
    for item in batch:
        found = claims[item.id]
        for metric in metrics:
            second_calls.extend(metric.plan_after_claims(item, [c.text for c in found], first))
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
            entailment, checks[item.id] = entailment_calls(item, found, config, embed, kb_for_claim)
            second_calls.extend((call, None) for call in entailment)
    replies = first | asker.ask(second_calls, f"stage {next(stage)}/{stages}: claim-chunk labels")

    for item in batch:
        for index, pairs in checks.get(item.id, {}).items():
            decide(claims[item.id][index], item, pairs, replies, config, embed, failures[item.id])

    # Stage 3 (quote_check): each supported-looking claim against its quote alone.
    if config.quote_check:
        quotes: list[Planned] = []
        asked: dict[CallKey, tuple[Claim, str, str]] = {}
        for item in batch:
            for index, claim in enumerate(claims[item.id]):
                planned = quote_call(claim, index, item, embed)
                if planned is not None:
                    call, quote, chunk_id = planned
                    quotes.append((call, None))
                    asked[call.key] = (claim, quote, chunk_id)
        answered = asker.ask(quotes, f"stage {next(stage)}/{stages}: quote labels")
        for key, (claim, quote, chunk_id) in asked.items():
            reply = answered.get(key)
            if reply is None:
                failures[key.item].append(f"quote {chunk_id}: no valid judge output after retries")
                continue
            probabilities, written = label_probabilities(reply.top_logprobs, reply.text)
            apply_quote(claim, quote, chunk_id, probabilities, written, config.support_threshold)

    rows = []
    for item in batch:
        fields: dict[str, Any] = dict(METRIC_FIELDS)
        for metric in metrics:
            fields |= metric.score(item, replies, failures[item.id], embed)
        row = _row(
            item, outcomes[item.id], claims[item.id], fields, usage[item.id], failures[item.id]
        )
        if premise:
            row["listed_claims"] = sum(c.origin == "judge" for c in listed.get(item.id, []))
            row["listing_errors"] = listing_errors[item.id]
        row["sources"] = item.sources
        if item.kb_chunks:
            meta = kb.meta if kb is not None else {}
            row["kb_chunks"] = [
                {"chunk_id": chunk_id, **meta.get(chunk_id, {}), "text": text}
                for chunk_id, text in item.kb_chunks
            ]
        rows.append(row)
    return rows


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


def _row(
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
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    hallucinated = counts["unsupported"] + counts["contradicted"]
    return {
        "id": item.id,
        "outcome": outcome,
        "claims": [c.to_json() for c in claims],
        "claim_counts": counts,
        "faithfulness": faithfulness(claims),
        "support_score": support_score(claims),
        "hallucinated": (hallucinated > 0)
        if counts["supported"] + hallucinated
        else (False if outcome == "refusal" else None),
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
