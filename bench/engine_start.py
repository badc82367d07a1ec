"""Where one vLLM engine start's time goes on this machine, and what a setting changes in it.

    .venv/bin/python bench/engine_start.py [--pipeline qwen-0.5b-cpu] [--rounds 1]
        [--set KEY=VALUE ...] [--env KEY=VALUE ...]
        [--compare LABEL [--compare-set KEY=VALUE ...] [--compare-env KEY=VALUE ...]]
        [--tokens 4] [--nice 10] [--min-free-gib 6] [--log-dir DIR] [--note TEXT] [--name NAME]
    .venv/bin/python bench/engine_start.py --reparse LOG [LOG ...]   # no engine

Each start runs in a new process (this file with --child), as the demo's first engine start
does: the pipeline's generator config (`--set` overrides its fields, e.g. `kv_cache_gib=2` or
`engine_args.max_num_seqs=8`; `--env` sets environment variables), the packaged model made
ready by `resolve_model`, then `VLLMGenerator` (the path `VLLMGenerator.from_config` takes),
a few tokens generated to prove the engine works, and the engine closed. With --compare, a
second side with its own overrides runs beside it, the sides taking turns to go first
(`side_order`).

vLLM's INFO log lines come from three processes (the caller, the EngineCore process the caller
spawns, the Worker process the EngineCore spawns); this bench stamps each line as it arrives
(vLLM's own stamps are whole seconds), adds marks of its own (the caller's imports, the model
ready, each process spawned, up and done importing the caller's main script, the engine
built, the tokens, the engine closed) and samples the CPU seconds of the start's process tree
every 0.5 s. `auditor.engine_log.breakdown` cuts the start at those lines (`PHASES`: which
line ends which phase; a phase whose line is missing merges into the next): torch and vllm
imports (caller), engine config and tokenizer (caller), the EngineCore's process start, main
script and vllm+torch imports, its set-up up to the Worker, the same three for the Worker, its
set-up up to the weights, the weights load, after the weights up to the engine core, KV cache
and warm-up ("init engine"), the EngineCore after init, the rest (the caller's renderer);
before the start the auditor's imports and the model's preparation, after it the first tokens
and the engine stop. On a busy machine read the CPU seconds: the wall seconds of a niced start
swing with the other work. Each start's stamped log is kept (--log-dir, default
/tmp/engine-start-logs) so that --reparse can cut it again.

Figures: per side and round the phases' wall and CPU seconds and their shares of the start,
the start's totals, vLLM's own figures (weights, KV cache tokens, init engine, a forced stop),
the CPU seconds of the whole child tree (generation and stop included), the load average
before and after and the memory available before; per side the medians
(`summarize_rounds`). Writes bench/results/NAME.json with `write_result` (machine, CPU flags,
dtype, packages). Before each start the bench checks MemAvailable (--min-free-gib) and skips
the start when there is less.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.engine_log import (
    CPU,
    MARK,
    PHASES,
    breakdown,
    phase_table,
    read_stamped,
    summarize_rounds,
)

INFO = "@@engine-start-info"  # the child's settings and results: "@@engine-start-info {json}"
CPU_SAMPLE_S = 0.5
DEFAULT_LOG_DIR = Path("/tmp/engine-start-logs")
PROMPT = "Name one prime number."


# ---------------------------------------------------------------------------------------
# the child: one engine start as the auditor makes it


def _mark(event: str) -> None:
    print(f"{MARK} {event} {time.time():.3f}", flush=True)


def child(pipeline: str, set_items: Sequence[str], tokens: int) -> None:
    """One start: config, model preparation, vllm import, engine, a few tokens, stop."""
    _mark("start")
    from auditor.config import load_pipeline, parse_set_option, resolve_pipeline_path
    from auditor.generate.base import GenRequest
    from auditor.generate.vllm_offline import VLLMGenerator, engine_settings
    from auditor.models import resolve_model

    _mark("auditor-imported")
    overrides = dict(parse_set_option(f"generator.{item}") for item in set_items)
    config = load_pipeline(resolve_pipeline_path(pipeline), overrides)
    cfg = config.generator
    assert cfg is not None and cfg.kind == "vllm", f"{pipeline}: not an in-process vLLM pipeline"
    path, identity = resolve_model(cfg.model)  # as VLLMGenerator.from_config
    _mark("prepared")
    import torch  # noqa: F401  (in the demo, imported by the retrieval before)

    _mark("torch-imported")
    from vllm import LLM  # noqa: F401  (what VLLMGenerator imports first; timed apart)

    _mark("vllm-imported")
    generator = VLLMGenerator(cfg, path, identity)
    _mark("engine-built")
    texts: list[str] = []
    generator.generate(
        [GenRequest("probe", ({"role": "user", "content": PROMPT},), max_tokens=tokens)],
        lambda result: texts.append(result.text or f"error: {result.error}"),
    )
    _mark("generated")
    engine = generator.llm.llm_engine.vllm_config
    info = {
        "settings": engine_settings(cfg),
        "dtype": generator.dtype,
        "startup_s": generator.startup_s,
        "text": texts,
        "vllm": {
            "max_num_seqs": engine.scheduler_config.max_num_seqs,
            "max_num_batched_tokens": engine.scheduler_config.max_num_batched_tokens,
            "enable_chunked_prefill": engine.scheduler_config.enable_chunked_prefill,
            "enable_prefix_caching": engine.cache_config.enable_prefix_caching,
            "block_size": engine.cache_config.block_size,
            "num_gpu_blocks": engine.cache_config.num_gpu_blocks,
            "compilation_mode": str(engine.compilation_config.mode),
            "executor": engine.parallel_config.distributed_executor_backend,
        },
        "env": {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "OMP_"))},
    }
    generator.close()
    _mark("closed")
    print(f"{INFO} {json.dumps(info, default=str)}", flush=True)


# ---------------------------------------------------------------------------------------
# the parent: starts, sides, rounds, results


@dataclass
class Side:
    label: str
    set_items: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user and system, with those of its waited-for children) of `root` and of
    every live process under it, from /proc."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text(encoding="utf-8")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # from field 3 (state) on
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        ticks[pid] = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return sum(ticks.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def sample_cpu(process: subprocess.Popen[str], samples: list[tuple[float, float]]) -> None:
    """Every CPU_SAMPLE_S, the CPU seconds of the start's process tree, until it ends."""
    while process.poll() is None:
        samples.append((time.time(), tree_cpu_s(process.pid)))
        time.sleep(CPU_SAMPLE_S)


