"""Engines die with the auditor: a watcher process that outlives a killed auditor and reaps
what its engines leave behind.

vLLM runs its engine core and workers in child processes. When the auditor exits normally
they are shut down; when it is killed (kill -9, a CI job's timeout, Ctrl-C twice) they are
adopted by PID 1 and live on with gigabytes of memory, the worker ignoring SIGTERM, and leave
shared-memory segments in /dev/shm. No code in a killed process runs, so the cleanup is done
by a small watcher started in its own session before the first engine: it keeps the list of
the auditor's descendants and, once the auditor is gone, SIGKILLs them (checking each one's
start time, so a reused PID is never hit). While they live it also samples which /dev/shm
files the auditor and its descendants hold (open file descriptors and memory maps, each file
by name and inode), and at the end removes only those: a segment another program (a concurrent
vLLM, a multiprocessing job) created during the run is never touched, even once it is closed.
A file that existed before the watcher started, or that a live process still holds, is kept.

The watcher is nobody's child: the process `watch_engines()` starts forks it off and exits, so
init adopts it, in a session of its own. A Ray worker that ends (its actor killed or done, its
driver gone) SIGKILLs its direct children and its process group, the engine's processes among
them, whose own clean-up then never runs unless the actor closed the engine first; the
watcher, in neither, outlives them and frees their segments (vLLM's shm_broadcast ring
buffers `psm_*`, the engine's `sem.loky-*` semaphores). Ray's deprecated raylet subreaper
would kill an adopted watcher too: leave it off
(`RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper`, false by default).

vLLM also makes ~7 ZMQ `ipc://` socket files per engine start directly in /tmp and never
removes them. `watch_engines()` gives this process's engines a private directory for them
(`VLLM_RPC_BASE_PATH`, unless the user set it), removed when this process exits, or by the
watcher once it is gone (a kill).

    python -P .../auditor/generate/reaper.py OWNER_PID [RUNTIME_DIR]   # what `watch_engines()` starts
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["RUNTIME_PREFIX", "kill_engines", "watch_engines"]

SHM = Path("/dev/shm")
POLL_S = 0.5
RUNTIME_PREFIX = "auditor-vllm-"  # a private directory for one process's engine sockets
_started_for: int | None = None
_watcher_pid: int | None = None


def _runtime_dir() -> str:
    """The directory this process's engines make their IPC sockets in: a private one of ours
    (removed at exit), unless the user set VLLM_RPC_BASE_PATH ("" then: nothing to remove)."""
    if os.environ.get("VLLM_RPC_BASE_PATH"):
        return ""
    path = tempfile.mkdtemp(prefix=RUNTIME_PREFIX)
    os.environ["VLLM_RPC_BASE_PATH"] = path
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:  # a forked child (a Ray worker's) inherits the handler
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(remove)
    return path


def _remove_runtime_dir(path: str) -> None:
    """Remove a private runtime dir of ours (its name says so), sockets and all."""
    if path and Path(path).name.startswith(RUNTIME_PREFIX):
        shutil.rmtree(path, ignore_errors=True)


def watch_engines() -> None:
    """Start the watcher for this process, once (before starting an engine), and give its
    engines a private directory for their sockets."""
    global _started_for, _watcher_pid
    if _started_for == os.getpid() or not Path("/proc").is_dir():
        return
    if os.environ.get("VLLM_RPC_BASE_PATH", "").startswith(
        os.path.join(tempfile.gettempdir(), RUNTIME_PREFIX)
    ):
        # inherited from the process that forked or spawned this one: its own, not ours
        del os.environ["VLLM_RPC_BASE_PATH"]
    runtime = _runtime_dir()
    starter = subprocess.Popen(
        # the file alone (-P: not its folder on sys.path): the standard library only, ~0.05 s
        [sys.executable, "-P", __file__, str(os.getpid()), runtime],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a signal to the auditor's process group spares the watcher
        close_fds=True,
        text=True,
    )
    assert starter.stdin is not None and starter.stdout is not None
    # what /dev/shm held before any engine: the watcher never touches those
    starter.stdin.write("\n".join(sorted(_shm_names())))
    starter.stdin.close()
    # the starter forks the watcher off, prints its pid and exits
    watcher = starter.stdout.readline().strip()
    starter.stdout.close()
    starter.wait()
    _started_for = os.getpid()
    _watcher_pid = int(watcher) if watcher.isdigit() else None


def kill_engines() -> int:
    """SIGKILL every process below this one but the watcher (which then frees /dev/shm once
    this process exits); returns how many were signalled. Safe in a signal handler."""
    killed = 0
    for pid, started in _descendants(os.getpid()).items():
        if pid == _watcher_pid or _start_time(pid) != started:
            continue
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat), None if gone."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_line.rsplit(")", 1)[1].split()[19]


def _descendants(*roots: int) -> dict[int, str]:
    """{pid: start time} of every process below any of `roots`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat_line.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: dict[int, str] = {}
    todo = [child for root in roots for child in children.get(root, [])]
    while todo:
        pid = todo.pop()
        started = _start_time(pid)
        if started is not None and pid not in found:
            found[pid] = started
            todo.extend(children.get(pid, []))
    return found


