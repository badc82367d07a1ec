"""Judge calls sent as one batch: unparseable replies re-asked, usage booked per answer."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from auditor.verify.base import CallKey, Judge, JudgeCall, JudgeReply, JudgeUsage

__all__ = ["Asker", "OnStageCalls"]


def _parse(reply: JudgeReply, model: type[BaseModel]) -> BaseModel | None:
    if reply.error or not reply.text:
        return None
    try:
        return model.model_validate_json(reply.text)
    except ValidationError:
        return None


OnStageCalls = Callable[[str, int, int], None]
"""Progress of one judge stage: (stage label, calls answered, calls in the stage)."""


class Asker:
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
