"""Ctrl-C that always stops the auditor, even when a library swallows the KeyboardInterrupt.

vLLM's start-up handshake runs inside `zmq_socket_ctx`, which catches KeyboardInterrupt and
carries on, then waits up to ten minutes for a "ready" message from an engine that the same
Ctrl-C stopped: one Ctrl-C during an engine's start left the auditor hanging. The handler
installed here remembers the interrupt, kills the engine processes and raises; a watchdog
thread raises it again while the main thread is still inside vLLM (where it was swallowed),
and ends the process outright if it has not stopped after `HARD_EXIT_S`. The code that waits
on an engine calls `raise_if_interrupted()` as well. Records already written are safe: every
command writes per result and resumes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from auditor.generate.reaper import kill_engines

__all__ = ["install_interrupt_handler", "interrupted", "raise_if_interrupted"]

REDELIVER_S = 3.0
HARD_EXIT_S = 30.0
_seen = threading.Event()
_say: Callable[[str], None] = print  # replaced by the CLI's terminal writer


def _in_vllm(thread_id: int) -> bool:
    """Whether the thread is running vLLM code (where a KeyboardInterrupt can be swallowed)."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if f"{os.sep}vllm{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _watchdog(main_id: int) -> None:
    started = time.monotonic()
    while time.monotonic() - started < HARD_EXIT_S:
        time.sleep(REDELIVER_S)
        if _in_vllm(main_id):
            # a real signal: it also breaks the system call the main thread waits in
            signal.pthread_kill(main_id, signal.SIGINT)
    _say(f"Aborted: still running {HARD_EXIT_S:.0f} s after Ctrl-C; stopped hard.")
    os._exit(130)


def _on_sigint(signum: int, frame: FrameType | None) -> None:

    if not _seen.is_set():
        _seen.set()
        main_id = threading.main_thread().ident
        assert main_id is not None
        threading.Thread(target=_watchdog, args=(main_id,), daemon=True).start()
    kill_engines()
    raise KeyboardInterrupt


def install_interrupt_handler(say: Callable[[str], None] | None = None) -> None:
    """Remember every SIGINT (main thread only; a no-op where signals can't be set). `say`
    shows the line written before a hard stop."""
    global _say
    if threading.current_thread() is not threading.main_thread():
        return
    if say is not None:
        _say = say
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def interrupted() -> bool:
    return _seen.is_set()


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt if a SIGINT arrived, whether or not it was swallowed."""
    if _seen.is_set():
        raise KeyboardInterrupt
