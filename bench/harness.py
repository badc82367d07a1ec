"""What every bench shares: side order by round, the spread of ratios, and the results file.

A bench that times two sides runs them in `side_order(round)` (the first side first in odd
rounds, second in even ones: warm caches and thermal drift do not favour one side), prints
`spread(ratios)` next to the median, and writes bench/results/NAME.json with `write_result`:
the figures with the date, the machine (CPU model, cores, the flags that decide the fast
kernels), the dtype and the package versions, so that docs/evidence.md (built by
scripts/evidence.py) quotes no figure without its run.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from auditor.versions import package_versions

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]
# the CPU flags that decide which kernels vLLM and torch use on this machine
KERNEL_FLAGS = {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni"}

Side = TypeVar("Side")


def side_order(round_no: int, sides: Sequence[Side]) -> list[Side]:
    """The sides in the order round `round_no` (from 1) runs them: alternating."""
    return list(sides) if round_no % 2 else list(reversed(sides))


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of per-round figures (the rounds' spread is the noise floor)."""
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "rounds": len(values),
    }


def spread_line(values: Sequence[float]) -> str:
    s = spread(values)
    return (
        f"median {s['median']:.3f} (spread {s['min']:.3f}-{s['max']:.3f} over {s['rounds']} rounds)"
    )


def machine() -> dict[str, Any]:
    """CPU model, cores this process may use, and the kernel-deciding flags it has."""
    model, flags = platform.processor() or "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return {
        "machine": platform.machine(),
        "model": model,
        "cores": len(os.sched_getaffinity(0)),
        "flags": sorted(flags & KERNEL_FLAGS),
        # kept for older results' readers: the bf16 flags alone
        "bf16": sorted(flags & {"amx_bf16", "avx512_bf16"}),
    }


def relative(path: Path) -> str:
    """A data path as the results file names it: relative to the repo where it can be."""
    resolved = path.resolve()
    for base, prefix in ((REPO, ""), (REPO.parent / "shared", "../shared/")):
        if resolved.is_relative_to(base.resolve()):
            return prefix + str(resolved.relative_to(base.resolve()))
    return str(path)


def machine_paths_relative(text: str) -> str:
    """A results file's text without this machine's folders: the repo's root dropped, the
    home folder as ~, a temporary work folder as WORKDIR (the file is committed)."""
    text = text.replace(str(REPO) + "/", "").replace(str(Path.home()) + "/", "~/")
    return re.sub(r"/tmp/[A-Za-z0-9_.-]+/", "WORKDIR/", text)


def write_result(
    name: str,
    bench: str,
    figures: dict[str, Any],
    *,
    note: str = "",
    data: Sequence[Path] = (),
    dtype: str | None = None,
    **extra: Any,
) -> Path:
    """bench/results/NAME.json: the figures and the run they come from."""
    RESULTS.mkdir(exist_ok=True)
    result = {
        "bench": bench,
        "note": note,
        "data": [relative(p) for p in data],
        "date": time.strftime("%Y-%m-%d"),
        "cpu": machine(),
        "dtype": dtype,
        "packages": package_versions(),
        **extra,
        "figures": figures,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(machine_paths_relative(json.dumps(result, indent=1)) + "\n", encoding="utf-8")
    print(f"-> {path}")
    return path
