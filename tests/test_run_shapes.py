"""A damaged run dir, beyond the fault suite's one-answer cases (tests/test_faults_inputs.py):
review samples of the wrong kind, a torn last line said and shown, a damaged summary.json said
and regenerated (with the fake judge)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import IngestConfig, PipelineConfig
from auditor.ingest import ingest_corpus
from auditor.run import run_pipeline
from auditor.testing import FakeEmbedder, FakeGenerator
from tests.test_review import _checked
from tests.verify.test_calibrate import _fakes, _labelled


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
    if artifact == "records.jsonl":  # never checked (a kill while the run grew), or the
        # checks name a stray answer: its check row goes, and check.json counts one fewer
        kept = _lines(run / "checks.jsonl")[:-1]
        _write(run / "checks.jsonl", kept)
        claims = sum(len(json.loads(line)["claims"]) for line in kept)
        _edit_json(run / "check.json", totals={"answers": len(kept), "claims": claims})
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


# files and run dirs (issue 48): a run dir agrees with its manifests' totals

DOCS = {"returns.md": "# Returns\n\nUnopened thermostats can be returned within 30 days."}
PIPELINE = {
    "name": "fake",
    "ingest": {"embedder": {"model": "fake-words"}},
    "retrieval": {"top_k": 1},
    "generator": {"kind": "vllm", "model": "smollm2-135m-instruct"},
}


def _pipeline_run(
    tmp: Path, count: int = 8, fake: FakeGenerator | None = None, limit: int | None = None
) -> Path:
    """A run dir of `count` questions (the first `limit` asked) answered by the fake
    generator, as `auditor run` writes it."""
    index = tmp / "index"
    if not index.exists():
        (tmp / "docs").mkdir()
        for name, text in DOCS.items():
            (tmp / "docs" / name).write_text(text)
        ingest_corpus(tmp / "docs", index, IngestConfig(), FakeEmbedder())
    questions = tmp / "q.jsonl"
    questions.write_text(
        "".join(
            json.dumps({"id": f"q{k}", "question": f"Returns of T{k}?"}) + "\n"
            for k in range(count)
        )
    )
    run = tmp / "run"
    config = PipelineConfig.model_validate(PIPELINE)
    made = fake or FakeGenerator()
    run_pipeline(config, questions, index, run, generator_factory=lambda *a, **k: made, limit=limit)
    return run


def _report(run: Path, *extra: str) -> Any:
    return CliRunner().invoke(
        cli, ["report", str(run), "--out", str(run.parent / "r.html"), *extra]
    )


@pytest.mark.usefixtures("use_fake_embedder")
def test_records_appended_past_the_totals_are_refused(tmp_path: Path) -> None:
    """8 requests grown to 48 rows (new ids, the same answers): tok/s went 6x up unsaid."""
    run = _pipeline_run(tmp_path)
    assert _report(run).exit_code == 0
    rows = [json.loads(line) for line in _lines(run / "records.jsonl")]
    more = [row | {"id": f"{row['id']}-{k}"} for k in range(5) for row in rows]
    _write(run / "records.jsonl", [json.dumps(row) for row in rows + more])
    done = _report(run)
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith(
        f"Error: {run / 'records.jsonl'}: 48 rows, but manifest.json says 8 requests "
        "(totals.requests); the records were appended to, or the manifest is of another run; "
        "re-run into a new --out"
    )
    check = CliRunner().invoke(cli, ["check", str(run)])  # refused before a judge starts
    assert check.exit_code == 2 and "48 rows, but manifest.json says 8" in check.stderr
    _write(run / "records.jsonl", [json.dumps(row) for row in rows[:5]])
    done = _report(run)
    assert done.exit_code == 2
    assert (
        "5 rows, but manifest.json says 8 requests (totals.requests); the records were cut or replaced"
        in done.stderr
    )


@pytest.mark.usefixtures("use_fake_embedder")
@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda row: row.update(output_tokens=row["output_tokens"] + 40),
            "output tokens, but manifest.json says",
        ),
        (lambda row: row.update(error="down"), "answered requests, but manifest.json says"),
    ],
)
def test_a_token_or_count_total_edited_is_refused(tmp_path: Path, change: Any, said: str) -> None:
    run = _pipeline_run(tmp_path)
    rows = [json.loads(line) for line in _lines(run / "records.jsonl")]
    change(rows[0])
    _write(run / "records.jsonl", [json.dumps(row) for row in rows])
    done = _report(run)
    assert done.exit_code == 2 and said in done.stderr and "manifest.json says" in done.stderr


@pytest.mark.usefixtures("use_fake_embedder")
def test_the_manifest_times_are_held_to_their_sessions(tmp_path: Path) -> None:
    run = _pipeline_run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["sessions"][0]["generation_s"] = 1.0  # tok/s eight times up
    (run / "manifest.json").write_text(json.dumps(manifest))
    done = _report(run)
    assert done.exit_code == 2
    assert "its sessions generated for 1 s, but it says 8 s (totals.generation_s)" in done.stderr


@pytest.mark.usefixtures("use_fake_embedder")
def test_a_run_killed_mid_answer_is_read_and_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill (no `finally`) leaves the session in the manifest without "completed" and rows
    past the totals: read as it is, never more rows than the session asked for, and the
    resume closes the session and brings the totals up to date."""
    _fakes(monkeypatch)  # the fake judge checks it
    run = _pipeline_run(tmp_path, count=8, limit=4)
    index, questions = tmp_path / "index", tmp_path / "q.jsonl"
    config = PipelineConfig.model_validate(PIPELINE)

    fake = FakeGenerator()
    fake.stop_after = 2
    snapshot: dict[str, Any] = {}
    real_close = fake.close

    def close() -> None:  # the manifest as a kill would have left it: before `finally`
        snapshot["manifest"] = (run / "manifest.json").read_text()
        real_close()

    fake.close = close  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(config, questions, index, run, generator_factory=lambda *a, **k: fake)
    (run / "manifest.json").write_text(snapshot["manifest"])
    manifest = json.loads(snapshot["manifest"])
    assert manifest["status"] == "running" and "completed" not in manifest["sessions"][-1]
    assert manifest["totals"]["requests"] == 4 and len(_lines(run / "records.jsonl")) == 6
    check = CliRunner().invoke(cli, ["check", str(run), "-q"])
    assert check.exit_code == 0, check.output
    assert _report(run).exit_code == 0
    rows = _lines(run / "records.jsonl")
    # 9 rows: past the 4 + 4 the killed session could have written
    extra = [json.dumps(json.loads(rows[0]) | {"id": f"x{k}"}) for k in range(3)]
    _write(run / "records.jsonl", rows + extra)
    done = _report(run)
    assert done.exit_code == 2 and "9 rows, but manifest.json says 4 requests" in done.stderr
    _write(run / "records.jsonl", rows)
    again = FakeGenerator()
    run_pipeline(config, questions, index, run, generator_factory=lambda *a, **k: again)
    assert [r.request_id for r in again.history] == ["q6", "q7"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["totals"]["requests"] == 8 and manifest["status"] == "complete"
    assert [s["completed"] for s in manifest["sessions"]] == [4, 2, 2]
    assert manifest["sessions"][1]["interrupted"]


@pytest.mark.usefixtures("use_fake_embedder")
def test_a_resume_with_nothing_left_brings_the_totals_up_to_date(tmp_path: Path) -> None:
    """Killed after its last record (by an earlier auditor: no session written): the rows are
    past the totals and refused, and the resume, with no question left, repairs it."""
    run = _pipeline_run(tmp_path, count=3)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["totals"] |= {"requests": 2, "completed": 2}
    (run / "manifest.json").write_text(json.dumps(manifest))
    done = _report(run)
    assert done.exit_code == 2 and "resume it into the same --out" in done.stderr
    _pipeline_run(tmp_path, count=3)  # the same command again: nothing left to answer
    assert _report(run).exit_code == 0


def test_imported_answers_agree_with_their_source_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=4)
    rows = _lines(run / "records.jsonl")
    _write(run / "records.jsonl", [*rows, json.dumps(json.loads(rows[0]) | {"id": "extra"})])
    done = _report(run)
    assert done.exit_code == 2
    assert done.stderr.startswith(
        f"Error: {run / 'records.jsonl'}: 5 rows, but manifest.json says it imported 4 answers "
        "(source.count); the records were appended to"
    )


