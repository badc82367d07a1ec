"""Agreement of `auditor check` verdicts with human hallucination labels (RAGTruth QA dev).

    .venv/bin/python bench/agreement.py --cv [--stock] [--out DIR] [--name N] # all 150, 5-fold CV
    .venv/bin/python bench/agreement.py --split check|tune [--limit N]   # one split, as set
    .venv/bin/python bench/agreement.py --cv --data ../shared/datasets/ragtruth-other/summary.jsonl \
        --data ../shared/datasets/ragtruth-other/data2txt.jsonl --sample 100  # other tasks

Runs `auditor check --answers` over ../shared/datasets/ragtruth-qa/dev.jsonl (resumable: the
out dir keeps what was judged; re-running with the same --out only re-scores) and prints,
against the human labels:
  - response level: an answer is flagged when a claim's p_supported is below the support
    threshold (an abstention: when a chunk gives what it says is missing); balanced accuracy
    with a bootstrap 95 % interval, AUROC of the answer score, precision, recall, F1.
    With --cv: 5 folds by question, the threshold chosen on four (highest balanced accuracy,
    `auditor.verify.thresholds.best_threshold`) and applied to the fifth, predictions pooled;
    also the threshold chosen on all answers (what the default judge ships);
  - claim level: a claim whose answer span overlaps a human span should be flagged;
  - judge cost: prompt tokens per claim computed and served from vLLM's prefix cache,
    completion tokens, seconds per answer;
  - with --stock: stock RAGAS faithfulness verification (its NLI prompt over the joined
    contexts, one call per answer) on the same claims, same answers, same engine.
With --name NAME the response-level, claim-level and cost figures are also written to
bench/results/NAME.json with the run's date, CPU, dtype, package versions and judge
(bench/harness.py; docs/evidence.md is built from those files).
Literature baselines on RAGTruth QA: HHEM-2.1-Open 0.743 and GPT-4 judge 0.741 balanced accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.claim_rows import Claim, flagged_at, ranking_score
from auditor.config import EmbedderConfig, load_judge, parse_set_option
from auditor.ingest.embed import load_embedder
from auditor.store import read_jsonl
from auditor.verify.base import CallKey
from auditor.verify.check import check_items, import_answers
from auditor.verify.judges import make_judge
from auditor.verify.thresholds import agreement, auroc, best_threshold, roc_points

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
DEV = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "ragtruth-qa" / "dev.jsonl"
FOLDS = 5


def split_of(source_id: str) -> str:
    """A fixed third of the questions is kept aside ("check"); the rest may be tuned on."""
    return "check" if _hash(source_id) % 3 == 0 else "tune"


def fold_of(source_id: str) -> int:
    """Cross-validation fold of a question (all answers to one question share a fold)."""
    return _hash(f"fold:{source_id}") % FOLDS


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["check", "tune", "all"], default="all")
    parser.add_argument("--cv", action="store_true", help="5-fold cross-validation by question.")
    parser.add_argument("--limit", type=int)
    parser.add_argument(
        "--data",
        type=Path,
        action="append",
        help="Labelled answers in RAGTruth's record shape (repeatable; default: RAGTruth QA dev). "
        "A context longer than a chunk is split as `auditor ingest` would.",
    )
    parser.add_argument(
        "--sample",
        type=int,
        help="A stratified sample of this many answers: equal shares of each file, each "
        "half hallucinated where it can be (by a hash of the id: the same every run).",
    )
    parser.add_argument("--out", type=Path, help="Run dir to write/resume (default: a temp dir).")
    parser.add_argument("--judge", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[])
    parser.add_argument("--roc", type=Path, help="Write the ROC curve here (SVG).")
    parser.add_argument("--stock", action="store_true", help="Also stock RAGAS on the same claims.")
    parser.add_argument(
        "--stock-limit",
        type=int,
        help="Stock RAGAS on the first N answers only (it costs ~3x ours on 2 cores).",
    )
    parser.add_argument(
        "--quotes",
        action="store_true",
        help="Also score with the quote check, from OUT/quotes.json (bench/quote_pass.py OUT).",
    )
    parser.add_argument(
        "--write-calibration",
        type=Path,
        help="Write these answers' calibration of the judge here (auditor calibrate's format; "
        "auditor/calibrations/ ships the default judge's).",
    )
    parser.add_argument(
        "--redecide",
        action="store_true",
        help="Decide the stored chunk judgements again with today's figure guards and decision "
        "rule (judges nothing; measures a change of rule that leaves the prompts alone).",
    )
    parser.add_argument(
        "--score-only",
        action="store_true",
        help="Judge nothing: score the answers already checked in --out (a partial run).",
    )
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    parser.add_argument("--note", default="", help="What was measured, for the results file.")
    args = parser.parse_args()
    started = time.perf_counter()

    rows = load_rows(args.data or [DEV], args.sample)
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
    done = (
        {row["id"] for row in read_jsonl(out / "checks.jsonl")}
        if (out / "checks.jsonl").exists()
        else set()
    )
    stock_path = out / "stock.json"
    need_stock = args.stock and not stock_path.exists()
    if not args.score_only and ({item.id for item in items} - done or need_stock):
        embedder = load_embedder(EmbedderConfig())
        judge = make_judge(config)
        try:
            check_items(items, out, config, judge, lambda texts: embedder.embed(texts))
            if need_stock:
                checks = read_jsonl(out / "checks.jsonl")
                wanted = {item.id for item in items[: args.stock_limit]}
                checks = [row for row in checks if row["id"] in wanted]
                stock_path.write_text(json.dumps(stock_verdicts(judge, items, checks)))
        finally:
            judge.close()
    checks = [row for row in read_jsonl(out / "checks.jsonl") if row["id"] in gold]
    if args.redecide:
        checks = redecided(checks, items, config)
    print(
        f"judge {config.name}; {len(checks)} answers ({sum(gold[r['id']]['hallucinated'] for r in checks)} hallucinated by the human labels); run dir {out}"
    )
    figures: dict[str, Any] = {
        "answers": len(checks),
        "hallucinated": sum(bool(gold[r["id"]]["hallucinated"]) for r in checks),
    }
    if args.cv:
        thresholds = report_cv(gold, checks, args.roc, figures)
    else:
        thresholds = report_at(gold, checks, config.support_threshold, figures)
    figures["cost"] = report_cost(checks)
    if args.quotes:
        report_quotes(gold, checks, out, config.support_threshold, args.cv)
    if args.write_calibration:
        write_calibration(args.write_calibration, gold, checks, out)
    if args.stock and stock_path.exists():
        report_stock(gold, checks, json.loads(stock_path.read_text()), thresholds)
    print(
        "baselines (RAGTruth QA, response level): HHEM-2.1-Open 0.743, GPT-4 judge 0.741 balanced accuracy"
    )
    print(f"bench wall time {time.perf_counter() - started:.0f} s")
    if args.name:
        from bench.harness import write_result

        write_result(
            args.name,
            "agreement",
            figures,
            note=args.note,
            data=args.data or [DEV],
            dtype=_run_judge(out).get("dtype"),
            answers=len(checks),
            judge={k: v for k, v in _run_judge(out).items() if k != "dtype"},
            command=_command(),
            settings={
                "split": args.split,
                "limit": args.limit,
                "sample": args.sample,
                "set": args.set_items,
                "redecide": args.redecide,
            },
        )


def _run_judge(out: Path) -> dict[str, Any]:
    """The judge identity, verdict logic and engine dtype of a run dir's check.json (the dtype
    the engine ran in: a CPU without bf16 runs a bfloat16 request in float32)."""
    manifest = json.loads((out / "check.json").read_text(encoding="utf-8"))
    judge = manifest.get("judge", {})
    identity = judge.get("identity") or {}
    return {
        "identity": judge.get("identity"),
        "verdict_logic": judge.get("verdict_logic"),
        "dtype": identity.get("dtype") or judge.get("config", {}).get("generator", {}).get("dtype"),
    }


def _command() -> str:
    """This command as run, its data paths as the results file names them, its output paths
    as RUN and ROC.svg (no machine's paths), without --note (the results file has it)."""
    from bench.harness import relative

    words: list[str] = []
    for word in sys.argv[1:]:
        if words and words[-1] == "--note":
            words.pop()
        elif words and words[-1] in ("--out", "--roc", "--write-calibration"):
            words.append({"--out": "RUN", "--roc": "ROC.svg"}.get(words[-1], "FILE"))
        elif Path(word).exists():
            words.append(relative(Path(word)))
        else:
            words.append(word)
    return shlex.join(["bench/agreement.py", *words])


def load_rows(paths: list[Path], sample: int | None) -> list[dict[str, Any]]:
    """The labelled answers of `paths`; with `sample`, an equal share of each file, half of
    each share hallucinated (as far as the file has them), picked by a hash of the id; long
    contexts split into the auditor's chunks."""
    picked: list[dict[str, Any]] = []
    for n, path in enumerate(paths):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        if sample is not None:
            share = sample // len(paths) + (n < sample % len(paths))
            by_hash = sorted(rows, key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
            bad = [r for r in by_hash if r["hallucinated"]]
            good = [r for r in by_hash if not r["hallucinated"]]
            take_bad = min(len(bad), max(share // 2, share - len(good)))
            rows = bad[:take_bad] + good[: share - take_bad]
        picked.extend(rows)
    if any(len(c) > CHUNK_CHARS for r in picked for c in r["contexts"]):
        split = context_splitter()
        for row in picked:
            row["contexts"] = [piece for c in row["contexts"] for piece in split(c)]
    return picked


# contexts longer than this are split into chunks (a RAGTruth summary source is one article)
CHUNK_CHARS = 1500


def context_splitter() -> Any:
    """Split a text into chunks as `auditor ingest` does (the default chunking settings)."""
    from auditor.config import ChunkingConfig
    from auditor.ingest.chunking import chunk_document, make_splitter
    from auditor.types import Document, Page

    embedder = load_embedder(EmbedderConfig())
    splitter = make_splitter(ChunkingConfig(), embedder.tokenize, embedder.identity.max_tokens)

    def split(text: str) -> list[str]:
        if len(text) <= CHUNK_CHARS:
            return [text]
        document = Document("context", "", len(text), "txt", (Page(number=1, text=text),))
        return [piece.text for piece in chunk_document(document, splitter)]

    return split


def redecided(checks: list[dict[str, Any]], items: list[Any], config: Any) -> list[dict[str, Any]]:
    """The rows with every claim decided again by today's rule from its stored judgements."""
    from auditor.verify.verdicts import redecide

    by_id = {item.id: item for item in items}
    rows = []
    changed = 0
    for row in checks:
        claims = []
        for claim in _claims(row):
            before = claim.p_supported
            redecide(claim, by_id[row["id"]], config)
            changed += before != claim.p_supported
            claims.append(claim.to_json())
        rows.append(row | {"claims": claims})
    print(f"decided again by today's rule: p_supported changed for {changed} claims")
    return rows


def _claims(row: dict[str, Any]) -> list[Claim]:
    return [Claim.from_json(c) for c in row["claims"]]


def report_at(
    gold: dict[str, Any],
    checks: list[dict[str, Any]],
    threshold: float,
    figures: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Agreement at one threshold (the judge's); the threshold each answer was scored at.
    The figures printed are added to `figures` where given."""
    pairs = [
        (bool(gold[r["id"]]["hallucinated"]), flagged_at(_claims(r), threshold)) for r in checks
    ]
    scores = [ranking_score(_claims(r)) for r in checks]
    found = {"scoring": f"at the judge's threshold {threshold:.3f}", "threshold": threshold}
    found |= _print_agreement(f"at the judge's threshold {threshold:.3f}", pairs, scores)
    thresholds = {r["id"]: threshold for r in checks}
    found["claim_level"] = _print_claims(gold, checks, thresholds)
    if figures is not None:
        figures.update(found)
    return thresholds


def report_cv(
    gold: dict[str, Any],
    checks: list[dict[str, Any]],
    roc: Path | None,
    figures: dict[str, Any] | None = None,
) -> dict[str, float]:
    """5-fold cross-validation by question: thresholds from four folds, scored on the fifth.
    Returns the threshold each answer was scored at; the figures printed are added to
    `figures` where given."""
    scores = {r["id"]: ranking_score(_claims(r)) for r in checks}
    labels = {r["id"]: bool(gold[r["id"]]["hallucinated"]) for r in checks}
    folds = {r["id"]: fold_of(str(gold[r["id"]]["source_id"])) for r in checks}
    thresholds: dict[str, float] = {}
    chosen = []
    for fold in range(FOLDS):
        train = [i for i in scores if folds[i] != fold]
        t = best_threshold([scores[i] for i in train], [labels[i] for i in train])
        chosen.append(t)
        thresholds.update({i: t for i in scores if folds[i] == fold})
    pairs = [(labels[r["id"]], flagged_at(_claims(r), thresholds[r["id"]])) for r in checks]
    found: dict[str, Any] = {"scoring": f"{FOLDS}-fold cross-validated, folds by question"}
    found |= _print_agreement(
        f"{FOLDS}-fold cross-validated (thresholds {', '.join(f'{t:.3f}' for t in chosen)})",
        pairs,
        list(scores.values()),
        [labels[i] for i in scores],
    )
    found["claim_level"] = _print_claims(gold, checks, thresholds)
    everything = best_threshold(list(scores.values()), list(labels.values()))
    print(
        f"threshold chosen on all {len(scores)} answers (ship as support_threshold): {everything:.3f}"
    )
    found["thresholds"] = {
        "folds": [round(t, 4) for t in chosen],
        "chosen_on_all": round(everything, 4),
    }
    if figures is not None:
        figures.update(found)
    if roc is not None:
        roc.parent.mkdir(parents=True, exist_ok=True)
        area = auroc(list(scores.values()), list(labels.values()))
        title = f"RAGTruth QA dev, {len(scores)} answers: AUROC {area:.3f}" if area else "ROC"
        points = roc_points(list(scores.values()), list(labels.values()))
        roc.write_text(roc_svg(points, title), encoding="utf-8")
        print(f"ROC curve -> {roc}")
    return thresholds


def _print_agreement(
    title: str,
    pairs: list[tuple[bool, bool]],
    scores: list[float],
    labels: list[bool] | None = None,
) -> dict[str, Any]:
    """Print the response-level figures; return them (intervals: bootstrap 95 % over
    answers, 2,000 rounds, seed 0)."""
    a = agreement(pairs)
    gold = labels if labels is not None else [g for g, _ in pairs]
    area = auroc(scores, gold)
    print(
        f"response level, {title}: balanced accuracy {a.balanced_accuracy:.3f} "
        f"(95% CI {a.interval[0]:.3f}-{a.interval[1]:.3f}), AUROC {area if area is None else round(area, 3)}, "
        f"precision {a.precision:.3f}, recall {a.recall:.3f}, specificity {a.specificity:.3f}, F1 {a.f1:.3f}"
    )
    low, high = auroc_interval(scores, gold)
    return {
        "balanced_accuracy": {
            "value": round(a.balanced_accuracy, 4),
            "low": round(a.interval[0], 4),
            "high": round(a.interval[1], 4),
        },
        "auroc": None
        if area is None
        else {"value": round(area, 4), "low": round(low, 4), "high": round(high, 4)},
        "precision": round(a.precision, 4),
        "recall": round(a.recall, 4),
        "specificity": round(a.specificity, 4),
        "f1": round(a.f1, 4),
        "intervals": "bootstrap 95 % over answers, 2000 rounds, seed 0",
    }


def auroc_interval(
    scores: list[float], labels: list[bool], rounds: int = 2000
) -> tuple[float, float]:
    """95 % percentile interval of AUROC over answers resampled with replacement (a resample
    with one class only is skipped)."""
    rng = random.Random(0)
    values = []
    for _ in range(rounds):
        picks = [rng.randrange(len(scores)) for _ in scores]
        area = auroc([scores[i] for i in picks], [labels[i] for i in picks])
        if area is not None:
            values.append(area)
    if not values:
        return 0.0, 0.0
    values.sort()
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


def _print_claims(
    gold: dict[str, Any], checks: list[dict[str, Any]], thresholds: dict[str, float]
) -> dict[str, Any]:
    pairs = []
    for row in checks:
        spans = [(s["start"], s["end"]) for s in gold[row["id"]]["spans"]]
        for claim in _claims(row):
            if claim.verdict == "unverifiable" or claim.span is None:
                continue
            start, end = claim.span
            bad = any(start < e and s < end for s, e in spans)
            pairs.append((bad, flagged_at([claim], thresholds[row["id"]])))
    a = agreement(pairs, rounds=200)
    agree = sum(g == f for g, f in pairs)
    print(
        f"claim level: {agree}/{len(pairs)} agree ({agree / max(1, len(pairs)):.3f}), "
        f"balanced accuracy {a.balanced_accuracy:.3f}"
    )
    return {
        "claims": len(pairs),
        "agree": agree,
        "balanced_accuracy": round(a.balanced_accuracy, 4),
    }


FAITHFULNESS_STAGES = ("claims", "premise", "entailment", "quote")


def report_cost(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Faithfulness's judge cost per claim (the claims and entailment stages; other metrics
    left out): prompt tokens computed vs served from vLLM's prefix cache, seconds per answer
    (each answer's judge seconds apportioned by its tokens, as `auditor check` books them)."""
    claims = sum(len(r["claims"]) for r in checks) or 1
    prompt = cached = completion = 0
    seconds = 0.0
    for row in checks:
        judge = row["judge"]
        stages = [judge["stages"].get(name, {}) for name in FAITHFULNESS_STAGES]
        mine = sum(s.get("prompt_tokens", 0) + s.get("completion_tokens", 0) for s in stages)
        every = sum(
            s.get("prompt_tokens", 0) + s.get("completion_tokens", 0)
            for s in judge["stages"].values()
        )
        prompt += sum(s.get("prompt_tokens", 0) for s in stages)
        cached += sum(s.get("cached_tokens", 0) for s in stages)
        completion += sum(s.get("completion_tokens", 0) for s in stages)
        seconds += judge["seconds"] * mine / every if every else 0.0
    unverifiable = sum(c["verdict"] == "unverifiable" for r in checks for c in r["claims"])
    print(
        f"judge cost of faithfulness per claim ({claims} claims, {claims / max(1, len(checks)):.1f} per answer): "
        f"prompt {prompt / claims:.0f} tokens = {(prompt - cached) / claims:.0f} computed + "
        f"{cached / claims:.0f} from the prefix cache; completion {completion / claims:.0f}; "
        f"computed in all {(prompt - cached + completion) / claims:.0f}; "
        f"{seconds / max(1, len(checks)):.1f} s per answer; unverifiable {unverifiable}"
    )
    return {
        "claims": sum(len(r["claims"]) for r in checks),
        "claims_per_answer": round(claims / max(1, len(checks)), 2),
        "prompt_tokens_per_claim": round(prompt / claims, 1),
        "computed_prompt_tokens_per_claim": round((prompt - cached) / claims, 1),
        "cached_prompt_tokens_per_claim": round(cached / claims, 1),
        "completion_tokens_per_claim": round(completion / claims, 1),
        "judge_seconds_per_answer": round(seconds / max(1, len(checks)), 2),
        "judge_seconds": round(sum(r["judge"]["seconds"] for r in checks), 1),
        "unverifiable_claims": unverifiable,
    }


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
        calls.append(JudgeCall(CallKey("nli", row["id"]), prompt, schema, 200 * len(claims) + 50))
        owners.append((row["id"], model))
    started = time.perf_counter()
    replies = judge.complete(calls)
    seconds = time.perf_counter() - started
    results: dict[str, Any] = {"seconds": seconds, "answers": {}}
    for (owner, model), reply in zip(owners, replies, strict=True):
        try:
            verdicts = [int(s.verdict) for s in model.model_validate_json(reply.text).statements]
        except ValueError:
            verdicts = None
        results["answers"][owner] = {
            "verdicts": verdicts,
            "prompt_tokens": reply.prompt_tokens,
            "cached_tokens": reply.cached_tokens,
            "completion_tokens": reply.completion_tokens,
        }
    return results


def calibration_of(
    gold: dict[str, Any], checks: list[dict[str, Any]], judge: dict[str, Any], data: list[Path]
) -> dict[str, Any]:
    """The calibration of checked RAGTruth QA answers labelled in `data` (`gold`: their
    records by id), for the judge of a check manifest's `judge` section."""
    from auditor.calibrate import HumanLabel, build_calibration, judge_section
    from auditor.files import utc_now
    from auditor.verify.check import VERDICT_LOGIC

    labels = {
        i: HumanLabel(
            bool(r["hallucinated"]),
            tuple((s["start"], s["end"]) for s in r["spans"]),
            str(r["source_id"]),
        )
        for i, r in gold.items()
    }
    figures = build_calibration(checks, labels, data[0])
    # checks made before the logic was versioned are today's logic (measured so)
    judge = {"verdict_logic": VERDICT_LOGIC} | judge
    names = " and ".join(path.stem for path in data)
    return {
        "schema_version": figures["schema_version"],
        "created_at": utc_now(),
        "judge": judge_section(
            judge,
            figures["threshold"],
            identity_keys=("name", "weights_sha256", "backend", "dtype"),
        ),
        "labels": {
            "path": f"RAGTruth QA {names} ("
            + ", ".join(f"../shared/datasets/ragtruth-qa/{path.name}" for path in data)
            + ")",
            "sha256": hashlib.sha256(b"".join(path.read_bytes() for path in data)).hexdigest(),
        },
        "domain": f"RAGTruth QA {names}: news and web passages, answers by 6 LLMs",
    } | figures


def report_quotes(
    gold: dict[str, Any], checks: list[dict[str, Any]], out: Path, threshold: float, cv: bool
) -> None:
    """The same answers scored with the quote check folded in (bench/quote_pass.py)."""
    from bench.quote_pass import with_quotes

    path = out / "quotes.json"
    if not path.exists():
        print(f"no {path}: run bench/quote_pass.py {out} first")
        return
    quotes = json.loads(path.read_text(encoding="utf-8"))
    rows = with_quotes(checks, quotes["answers"], threshold)
    asked = sum(len(v) for v in quotes["answers"].values())
    print(
        f"with the quote check ({asked} quote calls, "
        f"{(quotes['prompt_tokens'] - quotes['cached_tokens']) / max(1, asked):.0f} computed "
        f"tokens each, {quotes['seconds']:.0f} s in all):"
    )
    if cv:
        report_cv(gold, rows, None)
    else:
        report_at(gold, rows, threshold)


def write_calibration(
    target: Path, gold: dict[str, Any], checks: list[dict[str, Any]], out: Path
) -> None:
    """The calibration `auditor calibrate` would write for these checked, labelled answers:
    sensitivity and specificity out-of-fold (folds by question, the folds of --cv), the
    threshold chosen on all of them."""
    from auditor.files import write_json_atomic

    judge = json.loads((out / "check.json").read_text(encoding="utf-8"))["judge"]
    calibration = figures = calibration_of(gold, checks, judge, [DEV])
    write_json_atomic(target, calibration)
    level, fold = calibration["claim_level"], calibration["out_of_fold"]
    print(
        f"calibration -> {target}: threshold {figures['threshold']} (chosen on all); out-of-fold "
        f"({fold['folds']} folds by question) claim sensitivity {level['sensitivity']:.3f}, "
        f"specificity {level['specificity']:.3f} ({level['claims']} claims)"
    )


def report_stock(
    gold: dict[str, Any],
    checks: list[dict[str, Any]],
    stock: dict[str, Any],
    thresholds: dict[str, float],
) -> None:
    """Stock RAGAS verification of the same claims beside ours, on the answers it judged:
    agreement and judge cost (ours: faithfulness's stages)."""
    judged = [row for row in checks if row["id"] in stock["answers"]]
    stock_pairs, our_pairs = [], []
    failed = claims = prompt = cached = completion = 0
    for row in judged:
        entry = stock["answers"][row["id"]]
        truth = bool(gold[row["id"]]["hallucinated"])
        claims += len(row["claims"])
        prompt += entry["prompt_tokens"]
        cached += entry["cached_tokens"]
        completion += entry["completion_tokens"]
        our_pairs.append((truth, flagged_at(_claims(row), thresholds[row["id"]])))
        if entry["verdicts"] is None:
            failed += 1  # unparseable: stock RAGAS scores the answer NaN; counted as not flagged
            stock_pairs.append((truth, False))
        else:
            stock_pairs.append((truth, any(v == 0 for v in entry["verdicts"])))
    if not judged:
        return
    ours, theirs = agreement(our_pairs), agreement(stock_pairs)
    print(
        f"side by side on the {len(judged)} answers stock RAGAS judged (same claims, same engine):"
    )
    print(
        f"  stock RAGAS NLI (joined contexts, one call per answer): balanced accuracy "
        f"{theirs.balanced_accuracy:.3f} (95% CI {theirs.interval[0]:.3f}-{theirs.interval[1]:.3f}), "
        f"{failed} unparseable; per claim: prompt {prompt / max(1, claims):.0f} = "
        f"{(prompt - cached) / max(1, claims):.0f} computed + {cached / max(1, claims):.0f} cached, "
        f"completion {completion / max(1, claims):.0f}, computed in all "
        f"{(prompt - cached + completion) / max(1, claims):.0f}; "
        f"{stock['seconds'] / len(judged):.1f} s per answer"
    )
    print(
        f"  ours: balanced accuracy {ours.balanced_accuracy:.3f} "
        f"(95% CI {ours.interval[0]:.3f}-{ours.interval[1]:.3f}); ",
        end="",
    )
    report_cost(judged)


def roc_svg(points: list[tuple[float, float]], title: str, size: int = 360) -> str:
    """The ROC curve as a small self-contained SVG."""
    pad = 40
    span = size - 2 * pad

    def xy(fpr: float, tpr: float) -> str:
        return f"{pad + fpr * span:.1f},{size - pad - tpr * span:.1f}"

    path = " ".join(xy(f, t) for f, t in points)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
        f'font-family="sans-serif" font-size="11">'
        f'<rect x="{pad}" y="{pad}" width="{span}" height="{span}" fill="none" stroke="#888"/>'
        f'<line x1="{pad}" y1="{size - pad}" x2="{size - pad}" y2="{pad}" stroke="#ccc" stroke-dasharray="4"/>'
        f'<polyline points="{path}" fill="none" stroke="#3b6ea8" stroke-width="2"/>'
        f'<text x="{size / 2}" y="{size - 10}" text-anchor="middle">false-positive rate (clean answers flagged)</text>'
        f'<text x="12" y="{size / 2}" transform="rotate(-90 12 {size / 2})" text-anchor="middle">true-positive rate</text>'
        f'<text x="{size / 2}" y="20" text-anchor="middle">{html.escape(title)}</text>'
        "</svg>\n"
    )


if __name__ == "__main__":
    main()
