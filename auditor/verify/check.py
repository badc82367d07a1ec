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
from auditor.verify.base import Claim, Judge, JudgeCall, JudgeReply, JudgeUsage
from auditor.verify.claims import (
    align_span,
    answer_outcome,
    combine_chunk_labels,
    faithfulness,
    missing_details,
    sentence_spans,
)
from auditor.verify.prompts import (
    ClaimResult,
    ClaimResults,
    evidence_sources,
    verification_prompt,
    verification_schema,
)
from auditor.versions import package_versions

__all__ = ["CHECKS", "AnswerItem", "CheckSummary", "check_items", "items_from_run"]

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

    def ask(
        self, calls: Sequence[tuple[JudgeCall, type[BaseModel], str]]
    ) -> dict[str, BaseModel | None]:
        """{call key: parsed response or None after all retries}; the str is the answer id."""
        results: dict[str, BaseModel | None] = {}
        pending = list(calls)
        for _attempt in range(self.retries + 1):
            if not pending:
                break
            started = time.perf_counter()
            replies = self.judge.complete([call for call, _, _ in pending])
            elapsed = time.perf_counter() - started
            total_tokens = sum(r.prompt_tokens + r.completion_tokens for r in replies) or 1
            retry = []
            for (call, model, owner), reply in zip(pending, replies, strict=True):
                usage = self.usage[owner]
                usage.add(reply, _stage(call.key))
                usage.seconds += (
                    elapsed * (reply.prompt_tokens + reply.completion_tokens) / total_tokens
                )
                parsed = _parse(reply, model)
                results[call.key] = parsed
                if parsed is None:
                    usage.failures += 1
                    retry.append((call, model, owner))
            pending = retry
        return results


_STAGES = {
    "statements": "statements",
    "verify": "verify",
    "cp-answer": "context_precision",
    "cp-reference": "context_precision_with_reference",
    "relevancy": "answer_relevancy",
    "recall": "context_recall",
    "refstatements": "answer_correctness",
    "correctness": "answer_correctness",
}


