"""Engines die with the auditor: a watcher process that outlives a killed auditor and reaps
what its engines leave behind.

vLLM runs its engine core and workers in child processes. When the auditor exits normally
they are shut down; when it is killed (kill -9, a CI job's timeout, Ctrl-C twice) they are
adopted by PID 1 and live on with gigabytes of memory, the worker ignoring SIGTERM, and leave
shared-memory segments in /dev/shm. No code in a killed process runs, so the cleanup is done
by a small watcher started in its own session before the first engine: it keeps the list of
the auditor's descendants and, once the auditor is gone, SIGKILLs them (checking each one's
start time, so a reused PID is never hit) and removes the /dev/shm files that appeared while
the auditor ran and that no live process holds open.

    python -m auditor.generate.reaper OWNER_PID   # what `watch_engines()` starts
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["kill_engines", "watch_engines"]

SHM = Path("/dev/shm")
POLL_S = 0.5
_started_for: int | None = None
_watcher_pid: int | None = None


def watch_engines() -> None:
    """Start the watcher for this process, once (before starting an engine)."""
    global _started_for, _watcher_pid
    if _started_for == os.getpid() or not Path("/proc").is_dir():
        return
    watcher = subprocess.Popen(
        [sys.executable, "-m", "auditor.generate.reaper", str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a signal to the auditor's process group spares the watcher
        close_fds=True,
        text=True,
    )
    assert watcher.stdin is not None
    # what /dev/shm held before any engine: the watcher never touches those
    watcher.stdin.write("\n".join(sorted(_shm_names())))
    watcher.stdin.close()
    _started_for = os.getpid()
    _watcher_pid = watcher.pid


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
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _descendants(owner: int) -> dict[int, str]:
    """{pid: start time} of every process below `owner`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: dict[int, str] = {}
    todo = list(children.get(owner, []))
    while todo:
        pid = todo.pop()
        started = _start_time(pid)
        if started is not None and pid not in found:
            found[pid] = started
            todo.extend(children.get(pid, []))
    return found


def _open_shm_files() -> set[str]:
    """Names under /dev/shm that some live process has open or mapped."""
    held: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("/dev/shm/"):
                    held.add(target.split("/")[3].split(" ")[0])
            for line in (entry / "maps").read_text().splitlines():
                if "/dev/shm/" in line:
                    held.add(line.split("/dev/shm/", 1)[1].split("/")[0].split(" ")[0])
        except OSError:
            continue
    return held


def _shm_names() -> set[str]:
    try:
        return {p.name for p in SHM.iterdir()}
    except OSError:
        return set()


def reap(owner: int, owner_started: str | None, before: set[str]) -> None:
    """Watch `owner`; when it is gone, kill its last known descendants and free the /dev/shm
    files not in `before` that no live process holds."""
    known: dict[int, str] = {}
    while _start_time(owner) == owner_started and owner_started is not None:
        known.update(_descendants(owner))
        known = {pid: t for pid, t in known.items() if _start_time(pid) == t}
        time.sleep(POLL_S)
    for pid, started in known.items():
        if pid != os.getpid() and _start_time(pid) == started:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_start_time(p) == t for p, t in known.items()):
        time.sleep(0.1)
    if not known:
        return
    uid = os.getuid()
    held = _open_shm_files()
    for name in _shm_names() - before - held:
        path = SHM / name
        try:
            if path.is_file() and path.stat().st_uid == uid:
                path.unlink()
        except OSError:
            pass


if __name__ == "__main__":
    owner_pid = int(sys.argv[1])
    started_at = _start_time(owner_pid)
    reap(owner_pid, started_at, set(filter(None, sys.stdin.read().split("\n"))))
