"""Offline generation over Ray with FakeGenerator engines: every request once, timings per
request kept, the load regime says how many engines, the report warns when regimes differ."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from auditor.audit import finish_audit
from auditor.config import JudgeConfig, PipelineConfig, VLLMGeneratorConfig
from auditor.generate.base import GenRequest, GenResult
from auditor.run import run_pipeline
from auditor.scale.cluster import ActorPlan
from auditor.scale.generation import GeneratorActor, RayGenerator, cluster_generators
from auditor.store import read_records
from auditor.testing import FakeEmbedder, FakeGenerator, FakeJudge
from auditor.verify.check import check_items, items_from_run
from tests.test_run import PIPELINE, setup  # noqa: F401  (the fixture)

IDENTITY = json.dumps({"backend": "fake", "name": "fake", "weights_sha256": None}, sort_keys=True)


def _engine(fake: FakeGenerator) -> GeneratorActor:
    """A GeneratorActor as Ray would build it, with a fake engine."""
    actor = object.__new__(GeneratorActor)
    actor.generator, actor.identity = fake, IDENTITY
    return actor


def _blocks(requests: list[GenRequest], size: int) -> list[dict[str, np.ndarray]]:
    return [
        {
            "id": np.array([r.request_id for r in requests[i : i + size]], dtype=object),
            "request": np.array([pickle.dumps(r) for r in requests[i : i + size]], dtype=object),
        }
        for i in range(0, len(requests), size)
    ]


class _Cluster:
    """Ray Data's surface as RayGenerator uses it: blocks mapped by fake engines, in order;
    `drop` blocks never come back (past their retries), `repeat` blocks come back twice."""

    def __init__(
        self,
        engine: GeneratorActor,
        drop: frozenset[int] = frozenset(),
        repeat: frozenset[int] = frozenset(),
    ) -> None:
        self.engine, self.drop, self.repeat = engine, drop, repeat
        self.mapped: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []

    @property
    def data(self) -> Any:
        def from_items(rows: list[dict[str, Any]], **kwargs: Any) -> _Cluster:
            self.rows = rows
            return self

        return SimpleNamespace(from_items=from_items)

    def map_batches(self, fn: Any, **kwargs: Any) -> _Cluster:
        self.mapped = kwargs | {"fn": fn}
        return self

    def iter_batches(self, **kwargs: Any) -> Any:
        requests = [pickle.loads(row["request"]) for row in self.rows]
        for number, block in enumerate(_blocks(requests, self.mapped["batch_size"])):
            if number in self.drop:
                continue
            out = self.engine(block)
            yield out
            if number in self.repeat:
                yield out


def _generator(cluster: _Cluster, actors: int) -> RayGenerator:
    generator = object.__new__(RayGenerator)
    generator.ray, generator.plan = cluster, ActorPlan(actors, 1.0, 0.0, actors)
    generator.cfg = VLLMGeneratorConfig(kind="vllm", model="smollm2-135m-instruct")
    generator._identity = json.loads(IDENTITY)
    return generator


def test_every_request_once_with_its_own_timings() -> None:
    requests = [GenRequest(f"q{n}", ({"role": "user", "content": f"q{n}"},)) for n in range(5)]
    cluster = _Cluster(_engine(FakeGenerator()), repeat=frozenset({0}))  # a batch delivered twice
    results: list[GenResult] = []
    stats = _generator(cluster, actors=2).generate(requests, results.append)
    assert sorted(r.request_id for r in results) == [f"q{n}" for n in range(5)]
    assert cluster.mapped["fn"] is GeneratorActor and cluster.mapped["concurrency"] == 2
    assert cluster.mapped["batch_size"] == 3  # one batch per engine
    assert not [r for r in results if r.error]
    assert stats.regime["engines"] == 2 and stats.regime["scale"] == "ray"
    timed = [r for r in results if not r.error]
    assert timed and all(r.ttft_s is not None and r.e2e_s is not None for r in timed)


def test_a_batch_past_its_retries_is_an_error_on_its_requests() -> None:
    requests = [GenRequest(f"q{n}", ({"role": "user", "content": f"q{n}"},)) for n in range(4)]
    results: list[GenResult] = []
    _generator(_Cluster(_engine(FakeGenerator()), drop=frozenset({1})), actors=2).generate(
        requests, results.append
    )
    assert sorted(r.request_id for r in results) == ["q0", "q1", "q2", "q3"]
    errors = {r.request_id: r.error for r in results if r.error}
    assert sorted(errors) == ["q2", "q3"]
    assert "failed on 4 engines in a row" in (errors["q2"] or "")


def test_a_run_on_the_cluster_records_its_regime_and_the_report_says_so(
    setup: tuple[Path, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    index, questions = setup
    config = PipelineConfig.model_validate(PIPELINE)
    cluster = _Cluster(_engine(FakeGenerator().enqueue("Two years [1].", "30 days.", "No.")))
    spread = run_pipeline(
        config,
        questions,
        index,
        tmp_path / "spread",
        generator_factory=lambda *a, **k: _generator(cluster, actors=2),
    )
    assert [r["id"] for r in read_records(tmp_path / "spread")] == ["q1", "q2", "q3"]
    assert spread.regime["engines"] == 2
    single = config.model_copy(update={"name": "single"})
    run_pipeline(
        single,
        questions,
        index,
        tmp_path / "single",
        generator_factory=lambda *a, **k: FakeGenerator().enqueue("a", "b", "c"),
    )
    for run_dir in (tmp_path / "spread", tmp_path / "single"):
        config = JudgeConfig(metrics=["faithfulness"])
        check_items(items_from_run(run_dir), run_dir, config, FakeJudge(), FakeEmbedder().embed)
    finish_audit([tmp_path / "spread", tmp_path / "single"], tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    assert "offline batch over 2 engines (Ray)" in html
    assert "different numbers of engines" in html


def test_without_ray_no_factory_is_given() -> None:
    with cluster_generators(None, None) as factory:
        assert factory is None
