"""The Ray path's own logic with the deterministic FakeJudge: what an actor returns, what the
driver commits, faults, the actor plan. The real cluster and engines: tests/e2e/test_ray_real.py."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import JudgeConfig
from auditor.errors import AuditorError, BadInput
from auditor.scale.checking import JudgeActor, RayCheck
from auditor.scale.cluster import ActorPlan, plan_actors
from auditor.store import read_jsonl
from auditor.testing import FakeEmbedder, FakeJudge
from auditor.verify.check import AnswerItem, check_into, check_items
from auditor.verify.pipeline import check_batch
from tests.conftest import REPO

WARRANTY = "The T9 thermostat warranty lasts 2 years from the delivery date."
RETURNS = "Unopened thermostats can be returned within 30 days of delivery."


def _item(ident: str, answer: str) -> AnswerItem:
    return AnswerItem(
        id=ident,
        question="What are the warranty and return terms?",
        answer=answer,
        reference=None,
        chunks=[("doc#0", WARRANTY), ("doc#1", RETURNS)],
    )


ITEMS = [
    _item("a", WARRANTY),
    _item("b", "Unopened thermostats can be returned within 45 days of delivery."),
    _item("c", WARRANTY + " Shipping is free on Mondays."),
]


def _actor(judge: FakeJudge, config: JudgeConfig) -> JudgeActor:
    """A JudgeActor as Ray would build it, with the fake judge in place of an engine."""
    actor = object.__new__(JudgeActor)
    actor.config, actor.judge, actor.embed, actor.kb = config, judge, FakeEmbedder().embed, None
    actor.identity, actor.node = json.dumps(judge.identity(), sort_keys=True), "node-1"
    return actor


def _numpy_batch(items: list[AnswerItem]) -> dict[str, np.ndarray]:
    """What Ray Data hands the actor: the dataset's columns as numpy arrays."""
    return {
        "id": np.array([i.id for i in items], dtype=object),
        "item": np.array([pickle.dumps(i) for i in items], dtype=object),
    }


def test_an_actor_returns_the_rows_the_local_check_writes() -> None:
    """Same function, same rows: the actor's JSON is byte for byte the single-process row."""
    config = JudgeConfig(metrics=["faithfulness"])
    out = _actor(FakeJudge(), config)(_numpy_batch(ITEMS))
    local = check_batch(ITEMS, config, FakeJudge(), FakeEmbedder().embed)
    assert [_untimed(row) for row in out["row"]] == [
        _untimed(json.dumps(row, ensure_ascii=False)) for row in local
    ]
    assert out["id"] == ["a", "b", "c"] and set(out["node"]) == {"node-1"}
    assert [json.loads(r)["claim_counts"]["contradicted"] for r in out["row"]] == [0, 1, 0]


def _untimed(line: str) -> str:
    """A row's JSON with the judge's wall time (the one field two runs differ in) zeroed."""
    row = json.loads(line)
    row["judge"]["seconds"] = 0
    return json.dumps(row, ensure_ascii=False)


class _Crashes(FakeJudge):
    """Raises whenever a batch holds the answer `bad`."""

    def complete(self, calls: Any, on_reply: Any = None) -> list[Any]:
        if any(call.key.item == "bad" for call in calls):
            raise RuntimeError("engine step failed")
        return super().complete(calls, on_reply)


def test_an_answer_whose_check_raises_is_recorded_and_its_batch_mates_are_checked() -> None:
    items = [ITEMS[0], _item("bad", RETURNS), ITEMS[1]]
    out = _actor(_Crashes(), JudgeConfig(metrics=["faithfulness"]))(_numpy_batch(items))
    rows = {row["id"]: row for row in map(json.loads, out["row"])}
    assert list(rows) == ["a", "bad", "b"]
    assert rows["bad"]["outcome"] == "judge_failed" and rows["bad"]["claims"] == []
    assert "RuntimeError: engine step failed" in rows["bad"]["judge_failures"][0]
    assert rows["a"]["outcome"] == rows["b"]["outcome"] == "checked"
    assert rows["b"]["claim_counts"]["contradicted"] == 1


