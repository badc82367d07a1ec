"""The run dir on disk: `manifest.json` and append-only `records.jsonl`.

Records are appended one line at a time and flushed, so a crash loses at most the line being
written; on the next open a torn last line is cut off and the run resumes after the last
complete record. Every artifact carries `schema_version`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, Any

from auditor.errors import BadInput
from auditor.files import read_regular_file, write_json_atomic
from auditor.jsonl import parse_line
from auditor.run_shapes import check_row, record_row

__all__ = [
    "CHECK_MANIFEST",
    "RUN_SCHEMA_VERSION",
    "RecordWriter",
    "read_check_manifest",
    "read_checks",
    "read_json_artifact",
    "read_jsonl",
    "read_population",
    "read_records",
    "read_run_manifest",
    "refuse_other_records",
    "share_records",
    "torn_note",
    "write_run_manifest",
]

RUN_SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
CHECKS = "checks.jsonl"  # one row per checked answer (auditor.verify.check)
CHECK_MANIFEST = "check.json"  # the judge that wrote checks.jsonl (auditor.verify.check)
ENGINE_LOG = "engine.log"  # third-party output of the command that wrote the dir (-v: none)


def read_run_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The run manifest, None when the dir holds no run yet; BadInput when unreadable."""
    path = run_dir / MANIFEST
    if not path.exists():
        return None
    try:
        data = parse_line(read_regular_file(path).decode("utf-8"), str(path))
    except ValueError as exc:
        raise BadInput(f"{path}: corrupt run manifest ({exc}); use another --out dir") from exc
    if not isinstance(data, dict) or data.get("schema_version") != RUN_SCHEMA_VERSION:
        version = data.get("schema_version") if isinstance(data, dict) else None
        raise BadInput(
            f"{path}: run schema version {version!r}, this auditor reads {RUN_SCHEMA_VERSION}; "
            "use another --out dir"
        )
    return data


def read_json_artifact(path: Path, what: str, fix: str) -> dict[str, Any] | None:
    """A JSON object the auditor wrote (None when absent); BadInput in one line naming the file
    and `fix` when it is truncated, corrupt or not an object."""
    if not path.exists():
        return None
    try:
        data = parse_line(read_regular_file(path).decode("utf-8"), str(path))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise BadInput(f"{path}: corrupt {what} ({exc}); {fix}") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path}: corrupt {what} (not a JSON object); {fix}")
    return data


def read_check_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The check manifest of a run dir (None before any check); BadInput when damaged."""
    return read_json_artifact(
        run_dir / CHECK_MANIFEST,
        "check manifest",
        f"remove it and {run_dir / 'checks.jsonl'}, then check again (auditor check {run_dir})",
    )


def write_run_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    write_json_atomic(run_dir / MANIFEST, manifest)


def torn_note(where: str) -> str:
    """What a reader says of a torn last line (`file:line`) it left out, with the command
    that repairs it."""
    path = Path(where.rsplit(":", 1)[0])
    if path.name == CHECKS:
        fix = f"that answer counts as not checked; `auditor check {path.parent}` repairs and checks it"
    else:
        fix = (
            "that answer is left out of every figure; resume the run into the same --out "
            f"({path.parent}) to repair it"
        )
    return f"{where}: torn last line (a write cut short, e.g. a kill); {fix}"


def read_records(
    run_dir: Path, repair: bool = False, torn: TornLine | None = None, filled: bool = False
) -> list[dict[str, Any]]:
    """Every complete record of a run dir, each of the shape the figures read, as written or
    `filled` (`run_shapes.record_row`; see `read_jsonl` for `repair` and `torn`)."""
    return read_jsonl(
        run_dir / RECORDS, repair=repair, check=partial(record_row, filled=filled), torn=torn
    )


def read_checks(
    run_dir: Path, repair: bool = False, torn: TornLine | None = None, filled: bool = False
) -> list[dict[str, Any]]:
    """Every complete row of a run dir's checks.jsonl, each of the shape the figures read
    (`run_shapes.check_row`, see `read_records`); none before any check."""
    return read_jsonl(
        run_dir / CHECKS, repair=repair, check=partial(check_row, filled=filled), torn=torn
    )


class _NotANumber(Exception):
    """NaN/Infinity in an artifact: Python writes and reads them, JSON does not have them."""


def _refuse_constant(name: str) -> Any:
    raise _NotANumber(name)


RowCheck = Callable[[str, Any], dict[str, Any]]  # the row to keep, or BadInput
TornLine = Callable[[str], None]  # told `file:line` of a torn last line it leaves out


def read_jsonl(
    path: Path,
    repair: bool = False,
    check: RowCheck | None = None,
    torn: TornLine | None = None,
) -> list[dict[str, Any]]:
    """Every complete line of an append-only JSONL artifact; with `repair`, a torn last line
    (a crash mid-write) is cut off so that appending resumes cleanly; without, `torn` is told
    its `file:line` (a reader that leaves it out says so). `check(where, row)`, where given,
    sees each row with its `file:line`, raises BadInput on a bad shape and returns the row kept."""
    if not path.exists():
        return []
    records: list[dict[str, Any]] = []
    data = read_regular_file(path)  # a FIFO or a device in a run dir is refused, never read
    good_end = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            good_end += len(line) + 1
            continue
        try:
            row = parse_line(line, f"{path}:{number}", parse_constant=_refuse_constant)
        except _NotANumber as exc:
            raise BadInput(
                f"{path}:{number}: {exc} is not a number (JSON has no NaN or Infinity); "
                "the file was edited by hand? write null"
            ) from exc
        except ValueError as exc:
            is_last = data[good_end + len(line) :].strip() == b""
            if not is_last:
                raise BadInput(
                    f"{path}:{number}: corrupt record ({exc}); the file was edited by hand?"
                ) from exc
            if repair:
                with path.open("r+b") as handle:
                    handle.truncate(good_end)
            elif torn is not None:
                torn(f"{path}:{number}")
            break
        if check is not None:
            row = check(f"{path}:{number}", row)
        records.append(row)
        good_end += len(line) + 1
    return records


class RecordWriter:
    """Appends rows to a JSONL artifact (`records.jsonl` by default), one fsynced line each."""

    def __init__(self, run_dir: Path, name: str = RECORDS) -> None:
        self._handle: IO[str] = (run_dir / name).open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def refuse_other_records(run_dir: Path, out_dir: Path) -> None:
    """BadInput when `out_dir` (a new run dir to share `run_dir`'s records) already holds
    another run's manifest or records: only the same run's copy is resumed."""
    for name in (MANIFEST, RECORDS):
        there = out_dir / name
        if there.exists() and there.read_bytes() != (run_dir / name).read_bytes():
            raise BadInput(
                f"{there}: another run's {name} than {run_dir}'s; give --out a new dir (it "
                "shares RUN_DIR's records and is checked anew)"
            )


def share_records(run_dir: Path, out_dir: Path) -> None:
    """A new run dir with `run_dir`'s manifest and records (copied: the answers are the same,
    the check is another), each written whole."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (MANIFEST, RECORDS):
        target = out_dir / name
        if target.exists():
            continue
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(run_dir / name, partial)
        os.replace(partial, target)


def read_population(run_dir: Path, check: RowCheck) -> list[dict[str, Any]]:
    """population.jsonl of a run of imported traces (auditor.traffic checks its rows)."""
    return read_jsonl(run_dir / "population.jsonl", check=check)
