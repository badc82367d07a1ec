"""The RAGAS metrics beside faithfulness, one object per metric: plan its judge calls for an
answer, score the replies into fields of its checks.jsonl record.

Each `plan` returns (call, response model) pairs with typed keys; `score` reads the replies
by the same keys, appends what failed to `failures`, and returns the record's fields (a score
that needed a failed call is None, never NaN). Answer correctness needs the answer's claims,
so it plans a second call once they are known.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import BaseModel

from auditor.config import ContextPrecisionVerdict, JudgeConfig
from auditor.verify import ragas_judge
from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey, JudgeCall, JudgeReply

__all__ = ["METRIC_FIELDS", "Planned", "RagasMetric", "metrics_for", "useful_probability"]

Planned = tuple[JudgeCall, type[BaseModel] | None]
Replies = dict[CallKey, Any]
Embed = Callable[[list[str]], Any]

_UNJUDGEABLE = {"generation_error", "empty_answer"}


class RagasMetric(Protocol):
    def plan(self, item: AnswerItem, outcome: str) -> list[Planned]: ...

    def plan_after_claims(
        self, item: AnswerItem, claims: list[str], replies: Replies
    ) -> list[Planned]: ...

    def score(
        self, item: AnswerItem, replies: Replies, failures: list[str], embed: Embed
    ) -> dict[str, Any]: ...


def _ragas() -> Any:

    return ragas_judge


class _OneStage:
    def plan_after_claims(
        self, item: AnswerItem, claims: list[str], replies: Replies
    ) -> list[Planned]:
        return []


class ContextPrecision(_OneStage):
    """RAGAS context precision: was each chunk useful for the answer (or the reference)?

    Each chunk's verdict is RAGAS's (`verdict = "reason"`: the judge writes a reason, then 0 or
    1, as JSON) or read from the first token's log-probabilities of RAGAS's prompt asking for
    the verdict alone (`"first_token"`: `ragas_judge.context_precision_verdict_prompt`); either
    way scored by RAGAS's average precision over rank order.
    """

    def __init__(self, target: str, verdict: ContextPrecisionVerdict = "reason") -> None:
        self.target = target  # "answer" | "reference"
        self.verdict = verdict
        self.field = "context_precision" + ("_with_reference" if target == "reference" else "")
        self.verdicts = "context_verdicts" + ("_with_reference" if target == "reference" else "")

    def _key(self, item: AnswerItem, rank: int) -> CallKey:
        return CallKey(f"cp-{self.target}", item.id, (rank,))

    def plan(self, item: AnswerItem, outcome: str) -> list[Planned]:
        text = item.answer if self.target == "answer" else item.reference
        if outcome in _UNJUDGEABLE or not item.chunks or not text:
            return []
        ragas = _ragas()
        planned: list[Planned] = []
        for rank, (_, chunk) in enumerate(item.chunks):
            key = self._key(item, rank)
            if self.verdict == "first_token":
                prompt = ragas.context_precision_verdict_prompt(item.question, chunk, text)
                # max_tokens 1: the verdict is read from the first token's log-probabilities
                planned.append((JudgeCall(key, prompt, None, 1, logprobs=20), None))
                continue
            prompt, model = ragas.context_precision_prompt(item.question, chunk, text)
            schema = ragas.bounded_schema(model, 4, 300)
            planned.append((JudgeCall(key, prompt, schema, 200), model))
        return planned

    def score(
        self, item: AnswerItem, replies: Replies, failures: list[str], embed: Embed
    ) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        for rank, (chunk_id, _) in enumerate(item.chunks):
            key = self._key(item, rank)
            if key not in replies:
                return {self.field: None, self.verdicts: []}
            if self.verdict == "first_token":
                row, failure = _first_token_row(chunk_id, replies[key])
            else:
                row, failure = _reasoned_row(chunk_id, replies[key])
            if failure:
                failures.append(f"context precision {chunk_id}: {failure}")
            rows.append(row)
        failed = any(row["useful"] is None for row in rows)
        # a chunk the judge could not rate leaves the score unknown rather than lowered
        verdicts = [int(row["useful"]) for row in rows] if rows and not failed else []
        value = _ragas().average_precision(verdicts) if verdicts else None
        return {self.field: value, self.verdicts: rows}


def _reasoned_row(chunk_id: str, parsed: Any) -> tuple[dict[str, Any], str | None]:
    """A chunk's row from RAGAS's JSON reply (None: no valid output), and what failed."""
    if parsed is None:
        failed = {"chunk_id": chunk_id, "useful": None, "reason": "judge failed"}
        return failed, "no valid judge output after retries"
    return {"chunk_id": chunk_id, "useful": bool(parsed.verdict), "reason": parsed.reason}, None


def _first_token_row(chunk_id: str, reply: JudgeReply | None) -> tuple[dict[str, Any], str | None]:
    """A chunk's row from a verdict-alone label reply (None: no valid output), and what failed.
    The written token is never a fallback: without "1" or "0" among the first token's top
    log-probabilities the chunk is unrated."""
    p = None if reply is None else useful_probability(reply.top_logprobs)
    row = {
        "chunk_id": chunk_id,
        "useful": None if p is None else p >= 0.5,
        "p_useful": None if p is None else round(p, 4),
        "reason": None,
    }
    if reply is None:
        return row, "no valid judge output after retries"
    if p is None:
        return row, "no 1 or 0 among the first token's top log-probabilities"
    return row, None


def useful_probability(top_logprobs: Mapping[str, float] | None) -> float | None:
    """p("1") / (p("1") + p("0")) from the first token's top log-probabilities (tokens matched
    with surrounding spaces and quotes stripped); None when neither is among them."""
    mass = {"0": 0.0, "1": 0.0}
    for token, logprob in (top_logprobs or {}).items():
        digit = token.strip().strip('"')
        if digit in mass and math.isfinite(logprob):
            mass[digit] += math.exp(logprob)
    total = mass["0"] + mass["1"]
    return mass["1"] / total if total > 0.0 else None


class AnswerRelevancy(_OneStage):
    """RAGAS answer relevancy (strictness 1): the question the answer answers, vs the real one."""

    def __init__(self, config: JudgeConfig) -> None:
        self.max_chars = config.max_answer_chars

    def plan(self, item: AnswerItem, outcome: str) -> list[Planned]:
        if outcome in _UNJUDGEABLE or outcome == "refusal" or not item.chunks:
            return []
        ragas = _ragas()
        prompt, model = ragas.relevance_prompt(item.answer[: self.max_chars])
        schema = ragas.bounded_schema(model, 4, 300)
        return [(JudgeCall(CallKey("relevancy", item.id), prompt, schema, 200), model)]

    def score(
        self, item: AnswerItem, replies: Replies, failures: list[str], embed: Embed
    ) -> dict[str, Any]:
        key = CallKey("relevancy", item.id)
        parsed = replies.get(key)
        if parsed is None:
            if key in replies:
                failures.append("answer relevancy: no valid judge output after retries")
            return {"answer_relevancy": None}
        if parsed.noncommittal:
            return {"answer_relevancy": 0.0}
        vectors = embed([item.question, parsed.question])
        return {"answer_relevancy": max(0.0, float(vectors[0] @ vectors[1]))}


class ContextRecall(_OneStage):
    """RAGAS context recall: the share of the reference's sentences the chunks support."""

    def plan(self, item: AnswerItem, outcome: str) -> list[Planned]:
        if outcome in _UNJUDGEABLE or not item.chunks or not item.reference:
            return []
        ragas = _ragas()
        context = "\n".join(text for _, text in item.chunks)
        prompt, model = ragas.context_recall_prompt(item.question, context, item.reference)
        schema = ragas.bounded_schema(model, 12, 300)
        return [(JudgeCall(CallKey("recall", item.id), prompt, schema, 900), model)]

    def score(
        self, item: AnswerItem, replies: Replies, failures: list[str], embed: Embed
    ) -> dict[str, Any]:
        key = CallKey("recall", item.id)
        parsed = replies.get(key)
        if parsed is None:
            if key in replies:
                failures.append("context recall: no valid judge output after retries")
            return {"context_recall": None}
        found = [c.attributed for c in parsed.classifications]
        return {"context_recall": sum(1 for a in found if a) / len(found) if found else None}


