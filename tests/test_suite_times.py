"""`make test` records its seconds per phase (scripts/test.sh -> scripts/test_times.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_phase_times_are_written_with_the_machine_they_ran_on(tmp_path: Path) -> None:
    out = tmp_path / "times.json"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "test_times.py"),
            str(out),
            "12.5",
            "setup 1.0 passed",
            "unit 3.5 failed(1)",
        ],
        check=True,
        capture_output=True,
    )
    record = json.loads(out.read_text())
    assert record["figures"]["total_s"] == 12.5
    assert record["figures"]["phases"] == [
        {"phase": "setup", "seconds": 1.0, "status": "passed"},
        {"phase": "unit", "seconds": 3.5, "status": "failed(1)"},
    ]
    flags = set(Path("/proc/cpuinfo").read_text().split())
    bf16 = bool(flags & {"avx512_bf16", "amx_bf16"})
    assert record["engines_dtype"] == ("bfloat16" if bf16 else "float32")
    assert record["cpu"]["cores"] >= 1 and record["commit"]


def test_make_test_runs_every_phase_in_order() -> None:
    """The phases CI's log shows, in the order a failure stops them."""
    script = (REPO / "scripts" / "test.sh").read_text()
    phases = [line.split()[1] for line in script.splitlines() if line.startswith("run_phase ")]
    assert phases == ["setup", "browser", "lint", "mypy", "unit", "e2e"]
    makefile = (REPO / "Makefile").read_text()
    assert "\t@bash scripts/test.sh" in makefile.split("\ntest:", 1)[1].split("\n\n")[0]


def test_the_engines_shard_names_end_to_end_files_that_exist() -> None:
    """scripts/test.sh runs these files in one shard and every other end-to-end test in the
    other: a renamed file must be renamed there too (pytest would stop on a missing path)."""
    script = (REPO / "scripts" / "test.sh").read_text()
    block = script.split("ENGINES_SHARD=(", 1)[1].split(")", 1)[0]
    files = block.split()
    assert files and all((REPO / f).is_file() and f.startswith("tests/e2e/") for f in files)
    assert len(files) == len(set(files))
