"""Which Ray cluster a command joins, and how long a join may take: `--ray` alone starts its own
(never the one RAY_ADDRESS or a stale /tmp/ray/ray_current_cluster names), `--ray auto` or
`--ray HOST:PORT` join one within a bound. The fast tests stand a recording `ray` module in for
Ray; the e2e ones start a real local cluster, and join a port that answers but is no Ray head."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.scale import cluster
from auditor.scale.cluster import LOCAL, ray_address_file, ray_cluster
from tests.conftest import REPO
from tests.e2e.conftest import ray_nodes_leaving_no_file

TRIES = "RAY_gcs_server_port_wait_time_s"  # how many times ray.init tries a GCS (Ray: 20)
ANSWER = {"id": "x", "question": "q", "contexts": ["c"], "answer": "a"}


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def listening() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word (no Ray head)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        server.close()


@pytest.fixture
def stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ray_current_cluster naming a cluster long gone (a dead loopback port), where Ray and
    `auto` look for it (RAY_TMPDIR), and RAY_ADDRESS naming another dead one."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "raytmp"))
    gone = f"127.0.0.1:{_dead_port()}"
    ray_address_file().parent.mkdir(parents=True)
    ray_address_file().write_text(gone)
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{_dead_port()}")
    return gone


class _Ray(ModuleType):
    """Records `ray.init`; `block` makes it wait, as Ray does on a GCS that never answers."""

    def __init__(self, block: threading.Event | None = None) -> None:
        super().__init__("ray")
        self.__spec__ = ModuleSpec("ray", None)  # importlib.util.find_spec("ray") finds it
        self.inits: list[dict[str, Any]] = []
        self.tries: list[str | None] = []  # ray.init's tries of the GCS, as it reads them
        self.block, self.up, self.shutdowns = block, False, 0

    def is_initialized(self) -> bool:
        return self.up

    def init(self, **kwargs: Any) -> None:
        self.inits.append(kwargs)
        self.tries.append(os.environ.get(TRIES))
        if self.block is not None:
            self.block.wait(timeout=60)
            raise ConnectionError("gave up")
        self.up = True

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.up = False


def test_ray_alone_starts_its_own_cluster_whatever_the_environment_names(
    stale: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never address=None (it joins what RAY_ADDRESS or the stale file names and waits there
    for minutes): "local", which Ray starts a cluster for and no variable redirects."""
    fake = _Ray()
    monkeypatch.setitem(sys.modules, "ray", fake)
    with ray_cluster(LOCAL) as ray:
        assert ray is fake
    assert fake.inits == [
        {
            "address": "local",
            "include_dashboard": False,
            "log_to_driver": True,
            "configure_logging": False,
        }
    ]
    assert fake.shutdowns == 1


