"""An engine inside a Ray actor leaves nothing in /dev/shm however the actor ends: its driver
killed, the actor killed (kill -9 or `ray.kill`, as Ray Data ends its actors on an error or a
Ctrl-C), or its handle dropped. A Ray worker that ends SIGKILLs its direct children, so the
engine's own clean-up never runs; the watcher `watch_engines()` starts is nobody's child and
frees the segments. On a real one-node Ray cluster, with a stand-in engine that makes a segment
as vLLM's shm_broadcast does (multiprocessing.shared_memory: mapped, descriptor closed) and a
named semaphore as loky does in vLLM's engine core (mapped under sem_open's temporary name), and
frees neither itself. Real engines: tests/e2e/test_ray_real.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.faults,
    pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs Linux /proc and /dev/shm"),
]

DRIVER = """
import multiprocessing as mp, os, sys, time

import ray

from auditor.generate.reaper import watch_engines


def engine(queue):
    import uuid
    from _multiprocessing import SemLock
    from multiprocessing import shared_memory

    segment = shared_memory.SharedMemory(create=True, size=1 << 20)
    # a named semaphore left linked, as loky makes them (sem.loky-*) in vLLM's engine core
    semaphore = SemLock(1, 1, 1, f"/auditor-test-{uuid.uuid4().hex[:12]}", False)
    queue.put((segment.name, "sem." + semaphore.name.lstrip("/")))
    time.sleep(600)


class Holder:
    # as JudgeActor and GeneratorActor do: the watcher first, then the engine's processes
    def __init__(self):
        watch_engines()
        context = mp.get_context("spawn")  # as vLLM starts its engine core
        queue = context.Queue()
        self.engine = context.Process(target=engine, args=(queue,), daemon=True)
        self.engine.start()
        self.segment, self.semaphore = queue.get(timeout=60)

    def info(self):
        return os.getpid(), self.engine.pid, self.segment, self.semaphore


if __name__ == "__main__":
    import standin  # by reference: the worker and the engine's spawned process import it

    ray.init(address=sys.argv[1], log_to_driver=False)
    actor = ray.remote(num_cpus=1, max_restarts=0)(standin.Holder).remote()
    print(*ray.get(actor.info.remote()), flush=True)
    time.sleep(1.5)  # the watcher has polled while the engine holds its segment
    if sys.argv[2] == "ray.kill":
        ray.kill(actor)
    elif sys.argv[2] == "handle dropped":
        del actor
    print("done", flush=True)
    time.sleep(600)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A one-node cluster whose workers import the stand-in from its folder."""
    from tests.e2e.conftest import ray_nodes_leaving_no_file

    folder = tmp_path_factory.mktemp("standin")
    (folder / "standin.py").write_text(DRIVER)
    path = os.pathsep.join([str(folder), str(REPO), os.environ.get("PYTHONPATH", "")])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", path.rstrip(os.pathsep))
        with ray_nodes_leaving_no_file(1) as (address, env):
            yield address, env | {"STANDIN": str(folder / "standin.py")}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("how", ["driver killed", "actor killed", "ray.kill", "handle dropped"])
def test_an_actors_engine_leaves_no_segment_however_the_actor_ends(
    cluster: tuple[str, dict[str, str]], how: str
) -> None:
    address, env = cluster
    driver = subprocess.Popen(
        [sys.executable, env["STANDIN"], address, how],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    files: list[Path] = []
    try:
        assert driver.stdout is not None
        actor, engine, *names = driver.stdout.readline().split()
        files = [Path("/dev/shm") / name for name in names]
        assert all(path.exists() for path in files) and _alive(int(engine))
        assert driver.stdout.readline().strip() == "done"
        if how == "driver killed":
            driver.kill()
        elif how == "actor killed":
            os.kill(int(actor), signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            any(path.exists() for path in files) or _alive(int(engine))
        ):
            time.sleep(0.2)
        assert not _alive(int(engine)), f"{how}: the engine outlived its actor"
        left = [path.name for path in files if path.exists()]
        assert not left, f"{how}: the engine's files were left in /dev/shm: {left}"
    finally:
        driver.kill()
        for path in files:
            path.unlink(missing_ok=True)  # a failed test leaves nothing either
