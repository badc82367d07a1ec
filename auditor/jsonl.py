"""Reading JSONL inputs written by people: one object per line, errors named by file:line."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from auditor.errors import BadInput

__all__ = ["iter_objects", "labelled_id", "unique_id"]


def iter_objects(path: Path, fields: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`file:line`, object) for each non-blank line; BadInput on the first bad line.

    `fields` names what an object should hold, for the message (e.g. "id and question").
    A UTF-8 byte-order mark (Excel and Windows editors write one) is read past.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise BadInput(f"{path}: no such file") from exc
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror})") from exc
    try:
        # split on "\n" only: str.splitlines() also breaks at U+2028/U+2029/U+0085, which
        # JSON allows raw inside strings
        lines = data.decode("utf-8-sig").split("\n")
    except UnicodeDecodeError as exc:
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in data[:200]:
            raise BadInput(
                f"{path}: UTF-16 (Windows editors save it so); convert it to UTF-8, e.g. "
                f"iconv -f utf-16 -t utf-8 {path} > fixed.jsonl"
            ) from exc
        start = exc.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0)
        bad_line = data[:start].count(b"\n") + 1
        raise BadInput(
            f"{path}:{bad_line}: not UTF-8; convert it, e.g. iconv -f latin1 -t utf-8"
        ) from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(
                f"{where}: not valid JSON ({exc.msg}); one JSON object per line"
            ) from exc
        if not isinstance(row, dict):
            raise BadInput(f"{where}: expected a JSON object with {fields}")
        yield where, row


def unique_id(where: str, value: Any, seen: dict[str, int]) -> str:
    """A row's `id`: a non-empty string or an integer (not a boolean), unique in its file.

    `seen` maps ids to the lines they were first on; the duplicate's message names both.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise BadInput(
            f'{where}: missing or empty "id" (a string or an integer, unique in the file)'
        )
    number = int(where.rsplit(":", 1)[1])
    if value in seen:
        raise BadInput(
            f"{where}: duplicate id {value!r} (first on line {seen[value]}); ids must be unique"
        )
    seen[value] = number
    return value


def labelled_id(where: str, data: dict[str, Any], seen: dict[str, int]) -> str:
    """A labelled answer's id, unique in its file: `PIPELINE/ID` where the line names its
    pipeline (the review page's labels hold every pipeline's answer to a question, each under
    the question's id), else `ID`."""
    ident, pipeline = data.get("id"), data.get("pipeline")
    valid = isinstance(ident, int) and not isinstance(ident, bool)
    valid = valid or (isinstance(ident, str) and bool(ident.strip()))
    if valid and isinstance(pipeline, str) and pipeline.strip():
        ident = f"{pipeline}/{ident}"
    return unique_id(where, ident, seen)