def _shm_name(path: str) -> str | None:
    """The file name of a /dev/shm path as /proc shows it; None for one outside /dev/shm, in a
    subfolder, or no longer linked under that name."""
    if not path.startswith(f"{SHM}/") or path.endswith(" (deleted)"):
        return None
    name = path[len(f"{SHM}/") :]
    return name if name and "/" not in name else None


def _held_shm(pid: int, linked: set[tuple[str, int]] | None = None) -> set[tuple[str, int]]:
    """(name, inode) of each /dev/shm file `pid` has open or mapped now; empty if it is gone.

    vLLM's segments (multiprocessing.shared_memory) are mapped and their descriptors closed,
    so the maps count as much as the descriptors do. A named semaphore (`sem.loky-*`) is
    mapped under the temporary name sem_open() made it under, then linked to its own name:
    /proc shows that temporary name as deleted, so such a file is found by its inode among
    the names in /dev/shm (`linked`: `_linked_shm()`, listed here if not given).
    """
    held: set[tuple[str, int]] = set()
    unnamed: set[int] = set()  # inodes held under a name no longer there

    def note(path: str, inode: int) -> None:
        if (name := _shm_name(path)) is not None:
            held.add((name, inode))
        elif path.startswith(f"{SHM}/") and path.endswith(" (deleted)"):
            unnamed.add(inode)

    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                note(os.readlink(fd), fd.stat().st_ino)  # stat follows to the open file itself
            except OSError:
                continue
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            # address perms offset device inode path: the path may hold spaces
            fields = line.split(maxsplit=5)
            if len(fields) == 6:
                note(fields[5], int(fields[4]))
    if unnamed:
        linked = _linked_shm() if linked is None else linked
        held |= {(name, inode) for name, inode in linked if inode in unnamed}
    return held


def _linked_shm() -> set[tuple[str, int]]:
    """(name, inode) of each file directly in /dev/shm."""
    try:
        with os.scandir(SHM) as entries:
            return {(entry.name, entry.inode()) for entry in entries}
    except OSError:
        return set()


def _open_shm_files() -> set[str]:
    """Names under /dev/shm that some live process has open or mapped."""
    linked = _linked_shm()
    held: set[str] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            held.update(name for name, _ in _held_shm(int(entry.name), linked))
    return held


def _shm_names() -> set[str]:
    try:
        return {p.name for p in SHM.iterdir()}
    except OSError:
        return set()


def _sample(processes: dict[int, str], before: set[str]) -> set[tuple[str, int]]:
    """The /dev/shm files new since `before` that `processes` ({pid: start time}) hold now."""
    linked = _linked_shm()
    if not {name for name, _ in linked} - before:
        return set()  # the common case costs one listing, not a read of every map
    seen: set[tuple[str, int]] = set()
    for pid, started in processes.items():
        held = _held_shm(pid, linked)
        if _start_time(pid) == started:  # not a new process that took a reused PID meanwhile
            seen |= {(name, ino) for name, ino in held if name not in before}
    return seen


def _free(seen: set[tuple[str, int]]) -> list[str]:
    """Unlink each file of `seen` still there as the same file (same inode), owned by this
    user and held by no live process; returns the names removed."""
    uid = os.getuid()
    held = _open_shm_files()
    freed: list[str] = []
    for name, inode in sorted(seen):
        if name in held:
            continue
        path = SHM / name
        try:
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_uid == uid and info.st_ino == inode:
                path.unlink()
                freed.append(name)
        except OSError:
            continue
    return freed


def reap(owner: int, owner_started: str | None, before: set[str], runtime: str = "") -> None:
    """Watch `owner`; when it is gone, kill its last known descendants, free the /dev/shm
    files not in `before` that the owner or those descendants were seen holding, and remove
    the owner's private `runtime` dir (its engines' sockets)."""
    if owner_started is None:
        _remove_runtime_dir(runtime)
        return
    known: dict[int, str] = {}
    seen: set[tuple[str, int]] = set()
    while _start_time(owner) == owner_started:
        known.update(_descendants(owner))
        known = {pid: t for pid, t in known.items() if _start_time(pid) == t}
        seen |= _sample({owner: owner_started, **known}, before)
        time.sleep(POLL_S)
    # the owner is gone: what its descendants started since the last poll, and what they hold
    known.update(_descendants(*(pid for pid, t in known.items() if _start_time(pid) == t)))
    known.pop(os.getpid(), None)
    seen |= _sample(known, before)
    for pid, started in known.items():
        if _start_time(pid) == started:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_start_time(p) == t for p, t in known.items()):
        time.sleep(0.1)
    if seen:
        _free(seen)
    _remove_runtime_dir(runtime)


def _detach() -> None:
    """Go on in a grandchild of the starting process, which exits: init adopts the watcher, so
    a parent that SIGKILLs its children on exit (a Ray worker does) does not reach it."""
    child = os.fork()
    if child:
        print(child, flush=True)
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the starter's pipe is closed: nobody waits on the watcher's output
    os.close(null)


if __name__ == "__main__":
    owner_pid = int(sys.argv[1])
    started_at = _start_time(owner_pid)
    seen_before = set(filter(None, sys.stdin.read().split("\n")))
    _detach()
    reap(owner_pid, started_at, seen_before, sys.argv[2] if len(sys.argv) > 2 else "")
