"""Set-up time on an empty environment, uv against pip: scripts/setup.sh with
AUDITOR_SETUP=uv and AUDITOR_SETUP=pip, taking turns, with warm and with cold package caches.

    .venv/bin/python bench/setup.py [--rounds 2] [--cold-rounds N] [--states warm cold]
        [--tmp /tmp] [--name NAME]

Each timed run builds a new environment in a temporary folder (`AUDITOR_VENV`) from a copy of
the install inputs of this working tree (pyproject.toml, README.md, requirements/,
scripts/setup.sh, auditor/): its wall seconds, whether it succeeded with the installer asked
for, then, untimed, the first `import torch, vllm, faiss, ragas` (uv writes no bytecode at
install, pip does: the first import pays for it) and `pip check`; then the environment goes.
- warm: each side's caches (UV_CACHE_DIR, PIP_CACHE_DIR) filled by one untimed set-up first,
  kept across its timed runs;
- cold: new empty caches for every timed run, so the packages come from the indexes (PyPI,
  and whatever local indexes pip is configured with: both sides get the same ones).
Prints each run's seconds and the median pip/uv ratio per cache state over the rounds (each
round runs both sides, in turn first); writes bench/results/NAME.json. Each environment is
~5 GB and a cold uv cache ~1-2 GB more: see `df -h` for the --tmp folder first.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from bench.harness import REPO, side_order, spread, spread_line, write_result

SIDES = ("uv", "pip")
# what scripts/setup.sh reads: the copy each run builds from (no run writes in this tree)
INPUTS = ("pyproject.toml", "README.md", "requirements", "scripts/setup.sh", "auditor")
IMPORTS = "import torch, vllm, faiss, ragas; print(torch.__version__)"
RUN_TIMEOUT_S = 3600


def copy_inputs(dest: Path) -> Path:
    """The install inputs of this working tree, copied to dest (built, caches left out)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for name in INPUTS:
        src, out = REPO / name, dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, out, ignore=ignore)
        else:
            shutil.copy2(src, out)
    return dest


