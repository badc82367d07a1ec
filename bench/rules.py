"""Each rule that decides from stored judgements, switched off, paired against it on: what
the rule buys on data it was not written from. Judges nothing.

    .venv/bin/python bench/rules.py agreement RUN [--data F ...] [--name N]
    .venv/bin/python bench/rules.py contrast RUN [--data F] [--threshold T] [--name N]

RUN is a run dir of `bench/agreement.py --out` or `bench/contrast.py --out`. The rules:
  - figure veto (`figures.missing_figures`): a figure of the claim that a chunk never writes
    vetoes support by that chunk.
(The figure-binding guard was measured here too, changed no verdict on data it was not
written from, and was removed in verdict logic 2026-12-05.2.) Each is removed in turn (the claims decided again from their stored chunk judgements, as
`--redecide` does), then scored as `bench/paired.py` scores two arms: agreement by 5-fold CV
with the gain's interval over questions; contrast at the threshold.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

import auditor.verify.verdicts as verdicts
from auditor.config import JudgeConfig
from auditor.store import read_jsonl
from auditor.verify.check import import_answers
from bench.agreement import DEV, redecided
from bench.harness import write_result
from bench.paired import (
    CONTRAST,
    _dtype,
    _judge,
    compare_agreement,
    compare_contrast,
)


@contextmanager
def without(rule: str) -> Iterator[None]:
    """The decision with one rule switched off."""
    name = {"figure veto": "missing_figures"}[rule]
    original = getattr(verdicts, name)
    setattr(verdicts, name, lambda *args: [])
    try:
        yield
    finally:
        setattr(verdicts, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["agreement", "contrast"])
    parser.add_argument("run", type=Path)
    parser.add_argument("--data", type=Path, action="append")
    parser.add_argument("--threshold", type=float, default=0.264)
    parser.add_argument("--name")
    args = parser.parse_args()

    paths = args.data or [DEV if args.kind == "agreement" else CONTRAST]
    gold = {
        row["id"]: row
        for path in paths
        for row in (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    }
    answers = args.run.parent / f"{args.run.name}.answers.jsonl"
    items = import_answers(answers if answers.exists() else paths[0], args.run)
    config = JudgeConfig()
    checks = [r for r in read_jsonl(args.run / "checks.jsonl") if r["id"] in gold]
    with_rules = {r["id"]: r for r in redecided(checks, items, config)}
    figures: dict[str, Any] = {}
    for rule in ("figure veto",):
        with without(rule):
            off = {r["id"]: r for r in redecided(checks, items, config)}
        changed = sum(
            [c["verdict"] for c in off[i]["claims"]]
            != [c["verdict"] for c in with_rules[i]["claims"]]
            for i in off
        )
        if args.kind == "agreement":
            result = compare_agreement(gold, off, with_rules)
        else:
            result = compare_contrast(gold, off, with_rules, args.threshold, args.threshold)
        result["answers_changed"] = changed
        figures[rule] = result
        print(f"{rule}: on vs off, {changed} answers change a verdict")
        print(json.dumps(result, indent=1))
    if args.name:
        write_result(
            args.name,
            f"rules {args.kind}",
            figures,
            note="before = the rule off, after = the rule on (as shipped)",
            data=paths,
            dtype=_dtype(args.run),
            answers=len(checks),
            judge=_judge(args.run),
        )


if __name__ == "__main__":
    main()
