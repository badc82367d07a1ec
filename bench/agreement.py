"""Agreement of `auditor check` verdicts with human hallucination labels (RAGTruth QA dev).

    .venv/bin/python bench/agreement.py [--split check|tune|all] [--limit N] [--out DIR] [--judge J.toml]

Runs `auditor check --answers` over ../shared/datasets/ragtruth-qa/dev.jsonl (resumable: the
out dir keeps what was judged) and prints, against the human labels:
  - response level: an answer is flagged when any claim is unsupported or contradicted
    (a refusal is never flagged); precision, recall, F1, balanced accuracy with a bootstrap
    95 % interval;
  - claim level: a claim whose span overlaps a human span should be unsupported or
    contradicted, any other claim supported;
  - unverifiable rate; judge seconds and tokens per claim.
The dev slice is split by question (source_id, fixed hash): `tune` is what prompts may be
tuned against, `check` is kept aside as our own check. Literature baselines on RAGTruth QA:
HHEM-2.1-Open 74.3 and GPT-4 judge 74.1 balanced accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

from auditor.config import EmbedderConfig, load_judge, parse_set_option
from auditor.ingest.embed import load_embedder
from auditor.store import read_jsonl
from auditor.verify.check import check_items, import_answers
from auditor.verify.judges import make_judge

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
DEV = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "ragtruth-qa" / "dev.jsonl"


def split_of(source_id: str) -> str:
    """A fixed third of the questions is kept aside ("check"); the rest may be tuned on."""
    return "check" if int(hashlib.sha256(source_id.encode()).hexdigest(), 16) % 3 == 0 else "tune"


def balanced_accuracy(pairs: list[tuple[bool, bool]]) -> float:
    positives = [p for gold, p in pairs if gold]
    negatives = [not p for gold, p in pairs if not gold]
    recall = sum(positives) / len(positives) if positives else 0.0
    specificity = sum(negatives) / len(negatives) if negatives else 0.0
    return (recall + specificity) / 2


def bootstrap(pairs: list[tuple[bool, bool]], rounds: int = 2000) -> tuple[float, float]:
    rng = random.Random(0)
    values = sorted(
        balanced_accuracy([pairs[rng.randrange(len(pairs))] for _ in pairs]) for _ in range(rounds)
    )
    return values[int(0.025 * rounds)], values[int(0.975 * rounds) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["check", "tune", "all"], default="all")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--out", type=Path, help="Run dir to write/resume (default: a temp dir).")
    parser.add_argument("--judge", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[])
    parser.add_argument(
        "--stock",
        action="store_true",
        help="Also judge the same claims the stock RAGAS way (all contexts joined, one call) "
        "and compare tokens per claim and agreement.",
    )
    args = parser.parse_args()

    rows = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if args.split == "all" or split_of(str(r["source_id"])) == args.split]
    # interleave labels so a --limit keeps both classes
    rows.sort(key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
    if args.limit:
        rows = rows[: args.limit]
    gold = {r["id"]: r for r in rows}
    out = args.out or Path(tempfile.mkdtemp(prefix="auditor-agreement-"))
    answers = out.parent / f"{out.name}.answers.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    answers.write_text(
        "".join(
            json.dumps({k: r[k] for k in ("id", "question", "contexts", "answer")}) + "\n"
            for r in rows
        ),
        encoding="utf-8",
    )
    config = load_judge(args.judge, dict(parse_set_option(s) for s in args.set_items))
    items = import_answers(answers, out)
    embedder = load_embedder(EmbedderConfig())
    judge = make_judge(config)
    try:
        check_items(items, out, config, judge, lambda texts: embedder.embed(texts))
        checks = read_jsonl(out / "checks.jsonl")
        stock = stock_verdicts(judge, items, checks) if args.stock else None
    finally:
        judge.close()
    report(gold, checks, config.name, out)
    if stock is not None:
        report_stock(gold, checks, stock)


def stock_verdicts(judge: Any, items: list[Any], checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Stock RAGAS Faithfulness step 2 on our claims: one NLI call over the joined contexts."""
    from auditor.verify import ragas_judge as ragas
    from auditor.verify.base import JudgeCall

    by_id = {item.id: item for item in items}
    calls, owners = [], []
    for row in checks:
        claims = [c["text"] for c in row["claims"]]
        item = by_id.get(row["id"])
        if not claims or item is None:
            continue
        prompt, model = ragas.nli_prompt("\n".join(t for _, t in item.chunks), claims)
        schema = ragas.bounded_schema(model, len(claims), 300)
        schema["properties"]["statements"]["minItems"] = len(claims)
        calls.append(JudgeCall(f"nli|{row['id']}", prompt, schema, 200 * len(claims) + 50))
        owners.append((row["id"], model))
    results: dict[str, Any] = {}
    for (owner, model), reply in zip(owners, judge.complete(calls), strict=True):
        try:
            parsed = model.model_validate_json(reply.text)
            verdicts = [int(s.verdict) for s in parsed.statements]
        except ValueError:
            verdicts = None
        results[owner] = {
            "verdicts": verdicts,
            "tokens": reply.prompt_tokens + reply.completion_tokens,
        }
    return results


