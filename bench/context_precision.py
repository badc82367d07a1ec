"""RAGAS context precision two ways, on the same answers and one judge engine: stock (a JSON
reason, then the verdict, per chunk) against the verdict alone read from the first token.

    .venv/bin/python bench/context_precision.py [--data FILE ...] [--limit N] \
        [--target answer|reference] [--set K=V ...] [--name context-precision-DATE] [--note T]

Takes the answers (default: the 150 RAGTruth QA dev answers, in agreement.py's order; `--data`
repeatable, records with id, question, contexts, answer, source_id, and reference for
`--target reference`), starts one judge engine and, after a warm-up on the first answers (not
counted), rates every retrieved chunk of every answer each way, vLLM's prefix cache emptied
before each side (stock first):
  - stock: judge `context_precision_verdict = "reason"`, RAGAS's prompt and JSON output (a
    reason and a 0/1 verdict, up to 200 tokens);
  - first token: `context_precision_verdict = "first_token"`, RAGAS's prompt asking for the
    verdict alone, one generated token, useful when p(1) / (p(1) + p(0)) >= 0.5.
Both score with RAGAS's average precision over rank order. `--target answer` (the default) is
RAGAS's context precision without reference (the dev records have none). Prints and, with
`--name`, writes bench/results/NAME.json (bench/harness.py: date, CPU, dtype, packages):
  - per-chunk verdict agreement on the chunks both sides rated: the share, Cohen's kappa and
    the count of each disagreement (useful by stock only, by first token only);
  - per-answer context precision, first token minus stock, on the answers both scored: the
    mean with a 95 % bootstrap interval over questions (source_id), and the mean absolute
    difference;
  - each side's cost: calls, prompt tokens computed and served from the prefix cache,
    generated tokens, seconds, chunks without a verdict; and the ratio first token / stock.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.config import ContextPrecisionVerdict, JudgeConfig, load_judge, parse_set_option
from auditor.verify.answers import AnswerItem
from auditor.verify.asker import Asker
from auditor.verify.base import Judge, JudgeUsage
from auditor.verify.check import import_answers
from auditor.verify.judges import make_judge
from auditor.verify.metrics import ContextPrecision
from auditor.verify.precision_agreement import score_differences, verdict_agreement
from bench.agreement import DEV, load_rows
from bench.harness import relative, write_result

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

# the two sides, stock first, and the judge setting each runs with
SIDES: dict[str, ContextPrecisionVerdict] = {"stock": "reason", "first_token": "first_token"}
COST_FIGURES = (
    "calls",
    "prompt_tokens_computed",
    "prompt_tokens_cached",
    "generated_tokens",
    "seconds",
)
WARM_UP_ANSWERS = 4


@dataclass
class SideResult:
    """One side's verdicts and scores per answer, and what it cost."""

    verdicts: dict[str, list[bool | None]]  # answer id -> each chunk's verdict (None: failed)
    p_useful: dict[str, list[float | None]]  # answer id -> each chunk's p_useful (first token)
    scores: dict[str, float | None]  # answer id -> context precision (None: not scored)
    cost: dict[str, float]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, action="append", help="Answers (repeatable; default RAGTruth QA dev)."
    )
    parser.add_argument("--limit", type=int, help="The first N answers (agreement.py's order).")
    parser.add_argument("--target", choices=["answer", "reference"], default="answer")
    parser.add_argument("--judge", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[], metavar="K=V")
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    parser.add_argument("--note", default="", help="What was measured, for the results file.")
    args = parser.parse_args()

    data = args.data or [DEV]
    rows = load_answers(data, args.limit, args.target)
    command = _command(sys.argv[1:])  # made before the engine starts: a bad word fails early
    source_of = {r["id"]: str(r.get("source_id") or r["question"]) for r in rows}
    work = Path(tempfile.mkdtemp(prefix="auditor-context-precision-"))
    items = _items(rows, work)
    config = load_judge(args.judge, dict(parse_set_option(s) for s in args.set_items))
    chunks = sum(len(item.chunks) for item in items)
    print(f"{len(items)} answers, {chunks} chunks, target {args.target}; judge {config.name}")

    judge = make_judge(config)
    engine = getattr(getattr(judge, "generator", None), "llm", None)
    if engine is None:
        judge.close()
        sys.exit(
            "the in-process vLLM judge is needed: its prefix cache is emptied before each side"
        )
    results: dict[str, SideResult] = {}
    try:
        for verdict in SIDES.values():  # warm-up: the engine's first batches, not counted
            rate(items[:WARM_UP_ANSWERS], config, verdict, args.target, judge)
        for side, verdict in SIDES.items():
            engine.reset_prefix_cache()
            results[side] = rate(items, config, verdict, args.target, judge)
            print(f"{side:11}: {_cost_line(results[side].cost)}", flush=True)
        identity = judge.identity()
    finally:
        judge.close()

    stock, first = results["stock"], results["first_token"]
    figures = compare(stock, first, source_of)
    figures["cost"] = {side: result.cost for side, result in results.items()}
    figures["cost"]["ratio_first_token_over_stock"] = cost_ratio(stock.cost, first.cost)
    print_figures(figures)
    if args.name:
        write_result(
            args.name,
            "context_precision",
            figures,
            note=args.note,
            data=data,
            dtype=identity.get("dtype"),
            answers=len(items),
            chunks=chunks,
            target=args.target,
            judge={"name": config.name, "identity": identity},
            command=command,
            # per answer: both scores, stock's chunk verdicts and first token's p_useful
            scores={
                ident: {
                    "source_id": source_of[ident],
                    "stock": stock.scores[ident],
                    "first_token": first.scores[ident],
                    "stock_verdicts": stock.verdicts[ident],
                    "p_useful": first.p_useful[ident],
                }
                for ident in stock.scores
            },
        )


