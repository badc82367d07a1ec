"""Atomic file writes and time stamps: what every artifact writer shares.

A reader (a resumed command, a report, a second process) sees the old file or the new one,
never half of one; time stamps are UTC ISO-8601 to the second, as stored in every artifact.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["utc_now", "write_json_atomic", "write_text_atomic"]


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