class _Replaying:
    """A runner whose second batch repeats the first's rows, as a retried batch could, and
    whose identity is known only once a batch came back (as from actors)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows, self.seen = rows, False

    def identity(self) -> dict[str, Any] | None:
        return {"name": "fake-judge", "backend": "fake"} if self.seen else None

    def record(self) -> dict[str, Any] | None:
        return {"backend": "ray", "actors": 2}

    def batches(self, todo: list[AnswerItem]) -> Iterator[list[dict[str, Any]]]:
        self.seen = True
        yield self.rows[:2]
        yield self.rows[:2] + self.rows[2:]


def test_the_driver_commits_each_answer_once_and_records_where_it_ran(tmp_path: Path) -> None:
    config = JudgeConfig(metrics=["faithfulness"])
    rows = check_batch(ITEMS, config, FakeJudge(), FakeEmbedder().embed)
    summary = check_into(ITEMS, tmp_path, config, _Replaying(rows))
    ids = [row["id"] for row in read_jsonl(tmp_path / "checks.jsonl")]
    assert ids == ["a", "b", "c"] and summary.answers == 3
    manifest = json.loads((tmp_path / "check.json").read_text())
    assert manifest["judge"]["identity"]["name"] == "fake-judge"
    assert manifest["scale"] == {"backend": "ray", "actors": 2}
    # a single-process resume of the same dir keeps what the cluster committed
    check_items(ITEMS, tmp_path, config, FakeJudge(), FakeEmbedder().embed)
    assert [row["id"] for row in read_jsonl(tmp_path / "checks.jsonl")] == ids


class _Dataset:
    """Ray Data's surface as RayCheck uses it; the map returns the batches given."""

    def __init__(self, outputs: list[dict[str, list[str]]]) -> None:
        self.outputs = outputs
        self.mapped: dict[str, Any] = {}

    def map_batches(self, fn: Any, **kwargs: Any) -> _Dataset:
        self.mapped = kwargs | {"fn": fn}
        return self

    def iter_batches(self, **kwargs: Any) -> Iterator[dict[str, list[str]]]:
        yield from self.outputs


def _ray_check(outputs: list[dict[str, list[str]]], config: JudgeConfig) -> RayCheck:
    dataset = _Dataset(outputs)
    ray = SimpleNamespace(data=SimpleNamespace(from_items=lambda rows, **kw: dataset))
    check = RayCheck(ray, "auto", ActorPlan(2, 1.0, 0.0, 2), config, None)
    check.dataset = dataset  # type: ignore[attr-defined]
    return check


def test_answers_of_a_batch_past_its_retries_get_judge_failed_records(tmp_path: Path) -> None:
    config = JudgeConfig(metrics=["faithfulness"], answers_per_batch=2)
    first = _actor(FakeJudge(), config)(_numpy_batch(ITEMS[:2]))  # the batch of "c" never returns
    check = _ray_check([first], config)
    summary = check_into(ITEMS, tmp_path, config, check)
    rows = {row["id"]: row for row in read_jsonl(tmp_path / "checks.jsonl")}
    assert sorted(rows) == ["a", "b", "c"] and summary.outcomes["judge_failed"] == 1
    assert "failed on 4 judge actors" in rows["c"]["judge_failures"][0]
    mapped = check.dataset.mapped  # type: ignore[attr-defined]
    assert mapped["fn"] is JudgeActor and mapped["batch_size"] == 2
    assert mapped["concurrency"] == 2 and mapped["max_task_retries"] == 3
    manifest = json.loads((tmp_path / "check.json").read_text())
    assert manifest["scale"]["actors"] == 2 and manifest["scale"]["nodes_used"] == 1


def test_a_node_running_other_weights_fails_the_check(tmp_path: Path) -> None:
    config = JudgeConfig(metrics=["faithfulness"], answers_per_batch=2)
    one = _actor(FakeJudge(), config)(_numpy_batch(ITEMS[:2]))
    other = _actor(FakeJudge(), config)(_numpy_batch(ITEMS[2:]))
    other["identity"] = [json.dumps({"name": "fake-judge", "gguf_sha256": "other"})]
    other["node"] = ["node-2"]
    with pytest.raises(AuditorError, match="Ray node node-2 runs another judge"):
        check_into(ITEMS, tmp_path, config, _ray_check([one, other], config))
    assert [r["id"] for r in read_jsonl(tmp_path / "checks.jsonl")] == ["a", "b"]


