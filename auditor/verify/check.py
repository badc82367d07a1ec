"""`check_run`: every claim of every answer verified against its sources -> checks.jsonl.

Stages for each batch of answers (one judge batch each, so the engine stays full):
  1. RAGAS statements (claims) of each answer, RAGAS context precision per retrieved chunk
     (without and, when there is a reference, with it), RAGAS answer relevancy and context
     recall -- all independent, all in one batch;
  2. each claim checked against the chunks most similar to it (claims batched per chunk):
     a claim is supported when a chunk supports it, and those chunks are its sources.
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

from auditor.config import JudgeConfig, config_sha256
from auditor.errors import BadInput
from auditor.ingest.manifest import utc_now, write_json_atomic
from auditor.jsonl import iter_objects
from auditor.store import RecordWriter, read_jsonl
from auditor.verify.base import CallKey, Claim, Judge, JudgeCall, JudgeReply, JudgeUsage
from auditor.verify.claims import (
    align_span,
    answer_outcome,
    faithfulness,
    sentence_spans,
    support_score,
)
from auditor.verify.entailment import (
    ChunkJudgement,
    claim_decision,
    entailment_prompt,
    label_probabilities,
    missing_figures,
)
from auditor.verify.extraction import (
    ExtractedClaims,
    claim_kind,
    claims_prompt,
    claims_schema,
    is_question_echo,
)
from auditor.versions import package_versions

__all__ = [
    "CHECKS",
    "AnswerItem",
    "CheckSummary",
    "check_items",
    "check_run",
    "import_answers",
    "items_from_run",
]

CHECKS = "checks.jsonl"
CHECK_MANIFEST = "check.json"
CHECK_SCHEMA_VERSION = 1


@dataclass
class AnswerItem:
    """One answer to check, with the chunks it was given."""

    id: str
    question: str
    answer: str
    reference: str | None
    chunks: list[tuple[str, str]]  # (chunk id, text), in rank order
    error: str | None = None


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
    judge_completion_tokens: int = 0
    judge_seconds: float = 0.0
    skipped: int = 0

    @property
    def hallucination_rate(self) -> float | None:
        judged = self.supported + self.unsupported + self.contradicted
        return (self.unsupported + self.contradicted) / judged if judged else None


def items_from_run(run_dir: Path) -> list[AnswerItem]:
    """The answers of a run dir (`auditor run` or `auditor check --answers`)."""
    path = run_dir / "records.jsonl"
    if not path.is_file():
        raise BadInput(f"{path}: missing; run `auditor run ... --out {run_dir}` first")
    manifest_path = run_dir / "manifest.json"
    if manifest_path.is_file():
        version = json.loads(manifest_path.read_text(encoding="utf-8")).get("schema_version")
        if version != 1:
            raise BadInput(f"{manifest_path}: run schema version {version!r}; this auditor reads 1")
    items = []
    for row in read_jsonl(path):
        items.append(
            AnswerItem(
                id=str(row["id"]),
                question=row["question"],
                answer=row.get("answer") or "",
                reference=row.get("reference"),
                chunks=[(c["chunk_id"], c["text"]) for c in row.get("retrieved", [])],
                error=row.get("error"),
            )
        )
    return items


def _parse(reply: JudgeReply, model: type[BaseModel]) -> BaseModel | None:
    if reply.error or not reply.text:
        return None
    try:
        return model.model_validate_json(reply.text)
    except ValidationError:
        return None


class _Asker:
    """Sends judge calls in one batch, re-asks unparseable ones, and books usage per answer."""

    def __init__(self, judge: Judge, retries: int, usage: dict[str, JudgeUsage]) -> None:
        self.judge, self.retries, self.usage = judge, retries, usage

    def ask(self, calls: Sequence[tuple[JudgeCall, type[BaseModel] | None]]) -> dict[CallKey, Any]:
        """{call key: parsed response (a label call: its reply) or None after all retries}."""
        results: dict[CallKey, Any] = {}
        pending = list(calls)
        for _attempt in range(self.retries + 1):
            if not pending:
                break
            started = time.perf_counter()
            replies = self.judge.complete([call for call, _ in pending])
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


def _cosine_rank(
    embed: Callable[[list[str]], Any], claims: list[str], chunks: list[str], top: int
) -> list[list[int]]:
    """For each claim, the indices of its `top` most similar chunks."""
    import numpy as np

    vectors = embed(claims + chunks)
    sims = vectors[: len(claims)] @ vectors[len(claims) :].T
    return [list(np.argsort(-row, kind="stable")[:top]) for row in sims]


def check_items(
    items: list[AnswerItem],
    out_dir: Path,
    config: JudgeConfig,
    judge: Judge,
    embed: Callable[[list[str]], Any],
    *,
    on_batch: Callable[[int], None] | None = None,
) -> CheckSummary:
    """Check every item not yet in `out_dir/checks.jsonl`; append results batch by batch."""
    from auditor.verify import ragas_judge as ragas

    out_dir.mkdir(parents=True, exist_ok=True)
    done = {row["id"] for row in read_jsonl(out_dir / CHECKS, repair=True)}
    todo = [item for item in items if item.id not in done]
    manifest_path = out_dir / CHECK_MANIFEST
    manifest: dict[str, Any] = {
        "schema_version": CHECK_SCHEMA_VERSION,
        "judge": {"config": config.model_dump(mode="json"), "sha256": config_sha256(config)},
        "started_at": utc_now(),
    }
    if manifest_path.exists():
        previous = json.loads(manifest_path.read_text(encoding="utf-8"))
        if previous.get("judge", {}).get("sha256") != manifest["judge"]["sha256"] and done:
            raise BadInput(
                f"{manifest_path}: checks here were made by another judge configuration; "
                f"remove {out_dir / CHECKS} to re-judge, or check into another dir"
            )
        manifest["started_at"] = previous.get("started_at", manifest["started_at"])
    manifest["judge"]["identity"] = judge.identity()
    manifest["packages"] = package_versions()
    manifest["status"] = "running"
    write_json_atomic(manifest_path, manifest)

    summary = CheckSummary(out_dir=out_dir, skipped=len(items) - len(todo))
    size = config.answers_per_batch
    with RecordWriter(out_dir, CHECKS) as writer:
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            for row in _check_batch(batch, config, judge, embed, ragas):
                writer.write(row)
                _count(summary, row)
            if on_batch:
                on_batch(len(batch))
    for row in read_jsonl(out_dir / CHECKS):
        if row["id"] in done:
            _count(summary, row)
    manifest |= {"status": "complete", "finished_at": utc_now()}
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
) -> list[CheckSummary]:
    """Check the answers of several dirs with one embedder and one judge (`check` and `audit`).

    The embedder and the judge engine start only when some dir has answers left to check,
    and the engine is freed at the end, whatever happens. One summary per target, in order.
    """
    pending = [(d, items) for d, items in targets if {i.id for i in items} - _checked_ids(d)]
    summaries: dict[Path, CheckSummary] = {}
    if pending:
        if embed is None:
            from auditor.config import EmbedderConfig
            from auditor.ingest.embed import load_embedder

            on_stage("loading the embedder (claim-to-chunk similarity)")
            embed = load_embedder(EmbedderConfig()).embed
        if judge_factory is None:
            from auditor.verify.judges import make_judge

            judge_factory = make_judge
        on_stage(f"starting judge {config.name}")
        judge = judge_factory(config)
        try:
            for out_dir, items in pending:
                on_check_start(out_dir.name, len(items))
                summaries[out_dir] = check_items(
                    items, out_dir, config, judge, embed, on_batch=on_batch
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
    summary.judge_completion_tokens += judge["completion_tokens"]
    summary.judge_seconds += judge["seconds"]


def _check_batch(
    batch: list[AnswerItem],
    config: JudgeConfig,
    judge: Judge,
    embed: Callable[[list[str]], Any],
    ragas: Any,
) -> list[dict[str, Any]]:
    usage = {item.id: JudgeUsage() for item in batch}
    asker = _Asker(judge, config.retries, usage)
    wanted = set(config.metrics)
    outcomes = {
        item.id: (
            "generation_error"
            if item.error
            else answer_outcome(item.answer, [t for _, t in item.chunks], config.max_answer_chars)
        )
        for item in batch
    }

    # Stage 1: claims, context precision, relevancy, recall (independent of each other).
    calls: list[tuple[JudgeCall, type[BaseModel] | None]] = []
    for item in batch:
        outcome = outcomes[item.id]
        if (
            outcome in {"checked", "truncated", "no_context", "refusal"}
            and "faithfulness" in wanted
        ):
            prompt = claims_prompt(item.question, item.answer[: config.max_answer_chars])
            schema = claims_schema(config.max_claims)
            calls.append(
                (JudgeCall(CallKey("claims", item.id), prompt, schema, 900), ExtractedClaims)
            )
        if (
            "answer_correctness" in wanted
            and item.reference
            and outcome not in {"generation_error", "empty_answer"}
        ):
            prompt, model = ragas.statements_prompt(item.question, item.reference)
            schema = ragas.bounded_schema(model, config.max_claims, 300)
            calls.append((JudgeCall(CallKey("refstatements", item.id), prompt, schema, 900), model))
        if outcome in {"generation_error", "empty_answer"} or not item.chunks:
            continue
        targets = [("answer", item.answer)] if "context_precision" in wanted else []
        if "context_precision_with_reference" in wanted and item.reference:
            targets.append(("reference", item.reference))
        for label, target in targets:
            for rank, (_, text) in enumerate(item.chunks):
                prompt, model = ragas.context_precision_prompt(item.question, text, target)
                schema = ragas.bounded_schema(model, 4, 300)
                key = CallKey(f"cp-{label}", item.id, (rank,))
                calls.append((JudgeCall(key, prompt, schema, 200), model))
        if "answer_relevancy" in wanted and outcome != "refusal":
            prompt, model = ragas.relevance_prompt(item.answer[: config.max_answer_chars])
            schema = ragas.bounded_schema(model, 4, 300)
            calls.append((JudgeCall(CallKey("relevancy", item.id), prompt, schema, 200), model))
        if "context_recall" in wanted and item.reference:
            context = "\n".join(text for _, text in item.chunks)
            prompt, model = ragas.context_recall_prompt(item.question, context, item.reference)
            schema = ragas.bounded_schema(model, 12, 300)
            calls.append((JudgeCall(CallKey("recall", item.id), prompt, schema, 900), model))
    first = asker.ask(calls)

    # Stage 2: each claim against each of its most similar chunks, one short label per pair.
    claims: dict[str, list[Claim]] = {}
    failures: dict[str, list[str]] = {item.id: [] for item in batch}
    second_calls: list[tuple[JudgeCall, type[BaseModel] | None]] = []
    checks: dict[tuple[str, int], list[tuple[CallKey, int]]] = {}  # claim -> (call, chunk)
    for item in batch:
        key = CallKey("claims", item.id)
        if key not in first:
            claims[item.id] = []
            continue
        if first[key] is None:
            failures[item.id].append("claims: no valid judge output after retries")
            claims[item.id] = []
            continue
        claims[item.id] = texts = _claims_of(item, first[key].claims, config)
        if outcomes[item.id] == "refusal":  # a declining answer claims only what is missing
            for claim in texts:
                claim.kind = "abstention"
        reference_statements = getattr(
            first.get(CallKey("refstatements", item.id)), "statements", []
        )
        if texts and reference_statements:
            prompt, model = ragas.correctness_prompt(
                item.question, [c.text for c in texts], reference_statements
            )
            schema = ragas.bounded_schema(model, config.max_claims, 300)
            second_calls.append(
                (JudgeCall(CallKey("correctness", item.id), prompt, schema, 1500), model)
            )
        if not texts or not item.chunks:
            for claim in texts:
                claim.verdict, claim.reason = "unsupported", "no retrieved context to support it"
            continue
        chunk_texts = [t for _, t in item.chunks]
        ranked = _cosine_rank(embed, [c.text for c in texts], chunk_texts, config.chunks_per_claim)
        for index, (claim, chunk_indices) in enumerate(zip(texts, ranked, strict=True)):
            pairs = checks[(item.id, index)] = []
            for chunk_index in sorted(int(i) for i in chunk_indices):
                key = CallKey("entailment", item.id, (index, chunk_index))
                prompt = entailment_prompt(chunk_texts[chunk_index], claim.text, claim.kind)
                # the label is read from the first token's log-probabilities
                second_calls.append((JudgeCall(key, prompt, None, 1, logprobs=20), None))
                pairs.append((key, chunk_index))
    second = asker.ask(second_calls)

    rows = []
    for item in batch:
        for index, claim in enumerate(claims[item.id]):
            if (item.id, index) in checks:
                _decide(
                    claim, item, checks[(item.id, index)], second, config, embed, failures[item.id]
                )
        rows.append(
            _row(
                item,
                outcomes[item.id],
                claims[item.id],
                first | second,
                usage[item.id],
                failures[item.id],
                embed,
            )
        )
    return rows


def _claims_of(item: AnswerItem, extracted: list[str], config: JudgeConfig) -> list[Claim]:
    """The answer's claims: deduplicated, question echoes dropped, with spans and kinds.

    Falls back to the answer's own sentences when the judge found no claim in it.
    """
    body = item.answer[: config.max_answer_chars]
    texts = [t.strip() for t in extracted if t.strip()]
    texts = [t for t in texts if not is_question_echo(t, item.question, body)]
    if not texts:
        texts = [body[a:b] for a, b in sentence_spans(body)]
    texts = list(dict.fromkeys(texts))[: config.max_claims]
    return [Claim(text=t, span=align_span(t, item.answer), kind=claim_kind(t)) for t in texts]


def _decide(
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
    for key, chunk_index in pairs:
        chunk_id, text = item.chunks[chunk_index]
        reply = replies.get(key)
        if reply is None:
            failures.append(f"entailment {chunk_id}: no valid judge output after retries")
            continue
        probabilities, written = label_probabilities(reply.top_logprobs, reply.text)
        vetoed = missing_figures(claim.text, text) if claim.kind == "fact" else []
        judgements.append(ChunkJudgement(chunk_id, probabilities, written, vetoed))
    claim.checked_chunks = [item.chunks[i][0] for _, i in pairs]
    verdict, p, supporting, contradicting = claim_decision(
        judgements, claim.kind, config.support_threshold
    )
    claim.verdict, claim.p_supported = verdict, None if p is None else round(p, 4)
    claim.supporting_chunks, claim.contradicting_chunks = supporting, contradicting
    deciding = supporting or contradicting
    if deciding:
        text = dict(item.chunks)[deciding[0]]
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
    spans = sentence_spans(passage)
    if len(spans) <= 1:
        return passage.strip()[:400]
    sentences = [passage[a:b] for a, b in spans]
    vectors = embed([claim, *sentences])
    best = int((vectors[1:] @ vectors[0]).argmax())
    return sentences[best][:400]


def _row(
    item: AnswerItem,
    outcome: str,
    claims: list[Claim],
    first: dict[CallKey, Any],
    usage: JudgeUsage,
    failures: list[str],
    embed: Callable[[list[str]], Any],
) -> dict[str, Any]:
    from auditor.verify import ragas_judge as ragas

    def precision(label: str) -> tuple[float | None, list[dict[str, Any]]]:
        verdicts: list[int] = []
        rows: list[dict[str, Any]] = []
        for rank, (chunk_id, _) in enumerate(item.chunks):
            key = CallKey(f"cp-{label}", item.id, (rank,))
            if key not in first:
                return None, []
            parsed = first[key]
            if parsed is None:
                failures.append(
                    f"context precision {chunk_id}: no valid judge output after retries"
                )
                rows.append({"chunk_id": chunk_id, "useful": None, "reason": "judge failed"})
                verdicts.append(0)
                continue
            verdict = int(parsed.verdict)
            verdicts.append(verdict)
            rows.append({"chunk_id": chunk_id, "useful": bool(verdict), "reason": parsed.reason})
        failed = any(row["useful"] is None for row in rows)
        # a chunk the judge could not rate leaves the score unknown rather than lowered
        return (ragas.average_precision(verdicts) if verdicts and not failed else None), rows

    cp, cp_rows = precision("answer")
    cp_ref, cp_ref_rows = precision("reference")
    relevancy = None
    parsed = first.get(CallKey("relevancy", item.id))
    if parsed is not None:
        vectors = embed([item.question, parsed.question])
        relevancy = 0.0 if parsed.noncommittal else max(0.0, float(vectors[0] @ vectors[1]))
    elif CallKey("relevancy", item.id) in first:
        failures.append("answer relevancy: no valid judge output after retries")
    recall = None
    parsed = first.get(CallKey("recall", item.id))
    if parsed is not None:
        found = [c.attributed for c in parsed.classifications]
        recall = sum(1 for a in found if a) / len(found) if found else None
    elif CallKey("recall", item.id) in first:
        failures.append("context recall: no valid judge output after retries")
    correctness = None
    if CallKey("refstatements", item.id) in first and item.reference:
        classification = first.get(CallKey("correctness", item.id))
        reference_statements = getattr(
            first.get(CallKey("refstatements", item.id)), "statements", None
        )
        if classification is not None:
            factuality = ragas.correctness_f1(classification)
        elif CallKey("correctness", item.id) in first or reference_statements is None:
            factuality = None
            failures.append("answer correctness: no valid judge output after retries")
        else:
            factuality = 1.0  # RAGAS: no statements on one side counts as a match
        if factuality is not None:
            vectors = embed([item.answer, item.reference])
            similarity = max(0.0, float(vectors[0] @ vectors[1]))
            correctness = 0.75 * factuality + 0.25 * similarity  # RAGAS default weights
    if outcome == "checked" and failures and not claims:
        outcome = "judge_failed"
    counts = {
        v: sum(c.verdict == v for c in claims)
        for v in ("supported", "unsupported", "contradicted", "unverifiable")
    }
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
        "context_precision": cp,
        "context_precision_with_reference": cp_ref,
        "context_verdicts": cp_rows,
        "context_verdicts_with_reference": cp_ref_rows,
        "answer_relevancy": relevancy,
        "context_recall": recall,
        "answer_correctness": correctness,
        "judge": {
            "calls": usage.calls,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "seconds": round(usage.seconds, 4),
            "failures": usage.failures,
            "stages": usage.stages,
        },
        "judge_failures": failures,
    }


def import_answers(answers_path: Path, out_dir: Path) -> list[AnswerItem]:
    """Answers produced elsewhere (id, question, contexts, answer, reference?) as a run dir.

    Writes OUT/records.jsonl and OUT/manifest.json (kind "answers", no timings) once, so the
    check resumes like any run and the report renders it with throughput "not measured".
    """
    import hashlib

    from auditor.store import read_run_manifest, write_run_manifest

    try:
        digest = hashlib.sha256(answers_path.read_bytes()).hexdigest()
    except OSError as exc:
        raise BadInput(f"{answers_path}: cannot read answers file ({exc.strerror})") from exc
    rows = []
    seen: set[str] = set()
    for where, data in iter_objects(answers_path, "id, question, contexts, answer"):
        ident, question, contexts = data.get("id"), data.get("question"), data.get("contexts")
        answer, reference = data.get("answer"), data.get("reference")
        if not isinstance(ident, str | int) or str(ident) in seen:
            raise BadInput(f'{where}: missing or duplicate "id"')
        if not isinstance(question, str) or not isinstance(answer, str):
            raise BadInput(f'{where}: "question" and "answer" must be strings')
        if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
            raise BadInput(f'{where}: "contexts" must be a list of strings')
        if reference is not None and not isinstance(reference, str):
            raise BadInput(f'{where}: "reference" must be a string when present')
        seen.add(str(ident))
        rows.append(
            {
                "id": str(ident),
                "question": question,
                "reference": reference,
                "retrieved": [
                    {
                        "chunk_id": f"context-{k}",
                        "document": None,
                        "page": None,
                        "score": None,
                        "text": text,
                    }
                    for k, text in enumerate(contexts, start=1)
                ],
                "answer": answer,
                "error": None,
            }
        )
    if not rows:
        raise BadInput(f"{answers_path}: no answers")
    out_dir.mkdir(parents=True, exist_ok=True)
    existing = read_run_manifest(out_dir)
    if existing is not None:
        if existing.get("source", {}).get("sha256") != digest:
            raise BadInput(
                f"{out_dir / 'manifest.json'}: this dir holds answers from another file; use another --out"
            )
    else:
        if (out_dir / "records.jsonl").exists():
            raise BadInput(f"{out_dir}: holds records.jsonl but no manifest; use another --out")
        with RecordWriter(out_dir) as writer:
            for row in rows:
                writer.write(row)
        write_run_manifest(
            out_dir,
            {
                "schema_version": 1,
                "kind": "answers",
                "run_id": out_dir.name,
                "source": {"path": str(answers_path), "sha256": digest, "count": len(rows)},
                "started_at": utc_now(),
                "status": "complete",
                "load_regime": {"mode": "not measured"},
            },
        )
    return items_from_run(out_dir)