class AnswerCorrectness:
    """RAGAS answer correctness: the answer's claims vs the reference's statements (TP/FP/FN),
    F1 blended with embedding similarity (RAGAS default weights 0.75 / 0.25)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.max_claims = config.max_claims

    def plan(self, item: AnswerItem, outcome: str) -> list[Planned]:
        if outcome in _UNJUDGEABLE or not item.reference:
            return []
        ragas = _ragas()
        prompt, model = ragas.statements_prompt(item.question, item.reference)
        schema = ragas.bounded_schema(model, self.max_claims, 300)
        return [(JudgeCall(CallKey("refstatements", item.id), prompt, schema, 900), model)]

    def plan_after_claims(
        self, item: AnswerItem, claims: list[str], replies: Replies
    ) -> list[Planned]:
        reference = getattr(replies.get(CallKey("refstatements", item.id)), "statements", [])
        if not claims or not reference:
            return []
        ragas = _ragas()
        prompt, model = ragas.correctness_prompt(item.question, claims, reference)
        schema = ragas.bounded_schema(model, self.max_claims, 300)
        return [(JudgeCall(CallKey("correctness", item.id), prompt, schema, 1500), model)]

    def score(
        self, item: AnswerItem, replies: Replies, failures: list[str], embed: Embed
    ) -> dict[str, Any]:
        if CallKey("refstatements", item.id) not in replies or not item.reference:
            return {"answer_correctness": None}
        classification = replies.get(CallKey("correctness", item.id))
        reference = getattr(replies.get(CallKey("refstatements", item.id)), "statements", None)
        if classification is not None:
            factuality = _ragas().correctness_f1(classification)
        elif CallKey("correctness", item.id) in replies or reference is None:
            failures.append("answer correctness: no valid judge output after retries")
            return {"answer_correctness": None}
        else:
            factuality = 1.0  # RAGAS: no statements on one side counts as a match
        vectors = embed([item.answer, item.reference])
        similarity = max(0.0, float(vectors[0] @ vectors[1]))
        return {"answer_correctness": 0.75 * factuality + 0.25 * similarity}


def metrics_for(config: JudgeConfig) -> list[RagasMetric]:
    """The configured metrics other than faithfulness; the others' fields stay None."""
    wanted = set(config.metrics)
    chosen: list[RagasMetric] = []
    if "context_precision" in wanted:
        chosen.append(ContextPrecision("answer", config.context_precision_verdict))
    if "context_precision_with_reference" in wanted:
        chosen.append(ContextPrecision("reference", config.context_precision_verdict))
    if "answer_relevancy" in wanted:
        chosen.append(AnswerRelevancy(config))
    if "context_recall" in wanted:
        chosen.append(ContextRecall())
    if "answer_correctness" in wanted:
        chosen.append(AnswerCorrectness(config))
    return chosen


# every field the metrics write, so a record has them all even when a metric is off
METRIC_FIELDS: dict[str, Any] = {
    "context_precision": None,
    "context_precision_with_reference": None,
    "context_verdicts": [],
    "context_verdicts_with_reference": [],
    "answer_relevancy": None,
    "context_recall": None,
    "answer_correctness": None,
}
