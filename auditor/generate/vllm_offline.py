"""In-process `vllm.LLM` generator (the only module that imports vllm).

Requests are added to the engine all at once (one offline batch, as `LLM.generate` does) and
the engine is stepped here, so each answer is handed back the moment it finishes and an
interrupted run loses nothing already written. Per-request timings are the engine's own
(`RequestOutput.metrics`, enabled by `disable_log_stats=False`).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from auditor.config import VLLMGeneratorConfig
from auditor.engine_dtype import engine_dtype, is_cpu_build
from auditor.errors import AuditorError, BackendUnavailable
from auditor.generate.base import GenerationStats, GenRequest, GenResult, OnResult, tpot
from auditor.generate.reaper import watch_engines
from auditor.interrupt import interrupted, raise_if_interrupted
from auditor.models import resolve_model

__all__ = ["VLLMGenerator", "engine_dtype", "engine_settings", "is_cpu_build"]

log = logging.getLogger(__name__)


def _configure_environment(cfg: VLLMGeneratorConfig) -> None:
    """Environment vLLM reads at start-up; set before the engine is built."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("VLLM_DO_NOT_TRACK", "1")
    if is_cpu_build():
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        # One engine step on CPU prefills up to 4,096 tokens: a 1.5B model in float32 on 2
        # busy cores took over vLLM's 300 s limit for one step and the engine died mid-check
        # (seen 2026-12-06). A hung engine is the reaper's and Ctrl-C's business, not a timer's.
        os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "86400")
        # Without it vLLM tries to reserve 92 % of RAM for the KV cache and refuses to start.
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = f"{cfg.kv_cache_gib:g}"
        # set per engine: an earlier engine's binding must not carry over to the next one
        bound = {"VLLM_CPU_OMP_THREADS_BIND": cfg.cpu_threads, "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
        for key, value in bound.items():
            if cfg.cpu_threads:
                os.environ[key] = _SET_BY_US[key] = str(value)
            elif key in _SET_BY_US and os.environ.get(key) == _SET_BY_US.pop(key):
                del os.environ[key]


_SET_BY_US: dict[str, str] = {}  # environment values this module set (a user's own stay)

# How long a stopping engine core may take to exit before vLLM kills it and its worker (vLLM's
# default: 5 s). On the CPU build its worker never exits in time: every stop measured was that
# kill, 5-6 s after the answers were in (`make demo`'s 0.5B "engine stop" row, 5.5 s;
# bench/engine_start.py, docs/lab-notes.md), so the stop waits 1 s for the same kill.
ENGINE_STOP_GRACE_S = 1.0


def _plain(request: GenRequest) -> bool:
    """A request that uses the pipeline's sampling as it is."""
    return not (request.max_tokens or request.json_schema is not None or request.logprobs)


def _first_token_logprobs(logprobs: Any) -> dict[str, float] | None:
    """{decoded token: log-probability} for the first generated token (same text summed)."""
    if not logprobs:
        return None
    found: dict[str, float] = {}
    for entry in logprobs[0].values():
        token = entry.decoded_token or ""
        if token in found:  # two ids decoding to one text: add their probabilities
            found[token] = math.log(math.exp(found[token]) + math.exp(entry.logprob))
        else:
            found[token] = entry.logprob
    return found


def engine_settings(cfg: VLLMGeneratorConfig) -> dict[str, Any]:
    """What an engine is started with: weights, dtype, context, parallelism, cores, KV cache,
    engine arguments and seed. Two configs with the same settings can share one engine;
    sampling (temperature, max tokens) is per request."""
    return {
        "model": cfg.model,
        "dtype": cfg.dtype,
        "max_model_len": cfg.max_model_len,
        "enforce_eager": cfg.enforce_eager,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "kv_cache_gib": cfg.kv_cache_gib,
        "cpu_threads": cfg.cpu_threads,
        "engine_args": cfg.engine_args,
        "seed": cfg.sampling.seed,
    }


class VLLMGenerator:
    """A vLLM engine in this process, for one model."""

    def __init__(self, cfg: VLLMGeneratorConfig, model_path: str, identity: dict[str, Any]) -> None:
        _configure_environment(cfg)
        try:
            from vllm import LLM
        except ImportError as exc:
            raise BackendUnavailable("vllm", "cpu") from exc
        self.cfg = cfg
        self._identity = identity
        self.dtype = engine_dtype(cfg.dtype)
        if self.dtype != cfg.dtype:
            log.warning(
                "this CPU has no native bfloat16 (no avx512_bf16 or amx_bf16): running %s in "
                "float32, ~5x faster here than emulated bfloat16",
                identity.get("name"),
            )

        watch_engines()  # the engine's processes die with this one, even on kill -9
        started = time.perf_counter()
        try:
            self.llm = LLM(
                model=model_path,
                dtype=cast(Any, self.dtype),  # validated by vLLM, which names the valid ones
                max_model_len=cfg.max_model_len,
                enforce_eager=cfg.enforce_eager,
                tensor_parallel_size=cfg.tensor_parallel_size,
                seed=cfg.sampling.seed,
                disable_log_stats=False,  # per-request metrics come only with stats on
                **cfg.engine_args,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise_if_interrupted()  # the engine failed because Ctrl-C stopped it
            raise AuditorError(f"vLLM could not start {identity.get('name')}: {exc}") from exc
        if interrupted():  # vLLM's start-up handshake swallows KeyboardInterrupt
            self.close()
            raise KeyboardInterrupt
        self.startup_s = time.perf_counter() - started
        self.tokenizer = self.llm.get_tokenizer()
        self._batches = 0
        self._tag = "b"  # engine request ids: "b<batch>-<n>"; generators sharing it use others
        self._owner: VLLMGenerator | None = None  # set on a generator sharing another's engine

    def sharing(self, cfg: VLLMGeneratorConfig) -> VLLMGenerator:
        """A generator with `cfg`'s sampling on this engine (`cfg` starts the same engine:
        `engine_settings`), so an audit's judge checks on the engine that generated. Closing
        either frees the engine once."""
        if engine_settings(cfg) != engine_settings(self.cfg):
            raise ValueError(f"{cfg.model}: another engine than {self.cfg.model}'s")
        owner = self._owner or self
        shared = object.__new__(VLLMGenerator)
        shared.__dict__ |= owner.__dict__ | {"cfg": cfg, "startup_s": 0.0, "_batches": 0}
        shared._tag = f"s{id(shared)}-"
        shared._owner = owner
        return shared

    @classmethod
    def from_config(
        cls,
        cfg: VLLMGeneratorConfig,
        on_stage: Callable[[str], None] | None = None,
        on_bytes: Callable[[int, int], None] | None = None,
    ) -> VLLMGenerator:
        """Prepare the model if it is a packaged one, then start the engine."""

        path, identity = resolve_model(cfg.model, on_bytes=on_bytes, on_stage=on_stage)
        if on_stage:
            on_stage(f"starting vLLM engine for {identity['name']}")
        return cls(cfg, path, identity)

    def identity(self) -> dict[str, Any]:
        return self._identity | {
            "backend": "vllm",
            "cpu_build": is_cpu_build(),
            "dtype": self.dtype,
            "dtype_requested": self.cfg.dtype,
        }

    def render(self, messages: Sequence[dict[str, str]]) -> tuple[str, list[int]]:
        """The chat template applied to the messages, as text and as the token ids sent.

        Tokenized without special tokens: the template already has them (a second BOS
        would change what the model sees, e.g. for Llama 3).
        """
        text = str(
            self.tokenizer.apply_chat_template(
                list(messages), tokenize=False, add_generation_prompt=True
            )
        )
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False)
        return text, ids

    def sampling_params(self, request: GenRequest | None = None) -> Any:
        """The pipeline's sampling, with the request's own length, schema and logprobs."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        s = self.cfg.sampling
        params = SamplingParams(
            max_tokens=request.max_tokens if request and request.max_tokens else s.max_tokens,
            temperature=s.temperature,
            top_p=s.top_p,
            seed=s.seed,
            logprobs=request.logprobs if request and request.logprobs else None,
            structured_outputs=(
                StructuredOutputsParams(json=request.json_schema)
                if request and request.json_schema is not None
                else None
            ),
        )
        params.output_kind = RequestOutputKind.FINAL_ONLY  # as LLM.generate: no per-step copies
        return params

    def generate(self, requests: Sequence[GenRequest], on_result: OnResult) -> GenerationStats:
        from vllm.inputs import TokensPrompt

        engine = self.llm.llm_engine
        shared = self.sampling_params()
        self._batches += 1
        pending: dict[str, tuple[GenRequest, str]] = {}
        started = time.perf_counter()
        for number, request in enumerate(requests):
            try:
                prompt_text, ids = self.render(request.messages)
                engine_id = f"{self._tag}{self._batches}-{number}"
                params = shared if _plain(request) else self.sampling_params(request)
                engine.add_request(engine_id, TokensPrompt(prompt_token_ids=ids), params)
            except ValueError as exc:  # e.g. prompt longer than max_model_len
                on_result(
                    GenResult(request_id=request.request_id, error=f"rejected by vLLM: {exc}")
                )
                continue
            pending[engine_id] = (request, prompt_text)
        while engine.has_unfinished_requests():
            raise_if_interrupted()
            for output in engine.step():
                if not output.finished:
                    continue
                request, prompt_text = pending.pop(output.request_id)
                on_result(self._result(request, prompt_text, output, observed=time.time()))
        wall_s = time.perf_counter() - started
        regime = {
            "mode": "offline-batch",
            "backend": "vllm",
            "batch_size": len(requests),
            "max_num_seqs": self.llm.llm_engine.vllm_config.scheduler_config.max_num_seqs,
        }
        return GenerationStats(wall_s=wall_s, regime=regime)

    def _result(
        self, request: GenRequest, prompt_text: str, output: Any, observed: float
    ) -> GenResult:
        completion = output.outputs[0]
        tokens = len(completion.token_ids)
        result = GenResult(
            request_id=request.request_id,
            text=completion.text,
            prompt_text=prompt_text,
            prompt_tokens=len(output.prompt_token_ids or []),
            cached_tokens=output.num_cached_tokens,
            output_tokens=tokens,
            finish_reason=completion.finish_reason,
            engine={"observed_finish_time": observed},
            top_logprobs=_first_token_logprobs(completion.logprobs) if request.logprobs else None,
        )
        stats = output.metrics
        if stats is None or not stats.first_token_ts:
            log.warning("vLLM returned no request metrics for %s", request.request_id)
            return result
        # arrival_time is wall clock; the *_ts fields are the engine's monotonic clock.
        decode_s = stats.last_token_ts - stats.first_token_ts
        result.arrival_time = stats.arrival_time
        result.ttft_s = stats.first_token_latency
        result.first_token_time = stats.arrival_time + stats.first_token_latency
        result.last_token_time = result.first_token_time + decode_s
        result.e2e_s = stats.first_token_latency + decode_s
        result.tpot_s = tpot(result.first_token_time, result.last_token_time, tokens)
        result.engine |= {
            "queued_s": max(0.0, stats.scheduled_ts - stats.queued_ts),
            "prefill_s": max(0.0, stats.first_token_ts - stats.scheduled_ts),
            "decode_s": decode_s,
            "num_generation_tokens": stats.num_generation_tokens,
            "num_preemptions": stats.num_preemptions,
        }
        return result

    def close(self) -> None:
        """Shut the engine down and free its memory before another one starts."""
        import gc

        owner = getattr(self, "_owner", None)
        if owner is not None:  # a sharing generator: the engine is its owner's
            self.__dict__.pop("llm", None)
            owner.close()
            return
        llm = getattr(self, "llm", None)
        if llm is not None:
            # the engine core runs in its own process; without this, exit waits on it
            core = getattr(llm.llm_engine, "engine_core", None)
            if core is not None:
                core.shutdown(timeout=ENGINE_STOP_GRACE_S)
            del self.llm
        gc.collect()
