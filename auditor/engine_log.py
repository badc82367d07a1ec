"""A vLLM engine start's output cut into phases: where the start's time goes.

vLLM logs its start from three processes: the caller, the EngineCore process the caller
spawns, the Worker process the engine core spawns (on CPU always, `VLLM_ENABLE_V1_MULTIPROCESSING`
on: vllm/platforms/cpu.py). Its lines carry whole-second stamps, so bench/engine_start.py
stamps each line as it arrives ("EPOCH_SECONDS line") and adds marks of its own
(`MARK EVENT EPOCH_SECONDS`: the caller's imports, the model ready, each process spawned and
up, the engine built, a few tokens, the engine closed) and samples of the start's CPU seconds
(`CPU SECONDS`). `breakdown` cuts such a log at the lines `PHASES` names (which line ends which
phase); a phase whose line is missing is merged into the next. Parsing only: nothing here
imports vLLM.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AFTER",
    "BEFORE",
    "CPU",
    "MARK",
    "PHASES",
    "Boundary",
    "Line",
    "breakdown",
    "parse_line",
    "phase_table",
    "process_kind",
    "read_stamped",
    "reported",
    "summarize_rounds",
]

MARK = "@@engine-start"  # the child's own marks: "@@engine-start EVENT EPOCH_SECONDS"
INFO = "@@engine-start-info"  # the child's settings and results: "@@engine-start-info {json}"
CPU = "@@engine-start-cpu"  # the bench's samples: "@@engine-start-cpu SECONDS" (the tree's CPU)

# vLLM's log format (vllm/logger.py): "(PROC pid=N) LEVEL MM-DD HH:MM:SS [file.py:N] message"
LINE = re.compile(
    r"^\((?P<proc>[^()]*?) pid=(?P<pid>\d+)\) (?P<level>[A-Z]+) "
    r"(?P<date>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<where>[^\]]+)\] (?P<msg>.*)$"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STAMPED = re.compile(r"^(?P<t>\d+\.\d+) (?P<line>.*)$")


@dataclass(frozen=True)
class Line:
    """One line of the start's output: when it arrived, from which process, what it says."""

    t: float
    process: str  # "main", "engine-core", "worker", "" (not a vLLM log line)
    level: str
    where: str
    message: str
    mark: str = ""  # the child's own mark (MARK lines)


def process_kind(name: str) -> str:
    """vLLM's process name as one of main / engine-core / worker."""
    if name.startswith("EngineCore"):
        return "engine-core"
    if "Worker" in name:
        return "worker"
    return "main"


def _mark_process(event: str) -> str:
    """The process a mark was written in: a spawned process's own marks name it ("up:NAME",
    "main-imported:NAME"); "spawn:NAME" is written by the process that spawns NAME."""
    kind, _, name = event.partition(":")
    if kind == "spawn":
        return "engine-core" if "Worker" in name else "main"
    return process_kind(name) if name else "main"


def parse_line(text: str, stamp: float | None = None, year: int | None = None) -> Line | None:
    """A line of output as a `Line`: `stamp` is when it arrived; without one, the child's mark
    carries its time and a vLLM line its own whole-second stamp (read in `year`, local
    time); any other line without a stamp is dropped (None)."""
    text = ANSI.sub("", text.rstrip("\n"))
    if text.startswith(CPU + " "):
        return None if stamp is None else Line(stamp, "cpu", "CPU", "", text.split(" ", 1)[1])
    if text.startswith(MARK + " "):
        _, event, seconds = text.split(" ", 2)
        return Line(float(seconds), _mark_process(event), "MARK", "", event, mark=event)
    found = LINE.match(text)
    if found is None:
        return None if stamp is None else Line(stamp, "", "", "", text)
    if stamp is None:
        when = time.strptime(
            f"{year or time.localtime().tm_year}-{found['date']}", "%Y-%m-%d %H:%M:%S"
        )
        stamp = time.mktime(when)
    return Line(stamp, process_kind(found["proc"]), found["level"], found["where"], found["msg"])


