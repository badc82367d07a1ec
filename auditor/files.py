"""Atomic file writes, output checks and time stamps: what every artifact writer shares.

A reader (a resumed command, a report, a second process) sees the old file or the new one,
never half of one; time stamps are UTC ISO-8601 to the second, as stored in every artifact.
Every command checks its outputs (`check_output_file`, `check_output_dir`) before it writes
anything or starts an engine, so a bad `--out` is refused in one line, not after the work; the
same checks refuse an output that would land on a file the command reads or writes, existing
or not yet (`Read`, `refuse_output_on_input`; a path given twice, `refuse_given_twice`): paths
are compared resolved (a symbolic link to an input is the input) and by inode (a hard link).
A file a person gives is read through `read_regular_file`: a FIFO, a device or a socket is
refused before it is opened, and a file past a size bound before it is read.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from auditor.errors import BadInput

__all__ = [
    "Read",
    "check_output_dir",
    "check_output_file",
    "read_regular_file",
    "refuse_given_twice",
    "refuse_output_on_input",
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


@dataclass(frozen=True)
class Read:
    """A path a command reads, named as the user gave it (`--labels`, `RUN_DIR`): a file, or
    with `folder` a dir whose files it reads (a run dir, an index dir, a corpus). `writes`
    names the files (relative paths) the command's outputs may be in such a folder: an output
    anywhere else in it is refused (`report.html` in a RUN_DIR of `report`; `checks.jsonl` in
    the RUN_DIR of `check`). With `written`, it is another output of the same command (`report
    --history` with `--record`): an output on it is refused whether or not it exists yet. A
    path of None is nothing to keep; one that does not exist is compared by its path alone."""

    name: str
    path: Path | None
    folder: bool = False
    writes: tuple[str, ...] = ()
    written: bool = False


def check_output_file(path: Path, option: str, reads: Sequence[Read] = ()) -> None:
    """BadInput, one line naming `option` and `path`, unless a file can be written at `path`:
    it is no directory, is none of `reads` nor in a folder of them, and its nearest existing
    parent is a directory this process can create files in. Nothing is written."""
    if os.path.isdir(path):
        raise BadInput(f"{option} {path}: is a directory; give {option} a file path")
    refuse_output_on_input(path, option, reads)
    _check_folder_above(path, option)


def check_output_dir(
    path: Path, option: str, reads: Sequence[Read] = (), writes: Sequence[str] | None = None
) -> None:
    """BadInput, one line naming `option` and `path`, unless `path` can be written as a
    directory: an existing one this process can create files in, or a new one whose nearest
    existing parent is such a directory; and no output lands on one of `reads`: the files
    `writes` names in it, or (None) the dir as a whole (an index dir). Nothing is written."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise BadInput(f"{option} {path}: not a directory; give {option} a directory path")
    if os.path.isdir(path):
        if not _can_create_in(path):
            raise BadInput(
                f"{option} {path}: cannot create files in it; give {option} a writable directory"
            )
    else:
        _check_folder_above(path, option)
    refuse_output_on_input(path, option, reads, writes)


def refuse_output_on_input(
    path: Path, option: str, reads: Sequence[Read], writes: Sequence[str] | None = None
) -> None:
    """BadInput, one line naming `option`, `path`, what it would overwrite and the fix, when an
    output would land on something the command reads or another output it writes. The output is
    `path` (a file, or a dir as a whole), or with `writes` those files in the dir `path`; it
    lands on a read when, resolved (symbolic links followed), it is a file of `reads` (or the
    same file by inode: a hard link), is in a folder of `reads` other than at that folder's own
    `writes`, or holds one of `reads`; a read that does not exist yet (an output made by the
    same command, a history created on its first record) is compared by its resolved path."""
    targets = [path] if writes is None else [path / name for name in writes]
    for target in targets:
        where = target.resolve()
        for read in reads:
            if read.path is None:
                continue
            problem, fix = _lands_on(where, read, option)
            if not problem:
                continue
            if target != path:  # a file the command writes in the dir `path`
                problem = f"{target} {problem}"
                fix = (
                    f"give {option} another directory"
                    if option.startswith("-")
                    else f"give {read.name} another path"
                )
            does = "this command also writes" if read.written else "this command reads"
            raise BadInput(f"{option} {path}: {problem}, which {does}; {fix}")