def test_a_join_nobody_answers_ends_within_the_bound_in_one_line(
    tmp_path: Path, listening: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something listens at the address but no Ray head answers: ray.init would wait minutes;
    `check` ends at the bound with one line naming the address and exit 2."""
    monkeypatch.delenv(TRIES, raising=False)
    release = threading.Event()
    fake = _Ray(block=release)
    # a join outside the main thread sets what ray.init sets in it: SIGTERM ends the command
    monkeypatch.setattr(signal, "signal", lambda signum, handler: None)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(cluster, "JOIN_TIMEOUT_S", 0.5)
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: _NoEmbedder())
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n")
    address = f"127.0.0.1:{listening}"
    started = time.monotonic()
    try:
        result = CliRunner().invoke(
            cli, ["check", "--answers", str(answers), "--out", str(tmp_path / "o"), "-q",
                  "--ray", address],
        )  # fmt: skip
    finally:
        release.set()  # the join left behind ends
    assert time.monotonic() - started < 10
    assert result.exit_code == 2, result.output
    assert fake.inits and fake.inits[0]["address"] == address
    assert fake.tries == ["1"], "one try of the GCS, not Ray's 20"
    assert TRIES not in os.environ, "put back as it was"
    said = result.stderr.strip().splitlines()
    assert said[-1].startswith(f"Error: --ray {address}: no Ray cluster answered within 0.5 s")
    assert "--ray alone for a local cluster" in said[-1]
    assert not (tmp_path / "o" / "checks.jsonl").exists()


class _NoEmbedder:
    def embed(self, texts: list[str]) -> Any:
        raise AssertionError("nothing is embedded before the cluster is joined")


def test_auto_names_the_stale_address_it_stands_for_at_once(
    stale: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--ray auto` joins what RAY_ADDRESS, else the file, names: a cluster long gone there is
    one line before anything is written, naming what named it."""
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n")
    via_env = os.environ["RAY_ADDRESS"]
    for named_by, address in (("RAY_ADDRESS", via_env), (str(ray_address_file()), stale)):
        started = time.monotonic()
        result = CliRunner().invoke(
            cli, ["check", "--answers", str(answers), "--out", str(tmp_path / "o"), "--ray",
                  "auto"],
        )  # fmt: skip
        assert time.monotonic() - started < 10
        assert result.exit_code == 2, result.output
        assert f"--ray auto: {named_by} names {address}, where no Ray head answers" in result.stderr
        assert not (tmp_path / "o").exists()
        monkeypatch.delenv("RAY_ADDRESS", raising=False)  # then the file is what `auto` stands for


def test_the_test_clusters_leave_no_cluster_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ray_nodes_leaving_no_file` puts ray_current_cluster back as it was: gone when there was
    none, the earlier one otherwise; a file naming another cluster is left alone."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    path = ray_address_file()

    def nodes(write: str) -> Any:
        def fake(count: int) -> Iterator[tuple[str, dict[str, str]]]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(write)  # as `ray start --head` does, the host's address
            yield "127.0.0.1:7000", {}

        return contextlib.contextmanager(fake)

    monkeypatch.setattr("tests.e2e.conftest.ray_nodes_here", nodes("192.0.2.9:7000"))
    with ray_nodes_leaving_no_file(1):
        assert path.exists()
    assert not path.exists()
    path.write_text("10.0.0.1:6379")
    with ray_nodes_leaving_no_file(1):
        pass
    assert path.read_text() == "10.0.0.1:6379"
    monkeypatch.setattr("tests.e2e.conftest.ray_nodes_here", nodes("10.0.0.2:6380"))
    with ray_nodes_leaving_no_file(1):
        pass
    assert path.read_text() == "10.0.0.2:6380", "another cluster's file is not ours to remove"


# a real local cluster (10-30 s to start on 2 cores) running Ray Data actors, as a check does
LOCAL_SCRIPT = """
import json, sys, time

started = time.monotonic()
from auditor.scale.cluster import LOCAL, ActorPlan, on_actors, ray_cluster


class Double:  # a stand-in for the judge actor: one per engine, batches through Ray Data
    def __call__(self, batch):
        return {"id": batch["id"], "twice": batch["n"] * 2}


with ray_cluster(LOCAL) as ray:
    joined = time.monotonic() - started
    found = {"gcs": ray.get_runtime_context().gcs_address, "node": ray.util.get_node_ip_address()}
    rows = [{"id": str(i), "n": i} for i in range(4)]
    out = {}
    for batch in on_actors(ray, ActorPlan(1, 1.0, 0.0, 1), Double, {}, rows, 2):
        out.update(zip(batch["id"].tolist(), batch["twice"].tolist()))
print(json.dumps(found | {"out": out, "joined_s": joined}))
"""


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_ray_alone_ignores_a_stale_cluster_file_and_works_on_loopback() -> None:
    """A stale ray_current_cluster and RAY_ADDRESS both name dead loopback ports (the 9-minute
    hang: Ray retried the file's address): `--ray`'s cluster starts anyway, in the time a
    start takes, runs its actors, listens on loopback alone, and writes no such file."""
    # Ray's socket paths live under RAY_TMPDIR: a short one keeps them under the 107-byte limit
    raytmp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    try:
        gone = f"127.0.0.1:{_dead_port()}"
        (raytmp / "ray").mkdir()
        (raytmp / "ray" / "ray_current_cluster").write_text(gone)
        env = os.environ | {
            "RAY_TMPDIR": str(raytmp),
            "RAY_ADDRESS": f"127.0.0.1:{_dead_port()}",
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", LOCAL_SCRIPT], cwd=REPO, env=env, capture_output=True,
            text=True, timeout=540, check=False,
        )  # fmt: skip
        took = time.monotonic() - started
        assert done.returncode == 0, done.stderr[-3000:]
        found = json.loads(done.stdout.strip().splitlines()[-1])
        assert found["out"] == {"0": 0, "1": 2, "2": 4, "3": 6}
        assert found["gcs"].startswith("127.0.0.1:") and found["gcs"] != gone
        assert found["node"] == "127.0.0.1", "the local cluster listens on loopback alone"
        assert "Failed to connect to GCS" not in done.stderr, "it tried the stale address"
        # a start, not Ray's minutes of retries of the stale address
        assert found["joined_s"] < 120, took
        assert (raytmp / "ray" / "ray_current_cluster").read_text() == gone, "left as it was"
    finally:
        shutil.rmtree(raytmp, ignore_errors=True)


JOIN_SCRIPT = """
from auditor.ingest import embed
from auditor.testing import FakeEmbedder

embed.load_embedder = lambda config: FakeEmbedder()
from auditor.cli import main

main()
"""


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_join_of_a_port_that_is_no_ray_head_ends_in_one_line(
    tmp_path: Path, listening: int
) -> None:
    """Real Ray against a loopback port that accepts and never answers: Ray's own 20 tries of
    ~40 s each would take some 14 minutes; `check --ray HOST:PORT` gives it one and ends with
    one line naming the address, exit 2, and nothing of Ray's after it on the terminal."""
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n")
    address = f"127.0.0.1:{listening}"
    # Ray keeps 127.0.0.1 as given (it would try the host's own address for it otherwise)
    env = os.environ | {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    env.pop(TRIES, None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", JOIN_SCRIPT, "check", "--answers", str(answers), "--out",
         str(tmp_path / "o"), "-q", "--ray", address],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert said[-1].startswith(f"Error: --ray {address}: could not join the Ray cluster ("), said
    assert "something listens there, but no Ray head" in said[-1]
    assert not any("Failed to connect to GCS" in line for line in said), "Ray's retries: the log"
    assert took < cluster.JOIN_TIMEOUT_S + 60, took  # one try and the command's start
