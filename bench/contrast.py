"""Does the judge flag subtly wrong answers and pass correct ones? (Kestrel contrast set)

    .venv/bin/python bench/contrast.py [--out DIR] [--judge J.toml] [--set KEY=VALUE ...]

Checks corpora/kestrel/contrast.jsonl (per question: one correct answer or abstention and one
answer with a single subtle error or an invented fact, both against the same retrieved chunks;
written by hand, see corpora/kestrel/README.md) with `auditor check --answers` (resumable
through --out) and prints the share of wrong answers flagged (target >= 0.90) and of correct
answers flagged (target <= 0.10), each with a bootstrap 95 % interval, per kind of error, and
the judge's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.config import load_judge, parse_set_option
from auditor.store import read_jsonl
from auditor.verify.check import check_run, import_answers
from auditor.verify.thresholds import contrast_figures

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
CONTRAST = Path(__file__).resolve().parents[1] / "corpora" / "kestrel" / "contrast.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Run dir to write/resume (default: a temp dir).")
    parser.add_argument(
        "--data",
        type=Path,
        default=CONTRAST,
        help="The contrast set (default: the bundled one, which tuned the rules; "
        "corpora/kestrel/contrast-fresh.jsonl is the test set written before any tuning).",
    )
    parser.add_argument("--judge", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[])
    parser.add_argument(
        "--threshold",
        type=float,
        help="Score at this support threshold (default: the judge's); judges nothing new.",
    )
    parser.add_argument(
        "--redecide",
        action="store_true",
        help="Decide the stored chunk judgements again with today's rule (bench/agreement.py).",
    )
    parser.add_argument(
        "--quotes",
        action="store_true",
        help="Fold in the quote check from OUT/quotes.json (bench/quote_pass.py OUT).",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    labels = {
        row["id"]: row
        for row in (json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines())
    }
    out = args.out or Path(tempfile.mkdtemp(prefix="auditor-contrast-"))
    config = load_judge(args.judge, dict(parse_set_option(s) for s in args.set_items))
    items = import_answers(args.data, out)
    check_run([(out, items)], config)
    checks = read_jsonl(out / "checks.jsonl")
    if args.redecide:
        from bench.agreement import redecided

        checks = redecided(checks, items, config)
    if args.quotes:
        from bench.quote_pass import with_quotes

        quotes = json.loads((out / "quotes.json").read_text(encoding="utf-8"))
        checks = with_quotes(checks, quotes["answers"], config.support_threshold)
        print("with the quote check (bench/quote_pass.py)")
    threshold = config.support_threshold if args.threshold is None else args.threshold
    figures = contrast_figures(labels, checks, threshold)
    low, high = figures["wrong_interval"]
    print(f"judge {config.name}; {len(checks)} answers at threshold {threshold}; run dir {out}")
    print(
        f"wrong answers flagged: {figures['wrong_flagged']:.3f} (95% CI {low:.3f}-{high:.3f}) "
        f"of {figures['wrong']} (target >= 0.90)"
    )
    low, high = figures["correct_interval"]
    print(
        f"correct answers flagged: {figures['correct_flagged']:.3f} (95% CI {low:.3f}-{high:.3f}) "
        f"of {figures['correct']} (target <= 0.10)"
    )
    for kind, (flagged, total) in figures["by_kind"].items():
        print(f"  {kind:<13} flagged {flagged}/{total}")
    claims = sum(len(r["claims"]) for r in checks) or 1
    prompt = sum(r["judge"]["prompt_tokens"] for r in checks)
    cached = sum(r["judge"].get("cached_tokens", 0) for r in checks)
    completion = sum(r["judge"]["completion_tokens"] for r in checks)
    seconds = sum(r["judge"]["seconds"] for r in checks)
    print(
        f"judge cost: {claims / len(checks):.1f} claims per answer; per claim {(prompt - cached + completion) / claims:.0f} "
        f"tokens computed, {cached / claims:.0f} from the prefix cache; {seconds / len(checks):.1f} s per answer"
    )
    print(f"bench wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
