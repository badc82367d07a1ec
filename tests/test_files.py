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


# files and run dirs (issue 48): no output on an input nor on another output of the same
# command, existing or not yet, through symbolic and hard links


@pytest.mark.usefixtures("fakes")
def test_report_out_onto_its_new_history_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """`report --record --history H --out H` with H new wrote the history row, then the HTML
    over it (exit 0; every later report with that history failed)."""
    run = _good_run(tmp_path)
    history = tmp_path / "h.sqlite"
    before = _tree(tmp_path)
    args = ["report", str(run), "--record", "--history", str(history), "--out", str(history)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2, done.output
    assert done.stderr == (
        f"Error: --out {history}: would overwrite --history {history}, which this command also "
        "writes; give --out another path\n"
    )
    assert _tree(tmp_path) == before and not history.exists()
    # through a link to the (new) history, and without --record (the history is read, and
    # the report on it would make it no history)
    link = tmp_path / "link.html"
    link.symlink_to(history)
    done = CliRunner().invoke(
        cli, ["report", str(run), "--history", str(history), "--out", str(link)]
    )
    assert done.exit_code == 2 and "would overwrite --history" in done.stderr, done.output
    assert "which this command reads" in done.stderr


@pytest.mark.usefixtures("fakes")
def test_report_history_onto_the_default_report_or_a_summary_is_refused(tmp_path: Path) -> None:
    run = _good_run(tmp_path)
    default = run / "report.html"
    done = CliRunner().invoke(cli, ["report", str(run), "--history", str(default)])
    assert done.exit_code == 2, done.output
    assert done.stderr == (
        f"Error: --history {default}: would overwrite --out {default}, which this command also "
        "writes; give --history another path\n"
    )
    labels = _write(tmp_path / "l.jsonl", '{"id": "a1", "hallucinated": false}\n')
    os.link(labels, run / "summary.json")  # summary.json is the labels file, by inode
    before = _tree(tmp_path)
    done = CliRunner().invoke(cli, ["report", str(run), "--labels", str(labels)])
    assert done.exit_code == 2, done.output
    assert done.stderr == (
        f"Error: RUN_DIR {run}: {run / 'summary.json'} would overwrite --labels {labels}, which "
        "this command reads; give --labels another path\n"
    )
    assert _tree(tmp_path) == before


@pytest.mark.usefixtures("fakes")
def test_audit_history_onto_its_report_or_bundle_is_refused(tmp_path: Path) -> None:
    report = tmp_path / "audit" / "report.html"
    done = CliRunner().invoke(cli, _audit(tmp_path, "--history", str(report)))
    assert done.exit_code == 2, done.output
    assert done.stderr == (
        f"Error: --history {report}: would overwrite --out {report}, which this command also "
        "writes; give --history another path\n"
    )
    key = _write(tmp_path / "k", "not read: refused before")
    history = tmp_path / "h.sqlite"
    args = _audit(tmp_path, "--history", str(history), "--bundle", str(history), "--key", str(key))
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith(
        f"Error: --bundle {history}: would overwrite --history {history}, which this command "
        "also writes"
    )


@pytest.mark.usefixtures("fakes")
def test_a_run_dir_given_twice_is_refused(tmp_path: Path) -> None:
    """`review RUN RUN` drew and wrote review.json twice; through a link, too."""
    run = _good_run(tmp_path)
    link = tmp_path / "again"
    link.symlink_to(run)
    for command in ("review", "report"):
        extra = ["--sample", "1"] if command == "review" else []
        done = CliRunner().invoke(cli, [command, str(run), str(link), *extra])
        assert done.exit_code == 2, done.output
        assert done.stderr == (
            f"Error: RUN_DIR {link}: the same as RUN_DIR {run} (given twice, or a link to it); "
            "give each RUN_DIR once\n"
        )
    assert not (run / "review.json").exists()


def test_keygen_refuses_a_key_that_is_its_public_key(tmp_path: Path) -> None:
    """KEY and KEY.pub one file through a link: --force would write the public key over it."""
    key = tmp_path / "k"
    _write(tmp_path / "k.pub", "x")
    key.symlink_to(tmp_path / "k.pub")
    done = CliRunner().invoke(cli, ["keygen", "--out", str(key), "--force"], input="pw\npw\n")
    assert done.exit_code == 2, done.output
    assert done.stderr == (
        f"Error: --out {key}: would overwrite KEY.pub {tmp_path / 'k.pub'}, which this command "
        "also writes; give --out another path\n"
    )


def test_an_output_is_compared_with_outputs_not_made_yet(tmp_path: Path) -> None:
    """A read that does not exist yet is compared by its path (resolved): the same path, a
    link to it, a dir that would hold it; a folder not made yet keeps its own files."""
    new = tmp_path / "new" / "h.sqlite"
    written = Read("--history", new, written=True)
    for given in (new, tmp_path / "new" / "." / "h.sqlite"):
        with pytest.raises(BadInput, match="would overwrite --history"):
            check_output_file(given, "--out", [written])
    link = tmp_path / "link"
    link.symlink_to(new)
    with pytest.raises(BadInput, match="which this command also writes"):
        check_output_file(link, "--out", [written])
    with pytest.raises(BadInput, match="would hold --history"):
        check_output_dir(tmp_path / "new", "--index", [written])
    folder = Read("--out", tmp_path / "d", folder=True, writes=("report.html",))
    check_output_file(tmp_path / "d" / "report.html", "--bundle", [folder])
    with pytest.raises(BadInput, match="would write into --out"):
        check_output_file(tmp_path / "d" / "b.tar", "--bundle", [folder])
    check_output_file(tmp_path / "other.html", "--out", [written, folder])