def _cluster(*resources: dict[str, float]) -> Any:
    return SimpleNamespace(
        nodes=lambda: (
            [{"Alive": True, "Resources": r} for r in resources]
            + [{"Alive": False, "Resources": {"CPU": 64.0}}]
        )
    )


def test_the_actor_plan_follows_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    config = JudgeConfig()
    assert plan_actors(_cluster({"CPU": 1.0}, {"CPU": 1.0}), config, None) == ActorPlan(
        2, 1.0, 0.0, 2
    )
    # one engine per CPU node: it reserves the whole (smallest) node
    assert plan_actors(_cluster({"CPU": 2.0}), config, None) == ActorPlan(1, 2.0, 0.0, 1)
    assert plan_actors(_cluster({"CPU": 1.0}, {"CPU": 1.0}), config, 1).actors == 1
    with pytest.raises(BadInput, match="fits 2 judge actor"):
        plan_actors(_cluster({"CPU": 1.0}, {"CPU": 1.0}), config, 3)
    served = JudgeConfig.model_validate(
        {"generator": {"kind": "openai", "model": "m", "endpoints": ["http://127.0.0.1:9/v1"]}}
    )
    with pytest.raises(BadInput, match="served endpoint"):
        plan_actors(_cluster({"CPU": 1.0}), served, None)
    # GPU nodes (CUDA build): tensor_parallel_size GPUs per engine
    monkeypatch.setattr("auditor.scale.cluster.is_cpu_build", lambda: False)
    generator = JudgeConfig().generator.model_dump(mode="json") | {"tensor_parallel_size": 2}
    tp2 = JudgeConfig.model_validate({"generator": generator})
    plan = plan_actors(_cluster({"CPU": 32.0, "GPU": 8.0}, {"CPU": 32.0, "GPU": 4.0}), tp2, None)
    assert plan == ActorPlan(6, 1.0, 2.0, 2)


def test_an_address_nobody_answers_on_is_one_line(tmp_path: Path) -> None:
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps({"id": "x", "question": "q", "contexts": ["c"], "answer": "a"}))
    for address, said in (
        ("127.0.0.1:1", "no Ray head answers there"),
        ("nohost", "not an address"),
    ):
        result = CliRunner().invoke(
            cli,
            ["check", "--answers", str(answers), "--out", str(tmp_path / "o"), "--ray", address],
        )
        assert result.exit_code == 2, result.output
        assert f"--ray {address}: {said}" in result.stderr
        assert not (tmp_path / "o" / "checks.jsonl").exists()


def test_run_and_audit_refuse_a_bad_address_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Good questions, pipeline and index, an address nobody answers on: one line, nothing
    written (the inputs are validated first, so a bad question file is named instead)."""
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("The warranty lasts two years.")
    index = tmp_path / "index"
    assert (
        CliRunner().invoke(cli, ["ingest", str(corpus), "--index", str(index), "-q"]).exit_code == 0
    )
    pipeline = tmp_path / "tiny.toml"
    pipeline.write_text(
        (REPO / "pipelines" / "qwen-0.5b-cpu.toml")
        .read_text()
        .replace('model = "all-MiniLM-L6-v2"', 'model = "fake-words"', 1)
    )
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "Warranty?"}) + "\n")
    common = ["--pipeline", str(pipeline), "--questions", str(questions), "--index", str(index)]
    for command in (
        ["run", *common, "--out", str(tmp_path / "run")],
        ["audit", *common, "--out", str(tmp_path / "audit")],
    ):
        result = CliRunner().invoke(cli, [*command, "--ray", "127.0.0.1:1"])
        assert result.exit_code == 2, result.output
        assert "--ray 127.0.0.1:1: no Ray head answers there" in result.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "audit").exists()