def run_start(side: Side, args: argparse.Namespace, log_path: Path) -> dict[str, Any]:
    """One start in a new process; its stamped log to `log_path`; its breakdown."""
    command = [sys.executable, "-u", str(Path(__file__).resolve()), "--child"]
    command += ["--pipeline", args.pipeline, "--tokens", str(args.tokens)]
    for item in side.set_items:
        command += ["--set", item]
    if args.nice:
        command = ["nice", "-n", str(args.nice), *command]
    env = (
        os.environ
        | {
            "VLLM_LOGGING_LEVEL": args.log_level,
            "VLLM_LOGGING_STREAM": "ext://sys.stdout",
            "VLLM_LOGGING_COLOR": "0",
            "PYTHONUNBUFFERED": "1",  # the spawned processes too: lines arrive when written
            "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
            ),
        }
        | side.env
    )
    load_before, mem_before = os.getloadavg()[0], mem_available_gib()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"[{side.label}] {shlex.join(command)}", flush=True)
    info: dict[str, Any] = {}
    samples: list[tuple[float, float]] = []
    with (
        log_path.open("w", encoding="utf-8") as log,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        ) as process,
    ):
        sampler = threading.Thread(target=sample_cpu, args=(process, samples), daemon=True)
        sampler.start()
        assert process.stdout is not None
        for raw in process.stdout:
            stamp = time.time()
            log.write(f"{stamp:.3f} {raw}")
            if raw.startswith(INFO + " "):
                info = json.loads(raw.split(" ", 1)[1])
            elif args.verbose:
                print(raw, end="")
        process.wait()
        sampler.join()
        for stamp, seconds in samples:
            log.write(f"{stamp:.3f} {CPU} {seconds:.2f}\n")
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    lines = read_stamped(log_path.read_text(encoding="utf-8").splitlines())
    result = breakdown(lines)
    result |= {
        "exit": process.returncode,
        "cpu_s_child_tree": round(cpu_s, 2),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "mem_available_gib_before": round(mem_before, 1),
        "log": str(log_path),
        "child": info,
    }
    if process.returncode != 0:
        print(f"[{side.label}] the start failed (exit {process.returncode}); see {log_path}")
    return result


