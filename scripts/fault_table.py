"""docs/faults.md's bad-input table, rewritten from the messages the commands print.

    .venv/bin/python scripts/fault_table.py

Runs the fault suite (`tests/test_faults_inputs.py`) with AUDITOR_FAULT_TABLE set, so each case
appends its real message (paths relative to its folder, long lines cut) instead of comparing
it with the table, then writes one row per case, in the suite's order, between the line that
states the count and the first blank line after the table. The suite, run normally, fails
when a message and its row disagree.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "faults.md"
HEADER = "| bad input | what the user gets | exit |\n|---|---|---|\n"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "faults.jsonl"
        env = os.environ | {"AUDITOR_FAULT_TABLE": str(out)}
        test = "tests/test_faults_inputs.py::test_bad_input_is_one_line_with_exit_code_and_no_traceback"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
            cwd=REPO,
            env=env,
        )
        if done.returncode != 0:
            print("the fault suite failed: the table is left as it was", file=sys.stderr)
            return 1
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    sys.path.insert(0, str(REPO))
    from tests.test_faults_inputs import CASES

    by_case = {row["case"]: row for row in rows}
    table = "".join(
        f"| {c.name} | `{by_case[c.name]['message']}` | {by_case[c.name]['exit']} |\n"
        for c in CASES
    )
    text = DOC.read_text(encoding="utf-8")
    start = text.index(HEADER) + len(HEADER)
    end = text.index("\n\n", start) + 1
    text = text[:start] + table + text[end:]
    text = re.sub(r"(`tests/test_faults_inputs\.py`, )\d+( cases)", rf"\g<1>{len(CASES)}\2", text)
    DOC.write_text(text, encoding="utf-8")
    print(f"{DOC}: {len(CASES)} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
