"""A quiet terminal: while engines run, descriptor 2 (libraries, C++, child processes) goes to
the command's log and the auditor's own lines to the terminal; a failure shows the log's tail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = """
import os, sys, warnings
from pathlib import Path

import pytest
from auditor.cli.terminal import engine_output_to, terminal
with engine_output_to(Path(sys.argv[1])):
    os.system("echo child-noise >&2")
    print("python-noise", file=sys.stderr)
    warnings.warn("library-warning")
    print("our progress", file=terminal())
    if sys.argv[2] == "fail":
        os.system("echo engine-error-detail >&2")
        raise RuntimeError("engine died")
print("after", file=sys.stderr)
"""


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    log = tmp_path / mode / "engine.log"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(log), mode],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    return done, log


def test_third_party_output_goes_to_the_log_and_ours_to_the_terminal(tmp_path: Path) -> None:
    done, log = _run(tmp_path, "ok")
    assert done.returncode == 0
    assert f"engine and library logs: {log}" in done.stderr
    assert "our progress" in done.stderr and "after" in done.stderr  # restored afterwards
    for noise in ("child-noise", "python-noise", "library-warning"):
        assert noise not in done.stderr and noise in log.read_text()


def test_a_failure_shows_the_logs_last_lines(tmp_path: Path) -> None:
    done, log = _run(tmp_path, "fail")
    assert done.returncode != 0
    assert f"last lines of {log}:" in done.stderr and "engine-error-detail" in done.stderr
    assert "RuntimeError: engine died" in done.stderr


def test_progress_rates_read_in_the_unit_a_person_uses() -> None:
    from auditor.cli.progress import _rate

    assert _rate(2.5) == "2.5/s" and _rate(0.2) == "12.0/min" and _rate(0.0005) == "1.8/h"
    assert _rate(None) == "" and _rate(0.0) == ""


def test_the_stage_row_shows_under_the_bar_with_its_own_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from auditor.cli import progress

    screen = io.StringIO()
    monkeypatch.setattr(progress, "terminal", lambda: screen)
    display = progress.StderrProgress()
    display.bar("checking run-[a]", 4)
    display.step("stage 2/2: claim-chunk labels", 7, 30)
    shown = [task.description for task in display._bar.tasks]
    assert shown == ["checking run-\\[a]", "  stage 2/2: claim-chunk labels"]
    assert display._bar.tasks[1].completed == 7 and display._bar.tasks[1].total == 30
    display.step("stage 1/2: claims", 0, 8)  # the next batch: the row is replaced
    assert [task.total for task in display._bar.tasks] == [4, 8]
    display.stop()
    assert not display.active
