"""Engines die with the auditor: after a kill -9 of the auditor, the watcher kills the
processes it started (one ignoring SIGTERM, like vLLM's worker) and frees their /dev/shm."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

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


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs Linux /proc and /dev/shm")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_auditors_engine_and_shared_memory_are_reaped(how: signal.Signals) -> None:
    segment = Path("/dev/shm") / f"auditor-test-{uuid.uuid4().hex}"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(segment)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
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
        segment.unlink(missing_ok=True)