def test_checks_appended_past_check_json_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers checked with --limit 2; a row for a third appended by hand (its answer is in
    the records, so no stray id tells it)."""
    _fakes(monkeypatch)
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in _labelled(4)))
    run = tmp_path / "run"
    args = ["check", "--answers", str(answers), "--out", str(run), "-q", "--limit", "2"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert json.loads((run / "check.json").read_text())["totals"]["answers"] == 2
    assert _report(run).exit_code == 0
    rows = _lines(run / "checks.jsonl")
    _write(run / "checks.jsonl", [*rows, json.dumps(json.loads(rows[0]) | {"id": "a3"})])
    done = _report(run)
    assert done.exit_code == 2
    assert done.stderr.startswith(
        f"Error: {run / 'checks.jsonl'}: 3 rows, but check.json says it checked 2 answers "
        "(totals.answers); the checks were appended to, or check.json is of another check"
    )
    _write(run / "checks.jsonl", rows)  # all four checked by the command: the totals follow
    assert CliRunner().invoke(cli, ["check", str(run), "-q"]).exit_code == 0
    assert json.loads((run / "check.json").read_text())["totals"]["answers"] == 4
    assert _report(run).exit_code == 0


def test_a_cut_record_with_its_check_is_blamed_on_the_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A records.jsonl whose last line is cut (a copy cut short) while checks.jsonl checked
    that answer was blamed on "different runs"; re-importing the answers repairs it."""
    run = _checked(tmp_path, monkeypatch, count=4)
    lines = _lines(run / "records.jsonl")
    (run / "records.jsonl").write_text("".join(f"{line}\n" for line in lines[:-1]) + lines[-1][:30])
    done = _report(run)
    assert done.exit_code == 2
    assert done.stderr.startswith(
        f"Error: {run / 'records.jsonl'}:4: the last line is cut off (an interrupted write, or "
        "a copy cut short), and checks.jsonl checks that answer ('a3')"
    )
    assert "different runs" not in done.stderr
    args = ["check", "--answers", str(tmp_path / "answers.jsonl"), "--out", str(run), "-q"]
    redo = CliRunner().invoke(cli, args)
    assert redo.exit_code == 0, redo.output
    assert _lines(run / "records.jsonl") == lines
    assert _report(run).exit_code == 0
