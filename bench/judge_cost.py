"""The judge's cost per claim, ours against stock RAGAS, on the same claims and the same engine.

    .venv/bin/python bench/judge_cost.py [--answers 10] [--rounds 2] [--set claims="listed"] \
        [--name judge-cost-DATE]

Takes the first N RAGTruth QA dev answers (in agreement.py's order), starts one judge engine
and, each round, in alternating order (`bench.harness.side_order`), with vLLM's prefix cache
emptied before each side:
  - ours: `auditor check`'s faithfulness on the N answers (the judge config's `claims` mode:
    the answer's sentences as written, or the judge's claim list with its premise check);
  - stock: RAGAS Faithfulness's verification step (its NLI prompt: every statement against
    the joined contexts, a verdict and a reason per statement, one call per answer) on the
    claims ours checked in that round.
Computed tokens per claim = prompt tokens not served from the prefix cache + completion
tokens; seconds per answer are wall seconds of the side over N. Prints each round and the
median ratio ours/stock; `--name` writes bench/results/NAME.json. The target:
ours <= 0.5x stock in computed tokens per claim.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.config import EmbedderConfig, load_judge, parse_set_option
from auditor.ingest.embed import load_embedder
from auditor.store import read_jsonl
from auditor.verify.check import check_items, import_answers
from auditor.verify.judges import make_judge
from bench.agreement import DEV, FAITHFULNESS_STAGES, load_rows, stock_verdicts
from bench.harness import side_order, spread

SIDES = ("ours", "stock")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=10, help="RAGTruth QA dev answers.")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--set", dest="set_items", action="append", default=[], metavar="K=V")
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    parser.add_argument("--note", default="")
    args = parser.parse_args()

    rows = load_rows([DEV], None)
    rows.sort(key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
    rows = rows[: args.answers]
    config = load_judge(None, dict(parse_set_option(s) for s in args.set_items))
    config = config.model_copy(update={"metrics": ["faithfulness"]})
    embedder = load_embedder(EmbedderConfig())
    judge = make_judge(config)
    engine = judge.generator.llm  # type: ignore[attr-defined]
    measured: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    work = Path(tempfile.mkdtemp(prefix="auditor-judge-cost-"))
    answers = work / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps({k: r[k] for k in ("id", "question", "contexts", "answer")}) + "\n"
            for r in rows
        ),
        encoding="utf-8",
    )
    try:
        # warm-up, not counted: the engine's first batches, and the claims stock checks
        items = import_answers(answers, work / "claims")
        check_items(items, work / "claims", config, judge, embedder.embed)
        claims_of = _claims(work / "claims")
        for round_no in range(1, args.rounds + 1):
            for side in side_order(round_no, SIDES):
                engine.reset_prefix_cache()
                started = time.perf_counter()
                if side == "ours":
                    out = work / f"ours-{round_no}"
                    check_items(import_answers(answers, out), out, config, judge, embedder.embed)
                    figures = _ours(read_jsonl(out / "checks.jsonl"), time.perf_counter() - started)
                else:
                    checks = [
                        {"id": ident, "claims": [{"text": t} for t in texts]}
                        for ident, texts in claims_of.items()
                    ]
                    stock = stock_verdicts(judge, items, checks)
                    figures = _stock(stock, claims_of, time.perf_counter() - started)
                measured[side].append(figures)
                print(
                    f"round {round_no} {side:5}: {figures['claims']:.0f} claims, "
                    f"{figures['computed_tokens_per_claim']:.0f} computed tokens per claim "
                    f"({figures['computed_prompt_tokens_per_claim']:.0f} prompt + "
                    f"{figures['completion_tokens_per_claim']:.0f} completion; "
                    f"{figures['cached_prompt_tokens_per_claim']:.0f} more from the prefix "
                    f"cache), {figures['seconds_per_answer']:.1f} s per answer",
                    flush=True,
                )
    finally:
        judge.close()

    ratios = {
        key: [
            ours[key] / stock[key]
            for ours, stock in zip(measured["ours"], measured["stock"], strict=True)
            if stock[key]
        ]
        for key in ("computed_tokens_per_claim", "seconds_per_answer")
    }
    summary = {
        side: {
            key: statistics.median(f[key] for f in measured[side])
            for key in measured[side][0]
            if isinstance(measured[side][0][key], int | float)
        }
        for side in SIDES
    }
    print(
        f"ours/stock computed tokens per claim: median "
        f"{statistics.median(ratios['computed_tokens_per_claim']):.2f}; seconds per answer: "
        f"median {statistics.median(ratios['seconds_per_answer']):.2f} "
        f"({args.rounds} rounds, {len(rows)} answers, claims mode {config.claims!r})"
    )
    if args.name:
        from bench.harness import write_result

        write_result(
            args.name,
            "judge_cost",
            {
                "claims_mode": config.claims,
                "rounds": measured,
                "median": summary,
                "ratio_ours_over_stock": {key: spread(v) for key, v in ratios.items()},
            },
            note=args.note,
            data=[DEV],
            dtype=judge.identity().get("dtype") if hasattr(judge, "identity") else None,
            answers=len(rows),
            command=shlex.join(["bench/judge_cost.py", *sys.argv[1:]]),
        )


def _claims(run: Path) -> dict[str, list[str]]:
    return {
        row["id"]: [c["text"] for c in row["claims"]] for row in read_jsonl(run / "checks.jsonl")
    }


def _ours(checks: list[dict[str, Any]], seconds: float) -> dict[str, float]:
    """Faithfulness's tokens (its stages; no other metric runs) over the claims checked."""
    claims = sum(len(r["claims"]) for r in checks) or 1
    prompt = cached = completion = 0
    for row in checks:
        for name in FAITHFULNESS_STAGES:
            stage = row["judge"]["stages"].get(name, {})
            prompt += stage.get("prompt_tokens", 0)
            cached += stage.get("cached_tokens", 0)
            completion += stage.get("completion_tokens", 0)
    return _per_claim(claims, prompt, cached, completion, seconds, len(checks))


def _stock(
    stock: dict[str, Any], claims_of: dict[str, list[str]], seconds: float
) -> dict[str, float]:
    entries = stock["answers"]
    claims = sum(len(claims_of[ident]) for ident in entries) or 1
    prompt = sum(e["prompt_tokens"] for e in entries.values())
    cached = sum(e["cached_tokens"] for e in entries.values())
    completion = sum(e["completion_tokens"] for e in entries.values())
    figures = _per_claim(claims, prompt, cached, completion, seconds, len(claims_of))
    figures["unparseable"] = sum(e["verdicts"] is None for e in entries.values())
    return figures


def _per_claim(
    claims: int, prompt: int, cached: int, completion: int, seconds: float, answers: int
) -> dict[str, float]:
    return {
        "claims": claims,
        "computed_tokens_per_claim": round((prompt - cached + completion) / claims, 1),
        "computed_prompt_tokens_per_claim": round((prompt - cached) / claims, 1),
        "cached_prompt_tokens_per_claim": round(cached / claims, 1),
        "completion_tokens_per_claim": round(completion / claims, 1),
        "seconds_per_answer": round(seconds / max(1, answers), 2),
    }


if __name__ == "__main__":
    main()
