"""Output checks: every command's --out (and ingest's --index) is refused in one line naming
the option and the path, exit code 2, before anything is written or any engine starts."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.audit import finish_audit
from auditor.cli import cli
from auditor.errors import BadInput
from auditor.files import Read, check_output_dir, check_output_file
from auditor.testing import FakeEmbedder, FakeJudge
from tests.test_faults_inputs import (
    ANSWER,
    _audit,
    _corpus,
    _good_run,
    _index,
    _out,
    _run_with_index,
    _tree,
    _write,
)

FIX_PATH = "give --out a path in a writable directory"


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake embedder and judge, and a history database in tmp_path."""
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setenv("AUDITOR_HISTORY", str(tmp_path / "history.sqlite"))


def _reported_run(tmp: Path) -> Path:
    """A checked run dir with its summary.json, as `auditor report` left it."""
    run = _good_run(tmp)
    done = CliRunner().invoke(cli, ["report", str(run)])
    assert done.exit_code == 0, done.output
    assert (run / "summary.json").is_file()
    return run


def _report_into_its_run_dir(tmp: Path) -> tuple[list[str], str]:
    run = _reported_run(tmp)
    return ["report", str(run), "--out", str(run)], (
        f"--out {run}: is a directory; give --out a file path"
    )


def _report_under_a_file(tmp: Path) -> tuple[list[str], str]:
    run, target = _reported_run(tmp), tmp / "afile" / "x.html"
    _write(tmp / "afile", "x")
    return ["report", str(run), "--out", str(target)], (
        f"--out {target}: {tmp / 'afile'} is not a directory; {FIX_PATH}"
    )


def _report_in_proc(tmp: Path) -> tuple[list[str], str]:
    run = _reported_run(tmp)
    return ["report", str(run), "--out", "/proc/x.html"], (
        f"--out /proc/x.html: cannot create files in /proc; {FIX_PATH}"
    )


def _under_a_file(
    make: Callable[[Path, Path], list[str]], option: str = "--out"
) -> Callable[[Path], tuple[list[str], str]]:
    """A command whose output dir is `afile/out`, where afile is a file."""

    def case(tmp: Path) -> tuple[list[str], str]:
        target = tmp / "afile" / "out"
        args = make(tmp, target)
        _write(tmp / "afile", "x")
        return args, (
            f"{option} {target}: {tmp / 'afile'} is not a directory; give {option} a path in a "
            "writable directory"
        )

    return case


def _check_answers(tmp: Path, target: Path) -> list[str]:
    answers = _write(tmp / "answers.jsonl", json.dumps(ANSWER) + "\n")
    return ["check", "--answers", str(answers), "--out", str(target)]


def _calibrate(tmp: Path, target: Path) -> list[str]:
    labels = _write(tmp / "labels.jsonl", json.dumps(ANSWER | {"hallucinated": False}) + "\n")
    return ["calibrate", "--labels", str(labels), "--out", str(target)]


def _run(tmp: Path, target: Path) -> list[str]:
    return _out(_run_with_index(_index)(tmp), target)


def _ingest(tmp: Path, target: Path) -> list[str]:
    return ["ingest", str(_corpus(tmp, {"a.md": "Thermostats."})), "--index", str(target)]


OUTPUTS = {
    "report --out an existing dir": _report_into_its_run_dir,
    "report --out under a file": _report_under_a_file,
    "report --out where no file can be made": _report_in_proc,
    "check --answers --out under a file": _under_a_file(_check_answers),
    "calibrate --out under a file": _under_a_file(_calibrate),
    "audit --out under a file": _under_a_file(lambda tmp, target: _out(_audit(tmp), target)),
    "run --out under a file": _under_a_file(_run),
    "ingest --index under a file": _under_a_file(_ingest, "--index"),
}


