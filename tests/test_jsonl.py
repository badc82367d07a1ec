"""JSONL inputs people write: a byte-order mark is read past, bad bytes are named by line."""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import shutil
import socket
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import BadInput
from auditor.jsonl import MAX_DEPTH, MAX_INPUT_BYTES, iter_objects
from auditor.questions import load_questions
from auditor.testing import FakeEmbedder, FakeJudge

BOM = "\ufeff".encode()


def _zipped(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("labels.jsonl", data)
    return buffer.getvalue()


def test_a_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    """A file saved by Excel or Notepad (UTF-8 with BOM) reads as the same objects, and the
    mark does not shift the line a non-UTF-8 byte is named on."""
    path = tmp_path / "q.jsonl"
    path.write_bytes(BOM + b'{"id": "q1", "question": "How long?"}\n')
    assert list(iter_objects(path, "id and question")) == [
        (f"{path}:1", {"id": "q1", "question": "How long?"})
    ]
    assert [q.id for q in load_questions(path)] == ["q1"]
    path.write_bytes(BOM + b'{"id": "q1", "question": "a"}\n{"id": "q2", "question": "caf\xe9"}\n')
    with pytest.raises(BadInput) as refused:
        list(iter_objects(path, "id and question"))
    assert str(refused.value) == f"{path}:2: not UTF-8; convert it, e.g. iconv -f latin1 -t utf-8"


def test_answers_with_a_byte_order_mark_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check --answers` on an answers file with a BOM checks it (it refused line 1 before)."""
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    answers = tmp_path / "answers.jsonl"
    row = {"id": "a1", "question": "q?", "contexts": ["Thirty days."], "answer": "30 days."}
    answers.write_bytes(BOM + json.dumps(row).encode() + b"\n")
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["check", "--answers", str(answers), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert [
        json.loads(line)["id"] for line in (out / "records.jsonl").read_text().splitlines()
    ] == ["a1"]


# files and run dirs (issue 48): what a person gives is a regular file of a bounded size, of
# bounded depth, each key once, named by its real encoding when it is not UTF-8

LABEL = {"id": "a1", "hallucinated": False}


def _read_within(path: Path, seconds: float = 20) -> BaseException | None:
    """iter_objects on `path` in a thread: what it raised; fails when it has not returned
    within `seconds` (a FIFO opened for reading blocks until a writer comes)."""
    import threading

    raised: list[BaseException | None] = []

    def read() -> None:
        try:
            list(iter_objects(path, "id and hallucinated"))
            raised.append(None)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(seconds)
    assert raised, f"reading {path} did not return within {seconds} s"
    return raised[0]


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "labels.jsonl"
    os.mkfifo(fifo)
    raised = _read_within(fifo)
    assert isinstance(raised, BadInput)
    assert str(raised).startswith(f"{fifo}: a FIFO (named pipe), not a regular file")


def test_a_device_a_socket_and_a_folder_are_refused(tmp_path: Path) -> None:
    raised = _read_within(Path("/dev/zero"))  # read without end before: a MemoryError
    assert isinstance(raised, BadInput)
    assert str(raised).startswith("/dev/zero: a character device, not a regular file")
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    assert str(_read_within(link)).startswith(f"{link}: a character device")
    path = tmp_path / "s.jsonl"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert str(_read_within(path)).startswith(f"{path}: a socket, not a regular file")
    assert str(_read_within(tmp_path)).startswith(f"{tmp_path}: a directory, not a regular file")


def test_a_file_past_the_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    with path.open("wb") as handle:  # sparse: no disk, and never read
        handle.truncate(MAX_INPUT_BYTES + 2**20)
    with pytest.raises(BadInput) as refused:
        list(iter_objects(path, "id"))
    assert str(refused.value) == (
        f"{path}: 257 MiB, larger than the 256 MiB an input file may be; split it into "
        "smaller files"
    )
    path.write_text(json.dumps(LABEL) + "\n" + json.dumps(LABEL | {"id": "a2"}) + "\n")
    assert len(list(iter_objects(path, "id", limit=path.stat().st_size))) == 2
    with pytest.raises(BadInput, match=r"larger than the 0\.0 MiB"):
        list(iter_objects(path, "id", limit=10))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_a_line_nested_too_deep_is_refused_by_its_line(tmp_path: Path, depth: int) -> None:
    """100,000 levels gave a RecursionError (a traceback); one past the bound parses, and is
    refused all the same."""
    path = tmp_path / "labels.jsonl"
    deep = '{"id": "a0", "x": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    path.write_text(json.dumps(LABEL) + "\n" + deep + "\n")
    with pytest.raises(BadInput) as refused:
        list(iter_objects(path, "id"))
    assert str(refused.value).startswith(f"{path}:2: nested deeper than {MAX_DEPTH} levels")
    flat = '{"id": "a0", "x": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    path.write_text(flat + "\n")
    assert [where for where, _ in iter_objects(path, "id")] == [f"{path}:1"]


def test_a_key_given_twice_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        json.dumps(LABEL) + "\n" + '{"id": "a", "hallucinated": true, "hallucinated": false}\n'
    )
    with pytest.raises(BadInput) as refused:
        list(iter_objects(path, "id"))
    assert str(refused.value).startswith(f"{path}:2: key 'hallucinated' given twice in one object")
    path.write_text('{"id": "a", "claims": [{"index": 0, "index": 1}]}\n')  # nested too
    with pytest.raises(BadInput, match=r":1: key 'index' given twice"):
        list(iter_objects(path, "id"))


TEXT = (
    json.dumps(LABEL) + "\n" + json.dumps({"id": "a2", "hallucinated": True, "note": "été"}) + "\n"
)


@pytest.mark.parametrize(
    ("encoding", "mark", "name"),
    [
        ("utf-16-le", b"", "UTF-16LE"),
        ("utf-16-be", b"", "UTF-16BE"),
        ("utf-32-le", b"", "UTF-32LE"),
        ("utf-32-le", codecs.BOM_UTF32_LE, "UTF-32LE"),
        ("utf-32-be", b"", "UTF-32BE"),
        ("utf-32-be", codecs.BOM_UTF32_BE, "UTF-32BE"),
        ("utf-16-le", codecs.BOM_UTF16_LE, "UTF-16"),
    ],
)
def test_a_wide_encoding_is_named_with_a_hint_that_works(
    tmp_path: Path, encoding: str, mark: bytes, name: str
) -> None:
    """UTF-16 without a byte-order mark decodes as UTF-8 (a NUL after each ASCII character)
    and was refused as bad JSON; UTF-32 was named UTF-16. Each is named, and the iconv line
    of the message, run as given, makes a file that reads as the same objects."""
    path = tmp_path / "my labels.jsonl"  # a space: the hint quotes the path
    path.write_bytes(mark + TEXT.encode(encoding))
    with pytest.raises(BadInput) as refused:
        list(iter_objects(path, "id"))
    message = str(refused.value)
    assert message.startswith(f"{path}: {name} ")
    assert "UTF-16" not in message if name.startswith("UTF-32") else True
    hint = message.split("e.g. ", 1)[1]
    assert hint.startswith("iconv ") and hint.endswith(" > fixed.jsonl")
    if shutil.which("iconv") is None:
        pytest.skip("no iconv here to run the hint with")
    done = subprocess.run(["sh", "-c", hint], cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr
    fixed = list(iter_objects(tmp_path / "fixed.jsonl", "id"))
    assert [row for _, row in fixed] == [json.loads(line) for line in TEXT.splitlines()]


def test_nul_bytes_in_no_wide_pattern_are_named(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_bytes(json.dumps(LABEL).encode() + b"\n" + b"\x00\x01\x02\x03binary\x00" * 20)
    with pytest.raises(BadInput) as refused:
        list(iter_objects(path, "id"))
    assert str(refused.value).startswith(f"{path}:2: a NUL byte, which no UTF-8 JSON text has")


@pytest.mark.parametrize(
    ("compress", "named"),
    [
        (lambda data: gzip.compress(data), "a gzip file, not JSONL text; gunzip it first"),
        (lambda data: bz2.compress(data), "a bzip2 file, not JSONL text; bunzip2 it first"),
        (lambda data: lzma.compress(data), "an xz file, not JSONL text; unxz it first"),
        (_zipped, "a zip archive, not JSONL text; unzip it first"),
    ],
    ids=["gzip", "bzip2", "xz", "zip"],
)
def test_a_compressed_file_is_named_as_what_it_is(
    tmp_path: Path, compress: Callable[[bytes], bytes], named: str
) -> None:
    """Its bytes would otherwise be blamed on a NUL byte or another encoding."""
    path = tmp_path / "labels.jsonl"
    path.write_bytes(compress((json.dumps(LABEL) + "\n").encode()))
    with pytest.raises(BadInput) as refused:
        list(iter_objects(path, "id"))
    assert str(refused.value).startswith(f"{path}: {named}")


def test_labels_from_a_device_are_refused_by_the_command(tmp_path: Path) -> None:
    """`report --labels /dev/zero` ran out of memory: one line, exit code 2."""
    done = CliRunner().invoke(cli, ["report", str(tmp_path), "--labels", "/dev/zero"])
    assert done.exit_code == 2, done.output
    assert done.stderr.strip() == (
        "Error: /dev/zero: a character device, not a regular file; give a file (a pipe or a "
        "device would be read without end, or wait forever)"
    )
