"""Write `make test`'s seconds per phase as JSON (called by scripts/test.sh at its end).

    python scripts/test_times.py FILE TOTAL_S "NAME SECONDS STATUS" ...

The file names the machine the way bench results do (CPU model, cores, the kernel flags:
without avx512_bf16 or amx_bf16 every engine runs in float32), the commit and the date, so a
suite time in the docs comes from a file, as every other figure does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _machine() -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    try:
        from bench.harness import machine
    except ImportError:  # no environment yet (the set-up failed): what the shell can tell
        return {"cores": None, "flags": [], "bf16": []}
    return machine()


def _commit() -> str | None:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return found.stdout.strip()


def main(argv: list[str]) -> None:
    path, total, entries = Path(argv[0]), float(argv[1]), argv[2:]
    phases = []
    for entry in entries:
        name, seconds, status = entry.split(maxsplit=2)
        phases.append({"phase": name, "seconds": float(seconds), "status": status})
    cpu = _machine()
    record = {
        "bench": "make test",
        "date": time.strftime("%Y-%m-%d"),
        "commit": _commit(),
        "cpu": cpu,
        "engines_dtype": "bfloat16" if cpu.get("bf16") else "float32",
        "figures": {"total_s": round(total, 1), "phases": phases},
    }
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"phase times -> {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
