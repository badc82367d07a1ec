"""Engines die with the auditor: after a kill -9 of the auditor, the watcher kills the
processes it started (one ignoring SIGTERM, like vLLM's worker) and frees their /dev/shm, and
only theirs: a file another program made in /dev/shm during the run is kept."""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from auditor.generate import reaper

pytestmark = pytest.mark.skipif(
    not Path("/dev/shm").is_dir(), reason="needs Linux /proc and /dev/shm"
)
REPO = Path(__file__).resolve().parents[2]

OWNER = """
import os, signal, subprocess, sys, time
from auditor.generate.reaper import watch_engines
watch_engines()
engine = subprocess.Popen([sys.executable, "-c", '''
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
held = open(sys.argv[1], "wb"); held.write(b"x" * 4096); held.flush()
print("ready", flush=True)
time.sleep(600)
''', sys.argv[1]], stdout=subprocess.PIPE, text=True)
assert engine.stdout.readline().strip() == "ready"
print(engine.pid, flush=True)
time.sleep(600)
"""

# An auditor, its engine (SIGTERM ignored, a /dev/shm file open) and the engine's worker (a
# /dev/shm file mapped and its descriptor closed, as multiprocessing.shared_memory leaves
# vLLM's segments). Each prints the pids below it once they are ready; the auditor prints its
# watcher's first.
FAMILY = """
import mmap, signal, subprocess, sys, time

def start(role, *args):
    child = subprocess.Popen([sys.executable, __file__, role, *args], stdout=subprocess.PIPE, text=True)
    return [child.pid, *map(int, child.stdout.readline().split())]

role, *paths = sys.argv[1:]
if role == "auditor":
    from auditor.generate import reaper
    reaper.watch_engines()
    below = start("engine", *paths)
    print(reaper._watcher_pid, *below, flush=True)
else:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if role == "engine":
        held = open(paths[0], "wb"); held.write(b"x" * 4096); held.flush()
        print(*start("worker", paths[1]), flush=True)
    else:
        with open(paths[0], "w+b") as file:
            file.truncate(4096)
            segment = mmap.mmap(file.fileno(), 4096)
        print(flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _kill_if_ours(pid: int, script: Path) -> None:
    """SIGKILL a stand-in left alive by a failed test (never a process that reused its PID)."""
    try:
        ours = str(script) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        if ours:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


@pytest.fixture
def shm_names() -> Iterator[list[Path]]:
    """Fresh /dev/shm paths (made as needed), removed after the test whatever happened."""
    made: list[Path] = []
    yield made
    for path in made:
        path.unlink(missing_ok=True)


def _fresh(made: list[Path], tag: str) -> Path:
    path = Path("/dev/shm") / f"auditor-test-{tag}-{uuid.uuid4().hex}"
    made.append(path)
    return path


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_a_killed_auditors_engine_and_shared_memory_are_reaped(
    how: signal.Signals, shm_names: list[Path]
) -> None:
    """kill -9 or SIGTERM of the auditor: its engine dies and the file it held is freed."""
    segment = _fresh(shm_names, "engine")
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(segment)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    try:
        assert owner.stdout is not None
        engine = int(owner.stdout.readline())
        assert _alive(engine) and segment.exists()
        time.sleep(1.5)  # the watcher has seen the engine
        os.kill(owner.pid, how)
        owner.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (_alive(engine) or segment.exists()):
            time.sleep(0.2)
        assert not _alive(engine), "the engine outlived the auditor"
        assert not segment.exists(), "its /dev/shm segment was left behind"
    finally:
        owner.kill()


def test_only_the_engines_shared_memory_is_freed(tmp_path: Path, shm_names: list[Path]) -> None:
    """kill -9 of the auditor: the file its engine had open and the one its engine's worker
    mapped are freed; a file another program made and closed during the run is kept."""
    opened, mapped = _fresh(shm_names, "opened"), _fresh(shm_names, "mapped")
    other = _fresh(shm_names, "other")
    script = tmp_path / "family.py"
    script.write_text(FAMILY)
    auditor = subprocess.Popen(
        [sys.executable, str(script), "auditor", str(opened), str(mapped)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    started: list[int] = []
    try:
        assert auditor.stdout is not None
        started[:] = map(int, auditor.stdout.readline().split())
        watcher, engine, worker = started
        assert all(map(_alive, (watcher, engine, worker))) and opened.exists() and mapped.exists()
        # another program, not below the auditor, makes its own file and closes it
        subprocess.run(
            [sys.executable, "-c", f"open({str(other)!r}, 'wb').write(b'y' * 4096)"], check=True
        )
        time.sleep(1.5)  # the watcher has seen the engine, its worker and the other file
        auditor.kill()
        auditor.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _alive(watcher):
            time.sleep(0.2)
        assert not _alive(watcher), "the watcher did not finish"
        assert not _alive(engine) and not _alive(worker), "an engine process outlived the auditor"
        assert not opened.exists(), "the file the engine had open was left behind"
        assert not mapped.exists(), "the file the engine's worker mapped was left behind"
        assert other.read_bytes() == b"y" * 4096, "another program's file was freed"
    finally:
        auditor.kill()
        for pid in started[1:]:
            _kill_if_ours(pid, script)


def _own_start() -> str:
    started = reaper._start_time(os.getpid())
    assert started is not None
    return started


def test_held_shm_sees_open_and_mapped_files_by_inode(shm_names: list[Path]) -> None:
    """A descriptor and a map count, each with its file's inode; an unlinked file does not."""
    opened, mapped, gone = (_fresh(shm_names, tag) for tag in ("opened", "mapped", "gone"))
    with opened.open("wb"), gone.open("wb"):
        with mapped.open("w+b") as file:
            file.truncate(4096)
            segment = mmap.mmap(file.fileno(), 4096)
        gone.unlink()
        try:
            found = reaper._held_shm(os.getpid())
        finally:
            segment.close()
        assert (opened.name, opened.stat().st_ino) in found
        assert (mapped.name, mapped.stat().st_ino) in found
        assert not [name for name, _ in found if name == gone.name]
    after = {name for name, _ in reaper._held_shm(os.getpid())}
    assert opened.name not in after and mapped.name not in after, "closed, yet still held"


