"""A quiet terminal: engine and library output goes to a log file, ours to the terminal.

vLLM, torch, transformers and their worker processes write warnings, start-up lines and
progress bars straight to file descriptor 2, from C++ and from child processes that no Python
setting reaches. So while an engine runs, descriptor 2 itself points at the log file (children
inherit it), and the auditor's own lines go to a duplicate of the terminal's descriptor kept
aside (`terminal()`). With -v nothing is redirected. When a command fails, the log's last
lines are shown, so an engine's error still reaches the terminal.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from auditor.errors import BadInput

__all__ = ["TerminalHandler", "engine_output_to", "set_verbosity", "terminal"]

_terminal: TextIO | None = None  # the real stderr while descriptor 2 goes to a log
_verbosity = 0
TAIL_LINES = 15


def set_verbosity(count: int) -> None:
    """The -v count of this invocation (-v: third-party output stays on the terminal)."""
    global _verbosity
    _verbosity = count


def terminal() -> TextIO:
    """Where the auditor's own lines go: the terminal, even while engines log to a file."""
    return _terminal if _terminal is not None else sys.stderr


class TerminalHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Log records of the auditor's own loggers, on the terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        self.setStream(terminal())
        super().emit(record)


@contextmanager
def engine_output_to(log_path: Path, say: bool = True) -> Iterator[None]:
    """Send descriptor 2 (engines, libraries, their child processes) to `log_path` meanwhile."""
    global _terminal
    if _verbosity > 0 or _terminal is not None or not _stderr_is_descriptor_2():
        yield  # -v, nested, or stderr captured in-process (click's test runner)
        return
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        yield  # an --out the command itself will refuse, in one line
        return
    sys.stderr.flush()
    saved = os.dup(2)
    _terminal = io.TextIOWrapper(
        io.FileIO(saved, "w", closefd=False), encoding="utf-8", errors="replace", write_through=True
    )
    if say:
        print(f"engine and library logs: {log_path} (-v shows them here)", file=_terminal)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    show_warning = warnings.showwarning
    warnings.showwarning = _warning_to_log
    try:
        yield
    except BaseException as exc:
        if not isinstance(exc, (KeyboardInterrupt, BadInput, SystemExit)):
            _show_tail(log_path)
        raise
    finally:
        warnings.showwarning = show_warning
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        _terminal.flush()
        _terminal = None


def _stderr_is_descriptor_2() -> bool:
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False


def _warning_to_log(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Python warnings of third-party code go where descriptor 2 goes (the log)."""
    text = warnings.formatwarning(message, category, filename, lineno, line)
    os.write(2, text.encode("utf-8", "replace"))


def _show_tail(log_path: Path) -> None:
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    tail = [line for line in lines[-TAIL_LINES:] if line.strip()]
    if tail and _terminal is not None:
        print(f"last lines of {log_path}:", file=_terminal)
        for line in tail:
            print(f"  {line}", file=_terminal)
