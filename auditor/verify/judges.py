"""Judge backends: the pipeline generator backends, asked for JSON that matches a schema."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from auditor.config import JudgeConfig, OpenAIGeneratorConfig, VLLMGeneratorConfig
from auditor.verify.base import Judge, JudgeCall, JudgeReply

__all__ = ["VLLMJudge", "make_judge"]


class VLLMJudge:
    """An in-process vLLM engine with structured outputs (JSON schema per request), batched."""

    def __init__(self, cfg: VLLMGeneratorConfig) -> None:
        from auditor.generate.vllm_offline import VLLMGenerator

        self.cfg = cfg
        self.engine = VLLMGenerator.from_config(cfg)
        self.seconds = 0.0

    def identity(self) -> dict[str, Any]:
        return self.engine.identity()

    def complete(self, calls: Sequence[JudgeCall]) -> list[JudgeReply]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        llm_engine = self.engine.llm.llm_engine
        replies = {call.key: JudgeReply(key=call.key) for call in calls}
        ids: dict[str, str] = {}
        started = time.perf_counter()
        for number, call in enumerate(calls):
            _, tokens = self.engine.render([{"role": "user", "content": call.prompt}])
            params = SamplingParams(
                max_tokens=call.max_tokens,
                temperature=self.cfg.sampling.temperature,
                seed=self.cfg.sampling.seed,
                structured_outputs=StructuredOutputsParams(json=call.schema),
            )
            params.output_kind = RequestOutputKind.FINAL_ONLY
            request_id = f"judge-{id(calls)}-{number}"
            try:
                llm_engine.add_request(request_id, TokensPrompt(prompt_token_ids=tokens), params)
            except ValueError as exc:
                replies[call.key].error = f"rejected by vLLM: {exc}"
                continue
            ids[request_id] = call.key
        while llm_engine.has_unfinished_requests():
            output: Any
            for output in llm_engine.step():
                if not output.finished:
                    continue
                reply = replies[ids.pop(output.request_id)]
                completion: Any = output.outputs[0]
                reply.text = completion.text
                reply.prompt_tokens = len(output.prompt_token_ids or [])
                reply.completion_tokens = len(completion.token_ids)
                if completion.finish_reason == "length":
                    reply.error = "judge output hit max_tokens"
        self.seconds += time.perf_counter() - started
        return [replies[call.key] for call in calls]

    def close(self) -> None:
        self.engine.close()


class OpenAIJudge:
    """An OpenAI-compatible server (e.g. a strong model behind `vllm serve`), JSON schema mode."""

    def __init__(self, cfg: OpenAIGeneratorConfig) -> None:
        from auditor.generate.openai_server import OpenAIServerGenerator

        self.cfg = cfg
        self.generator = OpenAIServerGenerator.from_config(cfg)
        self.seconds = 0.0

    def identity(self) -> dict[str, Any]:
        return self.generator.identity()

    def complete(self, calls: Sequence[JudgeCall]) -> list[JudgeReply]:
        import asyncio

        import httpx

        started = time.perf_counter()
        limit = asyncio.Semaphore(self.cfg.concurrency)
        endpoint = self.cfg.endpoints[0].rstrip("/")
        headers = self.generator.headers()

        async def one(client: httpx.AsyncClient, call: JudgeCall) -> JudgeReply:
            body = {
                "model": self.cfg.model,
                "messages": [{"role": "user", "content": call.prompt}],
                "max_tokens": call.max_tokens,
                "temperature": self.cfg.sampling.temperature,
                "seed": self.cfg.sampling.seed,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "verdict", "schema": call.schema},
                },
            }
            reply = JudgeReply(key=call.key)
            async with limit:
                for attempt in range(self.cfg.max_retries + 1):
                    try:
                        response = await client.post(f"{endpoint}/chat/completions", json=body)
                        if response.status_code >= 500 and attempt < self.cfg.max_retries:
                            continue
                        response.raise_for_status()
                        data = response.json()
                        reply.text = data["choices"][0]["message"]["content"] or ""
                        usage = data.get("usage") or {}
                        reply.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                        reply.completion_tokens = int(usage.get("completion_tokens") or 0)
                        reply.error = None
                        return reply
                    except (httpx.HTTPError, KeyError, ValueError) as exc:
                        reply.error = f"{endpoint}: {type(exc).__name__}: {exc}"[:300]
            return reply

        async def run_all() -> list[JudgeReply]:
            timeout = httpx.Timeout(self.cfg.timeout_s)
            async with httpx.AsyncClient(timeout=timeout, headers=headers) as client:
                return list(await asyncio.gather(*(one(client, call) for call in calls)))

        replies = asyncio.run(run_all())
        self.seconds += time.perf_counter() - started
        return replies

    def close(self) -> None:
        self.generator.close()


def make_judge(cfg: JudgeConfig) -> Judge:
    """The judge backend the config names."""
    backends: dict[str, Any] = {"vllm": VLLMJudge, "openai": OpenAIJudge}
    judge: Judge = backends[cfg.generator.kind](cfg.generator)
    return judge