def setup_once(
    src: Path, side: str, venv: Path, caches: Path, log: Path, *, timed: bool
) -> dict[str, Any]:
    """One scripts/setup.sh run into `venv` with the caches under `caches`; then the venv goes."""
    env = {
        **_environ(),
        "AUDITOR_VENV": str(venv),
        "AUDITOR_SETUP": side,
        "UV_CACHE_DIR": str(caches / "uv"),
        "PIP_CACHE_DIR": str(caches / "pip"),
    }
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        try:
            rc = subprocess.run(
                ["bash", "scripts/setup.sh"],
                cwd=src,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=RUN_TIMEOUT_S,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    seconds = time.perf_counter() - start
    text = log.read_text(encoding="utf-8", errors="replace")
    run: dict[str, Any] = {
        "side": side,
        "seconds": round(seconds, 1),
        # AUDITOR_SETUP=uv has no fallback: "ready (uv)" means uv did every step
        "ok": rc == 0 and f"ready ({side})" in text,
        "rc": rc,
    }
    python = venv / "bin" / "python"
    if timed and run["ok"]:
        start = time.perf_counter()
        first = subprocess.run([python, "-c", IMPORTS], capture_output=True, text=True, env=env)
        run["first_import_s"] = round(time.perf_counter() - start, 1)
        run["torch"] = first.stdout.strip().splitlines()[-1] if first.returncode == 0 else None
        check = subprocess.run(
            [python, "-m", "pip", "check"], capture_output=True, text=True, env=env
        )
        run["pip_check"] = sorted(line for line in check.stdout.splitlines() if line.strip())
        du = subprocess.run(["du", "-sm", venv], capture_output=True, text=True)
        run["venv_mb"] = int(du.stdout.split()[0]) if du.returncode == 0 else None
    if not run["ok"]:
        tail = "\n".join(text.splitlines()[-15:])
        print(f"  {side} failed (rc {rc}); {log}:\n{tail}", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    return run


def _environ() -> dict[str, str]:
    # the bench's own interpreter is another venv's: keep it out of the runs' PATH and env
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if p != bindir)
    return env


def bench_state(
    state: str, rounds: int, src: Path, work: Path, logs: Path
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The timed runs of one cache state, and their figures."""
    runs: list[dict[str, Any]] = []
    warm = work / "cache-warm"
    if state == "warm":
        for side in SIDES:
            print(f"[warm] filling the {side} cache (untimed)", flush=True)
            fill = setup_once(
                src, side, work / "venv", warm / side, logs / f"warm-fill-{side}.log", timed=False
            )
            if not fill["ok"]:
                raise SystemExit(f"filling the {side} cache failed")
    for round_no in range(1, rounds + 1):
        for side in side_order(round_no, SIDES):
            caches = warm / side if state == "warm" else work / f"cache-cold-{round_no}-{side}"
            run = setup_once(
                src,
                side,
                work / "venv",
                caches,
                logs / f"{state}-{round_no}-{side}.log",
                timed=True,
            )
            if state == "cold":
                shutil.rmtree(caches, ignore_errors=True)
            run.update(state=state, round=round_no)
            runs.append(run)
            print(
                f"[{state}] round {round_no} {side:>3}: {run['seconds']:7.1f} s"
                f"  ok={run['ok']}  first import {run.get('first_import_s', '-')} s"
                f"  torch {run.get('torch', '-')}  venv {run.get('venv_mb', '-')} MB",
                flush=True,
            )
    if state == "warm":
        shutil.rmtree(warm, ignore_errors=True)
    return runs, figures_of(runs)


def figures_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per side: seconds and first import; per round with both sides ok: pip/uv."""
    figures: dict[str, Any] = {}
    for side in SIDES:
        ok = [r for r in runs if r["side"] == side and r["ok"]]
        if ok:
            figures[f"{side}_s"] = spread([r["seconds"] for r in ok])
            figures[f"{side}_first_import_s"] = spread([r["first_import_s"] for r in ok])
    ratios = []
    for round_no in sorted({r["round"] for r in runs}):
        pair = {r["side"]: r for r in runs if r["round"] == round_no and r["ok"]}
        if len(pair) == 2:
            ratios.append(pair["pip"]["seconds"] / pair["uv"]["seconds"])
    if ratios:
        figures["pip_over_uv"] = spread(ratios)
    figures["failed_runs"] = sum(not r["ok"] for r in runs)
    return figures


def _version(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return done.stdout.strip() or done.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="Rounds per cache state.")
    parser.add_argument("--cold-rounds", type=int, help="Rounds with cold caches (--rounds).")
    parser.add_argument("--states", nargs="+", choices=("warm", "cold"), default=["warm", "cold"])
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--name", default=f"setup-{time.strftime('%Y-%m-%d')}")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="auditor-setup-bench-", dir=args.tmp))
    logs = Path(tempfile.mkdtemp(prefix="auditor-setup-logs-", dir=args.tmp))
    print(f"work folder {work}, logs {logs}", flush=True)
    try:
        src = copy_inputs(work / "src")
        script = (src / "scripts" / "setup.sh").read_text(encoding="utf-8")
        uv_pin = next(
            line.split("=", 1)[1] for line in script.splitlines() if line.startswith("UV_VERSION=")
        )
        python = shutil.which("python3") or "python3"
        runs: list[dict[str, Any]] = []
        figures: dict[str, Any] = {}
        for state in args.states:
            rounds = args.cold_rounds if state == "cold" and args.cold_rounds else args.rounds
            state_runs, figures[state] = bench_state(state, rounds, src, work, logs)
            runs.extend(state_runs)
            for side in SIDES:
                seconds = [r["seconds"] for r in state_runs if r["side"] == side and r["ok"]]
                if seconds:
                    print(f"{state} {side:>3} seconds: {spread_line(seconds)}", flush=True)
            if "pip_over_uv" in figures[state]:
                ratio = figures[state]["pip_over_uv"]
                print(
                    f"{state} pip/uv: median {ratio['median']:.2f} "
                    f"({ratio['min']:.2f}-{ratio['max']:.2f} over {ratio['rounds']} rounds)",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    pip = _version([python, "-m", "pip", "--version"]).split(" from ")[0]
    write_result(
        args.name,
        "setup",
        figures,
        note=f"scripts/setup.sh into an empty venv: uv {uv_pin} against {pip}, "
        "warm and cold package caches",
        command=shlex.join(["bench/setup.py", *sys.argv[1:]]),
        uv=uv_pin,
        pip=pip,
        python=_version([python, "--version"]),
        setup_sh_sha256=hashlib.sha256(script.encode()).hexdigest(),
        runs=runs,
    )


if __name__ == "__main__":
    main()
