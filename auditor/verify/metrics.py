"""The RAGAS metrics beside faithfulness, one object per metric: plan its judge calls for an
answer, score the replies into fields of its checks.jsonl record.

Each `plan` returns (call, response model) pairs with typed keys; `score` reads the replies
by the same keys, appends what failed to `failures`, and returns the record's fields (a score
that needed a failed call is None, never NaN). Answer correctness needs the answer's claims,
so it plans a second call once they are known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from auditor.config import JudgeConfig
from auditor.verify import ragas_judge
from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey, JudgeCall

__all__ = ["METRIC_FIELDS", "Planned", "RagasMetric", "metrics_for"]

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
    """RAGAS context precision: was each chunk useful for the answer (or the reference)?"""

    def __init__(self, target: str) -> None:
        self.target = target  # "answer" | "reference"
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
            prompt, model = ragas.context_precision_prompt(item.question, chunk, text)
            schema = ragas.bounded_schema(model, 4, 300)
            planned.append((JudgeCall(self._key(item, rank), prompt, schema, 200), model))
        return planned

    def score(
        self, item: AnswerItem, replies: Replies, failures: list[str], embed: Embed
    ) -> dict[str, Any]:
        verdicts: list[int] = []
        rows: list[dict[str, Any]] = []
        for rank, (chunk_id, _) in enumerate(item.chunks):
            key = self._key(item, rank)
            if key not in replies:
                return {self.field: None, self.verdicts: []}
            parsed = replies[key]
            if parsed is None:
                failures.append(
                    f"context precision {chunk_id}: no valid judge output after retries"
                )
                rows.append({"chunk_id": chunk_id, "useful": None, "reason": "judge failed"})
                verdicts.append(0)
                continue
            verdicts.append(int(parsed.verdict))
            rows.append(
                {"chunk_id": chunk_id, "useful": bool(parsed.verdict), "reason": parsed.reason}
            )
        failed = any(row["useful"] is None for row in rows)
        # a chunk the judge could not rate leaves the score unknown rather than lowered
        value = _ragas().average_precision(verdicts) if verdicts and not failed else None
        return {self.field: value, self.verdicts: rows}


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
        chosen.append(ContextPrecision("answer"))
    if "context_precision_with_reference" in wanted:
        chosen.append(ContextPrecision("reference"))
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
