"""One Ctrl-C stops the auditor even when a library swallows the KeyboardInterrupt (as vLLM's
start-up handshake does): its engine processes die at once and the interrupt is raised again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.generate.test_reaper import _alive

REPO = Path(__file__).resolve().parents[2]

# stands in for vLLM's handshake: swallows the first KeyboardInterrupt, then waits on
LIBRARY = """
import time

def start_engine():
    try:
        time.sleep(600)
    except KeyboardInterrupt:
        pass
    time.sleep(600)
"""

OWNER = """
import subprocess, sys
from auditor.interrupt import install_interrupt_handler
from auditor.generate.reaper import watch_engines
install_interrupt_handler()
watch_engines()
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(engine.pid, flush=True)
from vllm_like.vllm.handshake import start_engine
try:
    start_engine()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")
def test_one_ctrl_c_stops_a_command_whose_library_swallows_it(tmp_path: Path) -> None:
    library = tmp_path / "vllm_like" / "vllm"
    library.mkdir(parents=True)
    (library / "handshake.py").write_text(LIBRARY)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])},
        # as from a terminal: a test session run in the background inherits SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert owner.stdout is not None
        engine = int(owner.stdout.readline())
        time.sleep(1.0)
        sent = time.monotonic()
        owner.send_signal(signal.SIGINT)
        out, _ = owner.communicate(timeout=20)
        took = time.monotonic() - sent
        assert owner.returncode == 130 and "interrupted" in out
        assert took < 10, f"stopped {took:.1f} s after Ctrl-C"
        assert not _alive(engine), "the engine outlived the Ctrl-C"
    finally:
        owner.kill()