def read_stamped(lines: Iterable[str]) -> list[Line]:
    """The lines of a stamped log ("EPOCH_SECONDS line"), or of a plain captured one."""
    parsed = []
    for raw in lines:
        stamped = STAMPED.match(raw.rstrip("\n"))
        if stamped:
            line = parse_line(stamped["line"], float(stamped["t"]))
            if line is not None and line.mark:  # the child's own time, not the arrival's
                line = parse_line(stamped["line"])
        else:
            line = parse_line(raw)
        if line is not None:
            parsed.append(line)
    return parsed


@dataclass(frozen=True)
class Boundary:
    """The end of a phase: the first line from the previous boundary's line on that matches:
    a mark of the child (its name starts with `mark`), or a vLLM line of `process` (of any
    process without one) whose message matches `pattern` (any line without one); with
    `until` (a mark), the last line of `process` before that mark instead (a process's last
    word before the caller goes on). With the engine core in the caller's process
    (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) its phases find no line of theirs and merge."""

    phase: str
    mark: str = ""
    process: str = ""
    pattern: str = ""
    until: str = ""


# Which line ends which phase, in order. The phases' sum is the start: from the model ready
# to the end of `VLLMGenerator.__init__`, what the demo's "engine start" row counts for its
# first engine (it counts the model's preparation apart: BEFORE). A spawned process marks
# when it was spawned (in its parent), when its Python began running the caller's main script
# and when it had imported it (`multiprocessing`'s spawn imports it; in the demo that is the
# `auditor` command, so the bench imports auditor.cli there too).
BEFORE: tuple[Boundary, ...] = (
    Boundary("auditor imports", mark="auditor-imported"),
    Boundary("model preparation", mark="prepared"),
)
PHASES: tuple[Boundary, ...] = (
    # in the demo the retrieval before the first engine start has imported torch already,
    # and a second engine start in the same process imports neither
    Boundary("torch import (caller)", mark="torch-imported"),
    Boundary("vllm import (caller)", mark="vllm-imported"),
    Boundary("engine config and tokenizer (caller)", mark="spawn:EngineCore"),
    Boundary("EngineCore: process and Python start", mark="up:EngineCore"),
    Boundary("EngineCore: main script imports", mark="main-imported:EngineCore"),
    # a spawned process imports vllm and torch again before it logs a line
    Boundary("EngineCore: vllm+torch imports", process="engine-core"),
    Boundary("EngineCore set-up to the Worker", mark="spawn:VllmWorker"),
    Boundary("Worker: process and Python start", mark="up:VllmWorker"),
    Boundary("Worker: main script imports", mark="main-imported:VllmWorker"),
    Boundary("Worker: vllm+torch imports", process="worker"),
    Boundary("Worker set-up to the weights", pattern=r"Starting to load model"),
    # "Initializing model took" (the layers built), then the safetensors read
    Boundary("weights load", pattern=r"Loading weights took"),
    # the worker's load_model returns (on CPU: the weights processed after loading, packed
    # for the GEMM kernels), then the engine core goes on
    Boundary("after the weights (worker) to the engine core", process="engine-core"),
    Boundary(
        "KV cache and warm-up (init engine)",
        pattern=r"init engine \(profile, create kv cache, warmup model\) took",
    ),
    # the structured-output manager (it loads the tokenizer), the scheduler, the handshake
    Boundary("EngineCore after init engine", process="engine-core", until="engine-built"),
    Boundary("the rest (caller: renderer, last steps)", mark="engine-built"),
)
AFTER: tuple[Boundary, ...] = (
    Boundary("first tokens", mark="generated"),
    Boundary("engine stop", mark="closed"),
)
# vLLM's own durations, as it reports them (seconds), and what each says
REPORTED = {
    "model_init_s": (r"Initializing model took ([\d.]+) seconds", "the layers built (worker)"),
    "weights_s": (r"Loading weights took ([\d.]+) seconds", "the weights read (worker)"),
    "model_load_s": (
        r"Model loading took [\d.]+ GiB memory and ([\d.]+) seconds",
        "the model built and its weights read (worker)",
    ),
    "init_engine_s": (
        r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+)",
        "KV cache specs, memory, allocation, warm-up (engine core)",
    ),
}
KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")
CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


