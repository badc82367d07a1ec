"""A damaged run dir is one line naming the file, the line and the field, exit 2, before any
figure is computed or file written: rows of the wrong shape, an answer twice, checks of
answers the records lack, manifests and review samples of the wrong kind (with the fake
judge; every case a traceback or a silently wrong figure before `auditor.run_shapes`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from tests.test_review import _checked


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(data | changes), encoding="utf-8")


def _first_check(run: Path, change: Callable[[dict], object]) -> None:
    lines = _lines(run / "checks.jsonl")
    row = json.loads(lines[0])
    change(row)
    _write(run / "checks.jsonl", [json.dumps(row), *lines[1:]])


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "check row a list": (
        lambda run: _write(run / "checks.jsonl", ["[1, 2]", *_lines(run / "checks.jsonl")[1:]]),
        "checks.jsonl:1: a check row must be a JSON object, not list",
    ),
    "check row without id": (
        lambda run: _first_check(run, lambda row: row.pop("id")),
        'checks.jsonl:1: a check row without "id"',
    ),
    "claims null": (
        lambda run: _first_check(run, lambda row: row.update(claims=None)),
        'checks.jsonl:1: "claims" must be a list',
    ),
    "a verdict nobody knows": (
        lambda run: _first_check(run, lambda row: row["claims"][0].update(verdict="maybe")),
        "checks.jsonl:1: claim 0 has verdict 'maybe', not one of contradicted, supported",
    ),
    "record a string": (
        lambda run: _write(run / "records.jsonl", ['"hello"', *_lines(run / "records.jsonl")]),
        "records.jsonl:1: a record must be a JSON object, not str",
    ),
    "records empty, checks not": (
        lambda run: _write(run / "records.jsonl", []),
        "checks.jsonl: 12 checked answer(s) not in records.jsonl",
    ),
    "a check row twice": (
        lambda run: _write(
            run / "checks.jsonl", [*_lines(run / "checks.jsonl"), _lines(run / "checks.jsonl")[0]]
        ),
        "checks.jsonl: answer 'a0' is in it twice",
    ),
    "check.json judge null": (
        lambda run: _edit_json(run / "check.json", judge=None),
        'check.json: "judge" must be an object',
    ),
    "manifest sessions a string": (
        lambda run: _edit_json(run / "manifest.json", sessions="x"),
        'manifest.json: "sessions" must be a list, not str',
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_run_dir_is_one_line_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    assert (
        CliRunner().invoke(cli, ["report", str(run), "--history", str(tmp_path / "h")]).exit_code
        == 0
    )
    summary = (run / "summary.json").read_bytes()
    damage, message = CASES[case]
    damage(run)
    done = CliRunner().invoke(cli, ["report", str(run), "--history", str(tmp_path / "h")])
    assert done.exit_code == 2, done.output
    assert message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.output
    assert (run / "summary.json").read_bytes() == summary, "summary.json rewritten"


@pytest.mark.parametrize(
    ("review", "message"),
    [
        ({"seed": "abc"}, '"seed" must be a whole number >= 0'),
        ({"sample": None}, '"sample" must be a list'),
    ],
)
def test_a_damaged_review_sample_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, review: dict, message: str
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    assert CliRunner().invoke(cli, ["review", str(run), "--sample", "4"]).exit_code == 0
    _edit_json(run / "review.json", **review)
    done = CliRunner().invoke(cli, ["review", str(run), "--sample", "6"])
    assert done.exit_code == 2 and message in done.stderr, done.output


def test_a_run_of_imported_answers_with_no_pipeline_is_reviewed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`"pipeline": null` in a run of imported answers (which has none) is no damage."""
    run = _checked(tmp_path, monkeypatch, count=12)
    _edit_json(run / "manifest.json", pipeline=None)
    done = CliRunner().invoke(cli, ["review", str(run), "--sample", "4"])
    assert done.exit_code == 0, done.output
