"""The claim check over Ray Data: answers in, checks.jsonl rows out, each committed once.

The answers left to check become a Ray dataset of (id, pickled AnswerItem), one block per
`answers_per_batch`. `map_batches` hands the blocks to a pool of `JudgeActor`s; each actor
starts the embedder, the knowledge base (read-only) and one judge engine once, and calls
`check_batch`, the function the single-process check calls. The rows stream back to the
driver in the order batches finish, and the driver alone appends them to checks.jsonl: a row
is committed when its line is fsynced there, and a re-run skips every committed id. Ray's
own checkpointing (`CheckpointConfig`) records rows a Ray Data sink wrote (parquet part
files), not our checks.jsonl; the commit log the single-process check already trusts is the
equivalent, so a batch finished by an actor but not yet written when the driver dies is
checked again, never written twice.

Faults: an actor that dies (engine crash, node lost, kill -9) is restarted by Ray and its
batch retried up to `ACTOR_RETRIES` times. An answer whose check raises is re-checked alone;
if it raises again, or its batch outlived its retries, it gets a `judge_failed` record naming
why and the run goes on.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from auditor.config import EmbedderConfig, JudgeConfig
from auditor.errors import AuditorError
from auditor.ingest import embed as embedders
from auditor.ingest.manifest import read_manifest
from auditor.scale.cluster import (
    ACTOR_RETRIES,
    LOCAL,
    ActorPlan,
    on_actors,
    plan_actors,
    ray_cluster,
)
from auditor.verify import judges
from auditor.verify.answers import AnswerItem
from auditor.verify.check import BatchRunner, OpenRunner
from auditor.verify.kb import KnowledgeBase, kb_identity
from auditor.verify.pipeline import check_batch, failed_row

__all__ = ["JudgeActor", "RayCheck", "ray_runner"]


class JudgeActor:
    """One judge engine on a cluster node: checks the batches Ray Data hands it."""

    def __init__(self, config_json: str, kb_index: str | None) -> None:
        import ray

        self.config = JudgeConfig.model_validate_json(config_json)
        self.embed = embedders.load_embedder(EmbedderConfig()).embed
        self.kb = KnowledgeBase(Path(kb_index)) if kb_index else None
        self.judge = judges.make_judge(self.config)
        identity = self.judge.identity()
        self.identity = json.dumps(identity, sort_keys=True)
        self.node = ray.get_runtime_context().get_node_id()

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        items: list[AnswerItem] = [pickle.loads(blob) for blob in batch["item"]]
        rows = self._check(items)
        return {
            "id": [row["id"] for row in rows],
            "row": [json.dumps(row, ensure_ascii=False) for row in rows],
            "identity": [self.identity] * len(rows),
            "node": [self.node] * len(rows),
        }

    def _check(self, items: list[AnswerItem]) -> list[dict[str, Any]]:
        try:
            return check_batch(items, self.config, self.judge, self.embed, None, self.kb)
        except Exception:  # a bad answer must not fail its batch-mates: check each alone
            rows = []
            for item in items:
                try:
                    rows += check_batch([item], self.config, self.judge, self.embed, None, self.kb)
                except Exception as exc:
                    rows.append(failed_row(item, f"the check raised {type(exc).__name__}: {exc}"))
            return rows

    def __del__(self) -> None:
        judge = getattr(self, "judge", None)
        if judge is not None:
            judge.close()


class RayCheck:
    """The check's batches on a Ray cluster (`check_items` writes what `batches` yields)."""

    def __init__(
        self, ray: Any, address: str, plan: ActorPlan, config: JudgeConfig, kb_index: Path | None
    ) -> None:
        self.ray = ray
        self.address = address
        self.plan = plan
        self.config = config
        self.kb_index = kb_index
        self.identities: dict[str, str] = {}  # node id -> judge identity (JSON)

    def batches(self, todo: list[AnswerItem]) -> Iterator[list[dict[str, Any]]]:
        """Rows of finished batches as they arrive; at the end, a `judge_failed` row for every
        answer whose batch outlived its retries."""
        if not todo:
            return
        size = self.config.answers_per_batch
        constructor = {
            "config_json": self.config.model_dump_json(),
            "kb_index": None if self.kb_index is None else str(self.kb_index.resolve()),
        }
        answers = [{"id": item.id, "item": pickle.dumps(item)} for item in todo]
        back: set[str] = set()
        for out in on_actors(self.ray, self.plan, JudgeActor, constructor, answers, size):
            for node, identity in zip(out["node"], out["identity"], strict=True):
                self._same_judge(str(node), str(identity))
            rows = [json.loads(row) for row in out["row"]]
            back.update(row["id"] for row in rows)
            yield rows
        lost = [item for item in todo if item.id not in back]
        if lost:
            why = f"its batch failed on {ACTOR_RETRIES + 1} judge actors in a row"
            yield [failed_row(item, why) for item in lost]

    def identity(self) -> dict[str, Any] | None:
        """The judge's identity as the actors reported it (None before the first batch)."""
        if not self.identities:
            return None
        found: dict[str, Any] = json.loads(next(iter(self.identities.values())))
        return found

    def record(self) -> dict[str, Any] | None:
        return self.plan.record(self.address) | {"nodes_used": len(self.identities)}

    def _same_judge(self, node: str, identity: str) -> None:
        """Every actor must run the same weights: a node with other files fails the check."""
        first = next(iter(self.identities.values()), identity)
        if identity != first:
            raise AuditorError(
                f"Ray node {node} runs another judge than the first node ({identity} vs "
                f"{first}): install the same model files on every node"
            )
        self.identities.setdefault(node, identity)


def ray_runner(
    ray: str,
    ray_actors: int | None,
    config: JudgeConfig,
    kb_index: Path | None,
    on_stage: Callable[[str], None] = lambda message: None,
) -> OpenRunner:
    """`check_run`'s runner on a Ray cluster (an address, or `LOCAL`): judge actors, one
    engine each, joined when some answer is left to check and left when the check ends."""

    @contextmanager
    def open_runner(
        items: list[AnswerItem],
    ) -> Iterator[tuple[BatchRunner, dict[str, Any] | None]]:
        uses_kb = kb_index is not None and any(i.sources != "returned" for i in items)
        kb_id = (
            kb_identity(kb_index, read_manifest(kb_index).totals.get("chunks"))
            if kb_index is not None and uses_kb
            else None
        )
        on_stage(f"joining the Ray cluster ({'local' if ray == LOCAL else ray})")
        with ray_cluster(ray) as ray_api:
            plan = plan_actors(ray_api, config, ray_actors)
            on_stage(f"checking with {plan.describe()}")
            yield RayCheck(ray_api, ray, plan, config, kb_index if uses_kb else None), kb_id

    return open_runner
