"""Offline generation over a Ray cluster: a pipeline's requests spread over N vLLM engines.

`RayGenerator` is a generator backend like `VLLMGenerator` (`identity`, `generate`, `close`),
so `run_pipeline` records, resumes and times exactly as for one engine: each engine measures
its own requests (TTFT, TPOT, e2e), the results come back to the command, which alone appends
them to records.jsonl. The load regime says "offline batch over N engines": its throughput is
the cluster's, not one engine's, and the report says so beside it.
"""

from __future__ import annotations

import contextlib
import json
import math
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from auditor.config import VLLMGeneratorConfig
from auditor.errors import AuditorError
from auditor.generate import make_generator
from auditor.generate.base import GenerationStats, GenRequest, GenResult
from auditor.generate.vllm_offline import VLLMGenerator, engine_dtype, is_cpu_build
from auditor.models.prepare import resolve_model
from auditor.scale.cluster import ACTOR_RETRIES, ActorPlan, on_actors, plan_actors, ray_cluster

__all__ = ["GeneratorActor", "RayGenerator", "cluster_generators"]


@contextlib.contextmanager
def cluster_generators(
    address: str | None, actors: int | None
) -> Iterator[Callable[..., Any] | None]:
    """With `--ray`: a generator factory whose vLLM pipelines run on the cluster's engines
    (other backends keep their own client), the cluster joined meanwhile; else None."""
    if address is None:
        yield None
        return
    with ray_cluster(address) as ray:

        def factory(
            cfg: Any,
            on_stage: Callable[[str], None] | None = None,
            on_bytes: Callable[[int, int], None] | None = None,
        ) -> Any:
            if cfg.kind != "vllm":
                return make_generator(cfg, on_stage=on_stage, on_bytes=on_bytes)
            plan = plan_actors(ray, cfg, actors)
            if on_stage:
                on_stage(f"generating with {plan.describe()}")
            return RayGenerator(ray, plan, cfg)

        yield factory


class GeneratorActor:
    """One pipeline engine on a cluster node: generates the request batches it is handed."""

    def __init__(self, config_json: str) -> None:
        self.generator = VLLMGenerator.from_config(
            VLLMGeneratorConfig.model_validate_json(config_json)
        )
        self.identity = json.dumps(self.generator.identity(), sort_keys=True)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        requests: list[GenRequest] = [pickle.loads(blob) for blob in batch["request"]]
        results: list[GenResult] = []
        stats = self.generator.generate(requests, results.append)
        return {
            "id": [r.request_id for r in results],
            "result": [pickle.dumps(r) for r in results],
            "identity": [self.identity] * len(results),
            "max_num_seqs": [stats.regime.get("max_num_seqs")] * len(results),
        }

    def __del__(self) -> None:
        generator = getattr(self, "generator", None)
        if generator is not None:
            generator.close()


class RayGenerator:
    """A vLLM pipeline generator whose engines are Ray actors (`run`/`audit --ray`)."""

    def __init__(self, ray: Any, plan: ActorPlan, cfg: VLLMGeneratorConfig) -> None:
        self.ray, self.plan, self.cfg = ray, plan, cfg
        _, found = resolve_model(cfg.model)  # the same files every node must hold
        self._identity = found | {
            "backend": "vllm",
            "cpu_build": is_cpu_build(),
            "dtype": engine_dtype(cfg.dtype),
            "dtype_requested": cfg.dtype,
        }

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def generate(
        self, requests: Sequence[GenRequest], on_result: Callable[[GenResult], None]
    ) -> GenerationStats:
        """Every request once, its result handed to `on_result` as its batch comes back; a
        request whose batch outlived its retries gets an error result."""
        # one batch per engine and round: each engine batches like a single offline engine
        size = max(1, math.ceil(len(requests) / self.plan.actors))
        started = time.perf_counter()
        rows = [{"id": r.request_id, "request": pickle.dumps(r)} for r in requests]
        constructor = {"config_json": self.cfg.model_dump_json()}
        back: set[str] = set()
        max_num_seqs = None
        expected = json.dumps(self._identity, sort_keys=True)
        for out in on_actors(self.ray, self.plan, GeneratorActor, constructor, rows, size):
            for identity in set(map(str, out["identity"])):
                if identity != expected:
                    raise AuditorError(
                        f"a Ray node runs {self.cfg.model} from other files or packages than "
                        f"this machine ({identity} vs {expected}): prepare the same model and "
                        "environment on every node"
                    )
            max_num_seqs = out["max_num_seqs"][0]
            for blob in out["result"]:
                result: GenResult = pickle.loads(blob)
                if result.request_id not in back:  # a retried batch: each request once
                    back.add(result.request_id)
                    on_result(result)
        for request in requests:
            if request.request_id not in back:
                why = f"its batch failed on {ACTOR_RETRIES + 1} engines in a row"
                on_result(GenResult(request_id=request.request_id, error=why))
        regime = {
            "mode": "offline-batch",
            "backend": "vllm",
            "engines": self.plan.actors,
            "scale": "ray",
            "batch_size": size,
            "max_num_seqs": None if max_num_seqs is None else int(max_num_seqs),
        }
        return GenerationStats(wall_s=time.perf_counter() - started, regime=regime)

    def close(self) -> None:
        """The actors end with the dataset; nothing held here."""
