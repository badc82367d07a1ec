"""A Ray cluster for one command: connect (or start a local one), plan the judge actors, stop.

`--ray` alone starts a local cluster for the command, on loopback, and stops it after: it never
joins another (neither RAY_ADDRESS nor the /tmp/ray/ray_current_cluster a `ray start` left
behind redirects it). `--ray auto` joins the cluster this machine belongs to (`ray start` ran
here: RAY_ADDRESS, else that file); `--ray HOST:PORT` or `ray://HOST:10001` joins that one.
A join is bounded: an address nobody answers on fails in one line at once; where something
answers that is no Ray head, Ray gets one try (~40 s) instead of its 20 (some 14 minutes), and
whatever else holds `ray.init` up ends at JOIN_TIMEOUT_S. Every node must have the auditor
installed in the same environment (the workers import `auditor`) and read the same paths (the
knowledge base, packaged models).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from auditor.config import JudgeConfig, VLLMGeneratorConfig
from auditor.errors import BackendUnavailable, BadInput
from auditor.generate.vllm_offline import is_cpu_build

__all__ = [
    "ACTOR_RETRIES",
    "JOIN_TIMEOUT_S",
    "LOCAL",
    "ActorPlan",
    "auto_address",
    "on_actors",
    "plan_actors",
    "ray_address_file",
    "ray_cluster",
    "refuse_unreachable",
]

LOCAL = "local"  # `--ray` with no address: a cluster started for this command
CONNECT_TIMEOUT_S = 10
# a healthy cluster is joined in seconds; Ray's own retries of a GCS that does not answer
# (20 tries of ~40 s) last some 14 minutes: a join gets one (GCS_TRIES) and at most this
JOIN_TIMEOUT_S: float = 60
NO_HEAD = (
    "something listens there, but no Ray head: give the head's GCS port (6379 by default; "
    "`ray status` on the head says it), or --ray alone for a local cluster"
)
GCS_TRIES = "1"  # ray.init's tries of the GCS (~40 s each), read from:
_GCS_TRIES_VARIABLE = "RAY_gcs_server_port_wait_time_s"
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
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": True,
        "configure_logging": False,
    }
    # Ray prints its workers' stdout on this process's sys.stdout: keep it off the terminal
    with contextlib.redirect_stdout(sys.stderr), _loopback_only(address == LOCAL):
        try:
            if address == LOCAL:
                # "local", never None: None joins what RAY_ADDRESS or a stale
                # /tmp/ray/ray_current_cluster names, and waits minutes on one long gone
                ray.init(address="local", **options)
            else:
                _join(ray, address, options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            why = str(exc.__cause__ or exc).strip().splitlines()[-1]
            raise BadInput(f"{_option(address)}: {_failed(address, why)}") from exc
        try:
            yield ray
        finally:
            ray.shutdown()


def _failed(address: str, why: str) -> str:
    if address == LOCAL:
        return f"could not start a local Ray cluster ({why}); the engine log says more"
    if "InvalidAuthToken" in why or "Authentication" in why:
        hint = (
            "a cluster started by `ray start --head` asks for its token: set RAY_AUTH_MODE=token "
            "here (the token is read from ~/.ray/auth_token or RAY_AUTH_TOKEN)"
        )
    elif "Timed out" in why:  # something accepts connections there, but no GCS answers
        hint = NO_HEAD
    else:
        hint = "start one with `ray start --head`, or give --ray alone for a local cluster"
    return f"could not join the Ray cluster ({why}); {hint}"


def _join(ray: Any, address: str, options: dict[str, Any]) -> None:
    """`ray.init(address)`, one try of the GCS, within JOIN_TIMEOUT_S: it runs in a thread the
    command leaves behind when it does not end in time (the process ends with the command's
    error; the thread may still log a line of Ray's meanwhile)."""
    outcome: list[BaseException] = []

    def join() -> None:
        try:
            ray.init(address=address, **options)
        except BaseException as exc:  # handed to the command's thread
            outcome.append(exc)

    if threading.current_thread() is threading.main_thread():
        # what ray.init does in the main thread (a SIGTERM ends the command through its
        # clean-up); in another thread it sets none and says so (that line is dropped)
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    quiet = _DropRecords("SIGTERM handler is not set")
    worker_log = logging.getLogger("ray._private.worker")
    worker_log.addFilter(quiet)
    # read by ray.init when it connects (Ray's default: 20 tries); a user's own setting is kept
    ours = _GCS_TRIES_VARIABLE not in os.environ
    os.environ.setdefault(_GCS_TRIES_VARIABLE, GCS_TRIES)
    try:
        thread = threading.Thread(target=join, name="ray-join", daemon=True)
        thread.start()
        thread.join(JOIN_TIMEOUT_S)
    finally:
        worker_log.removeFilter(quiet)
        if ours:
            os.environ.pop(_GCS_TRIES_VARIABLE, None)
    if thread.is_alive():
        raise BadInput(
            f"{_option(address)}: no Ray cluster answered within {JOIN_TIMEOUT_S:g} s; {NO_HEAD}"
        )
    if outcome:
        raise outcome[0]


def _exit_on_sigterm(signum: int, frame: object) -> None:
    sys.exit(signum)


class _DropRecords(logging.Filter):
    def __init__(self, starting: str) -> None:
        super().__init__()
        self.starting = starting

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.starting)