def _first(lines: Sequence[Line], start: int, test: Any) -> int | None:
    return next((i for i in range(start, len(lines)) if test(lines[i])), None)


def breakdown(lines: Sequence[Line]) -> dict[str, Any]:
    """The start's phases in seconds (a missing boundary merges its phase into the next:
    "a + b"), its total, what happens after it, and vLLM's reported durations."""
    lines = sorted(lines, key=lambda line: line.t)  # stable: arrival order within a stamp
    begin = _first(lines, 0, lambda line: line.mark == "start")
    if begin is None:
        raise ValueError("no start mark in the log")
    edges = _phase_edges(lines, begin)
    phases = {k: round(b - a, 3) for k, (a, b) in edges.items()}
    named = [part for k in edges for part in k.split(" + ")]
    pending = [b.phase for b in (*BEFORE, *PHASES, *AFTER) if b.phase not in named]
    if cpu := [(line.t, float(line.message)) for line in lines if line.process == "cpu"]:
        cpu_s = {
            k: round(_cpu_at(cpu, b) - _cpu_at(cpu, a), 2)
            for k, (a, b) in edges.items()
            if "engine stop" not in k  # the stopped processes' CPU leaves the sampled tree
        }
    else:
        cpu_s = {}
    start_names = {b.phase for b in PHASES}
    in_start = {k: v for k, v in phases.items() if set(k.split(" + ")) <= start_names}
    before_names = {b.phase for b in BEFORE}
    before = {k: v for k, v in phases.items() if set(k.split(" + ")) <= before_names}
    total = round(sum(in_start.values()), 3)
    return {
        "phases": in_start,
        "start_s": total,
        "shares": _shares(in_start),
        "before": before,
        "after": {k: v for k, v in phases.items() if k not in in_start and k not in before},
        "unmarked": pending,  # phases whose end was never seen (a failed start)
        # CPU seconds of the start's processes in each phase (sampled every CPU_SAMPLE_S):
        # less swayed than wall seconds by other work on the cores
        "cpu_s": cpu_s,
        "cpu_shares": _shares({k: v for k, v in cpu_s.items() if k in in_start}),
        "reported": reported(lines),
    }


def _phase_edges(lines: Sequence[Line], begin: int) -> dict[str, tuple[float, float]]:
    """Each phase's (start, end) time, merged as `breakdown` merges them."""
    edges: dict[str, tuple[float, float]] = {}
    pending: list[str] = []
    at, t = begin, lines[begin].t
    for boundary in (*BEFORE, *PHASES, *AFTER):
        found = _find(lines, at, boundary)
        pending.append(boundary.phase)
        if found is not None:
            edges[" + ".join(pending)] = (t, lines[found].t)
            pending, at, t = [], found, lines[found].t
    return edges


def _cpu_at(samples: Sequence[tuple[float, float]], t: float) -> float:
    """The CPU seconds at time `t`, interpolated between the samples around it."""
    before = [(st, c) for st, c in samples if st <= t]
    after = [(st, c) for st, c in samples if st > t]
    if not before:
        return after[0][1] if after else 0.0
    if not after:
        return before[-1][1]
    (t0, c0), (t1, c1) = before[-1], after[0]
    return c0 + (c1 - c0) * (t - t0) / (t1 - t0)


def _shares(seconds: dict[str, float]) -> dict[str, float | None]:
    total = sum(seconds.values())
    return {k: round(v / total, 4) if total else None for k, v in seconds.items()}