@pytest.mark.usefixtures("fakes")
@pytest.mark.parametrize("make", list(OUTPUTS.values()), ids=list(OUTPUTS))
def test_a_bad_output_is_refused_before_anything_is_written(
    make: Callable[[Path], tuple[list[str], str]], tmp_path: Path
) -> None:
    """One line naming the option and the path, exit code 2, and every file (a run dir's
    summary.json first of all) left as it was."""
    args, message = make(tmp_path)
    before = _tree(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"Error: {message}\n"
    assert _tree(tmp_path) == before, "a refused command wrote or changed files"


@pytest.mark.usefixtures("fakes")
def test_finish_audit_checks_the_report_path_before_writing_summaries(tmp_path: Path) -> None:
    """The Python API refuses a report path under a file before any summary.json is written."""
    run = _good_run(tmp_path)
    _write(tmp_path / "afile", "x")
    target = tmp_path / "afile" / "report.html"
    with pytest.raises(BadInput) as refused:
        finish_audit([run], target)
    assert (
        str(refused.value) == f"--out {target}: {tmp_path / 'afile'} is not a directory; {FIX_PATH}"
    )
    assert not (run / "summary.json").exists()


def test_output_checks_say_what_is_wrong(tmp_path: Path) -> None:
    """A file where a dir is wanted, a dir where a file is, a folder that takes no files."""
    afile = _write(tmp_path / "afile", "x")
    with pytest.raises(BadInput) as refused:
        check_output_dir(afile, "--out")
    assert str(refused.value) == f"--out {afile}: not a directory; give --out a directory path"
    with pytest.raises(BadInput) as refused:
        check_output_file(tmp_path, "--out")
    assert str(refused.value) == f"--out {tmp_path}: is a directory; give --out a file path"
    with pytest.raises(BadInput) as refused:
        check_output_dir(Path("/proc"), "--out")
    assert (
        str(refused.value)
        == "--out /proc: cannot create files in it; give --out a writable directory"
    )
    with pytest.raises(BadInput) as refused:
        check_output_dir(Path("/proc/new/run"), "--index")
    assert str(refused.value) == (
        "--index /proc/new/run: cannot create files in /proc; give --index a path in a "
        "writable directory"
    )


@pytest.mark.parametrize("unnamed_files", [True, False], ids=["O_TMPFILE", "named-probe"])
def test_a_good_output_passes_and_its_folders_stay_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed_files: bool
) -> None:
    """New nested paths and existing dirs pass; checking them creates and changes nothing,
    also where the file system has no unnamed files (a probe file made and removed)."""
    if not unnamed_files:
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    (tmp_path / "run").mkdir()
    before = _tree(tmp_path), os.stat(tmp_path).st_mtime_ns
    check_output_dir(tmp_path / "run", "--out")
    check_output_dir(tmp_path / "new" / "deeper", "--out")
    check_output_file(tmp_path / "run" / "report.html", "--out")
    check_output_file(tmp_path / "new" / "report.html", "--out")
    assert (_tree(tmp_path), os.stat(tmp_path).st_mtime_ns) == before


@pytest.mark.usefixtures("fakes")
def test_outputs_beside_their_inputs_pass(tmp_path: Path) -> None:
    """An output may sit next to what the command reads, and at the place the command writes
    in a run dir itself (report.html, the default); a hard link onto an input is refused."""
    run = _good_run(tmp_path)
    done = CliRunner().invoke(cli, ["report", str(run), "--out", str(run / "report.html")])
    assert done.exit_code == 0, done.output
    labels = _write(tmp_path / "c" / "labels.jsonl", "{}\n")
    folder = Read("RUN_DIR", run, folder=True, writes=("report.html",))
    check_output_file(tmp_path / "elsewhere.html", "--out", [folder, Read("--labels", labels)])
    check_output_file(labels, "--out", [Read("--labels", None), Read("--x", tmp_path / "none")])
    check_output_dir(tmp_path / "c", "--out", [Read("--labels", labels)], ["calibration.json"])
    os.link(labels, tmp_path / "hard.jsonl")
    with pytest.raises(BadInput) as refused:
        check_output_file(tmp_path / "hard.jsonl", "--out", [Read("--labels", labels)])
    assert str(refused.value) == (
        f"--out {tmp_path / 'hard.jsonl'}: would overwrite --labels {labels}, which this command "
        "reads; give --out another path"
    )
