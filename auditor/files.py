"""Atomic file writes, output checks and time stamps: what every artifact writer shares.

A reader (a resumed command, a report, a second process) sees the old file or the new one,
never half of one; time stamps are UTC ISO-8601 to the second, as stored in every artifact.
Every command checks its outputs (`check_output_file`, `check_output_dir`) before it writes
anything or starts an engine, so a bad `--out` is refused in one line, not after the work.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from auditor.errors import BadInput

__all__ = [
    "check_output_dir",
    "check_output_file",
    "utc_now",
    "write_json_atomic",
    "write_text_atomic",
]


def utc_now() -> str:
    """Now, as artifacts store it: `2026-12-05T06:44:04+00:00`."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file so that a reader sees the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the file is meant to be read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """`write_text_atomic` of indented JSON."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def check_output_file(path: Path, option: str) -> None:
    """BadInput, one line naming `option` and `path`, unless a file can be written at `path`:
    it is no directory, and its nearest existing parent is a directory this process can
    create files in. Nothing is written."""
    if os.path.isdir(path):
        raise BadInput(f"{option} {path}: is a directory; give {option} a file path")
    _check_folder_above(path, option)


def check_output_dir(path: Path, option: str) -> None:
    """BadInput, one line naming `option` and `path`, unless `path` can be written as a
    directory: an existing one this process can create files in, or a new one whose nearest
    existing parent is such a directory. Nothing is written."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise BadInput(f"{option} {path}: not a directory; give {option} a directory path")
    if os.path.isdir(path):
        if not _can_create_in(path):
            raise BadInput(
                f"{option} {path}: cannot create files in it; give {option} a writable directory"
            )
        return
    _check_folder_above(path, option)


def _check_folder_above(path: Path, option: str) -> None:
    """The nearest existing parent of a path to create must be a directory that takes files."""
    folder = next((parent for parent in path.parents if os.path.lexists(parent)), Path("."))
    if not os.path.isdir(folder):
        raise BadInput(
            f"{option} {path}: {folder} is not a directory; give {option} a path in a "
            "writable directory"
        )
    if not _can_create_in(folder):
        raise BadInput(
            f"{option} {path}: cannot create files in {folder}; give {option} a path in a "
            "writable directory"
        )


# errors of a file system that has no unnamed files (O_TMPFILE), as /proc and NFS answer
_NO_UNNAMED_FILES = {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL}


def _can_create_in(folder: Path) -> bool:
    """Whether this process can create a file in `folder`, tried without leaving a trace.

    Permission bits do not say it (root passes `os.access(W_OK)` on /proc, where no file can
    be made), so a file is made: an unnamed one (O_TMPFILE) that vanishes when closed, or
    where the file system has none, a named one removed at once with the folder's times put
    back where this process may (a refused command leaves its folders as they were).
    """
    unnamed = getattr(os, "O_TMPFILE", 0)
    if unnamed:
        try:
            os.close(os.open(folder, unnamed | os.O_WRONLY, 0o600))
            return True
        except OSError as exc:
            if exc.errno not in _NO_UNNAMED_FILES:
                return False
    try:
        times = os.stat(folder)
        handle, name = tempfile.mkstemp(dir=folder, prefix=".auditor-probe-")
    except OSError:
        return False
    os.close(handle)
    os.unlink(name)
    with contextlib.suppress(OSError):  # only the folder's owner may set its times
        os.utime(folder, ns=(times.st_atime_ns, times.st_mtime_ns))
    return True