def _find(lines: Sequence[Line], at: int, boundary: Boundary) -> int | None:
    if boundary.mark:
        return _first(lines, at, lambda line: line.mark.startswith(boundary.mark))
    if boundary.until:
        end = _first(lines, at, lambda line: line.mark.startswith(boundary.until))
        mine = [
            i
            for i in range(at, len(lines) if end is None else end)
            if lines[i].process == boundary.process and not lines[i].mark
        ]
        return mine[-1] if mine and end is not None else None
    pattern = re.compile(boundary.pattern) if boundary.pattern else None
    return _first(
        lines,
        at,
        lambda line: (
            (line.process == boundary.process if boundary.process else line.process != "")
            and not line.mark
            and (pattern is None or pattern.search(line.message) is not None)
        ),
    )


def reported(lines: Sequence[Line]) -> dict[str, Any]:
    """vLLM's own figures from its lines: durations (REPORTED), KV cache tokens, concurrency."""
    found: dict[str, Any] = {}
    for line in lines:
        for key, (pattern, _) in REPORTED.items():
            if key not in found and (hit := re.search(pattern, line.message)):
                found[key] = float(hit[1])
        if "kv_cache_tokens" not in found and (hit := KV_TOKENS.search(line.message)):
            found["kv_cache_tokens"] = int(hit[1].replace(",", ""))
        if "max_concurrency" not in found and (hit := CONCURRENCY.search(line.message)):
            found["max_concurrency"] = float(hit[2])
        if "force killing remaining process" in line.message or "sending SIGKILL" in line.message:
            found["stop_forced"] = True  # a process did not exit within its grace period
    return found


def phase_table(result: dict[str, Any]) -> list[str]:
    """The breakdown as printed lines: seconds and share of the start."""
    rows = [f"  {name:<48} {s:8.1f} s  (before the start)" for name, s in result["before"].items()]
    cpu = result.get("cpu_s", {})
    rows += [
        f"  {name:<48} {s:8.1f} s  {result['shares'][name]:6.1%}"
        + (f"  cpu {cpu[name]:7.1f} s {result['cpu_shares'][name]:6.1%}" if name in cpu else "")
        for name, s in result["phases"].items()
    ]
    rows.append(f"  {'start (sum)':<48} {result['start_s']:8.1f} s")
    rows += [f"  {name:<48} {s:8.1f} s  (after the start)" for name, s in result["after"].items()]
    if result["reported"]:
        rows.append(f"  vLLM says: {json.dumps(result['reported'])}")
    return rows


def _spread(values: Sequence[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "rounds": len(values),
    }


def summarize_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the rounds that ran: the start's wall seconds and CPU seconds (median and spread),
    each phase's median seconds and share of the start, and the same for its CPU seconds
    where the rounds were sampled."""
    ran = [r for r in rounds if not r.get("skipped") and r.get("exit") == 0]
    if not ran:
        return {}
    names = list(dict.fromkeys(name for r in ran for name in r["phases"]))
    summary: dict[str, Any] = {
        "start_s": _spread([r["start_s"] for r in ran]),
        "phase_s": {n: statistics.median(r["phases"].get(n, 0.0) for r in ran) for n in names},
        "share": {
            n: round(statistics.median(r["shares"].get(n) or 0.0 for r in ran), 4) for n in names
        },
        "cpu_s_child_tree": statistics.median(r["cpu_s_child_tree"] for r in ran),
    }
    sampled = [r for r in ran if r.get("cpu_s")]
    if sampled:
        starts = [sum(v for k, v in r["cpu_s"].items() if k in r["phases"]) for r in sampled]
        summary["start_cpu_s"] = _spread(starts)
        summary["phase_cpu_s"] = {
            n: statistics.median(r["cpu_s"].get(n, 0.0) for r in sampled) for n in names
        }
        summary["cpu_share"] = {
            n: round(statistics.median(r["cpu_shares"].get(n) or 0.0 for r in sampled), 4)
            for n in names
        }
    return summary