def test_sample_skips_files_from_before_and_reused_pids(shm_names: list[Path]) -> None:
    """Only files new since the watcher started count, and only from the process it saw."""
    old, new = _fresh(shm_names, "old"), _fresh(shm_names, "new")
    with old.open("wb"), new.open("wb"):
        me = {os.getpid(): _own_start()}
        assert reaper._sample(me, before={old.name}) == {(new.name, new.stat().st_ino)}
        assert reaper._sample({os.getpid(): "0"}, before={old.name}) == set()


def test_free_removes_only_the_same_unheld_file(shm_names: list[Path]) -> None:
    """A seen file is freed; one replaced by another file of that name, or still held by a
    live process, is kept."""
    freed, replaced, held = (_fresh(shm_names, tag) for tag in ("freed", "replaced", "held"))
    for path in (freed, replaced, held):
        path.write_bytes(b"x")
    seen = {(path.name, path.stat().st_ino) for path in (freed, replaced, held)}
    replaced.unlink()
    replaced.write_bytes(b"another program's")  # same name, another file
    with held.open("rb"):
        assert reaper._free(seen) == [freed.name]
    assert not freed.exists()
    assert replaced.read_bytes() == b"another program's"
    assert held.exists()


# An auditor that starts the watcher, binds a socket in its engines' runtime dir (as vLLM's
# ZMQ ipc:// paths are), prints the dir, and exits or sleeps to be killed.
SOCKETS = """
import os, socket, sys, time
from auditor.generate import reaper
reaper.watch_engines()
path = os.environ["VLLM_RPC_BASE_PATH"]
server = socket.socket(socket.AF_UNIX)
server.bind(os.path.join(path, "0f2e3756-28ef-4731-9a99-9339c44cdfc6"))
print(path, flush=True)
sys.stdin.readline()  # the test has looked at the dir
if sys.argv[1] == "sleep":
    time.sleep(600)
"""


@pytest.mark.parametrize("end", ["exit", "SIGKILL"])
def test_engine_sockets_live_in_a_private_dir_removed_at_exit_or_after_a_kill(end: str) -> None:
    """vLLM's IPC socket files go to a private dir of the process (not /tmp itself), removed
    when it exits, or by the watcher once it is killed."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_RPC_BASE_PATH"}
    owner = subprocess.Popen(
        [sys.executable, "-c", SOCKETS, "exit" if end == "exit" else "sleep"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env | {"PYTHONPATH": str(REPO)},
    )
    try:
        assert owner.stdout is not None
        runtime = Path(owner.stdout.readline().strip())
        assert runtime.parent == Path(tempfile.gettempdir())
        assert runtime.name.startswith(reaper.RUNTIME_PREFIX)
        assert any(p.is_socket() for p in runtime.iterdir()), "no socket in the runtime dir"
        assert owner.stdin is not None
        owner.stdin.write("\n")
        owner.stdin.flush()
        if end == "SIGKILL":
            owner.kill()
        owner.wait(timeout=30)
        deadline = time.monotonic() + 10
        while runtime.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not runtime.exists(), f"{runtime} left behind after {end}"
    finally:
        owner.kill()
