"""Where `make demo`'s time goes, and what preparing models ahead saves.

    .venv/bin/python bench/demo_stages.py [--parts pairs,overlap,from-nothing] [--rounds 1]
        [--pair-rounds 2] [--tmp /tmp/demo-stages] [--max-load 1.5] [--name NAME]

- pairs: each overlap the audit makes, alone and beside the conversion it overlaps, each in a
  new process, sides in turn: the 0.5B's engine start alone, beside the 1.5B's conversion at
  normal priority and at idle priority (what the background uses while the audit works;
  normal again once the foreground is done, as while the audit waits); the first retrieval
  (the embedder's load) alone and beside the 0.5B's conversion at both priorities. Per
  side: the foreground's seconds and the seconds until both were done.

- overlap: the demo's audit (its pipelines, questions, judge settings, gates and review, as the
  Makefile runs it) twice a round, each from an empty model cache into a new out dir, on one
  index built first (untimed): "serial" prepares each model when its engine is about to start,
  "ahead" (the default) prepares them in a background thread from the start (while the
  previous pipeline retrieves and its engine starts; nothing in the background while an
  engine generates or checks). The sides take turns to go first. Per side: the audit's wall
  seconds, the seconds up to the last pipeline's answers (what the overlap can shorten) and
  each stage's seconds from the audit's timings.json; the serial/ahead ratios.
- from-nothing: `make demo` with a new environment (AUDITOR_VENV), an empty model cache
  (AUDITOR_MODELS_DIR), a new index, out dir and history, all under --tmp; the main .venv
  and caches are not touched. The package downloads come from uv's cache when it is warm:
  the results file says how big that cache was. Its figures: make's wall seconds and every
  stage of the demo's table (set-up and ingest included).

Before each timed run the bench waits (up to --wait-s) for the 1-minute load average to fall
below --max-load, so that another job's work is not counted, and records the load it started
and ended at. Writes bench/results/NAME.json (a part run alone keeps the other part's figures
already in the file). ~10 min per audit on 2 cores with bf16; the new environment is ~5 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from bench.harness import REPO, RESULTS, side_order, spread, spread_line, write_result

SIDES = ("serial", "ahead")
PAIR_SIDES = ("alone", "normal", "idle")
RUN_TIMEOUT_S = 3600
ENGINE_MODEL, CONVERTED = "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"


def makefile_value(name: str) -> str:
    """A variable of the Makefile as make expands it (the demo's settings, kept in one place)."""
    out = subprocess.run(
        ["make", "--no-print-directory", "-s", "-f", "Makefile", "-f", "-", "print"],
        input=f"print:\n\t@:$(info $({name}))\n",  # as written: no shell between
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def demo_audit_args(index: Path, out: Path) -> list[str]:
    """`auditor audit`'s arguments in the Makefile's demo, with another index and out dir."""
    pipelines = makefile_value("DEMO_PIPELINES").split()
    limit = makefile_value("DEMO_LIMIT")
    args = ["audit", *(a for p in pipelines for a in ("--pipeline", p))]
    args += ["--questions", str(REPO / makefile_value("QUESTIONS")), "--index", str(index)]
    args += ["--limit", limit, "--out", str(out)]
    args += shlex.split(makefile_value("DEMO_JUDGE")) + shlex.split(makefile_value("DEMO_GATES"))
    return [*args, "--review", limit]


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def wait_for_quiet(max_load: float, wait_s: float) -> float:
    """Wait until the 1-minute load average is below max_load (or wait_s passed); the load."""
    deadline = time.monotonic() + wait_s
    while load() >= max_load and time.monotonic() < deadline:
        time.sleep(15)
    return load()


def du_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False)
    return int(out.stdout.split()[0]) if out.returncode == 0 and out.stdout else 0


def read_timings(path: Path) -> dict[str, Any]:
    timings: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return timings


def stage_seconds(timings: dict[str, Any]) -> dict[str, float]:
    """{label: seconds} of a timings.json, the stages before the audit first."""
    rows = {name: float(secs) for name, secs in timings.get("before", {}).items()}
    for row in timings["stages"]:
        label = f"{row['pipeline']}: {row['stage']}" if row["pipeline"] else row["stage"]
        rows[label] = float(row["seconds"])
        if row.get("background_s") is not None:
            rows[f"{label} (work in the background)"] = float(row["background_s"])
    rows["other"] = float(timings["other_s"])
    return rows


def to_generated(timings: dict[str, Any]) -> float:
    """Seconds from the audit's start to the last pipeline's answers: every row before the
    checking set-up (the stages are in the order they ran), and the rest ("other") in full,
    which is small."""
    total = 0.0
    for row in timings["stages"]:
        if row["stage"] == "checking set-up":
            break
        total += float(row["seconds"])
    return total + float(timings["other_s"])


def child(side: str, args: list[str]) -> None:
    """One audit, as `auditor audit ARGS`, models prepared ahead or not."""
    from auditor.cli import audit_cmd, main

    audit_cmd.run_audit = partial(audit_cmd.run_audit, prepare_ahead=side == "ahead")  # type: ignore[assignment]
    sys.argv = ["auditor", *args]
    main()


def pair_child(work: str, side: str, tmp: Path) -> None:
    """One pair: the foreground work (an engine start, a retrieval) alone or beside a
    conversion at normal or idle priority; prints the seconds as JSON."""
    from auditor.models.prepare import _convert_command, set_idle

    model = CONVERTED if work == "engine" else ENGINE_MODEL
    out = tmp / "pairs" / "converted"
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    conversion = None
    if side != "alone":
        command = _convert_command(tmp / "pairs" / f"{model}.gguf", out)
        conversion = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        set_idle(conversion.pid, side == "idle")  # as the audit does while it works
    if work == "engine":
        from auditor.config import VLLMGeneratorConfig
        from auditor.generate.vllm_offline import VLLMGenerator

        config = VLLMGeneratorConfig.model_validate(
            {
                "kind": "vllm",
                "model": str(tmp / "pairs" / "models" / ENGINE_MODEL),
                "max_model_len": 4096,
                "cpu_threads": "0-1",
                "kv_cache_gib": 1,
            }
        )
        begun = time.monotonic()
        VLLMGenerator.from_config(config).close()
        foreground = time.monotonic() - begun
    else:
        from auditor.retrieve import Retriever

        retriever = Retriever.open(tmp / "index")
        for question in ("How long is the warranty?", "Can I return a thermostat?") * 4:
            retriever.search(question, k=4)
        foreground = time.monotonic() - started
    if conversion is not None:
        set_idle(conversion.pid, False)  # as the audit does while it waits
    if conversion is not None and conversion.wait() != 0:
        sys.exit("the conversion failed")
    print(json.dumps({"foreground_s": foreground, "both_s": time.monotonic() - started}))


def pairs(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The engine start and the first retrieval, alone and beside a conversion."""
    from auditor.models.prepare import _join_parts, prepare_model
    from auditor.models.registry import get_packaged_model

    folder = tmp / "pairs"
    for name in (ENGINE_MODEL, CONVERTED):  # untimed: the folders and GGUFs the pairs use
        prepare_model(name, cache=folder / "models")
        gguf = folder / f"{name}.gguf"
        if not gguf.is_file():
            _join_parts(get_packaged_model(name), gguf, None, None)
    ensure_index(tmp)
    figures: dict[str, Any] = {}
    for work in ("engine", "retrieval"):
        runs: list[dict[str, Any]] = []
        for round_no in range(1, args.pair_rounds + 1):
            order = PAIR_SIDES if round_no % 2 else tuple(reversed(PAIR_SIDES))
            for side in order:
                load_before = wait_for_quiet(args.max_load, args.wait_s)
                command = [sys.executable, __file__, "--pair", work, side, "--tmp", str(tmp)]
                done = subprocess.run(
                    command,
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    timeout=RUN_TIMEOUT_S,
                    check=False,
                )
                if done.returncode != 0:
                    sys.exit(f"{work} {side}: {done.stderr[-2000:]}")
                run = json.loads(done.stdout.strip().splitlines()[-1])
                run |= {"side": side, "round": round_no, "load_before": load_before}
                runs.append(run)
                print(
                    f"{work} {side}: {run['foreground_s']:.1f} s, both done {run['both_s']:.1f} s"
                    f" (load {load_before:.2f})",
                    flush=True,
                )
        part: dict[str, Any] = {"runs": runs}
        for side in PAIR_SIDES:
            mine = [r for r in runs if r["side"] == side]
            part[f"{side}_foreground_s"] = spread([r["foreground_s"] for r in mine])
            part[f"{side}_both_s"] = spread([r["both_s"] for r in mine])
        figures[work] = part
    return figures


def ensure_index(tmp: Path) -> Path:
    index = tmp / "index"
    if not (index / "manifest.json").is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "auditor",
                "ingest",
                str(REPO / "corpora/kestrel/docs"),
                "--index",
                str(index),
            ],
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return index


def one_audit(side: str, index: Path, work: Path, log: Path) -> dict[str, Any]:
    """The demo's audit from an empty model cache; its timings and the machine's load."""
    models, out = work / "models", work / "out"
    for path in (models, out):
        shutil.rmtree(path, ignore_errors=True)
    env = os.environ | {
        "AUDITOR_MODELS_DIR": str(models),
        "AUDITOR_HISTORY": str(work / "history.sqlite"),
    }
    command = [sys.executable, __file__, "--child", side, "--", *demo_audit_args(index, out)]
    load_before = load()
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        done = subprocess.run(
            command,
            cwd=REPO,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):  # 1: a gate failed, the audit ran
        sys.exit(f"{side}: audit exited {done.returncode}; see {log}")
    timings = read_timings(out / "timings.json")
    shutil.rmtree(models, ignore_errors=True)  # GBs each
    return {
        "side": side,
        "process_s": round(wall, 1),
        "wall_s": timings["wall_s"],
        "to_generated_s": round(to_generated(timings), 1),
        "stages": stage_seconds(timings),
        "load_before": load_before,
        "load_after": load(),
    }


def overlap(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    index = ensure_index(tmp)
    runs: list[dict[str, Any]] = []
    for round_no in range(1, args.rounds + 1):
        for side in side_order(round_no, SIDES):
            wait_for_quiet(args.max_load, args.wait_s)
            run = one_audit(side, index, tmp / side, tmp / f"{side}-{round_no}.log")
            run["round"] = round_no
            runs.append(run)
            print(
                f"round {round_no} {side}: audit {run['wall_s']:.0f} s, to the last answers "
                f"{run['to_generated_s']:.0f} s (load {run['load_before']:.2f} -> "
                f"{run['load_after']:.2f})",
                flush=True,
            )
    figures: dict[str, Any] = {"runs": runs}
    for key in ("wall_s", "to_generated_s"):
        for side in SIDES:
            figures[f"{side}_{key}"] = spread([r[key] for r in runs if r["side"] == side])
        ratios = [
            s[key] / a[key]
            for s, a in zip(
                [r for r in runs if r["side"] == "serial"],
                [r for r in runs if r["side"] == "ahead"],
                strict=True,
            )
        ]
        figures[f"serial_over_ahead_{key}"] = spread(ratios)
        print(f"serial/ahead {key}: {spread_line(ratios)}")
    return figures


def from_nothing(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """`make demo` with a new environment, model cache, index, out dir and history."""
    work = tmp / "from-nothing"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    uv_cache = Path(os.environ.get("UV_CACHE_DIR", Path.home() / ".cache" / "uv"))
    cache_bytes = du_bytes(uv_cache)
    env = os.environ | {
        "AUDITOR_VENV": str(work / "venv"),
        "AUDITOR_MODELS_DIR": str(work / "models"),
        "AUDITOR_HISTORY": str(work / "history.sqlite"),
    }
    make = [
        "make",
        "--no-print-directory",
        "demo",
        f"DEMO_OUT={work / 'demo'}",
        f"INDEX={work / 'index'}",
    ]
    load_before = wait_for_quiet(args.max_load, args.wait_s)
    log = tmp / "from-nothing.log"
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        done = subprocess.run(
            make,
            cwd=REPO,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    wall = time.monotonic() - started
    if done.returncode not in (0, 2) or not (work / "demo" / "timings.json").is_file():
        sys.exit(f"make demo exited {done.returncode}; see {log}")
    timings = read_timings(work / "demo" / "timings.json")
    setup_line = re.search(r"^set-up: ([\d.]+) s$", log.read_text(encoding="utf-8"), re.M)
    figures = {
        "make_demo_s": spread([wall]),
        "audit_s": spread([timings["wall_s"]]),
        "stages": stage_seconds(timings),
        "make_exit": done.returncode,
        "setup_printed_s": float(setup_line.group(1)) if setup_line else None,
        "load_before": load_before,
        "load_after": load(),
        "uv_cache_bytes_before": cache_bytes,
        "uv_cache": "warm" if cache_bytes > 1 << 30 else "cold or small",
    }
    print(f"make demo from nothing: {wall:.0f} s (load {load_before:.2f} -> {load():.2f})")
    for label, seconds in figures["stages"].items():
        print(f"  {label:<55} {seconds:7.1f} s")
    shutil.rmtree(work, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="pairs,overlap,from-nothing")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--pair-rounds", type=int, default=2)
    parser.add_argument("--tmp", type=Path, default=Path("/tmp/demo-stages"))
    parser.add_argument("--max-load", type=float, default=1.5)
    parser.add_argument("--wait-s", type=float, default=1800)
    parser.add_argument("--name", default=f"demo-stages-{time.strftime('%Y-%m-%d')}")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--pair", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rest)
        return
    if args.pair:
        pair_child(*args.pair, args.tmp)
        return
    args.tmp.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{args.name}.json"
    figures: dict[str, Any] = {}
    if path.is_file():  # a part run alone keeps the other's figures
        figures = json.loads(path.read_text(encoding="utf-8")).get("figures", {})
    parts = args.parts.split(",")
    if "pairs" in parts:
        figures["pairs"] = pairs(args, args.tmp)
    if "overlap" in parts:
        figures["overlap"] = overlap(args, args.tmp)
    if "from-nothing" in parts:
        figures["from_nothing"] = from_nothing(args, args.tmp)
    write_result(
        args.name,
        "demo_stages",
        figures,
        note="make demo's stages; models prepared ahead in the background against one by one",
        dtype="bfloat16 where the CPU has it, else float32",
    )


if __name__ == "__main__":
    main()