def report_stock(gold: dict[str, Any], checks: list[dict[str, Any]], stock: dict[str, Any]) -> None:
    """Stock RAGAS verification on the same claims: agreement and tokens per claim, side by side."""
    pairs = []
    ours_tokens = stock_tokens = claims = failed = 0
    for row in checks:
        if row["id"] not in gold:
            continue
        stages = row["judge"].get("stages", {})
        statements = stages.get("statements", {})
        shared = statements.get("prompt_tokens", 0) + statements.get("completion_tokens", 0)
        verify = stages.get("verify", {})
        n = len(row["claims"])
        claims += n
        ours_tokens += shared + verify.get("prompt_tokens", 0) + verify.get("completion_tokens", 0)
        entry = stock.get(row["id"])
        if entry is None:
            pairs.append((bool(gold[row["id"]]["hallucinated"]), bool(row["hallucinated"])))
            stock_tokens += shared
            continue
        stock_tokens += shared + entry["tokens"]
        if entry["verdicts"] is None:
            failed += 1
            continue
        pairs.append(
            (bool(gold[row["id"]]["hallucinated"]), any(v == 0 for v in entry["verdicts"]))
        )
    print(
        f"stock RAGAS (joined contexts, one NLI call) on the same claims: balanced accuracy "
        f"{balanced_accuracy(pairs):.3f} over {len(pairs)} answers ({failed} unparseable)"
    )
    print(
        f"judge tokens per claim (statements + verification): ours {ours_tokens / max(1, claims):.0f}, "
        f"stock RAGAS {stock_tokens / max(1, claims):.0f}"
    )


def report(gold: dict[str, Any], checks: list[dict[str, Any]], judge_name: str, out: Path) -> None:
    """Print the agreement figures for the checked answers."""
    pairs: list[tuple[bool, bool]] = []
    claim_pairs: list[tuple[bool, bool]] = []
    claims = unverifiable = tokens = 0
    seconds = 0.0
    for row in checks:
        record = gold.get(row["id"])
        if record is None:
            continue
        flagged = bool(row["hallucinated"])
        pairs.append((bool(record["hallucinated"]), flagged))
        spans = [(s["start"], s["end"]) for s in record["spans"]]
        for claim in row["claims"]:
            claims += 1
            if claim["verdict"] == "unverifiable":
                unverifiable += 1
                continue
            if claim["span"] is None:
                continue
            start, end = claim["span"]
            bad = any(start < e and s < end for s, e in spans)
            claim_pairs.append((bad, claim["verdict"] in {"unsupported", "contradicted"}))
        tokens += row["judge"]["prompt_tokens"] + row["judge"]["completion_tokens"]
        seconds += row["judge"]["seconds"]
    tp = sum(g and p for g, p in pairs)
    fp = sum(p and not g for g, p in pairs)
    fn = sum(g and not p for g, p in pairs)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    low, high = bootstrap(pairs) if pairs else (0.0, 0.0)
    print(
        f"judge {judge_name}; {len(pairs)} answers ({sum(g for g, _ in pairs)} hallucinated by the human labels); run dir {out}"
    )
    print(
        f"response level: balanced accuracy {balanced_accuracy(pairs):.3f} (95% CI {low:.3f}-{high:.3f}), "
        f"precision {precision:.3f}, recall {recall:.3f}, F1 {f1:.3f}"
    )
    agree = sum(g == p for g, p in claim_pairs)
    print(
        f"claim level: {agree}/{len(claim_pairs)} agree ({agree / max(1, len(claim_pairs)):.3f}), "
        f"balanced accuracy {balanced_accuracy(claim_pairs):.3f}; unverifiable {unverifiable}/{claims}"
    )
    print(
        f"judge cost: {tokens / max(1, claims):.0f} tokens and {seconds / max(1, claims):.2f} s per claim, "
        f"{seconds / max(1, len(pairs)):.1f} s per answer"
    )
    print(
        "baselines (RAGTruth QA, response level): HHEM-2.1-Open 0.743, GPT-4 judge 0.741 balanced accuracy"
    )


if __name__ == "__main__":
    main()