@contextlib.contextmanager
def _loopback_only(local: bool) -> Iterator[None]:
    """A local cluster's processes listen on 127.0.0.1 alone. Ray 2.60 gives its head node the
    address other machines reach, even for `_node_ip_address="127.0.0.1"` (it resolves
    loopback to that address), and its GCS and raylet then listen on every interface; with
    Ray's cluster mode off, as Ray does on macOS and Windows, the node is 127.0.0.1 and so is
    every port. Restored when the cluster stops (a join must name an address others reach)."""
    if not local:
        yield
        return
    try:
        from ray._private import ray_constants
    except ImportError:  # another Ray: tests/scale says whether its cluster is on loopback
        yield
        return
    if not hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def refuse_unreachable(address: str) -> None:
    """A HOST:PORT nobody answers on: one line now (Ray itself retries for minutes). For
    `auto`, the address RAY_ADDRESS or the file `ray start` leaves names (a cluster long gone
    leaves that file behind)."""
    if address == LOCAL:
        return
    if address == "auto":
        named = auto_address()
        if named is None:
            return  # Ray fails fast by itself when this machine joined no cluster
        where, target = named
        host, _, port = target.removeprefix("ray://").rpartition(":")
        if host and port.isdigit():
            why = _no_answer(host, int(port))
            if why is not None:
                raise BadInput(
                    f"--ray auto: {where} names {target}, where no Ray head answers ({why}); "
                    "start one with `ray start --head`, give --ray HOST:PORT, or --ray alone "
                    "for a local cluster"
                )
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise BadInput(
            f"--ray {address}: not an address; give HOST:PORT (the head's GCS port, 6379 by "
            "default), ray://HOST:10001, auto, or --ray alone"
        )
    why = _no_answer(host, int(port))
    if why is not None:
        raise BadInput(
            f"--ray {address}: no Ray head answers there ({why}); start one "
            "with `ray start --head`, or give --ray alone for a local cluster"
        )


def _no_answer(host: str, port: int) -> str | None:
    """Why nothing accepts a connection at host:port within CONNECT_TIMEOUT_S, or None."""
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        return str(exc.strerror or exc)
    return None


def auto_address() -> tuple[str, str] | None:
    """What `ray.init(address="auto")` joins first, and what names it: RAY_ADDRESS, else the
    file the last `ray start --head` here wrote. None when neither names one (Ray then looks
    for a GCS process here)."""
    if env := os.environ.get("RAY_ADDRESS"):
        return "RAY_ADDRESS", env
    path = ray_address_file()
    try:
        named = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return (str(path), named) if named else None


def ray_address_file() -> Path:
    """Where `ray start --head` names its cluster for `auto` (ray._common.utils.
    get_ray_address_file): $RAY_TMPDIR, else $TMPDIR on Linux, else /tmp; then
    ray/ray_current_cluster. A cluster that ends without `ray stop` leaves it there."""
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    elif sys.platform.startswith(("linux", "darwin")):
        base = "/tmp"
    else:
        base = tempfile.gettempdir()
    return Path(base) / "ray" / "ray_current_cluster"


def _option(address: str) -> str:
    """`--ray` as given, and for `auto` the address it stands for."""
    if address == "auto" and (named := auto_address()) is not None:
        return f"--ray auto ({named[0]}: {named[1]})"
    return "--ray" if address == LOCAL else f"--ray {address}"


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