def _stage(key: str) -> str:
    """The stage a call key belongs to: `verify|...|ID` -> "verify" (ids may hold any text)."""
    return _STAGES.get(key.split("|", 1)[0], "other")


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
    calls: list[tuple[JudgeCall, type[BaseModel], str]] = []
    for item in batch:
        outcome = outcomes[item.id]
        if outcome in {"checked", "truncated", "no_context"} and "faithfulness" in wanted:
            prompt, model = ragas.statements_prompt(
                item.question, item.answer[: config.max_answer_chars]
            )
            schema = ragas.bounded_schema(model, config.max_claims, 300)
            schema["properties"]["statements"]["minItems"] = 1  # a non-empty answer says something
            calls.append((JudgeCall(f"statements|{item.id}", prompt, schema, 900), model, item.id))
        if (
            "answer_correctness" in wanted
            and item.reference
            and outcome not in {"generation_error", "empty_answer"}
        ):
            prompt, model = ragas.statements_prompt(item.question, item.reference)
            schema = ragas.bounded_schema(model, config.max_claims, 300)
            calls.append(
                (JudgeCall(f"refstatements|{item.id}", prompt, schema, 900), model, item.id)
            )
        if outcome in {"generation_error", "empty_answer"} or not item.chunks:
            continue
        targets = [("answer", item.answer)] if "context_precision" in wanted else []
        if "context_precision_with_reference" in wanted and item.reference:
            targets.append(("reference", item.reference))
        if targets:
            for label, target in targets:
                for rank, (_, text) in enumerate(item.chunks):
                    prompt, model = ragas.context_precision_prompt(item.question, text, target)
                    schema = ragas.bounded_schema(model, 4, 300)
                    calls.append(
                        (
                            JudgeCall(f"cp-{label}|{rank}|{item.id}", prompt, schema, 200),
                            model,
                            item.id,
                        )
                    )
        if "answer_relevancy" in wanted and outcome != "refusal":
            prompt, model = ragas.relevance_prompt(item.answer[: config.max_answer_chars])
            calls.append(
                (
                    JudgeCall(
                        f"relevancy|{item.id}", prompt, ragas.bounded_schema(model, 4, 300), 200
                    ),
                    model,
                    item.id,
                )
            )
        if "context_recall" in wanted and item.reference:
            context = "\n".join(text for _, text in item.chunks)
            prompt, model = ragas.context_recall_prompt(item.question, context, item.reference)
            schema = ragas.bounded_schema(model, 12, 300)
            calls.append((JudgeCall(f"recall|{item.id}", prompt, schema, 900), model, item.id))
    first = asker.ask(calls)

    # Stage 2: each claim against its most similar chunks.
    claims: dict[str, list[Claim]] = {}
    failures: dict[str, list[str]] = {item.id: [] for item in batch}
    verify_calls: list[tuple[JudgeCall, type[BaseModel], str]] = []
    plans: dict[str, tuple[str, list[int], list[str]]] = {}  # key -> (item, claims, chunk ids)
    chunk_text_of = {(item.id, cid): text for item in batch for cid, text in item.chunks}
    claim_text_of: dict[tuple[str, int], str] = {}
    result_model = ClaimResults
    for item in batch:
        if f"statements|{item.id}" not in first:
            claims[item.id] = []
            continue
        parsed = first[f"statements|{item.id}"]
        if parsed is None:
            failures[item.id].append("statements: no valid judge output after retries")
            claims[item.id] = []
            continue
        statements: list[str] = getattr(parsed, "statements", [])
        if not any(s.strip() for s in statements):
            # the judge found no statement: fall back to the answer's own sentences
            body = item.answer[: config.max_answer_chars]
            statements = [body[a:b] for a, b in sentence_spans(body)]
        texts = list(dict.fromkeys(s.strip() for s in statements if s.strip()))[: config.max_claims]
        claims[item.id] = [Claim(text=t, span=align_span(t, item.answer)) for t in texts]
        claim_text_of.update({(item.id, i): t for i, t in enumerate(texts)})
        reference_parsed = first.get(f"refstatements|{item.id}")
        reference_statements: list[str] = getattr(reference_parsed, "statements", [])
        if texts and reference_statements:
            prompt, model = ragas.correctness_prompt(item.question, texts, reference_statements)
            schema = ragas.bounded_schema(model, config.max_claims, 300)
            verify_calls.append(
                (JudgeCall(f"correctness|{item.id}", prompt, schema, 1500), model, item.id)
            )
        if not texts or not item.chunks:
            for claim in claims[item.id]:
                claim.verdict, claim.reason = "unsupported", "no retrieved context to support it"
            continue
        ranked = _cosine_rank(embed, texts, [t for _, t in item.chunks], config.chunks_per_claim)
        by_passages: dict[tuple[int, ...], list[int]] = {}
        for claim_index, chunk_indices in enumerate(ranked):
            # rank order, so calls that share a top chunk share the prompt prefix
            by_passages.setdefault(tuple(sorted(int(i) for i in chunk_indices)), []).append(
                claim_index
            )
        for passage_set, claim_indices in sorted(by_passages.items()):
            chunk_ids = [item.chunks[i][0] for i in passage_set]
            passages = [item.chunks[i][1] for i in passage_set]
            for part in range(0, len(claim_indices), config.claims_per_call):
                group = claim_indices[part : part + config.claims_per_call]
                key = f"verify|{','.join(map(str, passage_set))}|{part}|{item.id}"
                prompt = verification_prompt(passages, [texts[i] for i in group])
                call = JudgeCall(
                    key, prompt, verification_schema(len(group)), 180 * len(group) + 40
                )
                verify_calls.append((call, result_model, item.id))
                plans[key] = (item.id, group, chunk_ids)
    second = asker.ask(verify_calls)

    labels: dict[tuple[str, int], dict[str, str]] = {}
    reasons: dict[tuple[str, int], str] = {}
    for key, (item_id, group, chunk_ids) in plans.items():
        parsed = second.get(key)
        results = parsed.results if parsed is not None else None  # type: ignore[attr-defined]
        if results is None or len(results) != len(group):
            failures[item_id].append(
                f"verify {', '.join(chunk_ids)}: no valid judge output after retries"
            )
            for claim_index in group:
                labels[(item_id, claim_index)] = dict.fromkeys(chunk_ids, "error")
            continue
        passages = [chunk_text_of[(item_id, chunk_id)] for chunk_id in chunk_ids]
        for claim_index, result in zip(group, results, strict=True):
            slot = (item_id, claim_index)
            labels[slot], reasons[slot] = _claim_labels(
                claim_text_of[slot], result, chunk_ids, passages
            )

    rows = []
    for item in batch:
        for index, claim in enumerate(claims[item.id]):
            slot = (item.id, index)
            if slot not in labels:
                continue
            claim.checked_chunks = list(labels[slot])
            claim.verdict, claim.supporting_chunks, claim.contradicting_chunks = (
                combine_chunk_labels(labels[slot])
            )
            claim.reason = reasons.get(slot, "")
            if claim.verdict == "unverifiable":
                claim.reason = "judge failed on every check of this claim"
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


