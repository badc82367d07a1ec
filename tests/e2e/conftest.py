"""Fixtures shared by the end-to-end tests: the light judge and the engines they share.

Engines are the suite's cost (30-70 s to start one on 2 cores before any work), so a test of a
path (run, check, audit, calibrate, report, examples, services) borrows an engine started once
per test session from `engine_pool`; a test of an engine's life (kills, resumes, reapers, Ray
actors, engine start and stop) starts its own in a subprocess, because that is what it tests.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.config import IngestConfig
from auditor.generate.vllm_offline import VLLMGenerator, engine_settings
from auditor.ingest import ingest_corpus
from auditor.scale.cluster import ray_address_file
from auditor.testing import put_back_cluster_file, ray_nodes_here
from tests.conftest import ENGINE_CORES, KESTREL, ONE_CORE
from tests.e2e.servers import otlp_sink, vllm_server

__all__ = [
    "LIGHT_CPU_THREADS",
    "LIGHT_JUDGE",
    "EnginePool",
    "engine_pool",
    "kestrel_index",
    "light_judge",
    "light_judge_toml",
    "light_pipeline_toml",
    "otlp_sink",
    "ray_nodes_leaving_no_file",
    "vllm_server",
]


# The engine the tests of paths share (SmolLM2 on the test process's cores): the light judge and any
# in-process SmolLM2 pipeline of a test start it alike, so the pool starts it once per session
# and an audit's judge checks on the engine that generated, as a user's audit does.
LIGHT_CPU_THREADS = ENGINE_CORES
LIGHT_ENGINE = (
    f'model = "smollm2-135m-instruct"\nmax_model_len = 2048\ncpu_threads = "{LIGHT_CPU_THREADS}"\n'
)


def light_judge_toml(answers_per_batch: int = 16, all_cores: bool = True) -> str:
    """A judge on SmolLM2-135M, for tests of paths, processes and scale, not of verdicts.

    The default 1.5B judge runs in float32 on a CPU without bfloat16 (~12 GB, ~33 s per RAGTruth
    answer on 2 cores): its verdicts are tested by the smoke in test_check_real and measured by
    bench/judge_quality.py; everything else a check does (prompts, structured outputs,
    commits, resumes, calibration, reports) is the same code on either model. 16 answers a
    batch, as the product's default (batched calls keep the cores busy); `all_cores` False
    binds one core, as a Ray actor of one CPU has.
    """
    engine = LIGHT_ENGINE if all_cores else LIGHT_ENGINE.replace(ENGINE_CORES, ONE_CORE)
    return (
        f'name = "smollm2-judge"\nmetrics = ["faithfulness"]\n'
        f"answers_per_batch = {answers_per_batch}\n"
        f'[generator]\nkind = "vllm"\n{engine}[generator.sampling]\nmax_tokens = 256\n'
    )


LIGHT_JUDGE = light_judge_toml()


def light_pipeline_toml(name: str, max_tokens: int, top_k: int = 4) -> str:
    """A SmolLM2 pipeline on the light judge's engine settings (so it shares the engine)."""
    return (
        f'name = "{name}"\n[retrieval]\ntop_k = {top_k}\n'
        f'[generator]\nkind = "vllm"\n{LIGHT_ENGINE}'
        f"[generator.sampling]\nmax_tokens = {max_tokens}\ntemperature = 0.0\n"
    )


_start_engine: Callable[..., VLLMGenerator] = VLLMGenerator.from_config


class EnginePool:
    """In-process vLLM engines started once per test session and lent to every test of a path.

    An engine is keyed by what it is started with (`engine_settings`: weights, dtype, context,
    cores, KV cache, seed); a borrower gets it with its own sampling (`VLLMGenerator.sharing`,
    as an audit lends a pipeline's engine to its judge), and its close leaves the engine up.
    At most `limit` engines are held: the least recently used one is freed before another
    starts, so the pool never holds more memory than two small engines.
    """

    def __init__(self, limit: int = 2) -> None:
        self.limit = limit
        self.engines: dict[str, VLLMGenerator] = {}  # least recently used first
        self.started: list[str] = []  # the models started, in order (the tests read it)

    def lend(self, cfg: Any, **callbacks: Any) -> VLLMGenerator:
        key = json.dumps(engine_settings(cfg), sort_keys=True, default=str)
        engine = self.engines.pop(key, None)
        if engine is None:
            while len(self.engines) >= self.limit:
                self._free(self.engines.pop(next(iter(self.engines))))
            engine = _start_engine(cfg, **callbacks)
            # borrowers close what they are given: only the pool frees a pooled engine (the
            # lent generators copy this attribute with the rest of the engine's state)
            engine.close = lambda: None  # type: ignore[method-assign]
            self.started.append(cfg.model)
        self.engines[key] = engine
        return engine.sharing(cfg)

    @staticmethod
    def _free(engine: VLLMGenerator) -> None:
        VLLMGenerator.close(engine)  # the class's close: the instance's own is the no-op above

    def close(self) -> None:
        while self.engines:
            self._free(self.engines.pop(next(iter(self.engines))))


@pytest.fixture(scope="session")
def _engines() -> Iterator[EnginePool]:
    pool = EnginePool()
    yield pool
    pool.close()


@pytest.fixture
def engine_pool(_engines: EnginePool, monkeypatch: pytest.MonkeyPatch) -> EnginePool:
    """In-process engines in this test come from the session's pool (the commands run through
    CliRunner start them as they would, through `VLLMGenerator.from_config`)."""

    def lend(cls: type, cfg: Any, **callbacks: Any) -> VLLMGenerator:
        return _engines.lend(cfg, **callbacks)

    monkeypatch.setattr(VLLMGenerator, "from_config", classmethod(lend))
    return _engines


@pytest.fixture(scope="session")
def kestrel_index(tmp_path_factory: pytest.TempPathFactory, real_embedder: Any) -> Path:
    """The bundled Kestrel docs ingested once per test session (MiniLM, FAISS: ~12 s on 2
    cores); the tests read it, none writes it."""
    index = tmp_path_factory.mktemp("kestrel") / "index"
    ingest_corpus(KESTREL / "docs", index, IngestConfig(), real_embedder)
    return index


@pytest.fixture
def light_judge(
    tmp_path: Path, smollm2_dir: Path, monkeypatch: pytest.MonkeyPatch, engine_pool: EnginePool
) -> Path:
    """The light judge's TOML, its model prepared where engines look for it, its engine (and
    every other in-process engine of the test) borrowed from the session's pool."""
    monkeypatch.setenv("AUDITOR_MODELS_DIR", str(smollm2_dir.parent))
    path = tmp_path / "light-judge.toml"
    path.write_text(LIGHT_JUDGE, encoding="utf-8")
    return path


@contextlib.contextmanager
def ray_nodes_leaving_no_file(nodes: int) -> Iterator[tuple[str, dict[str, str]]]:
    """`ray_nodes_here(nodes)` (which puts back the file `ray start --head` names its cluster
    in, /tmp/ray/ray_current_cluster, as it was), checked again here after it: the cluster is
    killed, not `ray stop`ped, so the file would name a cluster long gone, and `auto` and a
    bare `ray.init()` join what it names. Left alone when something else wrote it meanwhile
    (it names another port)."""
    path = ray_address_file()
    before = _read(path)
    address = None
    try:
        with ray_nodes_here(nodes) as found:
            address = found[0]
            yield found
    finally:
        if address is not None:
            put_back_cluster_file(path, before, address)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None
