"""A damaged run dir, beyond the fault suite's one-answer cases (tests/test_faults_inputs.py):
review samples of the wrong kind, a torn last line said and shown, a damaged summary.json said
and regenerated (with the fake judge)."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("artifact", ["checks.jsonl", "records.jsonl"])
def test_a_torn_last_line_is_said_on_the_terminal_and_in_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, artifact: str
) -> None:
    """A kill mid-write leaves a torn last line: `report` leaves it out (the run resumes from
    it) and says so with its line on stderr and beside the run in the HTML, never silently."""
    run = _checked(tmp_path, monkeypatch, count=12)
    lines = _lines(run / artifact)
    if artifact == "records.jsonl":  # its check row goes too, or the checks name a stray answer
        _write(run / "checks.jsonl", _lines(run / "checks.jsonl")[:-1])
    (run / artifact).write_text("".join(f"{line}\n" for line in lines[:-1]) + lines[-1][:40])
    out = tmp_path / "r.html"
    done = CliRunner().invoke(cli, ["report", str(run), "--out", str(out)])
    assert done.exit_code == 0, done.output
    said = f"{run / artifact}:12: torn last line"
    assert said in done.stderr, done.stderr
    fix = "auditor check" if artifact == "checks.jsonl" else "resume the run"
    assert fix in done.stderr
    html = out.read_text(encoding="utf-8")
    assert 'class="fail damaged"' in html and f"{artifact}:12: torn last line" in html


def test_check_says_a_torn_record_it_leaves_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    lines = _lines(run / "records.jsonl")
    (run / "records.jsonl").write_text("".join(f"{line}\n" for line in lines[:-1]) + "{")
    done = CliRunner().invoke(cli, ["check", str(run)])
    assert done.exit_code == 0, done.output
    assert f"{run / 'records.jsonl'}:12: torn last line" in done.stderr


@pytest.mark.parametrize("damage", ["{trunc", "[1, 2]", '{"metrics": null}'])
def test_a_damaged_summary_is_said_and_regenerated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    report = ["report", str(run), "--out", str(tmp_path / "r.html")]
    assert CliRunner().invoke(cli, report).exit_code == 0
    good = json.loads((run / "summary.json").read_text())["metrics"]
    (run / "summary.json").write_text(damage)
    done = CliRunner().invoke(cli, report)
    assert done.exit_code == 0, done.output
    assert f"{run / 'summary.json'}: damaged" in done.stderr and "regenerated" in done.stderr
    assert json.loads((run / "summary.json").read_text())["metrics"] == good


def test_a_damaged_review_sample_is_said_on_the_terminal_by_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The figures need no review.json, so `report` still writes the report, but the damage is
    said on stderr, not only inside the HTML."""
    run = _checked(tmp_path, monkeypatch, count=12)
    assert CliRunner().invoke(cli, ["review", str(run), "--sample", "4"]).exit_code == 0
    _edit_json(run / "review.json", seed="abc")
    out = tmp_path / "r.html"
    done = CliRunner().invoke(cli, ["report", str(run), "--out", str(out)])
    assert done.exit_code == 0, done.output
    said = f'{run / "review.json"}: "seed" must be a whole number >= 0'
    assert said in done.stderr and "the review of" in done.stderr
    assert 'class="fail review-problem"' in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", [["review", "--sample", "4"], ["report", "--out", "REPORT"]])
def test_a_judge_setting_edited_in_check_json_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """The threshold decides every flag: edited by hand (its hash kept) it would change the
    judge's agreement and the rates' weights with the check's fingerprint unchanged."""
    run = _checked(tmp_path, monkeypatch, count=12)
    check = json.loads((run / "check.json").read_text(encoding="utf-8"))
    check["judge"]["config"]["support_threshold"] = 0.99
    (run / "check.json").write_text(json.dumps(check), encoding="utf-8")
    argv = [command[0], str(run)] + [
        str(tmp_path / "r.html") if a == "REPORT" else a for a in command[1:]
    ]
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 2, done.output
    assert '"judge.config" does not hash to "judge.sha256"' in done.stderr
    assert not (tmp_path / "r.html").exists()