def _claim_labels(
    claim: str, result: ClaimResult, chunk_ids: list[str], passages: list[str]
) -> tuple[dict[str, str], str]:
    """Per-chunk labels and the reason for one claim from the judge's answer over its passages.

    Support counts only where the quoted evidence is found: the chunks holding the quote are
    the claim's sources; a quote found nowhere, or a claim whose figures or names the passages
    never mention, is not supported whatever the label said.
    """
    unknown = dict.fromkeys(chunk_ids, "unknown")
    sources = evidence_sources(result.evidence, passages)
    if result.label == "true":
        absent = missing_details(claim, "\n".join(passages))
        if sources is None:
            return unknown, f"quoted evidence is not in the passages: {result.evidence}"
        if absent:
            return unknown, f"the passages never mention {', '.join(absent[:3])}"
        return unknown | {chunk_ids[i]: "true" for i in sources}, result.evidence
    if result.label == "false":
        # the contradicting chunks are the ones quoted; without a usable quote, all checked
        against = sources if sources is not None else list(range(len(chunk_ids)))
        reason = result.evidence if sources is not None else "the passages contradict it"
        return unknown | {chunk_ids[i]: "false" for i in against}, reason
    return unknown, "the passages do not state it"


def _row(
    item: AnswerItem,
    outcome: str,
    claims: list[Claim],
    first: dict[str, BaseModel | None],
    usage: JudgeUsage,
    failures: list[str],
    embed: Callable[[list[str]], Any],
) -> dict[str, Any]:
    from auditor.verify import ragas_judge as ragas

    def precision(label: str) -> tuple[float | None, list[dict[str, Any]]]:
        verdicts: list[int] = []
        rows: list[dict[str, Any]] = []
        for rank, (chunk_id, _) in enumerate(item.chunks):
            key = f"cp-{label}|{rank}|{item.id}"
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
            verdict = int(parsed.verdict)  # type: ignore[attr-defined]
            verdicts.append(verdict)
            rows.append({"chunk_id": chunk_id, "useful": bool(verdict), "reason": parsed.reason})  # type: ignore[attr-defined]
        failed = any(row["useful"] is None for row in rows)
        # a chunk the judge could not rate leaves the score unknown rather than lowered
        return (ragas.average_precision(verdicts) if verdicts and not failed else None), rows

    cp, cp_rows = precision("answer")
    cp_ref, cp_ref_rows = precision("reference")
    relevancy = None
    parsed = first.get(f"relevancy|{item.id}")
    if parsed is not None:
        vectors = embed([item.question, parsed.question])  # type: ignore[attr-defined]
        relevancy = 0.0 if parsed.noncommittal else max(0.0, float(vectors[0] @ vectors[1]))  # type: ignore[attr-defined]
    elif f"relevancy|{item.id}" in first:
        failures.append("answer relevancy: no valid judge output after retries")
    recall = None
    parsed = first.get(f"recall|{item.id}")
    if parsed is not None:
        found = [c.attributed for c in parsed.classifications]  # type: ignore[attr-defined]
        recall = sum(1 for a in found if a) / len(found) if found else None
    elif f"recall|{item.id}" in first:
        failures.append("context recall: no valid judge output after retries")
    correctness = None
    if f"refstatements|{item.id}" in first and item.reference:
        classification = first.get(f"correctness|{item.id}")
        reference_statements = getattr(first.get(f"refstatements|{item.id}"), "statements", None)
        if classification is not None:
            factuality = ragas.correctness_f1(classification)
        elif f"correctness|{item.id}" in first or reference_statements is None:
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
