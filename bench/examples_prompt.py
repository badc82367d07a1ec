"""Labelled answers to the same question in the verdict prompt (way (a)), measured.

    .venv/bin/python bench/examples_prompt.py RUN_DIR [--work DIR] [--name N] [--answers N]
        [--examples-from siblings-and-dev|siblings]

RUN_DIR is a `bench/agreement.py --out` run over the 150 RAGTruth QA dev answers. Its claims
and the chunks each was checked against are kept; only the claim-chunk label calls are made
again, in two arms side by side on one engine, batch by batch in alternating order:
  - none:   the verdict prompt as shipped;
  - prompt: the same prompt with what people said of other answers to the question
            (`examples.reviewed_block`: their marked statements and accepted sentences, the
            closest to the answer's claims first, within `PROMPT_BUDGET_CHARS`), before the
            passage so one answer's calls share it in the prefix cache.
Examples are the labelled answers to the question (siblings.jsonl and the other dev answers,
never the answer itself), as bench/examples.py. The support threshold of each arm is chosen on
four folds by question and scored on the fifth, paired: balanced accuracy and AUROC with
bootstrap intervals over questions; also the prompt with the claim memory on top (weights fitted
on training folds), and the cost: computed prompt tokens per claim and seconds per answer.
Replies are kept in --work (JSONL per arm), so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.claim_rows import Claim
from auditor.config import EmbedderConfig, load_judge
from auditor.ingest.embed import load_embedder
from auditor.store import read_jsonl
from auditor.verify.answers import AnswerItem, items_from_run
from auditor.verify.base import CallKey, JudgeCall
from auditor.verify.entailment import (
    ChunkJudgement,
    claim_decision,
    entailment_prompt,
    label_probabilities,
)
from auditor.verify.examples import (
    NO_RECALL,
    PROMPT_BUDGET_CHARS,
    ExampleBook,
    prompt_references,
    references,
    reviewed_block,
)
from auditor.verify.judges import make_judge
from bench.agreement import DEV, fold_of
from bench.examples import (
    GRID,
    NONE,
    SIBLINGS,
    Arm,
    as_example,
    cached,
    compare,
    gains,
    memories,
)
from bench.harness import side_order, write_result

ARMS = ("none", "prompt")
BATCH_ANSWERS = 10


def planned_calls(
    item: AnswerItem, claims: list[Claim], block: str
) -> list[tuple[JudgeCall, int, str]]:
    """(call, claim index, chunk id) for every chunk each stored claim was checked against."""
    texts = dict(item.chunks)
    calls = []
    for index, claim in enumerate(claims):
        for judgement in claim.judgements or []:
            chunk_id = judgement["chunk"]
            key = CallKey("entailment", item.id, (index, chunk_id))
            prompt = entailment_prompt(texts[chunk_id], claim.text, claim.kind, block)
            calls.append((JudgeCall(key, prompt, None, 1, logprobs=20), index, chunk_id))
    return calls


def rejudged(claims: list[Claim], replies: dict[str, Any], threshold: float) -> list[Claim]:
    """The claims decided again from this arm's labels (the stored figure vetoes kept)."""
    found = []
    for index, claim in enumerate(claims):
        if not claim.judgements:
            found.append(claim)
            continue
        judgements = []
        for stored in claim.judgements:
            reply = replies[f"{index}|{stored['chunk']}"]
            probabilities, written = label_probabilities(reply["top_logprobs"], reply["text"])
            judgements.append(
                ChunkJudgement(stored["chunk"], probabilities, written, list(stored["vetoed"]))
            )
        verdict, p, _, _ = claim_decision(judgements, claim.kind, threshold)
        found.append(Claim.from_json(claim.to_json() | {"verdict": verdict, "p_supported": p}))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="bench/agreement.py --out dir of the 150")
    parser.add_argument("--work", type=Path, default=Path("/tmp/examples-prompt"))
    parser.add_argument("--answers", type=int, default=None, help="the first N (a pilot)")
    parser.add_argument("--name", default=None, help="bench/results/NAME.json")
    parser.add_argument(
        "--examples-from",
        choices=("siblings-and-dev", "siblings"),
        default="siblings-and-dev",
        help="siblings-and-dev (planned): every other labelled answer to the question; "
        "siblings: siblings.jsonl only (the prompt arm kept apart, the none arm shared)",
    )
    args = parser.parse_args()

    dev = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines()]
    siblings = [json.loads(line) for line in SIBLINGS.read_text(encoding="utf-8").splitlines()]
    gold = {str(r["id"]): r for r in dev}
    checks = {
        str(r["id"]): r
        for r in read_jsonl(args.run / "checks.jsonl")
        if str(r["id"]) in gold and r.get("claims") is not None
    }
    ids = sorted(checks)[: args.answers]
    checks = {i: checks[i] for i in ids}
    items = {i.id: i for i in items_from_run(args.run) if i.id in checks}
    stored = {i: [Claim.from_json(c) for c in checks[i]["claims"]] for i in ids}
    pool = siblings + dev if args.examples_from == "siblings-and-dev" else siblings
    book = ExampleBook(SIBLINGS, [as_example(r) for r in pool])
    tail = "" if args.examples_from == "siblings-and-dev" else "-siblings"
    files = {"none": "none.jsonl", "prompt": f"prompt{tail}.jsonl"}
    config = load_judge(None, {})
    embed = cached(load_embedder(EmbedderConfig()).embed)
    blocks = {}
    used = {}
    for ident in ids:
        answer = gold[ident]
        examples = book.for_answer(ident, answer["question"], str(answer["source_id"]))
        used[ident] = len(examples)
        facts = [c.text for c in stored[ident] if c.kind == "fact"]
        blocks[ident] = reviewed_block(prompt_references(facts, references(examples), embed))
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / f"blocks{tail}.json").write_text(json.dumps(blocks, indent=1), encoding="utf-8")

    done: dict[str, dict[str, dict[str, Any]]] = {arm: {} for arm in ARMS}
    for arm in ARMS:
        path = args.work / files[arm]
        if path.exists():
            for row in read_jsonl(path):
                done[arm][row["id"]] = row
    batches = [ids[n : n + BATCH_ANSWERS] for n in range(0, len(ids), BATCH_ANSWERS)]
    left = any(i not in done[arm] for arm in ARMS for i in ids)
    judge = make_judge(config) if left else None  # all replies kept: the figures alone
    try:
        for number, batch in enumerate(batches if judge is not None else [], start=1):
            for arm in side_order(number, ARMS):
                todo = [i for i in batch if i not in done[arm]]
                if not todo:
                    continue
                planned = {
                    i: planned_calls(items[i], stored[i], blocks[i] if arm == "prompt" else "")
                    for i in todo
                }
                calls = [call for i in todo for call, _, _ in planned[i]]
                started = time.perf_counter()
                replies = judge.complete(calls) if calls else []
                seconds = time.perf_counter() - started
                by_key = {r.key: r for r in replies}
                with (args.work / files[arm]).open("a", encoding="utf-8") as out:
                    for i in todo:
                        got = [by_key[call.key] for call, _, _ in planned[i]]
                        row = {
                            "id": i,
                            "replies": {
                                f"{index}|{chunk}": {
                                    "text": r.text,
                                    "top_logprobs": r.top_logprobs,
                                    "error": r.error,
                                }
                                for (_, index, chunk), r in zip(planned[i], got, strict=True)
                            },
                            "prompt_tokens": sum(r.prompt_tokens for r in got),
                            "cached_tokens": sum(r.cached_tokens for r in got),
                            # the batch's seconds, shared by its answers in proportion to calls
                            "seconds": seconds * len(got) / max(1, len(calls)),
                        }
                        done[arm][i] = row
                        out.write(json.dumps(row) + "\n")
                print(
                    f"batch {number}/{len(batches)} {arm:6}: {len(calls)} calls, {seconds:.0f} s",
                    flush=True,
                )
    finally:
        if judge is not None:
            judge.close()

    threshold = config.support_threshold
    arms = {
        arm: {i: rejudged(stored[i], done[arm][i]["replies"], threshold) for i in ids}
        for arm in ARMS
    }
    labels = {i: bool(gold[i]["hallucinated"]) for i in ids}
    folds = {i: fold_of(str(gold[i]["source_id"])) for i in ids}
    nothing = {i: [NO_RECALL] * len(stored[i]) for i in ids}
    figures: dict[str, Any] = {
        "examples_from": args.examples_from,
        "answers": len(ids),
        "hallucinated": sum(labels.values()),
        "prompt_budget_chars": PROMPT_BUDGET_CHARS,
        "answers_with_examples": sum(bool(b) for b in blocks.values()),
        "examples_per_answer": round(sum(used.values()) / len(ids), 2),
    }
    moved = sum(
        abs((a.p_supported or 0) - (b.p_supported or 0)) > 0.02
        for i in ids
        for a, b in zip(stored[i], arms["none"][i], strict=True)
    )
    figures["none_vs_stored_claims_moved_over_0.02"] = moved
    print(f"{len(ids)} answers; 'none' re-run vs stored: {moved} claims moved by > 0.02")
    claims_total = sum(len(stored[i]) for i in ids)
    for arm in ARMS:
        rows = done[arm].values()
        prompt = sum(r["prompt_tokens"] for r in rows)
        cached_tokens = sum(r["cached_tokens"] for r in rows)
        seconds = sum(r["seconds"] for r in rows)
        figures[f"cost_{arm}"] = {
            "computed_prompt_tokens_per_claim": round((prompt - cached_tokens) / claims_total, 1),
            "prompt_tokens_per_claim": round(prompt / claims_total, 1),
            "label_seconds_per_answer": round(seconds / len(ids), 2),
        }
        print(f"cost {arm}: {figures[f'cost_{arm}']}")
    for key in ("computed_prompt_tokens_per_claim", "label_seconds_per_answer"):
        figures[f"ratio_prompt_over_none_{key}"] = round(
            figures["cost_prompt"][key] / max(1e-9, figures["cost_none"][key]), 3
        )
    baseline = Arm(arms["none"], nothing, labels, folds, [NONE])
    found, _, _ = memories(checks, gold, book, embed, None)
    given = "" if not tail else ", siblings only"
    contenders = {
        f"prompt{given} ({'planned' if not tail else 'tried after'})": Arm(
            arms["prompt"], nothing, labels, folds, [NONE]
        ),
        f"claim memory alone{given}": Arm(arms["none"], found, labels, folds, GRID),
        f"prompt and claim memory{given}": Arm(arms["prompt"], found, labels, folds, GRID),
    }
    if tail:
        figures["cost_note"] = "the none arm's replies (and seconds) come from the planned run"
    for label, arm in contenders.items():
        paired = compare(baseline, arm, gold)
        figures[label] = paired
        print(f"{label}: {gains(paired)}; thresholds {paired['weights_by_fold']}", flush=True)
    if args.name:
        manifest = json.loads((args.run / "check.json").read_text(encoding="utf-8"))
        write_result(
            args.name,
            "examples_prompt",
            figures,
            note="way (a): labelled answers to the same question in the verdict prompt, "
            "5-fold CV by question, paired against the same claims and chunks without them",
            data=[DEV, SIBLINGS],
            dtype=(manifest.get("judge", {}).get("identity") or {}).get("dtype"),
            judge={"verdict_logic": manifest.get("judge", {}).get("verdict_logic")},
        )


if __name__ == "__main__":
    main()
