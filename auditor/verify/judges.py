"""Judge backends: the pipeline generator backends (in-process vLLM, OpenAI-compatible
servers) asked for JSON matching a schema, or for a short label with its log-probabilities.

The judge adds nothing to the backends but the translation: it batches through the same
engine step loop as `auditor run`, and over HTTP gets the generator's retries, backoff on
429/5xx and every configured endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from auditor.config import JudgeConfig
from auditor.generate.base import GenRequest, GenResult
from auditor.generate.openai_server import OpenAIServerGenerator
from auditor.generate.vllm_offline import VLLMGenerator
from auditor.verify.base import Judge, JudgeCall, JudgeReply

__all__ = ["GeneratorJudge", "make_judge"]


class GeneratorJudge:
    """A judge over any generator backend: one batch of calls = one `generate` batch."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator
        self.seconds = 0.0

    def identity(self) -> dict[str, Any]:
        identity: dict[str, Any] = self.generator.identity()
        return identity

    def complete(
        self, calls: Sequence[JudgeCall], on_reply: Callable[[], None] | None = None
    ) -> list[JudgeReply]:
        requests = [
            GenRequest(
                request_id=str(number),
                messages=({"role": "user", "content": call.prompt},),
                max_tokens=call.max_tokens,
                json_schema=call.schema,
                logprobs=call.logprobs,
            )
            for number, call in enumerate(calls)
        ]
        results: dict[str, GenResult] = {}

        def arrived(result: GenResult) -> None:
            results[result.request_id] = result
            if on_reply is not None:
                on_reply()

        started = time.perf_counter()
        self.generator.generate(requests, arrived)
        self.seconds += time.perf_counter() - started
        return [_reply(call, results.get(str(n))) for n, call in enumerate(calls)]

    def close(self) -> None:
        self.generator.close()


def _reply(call: JudgeCall, result: GenResult | None) -> JudgeReply:
    reply = JudgeReply(key=call.key)
    if result is None:
        reply.error = "the backend returned no result"
        return reply
    reply.text = result.text
    reply.prompt_tokens = result.prompt_tokens or 0
    reply.cached_tokens = result.cached_tokens or 0
    reply.completion_tokens = result.output_tokens
    reply.top_logprobs = result.top_logprobs
    reply.error = result.error
    if reply.error is None and call.schema is not None and result.finish_reason == "length":
        reply.error = "judge output hit max_tokens"
    return reply


def make_judge(cfg: JudgeConfig) -> Judge:
    """The judge backend the config names."""
    if cfg.generator.kind == "vllm":
        return GeneratorJudge(VLLMGenerator.from_config(cfg.generator))

    return GeneratorJudge(OpenAIServerGenerator.from_config(cfg.generator))