def _command(argv: Sequence[str]) -> str:
    """This command as run, data paths as the results file names them, without --note's text
    (the results file has it; a long note is no path to look up)."""
    words: list[str] = []
    for word in argv:
        if words and words[-1] == "--note":
            words.pop()
            continue
        try:
            words.append(relative(Path(word)) if Path(word).exists() else word)
        except OSError:  # not a path at all (too long a name)
            words.append(word)
    return shlex.join(["bench/context_precision.py", *words])


def load_answers(paths: Sequence[Path], limit: int | None, target: str) -> list[dict[str, Any]]:
    """The answers of `paths` in agreement.py's order (a hash of the id), the first `limit`;
    SystemExit when `--target reference` meets an answer without a reference."""
    rows = load_rows(list(paths), None)
    rows.sort(key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
    rows = rows[:limit] if limit else rows
    if target == "reference":
        missing = [r["id"] for r in rows if not r.get("reference")]
        if missing:
            sys.exit(
                f"--target reference: {len(missing)} answers have no reference, e.g. {missing[0]}"
            )
    return rows


def _items(rows: list[dict[str, Any]], work: Path) -> list[AnswerItem]:
    answers = work / "answers.jsonl"
    keys = ("id", "question", "contexts", "answer", "reference")
    answers.write_text(
        "".join(json.dumps({k: r[k] for k in keys if r.get(k) is not None}) + "\n" for r in rows),
        encoding="utf-8",
    )
    return import_answers(answers, work / "run")


def rate(
    items: list[AnswerItem],
    config: JudgeConfig,
    verdict: ContextPrecisionVerdict,
    target: str,
    judge: Judge,
) -> SideResult:
    """Every chunk of `items` rated one way (one batch of judge calls, re-asked as `auditor
    check` re-asks), each answer scored, and what the side cost."""
    metric = ContextPrecision(target, verdict)
    usage = {item.id: JudgeUsage() for item in items}
    planned = [call for item in items for call in metric.plan(item, "checked")]
    started = time.perf_counter()
    replies = Asker(judge, config.retries, usage).ask(planned, f"context precision, {verdict}")
    seconds = time.perf_counter() - started
    verdicts: dict[str, list[bool | None]] = {}
    p_useful: dict[str, list[float | None]] = {}
    scores: dict[str, float | None] = {}
    for item in items:
        fields = metric.score(item, replies, [], lambda texts: None)
        verdicts[item.id] = [row["useful"] for row in fields[metric.verdicts]]
        p_useful[item.id] = [row.get("p_useful") for row in fields[metric.verdicts]]
        scores[item.id] = fields[metric.field]
    spent = usage.values()
    cost = {
        "calls": sum(u.calls for u in spent),
        "prompt_tokens_computed": sum(u.prompt_tokens - u.cached_tokens for u in spent),
        "prompt_tokens_cached": sum(u.cached_tokens for u in spent),
        "generated_tokens": sum(u.completion_tokens for u in spent),
        "seconds": round(seconds, 2),
        "chunks_without_verdict": sum(v is None for vs in verdicts.values() for v in vs),
        "answers_not_scored": sum(s is None for s in scores.values()),
    }
    return SideResult(verdicts, p_useful, scores, cost)


def compare(stock: SideResult, first: SideResult, source_of: Mapping[str, str]) -> dict[str, Any]:
    """Per-chunk agreement on the chunks both sides rated, and the per-answer difference
    (first token minus stock) on the answers both scored, grouped by question."""
    pairs = [
        (s, f)
        for ident, ours in stock.verdicts.items()
        for s, f in zip(ours, first.verdicts.get(ident, []), strict=False)
        if s is not None and f is not None
    ]
    differences: dict[str, list[float]] = {}
    for ident, s_score in stock.scores.items():
        f_score = first.scores.get(ident)
        if s_score is not None and f_score is not None:
            differences.setdefault(source_of[ident], []).append(f_score - s_score)
    chunks = verdict_agreement(pairs)
    return {
        "chunks": {
            "chunks": chunks["chunks"],
            "agreement": chunks["agreement"],
            "kappa": chunks["kappa"],
            "both_useful": chunks["both_useful"],
            "neither_useful": chunks["neither_useful"],
            "useful_by_stock_only": chunks["useful_by_first_only"],
            "useful_by_first_token_only": chunks["useful_by_second_only"],
        },
        "answers": score_differences(differences),
    }


def cost_ratio(stock: Mapping[str, float], first: Mapping[str, float]) -> dict[str, float | None]:
    """Each cost figure, first token over stock (None where stock spent none)."""
    return {
        key: round(first[key] / stock[key], 4) if stock.get(key) else None for key in COST_FIGURES
    }


def _cost_line(cost: Mapping[str, float]) -> str:
    return (
        f"{cost['calls']:.0f} calls, {cost['prompt_tokens_computed']:.0f} prompt tokens computed "
        f"+ {cost['prompt_tokens_cached']:.0f} from the prefix cache, "
        f"{cost['generated_tokens']:.0f} generated, {cost['seconds']:.1f} s; "
        f"{cost['chunks_without_verdict']:.0f} chunks without a verdict, "
        f"{cost['answers_not_scored']:.0f} answers not scored"
    )


def print_figures(figures: Mapping[str, Any]) -> None:
    chunks, answers = figures["chunks"], figures["answers"]
    print(
        f"chunk verdicts, {chunks['chunks']} rated both ways: agreement {chunks['agreement']}, "
        f"Cohen's kappa {chunks['kappa']}; useful by stock only {chunks['useful_by_stock_only']}, "
        f"by first token only {chunks['useful_by_first_token_only']} "
        f"(both {chunks['both_useful']}, neither {chunks['neither_useful']})"
    )
    print(
        f"context precision per answer, first token minus stock, {answers['answers']} "
        f"answers to {answers['questions']} questions: mean {answers['mean_difference']} "
        f"(95 % CI {answers['mean_difference_ci95']}, bootstrap over questions), mean absolute "
        f"difference {answers['mean_absolute_difference']}"
    )
    ratio = figures["cost"]["ratio_first_token_over_stock"]
    print("first token / stock: " + ", ".join(f"{k} {v}" for k, v in ratio.items()))


if __name__ == "__main__":
    main()
