"""What checking through Ray costs, and what a second actor buys, on the same answers.

    .venv/bin/python bench/ray_check.py [--answers 12] [--batch 4] [--rounds 1] [--name NAME]

The default judge on the first N RAGTruth QA dev answers, each arm a fresh `auditor check`
command into a fresh dir (engine start included: what a user waits for), wall-clock answers/s:
  1. one node, one engine: the single-process check against `--ray` (a local cluster started
     by the command, one actor holding the node's cores), sides alternating per round;
     ratio target >= 0.90;
  2. a two-node cluster on this machine (`ray start`, 1 CPU each): 1 actor against 2 actors.
     Both nodes share this machine's cores, so 2 actors here measure the overhead of
     spreading, not a second machine's speed-up (on separate machines each actor brings its
     own cores: see the README's estimate).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.testing import ray_nodes_here
from bench.agreement import DEV
from bench.harness import REPO, side_order, spread, spread_line, write_result


def timed_check(answers: Path, out: Path, batch: int, *ray: str) -> float:
    """Seconds one `auditor check` command took, start to exit."""
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable, "-m", "auditor", "check", "--answers", str(answers), "--out", str(out),
        "-q", "--set", f"answers_per_batch={batch}", *ray,
    ]  # fmt: skip
    env = os.environ | {"RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    rows = (out / "checks.jsonl").read_text().splitlines()
    assert len(rows) == len(answers.read_text().splitlines()), "every answer checked once"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--skip-two-nodes", action="store_true")
    parser.add_argument("--name", help="Write bench/results/NAME.json.")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ray-bench-"))
    rows = [json.loads(line) for line in DEV.read_text().splitlines()][: args.answers]
    answers = work / "answers.jsonl"
    keep = ("id", "question", "contexts", "answer")
    answers.write_text("".join(json.dumps({k: r[k] for k in keep}) + "\n" for r in rows))
    n = len(rows)
    print(f"{n} RAGTruth QA dev answers, {args.batch} per batch, default judge; wall clock")

    sides = {
        "single process": (),
        "ray, 1 local node, 1 actor": ("--ray",),
    }
    ratios, rates = [], {name: [] for name in sides}
    for round_no in range(1, args.rounds + 1):
        seconds = {}
        for name in side_order(round_no, list(sides)):
            seconds[name] = timed_check(answers, work / "out", args.batch, *sides[name])
            rates[name].append(n / seconds[name])
            print(
                f"  round {round_no}: {name}: {seconds[name]:.0f} s, {n / seconds[name]:.3f} answers/s"
            )
        ratios.append(seconds["single process"] / seconds["ray, 1 local node, 1 actor"])
    print(f"ray / single-process answers/s: {spread_line(ratios)} (target >= 0.90)")
    figures: dict[str, object] = {
        "answers": n,
        "batch": args.batch,
        "ray_over_single": spread(ratios),
        "answers_per_s": {name: spread(values) for name, values in rates.items()},
    }

    if not args.skip_two_nodes:
        with ray_nodes_here(2) as (address, _):
            actors = {}
            for count in (1, 2):
                seconds = timed_check(
                    answers, work / "out", args.batch, "--ray", address, "--ray-actors", str(count)
                )
                actors[count] = n / seconds
                print(
                    f"  two-node cluster, {count} actor(s): {seconds:.0f} s, {actors[count]:.3f} answers/s"
                )
            print(f"2 actors / 1 actor on one 2-core machine: {actors[2] / actors[1]:.3f}")
            figures["two_nodes_one_machine"] = {
                "answers_per_s_1_actor": spread([actors[1]]),
                "answers_per_s_2_actors": spread([actors[2]]),
                "ratio_2_over_1": spread([actors[2] / actors[1]]),
            }
    shutil.rmtree(work, ignore_errors=True)
    if args.name:
        write_result(
            args.name,
            "ray_check",
            figures,
            note="wall clock per command, engine and cluster start included",
            data=[DEV],
        )


if __name__ == "__main__":
    main()