def refuse_given_twice(name: str, paths: Sequence[Path]) -> None:
    """BadInput when two of `paths` (given as `name`, e.g. RUN_DIR) are one file or dir:
    the same path, a symbolic link to it, or a hard link; each would be read and written
    twice."""
    seen: list[Path] = []
    for path in paths:
        for earlier in seen:
            if _same(path.resolve(), earlier):
                raise BadInput(
                    f"{name} {path}: the same as {name} {earlier} (given twice, or a link to "
                    f"it); give each {name} once"
                )
        seen.append(path)


def _same(where: Path, other: Path) -> bool:
    """Whether the resolved path `where` is `other`: the same path resolved, or the same file
    by inode (a hard link) where both exist."""
    source = other.resolve()
    if where == source:
        return True
    try:
        return os.path.samefile(where, source)
    except OSError:  # one of them does not exist (yet)
        return False


def _lands_on(where: Path, read: Read, option: str) -> tuple[str, str]:
    """What an output of `option` at `where` (resolved) would do to `read`, and the fix; empty
    when it leaves `read` alone."""
    assert read.path is not None
    source = read.path.resolve()
    named = f"{read.name} {read.path}"
    if read.folder and where.is_relative_to(source):
        inside = where.relative_to(source).as_posix()
        if inside in read.writes:
            return "", ""
        if where == source:
            return f"would replace {named}", f"give {option} a path apart from it"
        if os.path.isfile(where):
            return (
                f"would overwrite {inside} of {named}",
                f"give {option} a path outside {read.path}",
            )
        return f"would write into {named}", f"give {option} a path outside {read.path}"
    if _same(where, read.path):
        return f"would overwrite {named}", f"give {option} another path"
    if source.is_relative_to(where):
        return f"would hold {named}", f"give {option} a path apart from {read.path}"
    return "", ""


# what a path that is no regular file is, for the refusal
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_regular_file(path: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file at `path` (symbolic links followed); BadInput in one line
    naming it when it does not exist, cannot be read, is no regular file (a FIFO would block
    the command, /dev/zero never end: they are refused from their stat, a FIFO never opened)
    or holds more than `limit` bytes (refused from its size, before it is read)."""
    try:
        found = os.stat(path)
    except FileNotFoundError as exc:
        raise BadInput(f"{path}: no such file") from exc
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror})") from exc
    _refuse_irregular(path, found, limit)
    try:
        # O_NONBLOCK: were it swapped for a FIFO since the stat, opening would not wait for
        # a writer, and the fstat below refuses it
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror})") from exc
    try:
        _refuse_irregular(path, os.fstat(handle), limit)
        chunks = []
        size = 0
        while chunk := os.read(handle, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:  # it grew while read
                raise BadInput(_too_large(path, size, limit))
        return b"".join(chunks)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror})") from exc
    finally:
        os.close(handle)


def _refuse_irregular(path: Path, found: os.stat_result, limit: int | None) -> None:
    if not stat.S_ISREG(found.st_mode):
        kind = next((name for test, name in _KINDS if test(found.st_mode)), "not a file")
        raise BadInput(
            f"{path}: {kind}, not a regular file; give a file (a pipe or a device would be "
            "read without end, or wait forever)"
        )
    if limit is not None and found.st_size > limit:
        raise BadInput(_too_large(path, found.st_size, limit))


def _too_large(path: Path, size: int, limit: int) -> str:
    return (
        f"{path}: {_mib(size)}, larger than the {_mib(limit)} an input file may be; split it "
        "into smaller files"
    )


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB" if size % 2**20 else f"{size // 2**20:,} MiB"


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
