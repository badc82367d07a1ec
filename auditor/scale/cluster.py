"""A Ray cluster for one command: connect (or start a local one), plan the judge actors, stop.

`--ray` alone starts a local cluster for the command and stops it after; `--ray auto` joins the
cluster this machine belongs to (`ray start` ran here); `--ray HOST:PORT` or `ray://HOST:10001`
joins that one. Every node must have the auditor installed in the same environment (the
workers import `auditor`) and read the same paths (the knowledge base, packaged models).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from auditor.config import JudgeConfig, VLLMGeneratorConfig
from auditor.errors import BackendUnavailable, BadInput
from auditor.generate.vllm_offline import is_cpu_build

__all__ = [
    "ACTOR_RETRIES",
    "LOCAL",
    "ActorPlan",
    "on_actors",
    "plan_actors",
    "ray_cluster",
    "refuse_unreachable",
]

LOCAL = "local"  # `--ray` with no address: a cluster started for this command
CONNECT_TIMEOUT_S = 10
ACTOR_RETRIES = 3  # a batch whose actor died is retried on a restarted actor this many times


@dataclass(frozen=True)
class ActorPlan:
    """How many judge actors, each holding one engine, and what each reserves."""

    actors: int
    num_cpus: float
    num_gpus: float
    nodes: int

    def record(self, address: str) -> dict[str, Any]:
        """What check.json records of where the checks ran."""
        return {"backend": "ray", "address": address} | asdict(self)

    def describe(self) -> str:
        each = f"{self.num_gpus:g} GPU" if self.num_gpus else f"{self.num_cpus:g} CPU"
        return f"{self.actors} engine actor(s) ({each} each) on a {self.nodes}-node Ray cluster"


@contextlib.contextmanager
def ray_cluster(address: str) -> Iterator[Any]:
    """Ray, connected for the duration; worker output goes where this process's stderr goes
    (the run's engine log while `engine_output_to` holds it)."""
    try:
        import ray
    except ImportError as exc:
        raise BackendUnavailable("ray", "scale") from exc
    if ray.is_initialized():  # `audit --ray`: generation and checking share one connection
        yield ray
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network at audit time
    refuse_unreachable(address)
    # Ray prints its workers' stdout on this process's sys.stdout: keep it off the terminal
    with contextlib.redirect_stdout(sys.stderr):
        try:
            ray.init(
                address=None if address == LOCAL else address,
                include_dashboard=False,
                log_to_driver=True,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            why = str(exc.__cause__ or exc).strip().splitlines()[-1]
            hint = (
                "a cluster started by `ray start --head` asks for its token: set "
                "RAY_AUTH_MODE=token here (the token is read from ~/.ray/auth_token or "
                "RAY_AUTH_TOKEN)"
                if "InvalidAuthToken" in why or "Authentication" in why
                else "start one with `ray start --head`, or give --ray alone for a local cluster"
            )
            raise BadInput(
                f"--ray {address}: could not join the Ray cluster ({why}); {hint}"
            ) from exc
        try:
            yield ray
        finally:
            ray.shutdown()


def refuse_unreachable(address: str) -> None:
    """A HOST:PORT nobody answers on: one line now (Ray itself retries for minutes)."""
    if address in (LOCAL, "auto"):
        return  # `auto` fails fast by itself when this machine joined no cluster
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise BadInput(
            f"--ray {address}: not an address; give HOST:PORT (the head's GCS port, 6379 by "
            "default), ray://HOST:10001, auto, or --ray alone"
        )
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise BadInput(
            f"--ray {address}: no Ray head answers there ({exc.strerror or exc}); start one "
            "with `ray start --head`, or give --ray alone for a local cluster"
        ) from exc


def plan_actors(
    ray: Any, config: JudgeConfig | VLLMGeneratorConfig, actors: int | None
) -> ActorPlan:
    """One engine per actor: `tensor_parallel_size` GPUs each on GPU nodes; on CPU nodes one
    actor per node (a vLLM CPU engine uses its node's cores).
    `actors` overrides the count; more actors than the cluster can place is refused here."""
    generator = config.generator if isinstance(config, JudgeConfig) else config
    if not isinstance(generator, VLLMGeneratorConfig):
        raise BadInput(
            f"--ray: the judge {getattr(config, 'name', generator.kind)} is a served endpoint ({generator.kind}); the "
            "cluster runs in-process vLLM judges only (a served judge scales on its server)"
        )
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    gpus = [float(n["Resources"].get("GPU", 0)) for n in nodes]
    cpus = [float(n["Resources"].get("CPU", 0)) for n in nodes]
    if not is_cpu_build() and any(gpus):
        each_gpus = float(generator.tensor_parallel_size)
        fits = sum(int(g // each_gpus) for g in gpus)
        plan = ActorPlan(actors or fits, 1.0, each_gpus, len(nodes))
    else:
        # a CPU actor reserves a whole node (the smallest): Ray sets its OMP_NUM_THREADS to
        # what it reserved, and an engine on 1 thread of a 2-core node runs at half speed
        each_cpus = min((c for c in cpus if c >= 1), default=1.0)
        fits = sum(int(c // each_cpus) for c in cpus)
        plan = ActorPlan(actors or fits, each_cpus, 0.0, len(nodes))
    if plan.actors > fits or fits == 0:
        need = f"{plan.num_gpus:g} GPU" if plan.num_gpus else f"{plan.num_cpus:g} CPU"
        raise BadInput(
            f"--ray-actors {plan.actors}: the cluster ({len(nodes)} nodes) fits {fits} judge "
            f"actor(s) of {need} each; add nodes or ask for fewer"
        )
    return plan


def on_actors(
    ray: Any,
    plan: ActorPlan,
    actor: type,
    constructor: dict[str, Any],
    rows: list[dict[str, Any]],
    batch_size: int,
) -> Iterator[dict[str, Any]]:
    """`rows` in blocks of `batch_size` through a pool of `plan.actors` `actor`s (one engine
    each), their outputs as numpy batches in the order they finish. A dead actor is restarted
    and its batch retried ACTOR_RETRIES times; a batch past that is dropped (the caller records
    what did not come back), so the run goes on."""
    from ray.data import DataContext

    context = DataContext.get_current()
    context.enable_progress_bars = False  # the command prints its own progress
    context.max_errored_blocks = -1
    dataset = ray.data.from_items(
        rows, override_num_blocks=max(1, math.ceil(len(rows) / batch_size))
    ).map_batches(
        actor,
        batch_size=batch_size,
        batch_format="numpy",
        fn_constructor_kwargs=constructor,
        concurrency=plan.actors,
        num_cpus=plan.num_cpus,
        num_gpus=plan.num_gpus,
        max_restarts=-1,
        max_task_retries=ACTOR_RETRIES,
        scheduling_strategy="SPREAD",
    )
    yield from dataset.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=0)