def parse_pairs(items: Sequence[str], option: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"{option} {item!r}: expected KEY=VALUE")
        pairs[key] = value
    return pairs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", default="qwen-0.5b-cpu")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--set", dest="set_items", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--env", dest="env_items", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--compare", metavar="LABEL", help="a second side, with the options below")
    parser.add_argument("--compare-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--compare-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--tokens", type=int, default=4, help="tokens generated after the start")
    parser.add_argument("--nice", type=int, default=0, help="run each start under nice -n N")
    parser.add_argument("--min-free-gib", type=float, default=6.0)
    parser.add_argument("--log-level", default="INFO", help="VLLM_LOGGING_LEVEL of the start")
    parser.add_argument("--log-dir", type=Path, default=DEFAULT_LOG_DIR)
    parser.add_argument("--note", default="", help="the conditions (e.g. another job running)")
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written)")
    parser.add_argument("--reparse", nargs="+", type=Path, metavar="LOG")
    parser.add_argument("--verbose", action="store_true", help="echo the start's output")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        child(args.pipeline, args.set_items, args.tokens)
        return
    if args.reparse:
        for log_path in args.reparse:
            result = breakdown(read_stamped(log_path.read_text(encoding="utf-8").splitlines()))
            print(log_path)
            print("\n".join(phase_table(result)))
        return

    base_env = parse_pairs(args.env_items, "--env")
    base = "as configured" + (" with --set/--env" if args.set_items or base_env else "")
    sides = [Side(base, list(args.set_items), base_env)]
    if args.compare:
        sides.append(
            Side(
                args.compare,
                [*args.set_items, *args.compare_set],
                base_env | parse_pairs(args.compare_env, "--compare-env"),
            )
        )
    from bench.harness import side_order, write_result

    stamp = time.strftime("%Y%m%d-%H%M%S")
    per_side: dict[str, list[dict[str, Any]]] = {side.label: [] for side in sides}
    for round_no in range(1, args.rounds + 1):
        for side in side_order(round_no, sides):
            free = mem_available_gib()
            if free < args.min_free_gib:
                print(f"[{side.label}] round {round_no}: skipped, {free:.1f} GiB available")
                per_side[side.label].append({"skipped": f"{free:.1f} GiB available"})
                continue
            slug = re.sub(r"[^a-z0-9]+", "-", side.label.lower()).strip("-")
            result = run_start(side, args, args.log_dir / f"{stamp}-{slug}-r{round_no}.log")
            result["round"] = round_no
            per_side[side.label].append(result)
            print(f"[{side.label}] round {round_no}:")
            print("\n".join(phase_table(result)))
    figures = {
        side.label: {
            "set": side.set_items,
            "env": side.env,
            "summary": summarize_rounds(per_side[side.label]),
            "rounds": per_side[side.label],
        }
        for side in sides
    }
    if args.name:
        dtypes = {r["child"].get("dtype") for rs in per_side.values() for r in rs if r.get("child")}
        write_result(
            args.name,
            "engine_start",
            figures,
            note=args.note,
            dtype=", ".join(sorted(d for d in dtypes if d)) or None,
            pipeline=args.pipeline,
            nice=args.nice,
            phase_lines={b.phase: b.pattern or b.mark or f"{b.process} line" for b in PHASES},
        )


# Marks from the processes vLLM spawns: `multiprocessing`'s spawn imports the caller's main
# script (this file, as __mp_main__) in each, before vLLM runs there.
MARKS_ENV = "ENGINE_START_MARKS"


def _mark_spawns() -> None:
    """A mark each time this process spawns one (before `Process.start`)."""
    import multiprocessing.process

    original = multiprocessing.process.BaseProcess.start

    def start(self: Any) -> None:
        _mark(f"spawn:{self.name}")
        original(self)

    multiprocessing.process.BaseProcess.start = start  # type: ignore[method-assign]


if os.environ.get(MARKS_ENV) and __name__ == "__mp_main__":
    import multiprocessing

    _name = multiprocessing.current_process().name
    _mark(f"up:{_name}")
    import auditor.cli  # noqa: F401  (what the demo's spawned processes import: its main script)

    _mark(f"main-imported:{_name}")
    _mark_spawns()

if __name__ == "__main__":
    if "--child" in sys.argv:
        os.environ[MARKS_ENV] = "1"
        _mark_spawns()
    main()
