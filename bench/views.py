"""Measure two more views of each claim on answers already checked (no re-judging of the rest).

    .venv/bin/python bench/views.py RUN_DIR [--set KEY=VALUE ...]     # judge the views, once
    .venv/bin/python bench/views.py RT_RUN --score [--contrast RUN]  # score them, seconds

For every fact claim in RUN_DIR/checks.jsonl, asks the judge's label question twice more:
- joined: against all the answer's chunks at once, joined in rank order (a claim that fuses
  facts of two chunks is stated by neither alone; the chunks are a prefix shared by all the
  answer's claims, so each claim computes only its own tokens);
- null: against an empty passage (what the judge believes of the claim with no evidence:
  a claim it approves from its own knowledge scores high here too; a PMI-style correction).
Writes RUN_DIR/views.json. With --score, prints for the stored per-chunk probability and for
combinations with the views, side by side on the same claims: RAGTruth QA dev agreement
(5-fold CV by question) and the contrast set's shares flagged at the threshold chosen on all
RAGTruth answers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.config import load_judge, parse_set_option
from auditor.store import read_jsonl
from auditor.verify.answers import items_from_run
from auditor.verify.base import CallKey, JudgeCall
from auditor.verify.entailment import entailment_prompt, label_probabilities
from auditor.verify.figures import missing_figures
from bench.quote_pass import judge_once

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
NULL_PASSAGE = "(no passage)"


def judge_views(run_dir: Path, set_items: list[str]) -> None:
    target = run_dir / "views.json"
    if target.exists():
        print(f"{target} exists; nothing to judge")
        return
    config = load_judge(None, dict(parse_set_option(s) for s in set_items))
    items = {item.id: item for item in items_from_run(run_dir)}
    calls: list[JudgeCall] = []
    for row in read_jsonl(run_dir / "checks.jsonl"):
        item = items[row["id"]]
        joined = "\n\n".join(text for _, text in item.chunks)
        for index, claim in enumerate(row["claims"]):
            if claim["kind"] != "fact" or claim["verdict"] == "unverifiable":
                continue
            for view, passage in (("joined", joined), ("null", NULL_PASSAGE)):
                key = CallKey(view, row["id"], (index,))
                calls.append(JudgeCall(key, entailment_prompt(passage, claim["text"]), None, 1, 20))
    # joined calls of one answer next to each other: its chunks are computed once
    calls.sort(key=lambda c: (c.key.stage, c.key.item, c.key.part))
    replies, seconds = judge_once(config, calls)
    results: dict[str, Any] = {"seconds": seconds, "answers": {}, "cost": {}}
    for call, reply in zip(calls, replies, strict=True):
        probabilities, _ = label_probabilities(reply.top_logprobs, reply.text)
        slot = (
            results["answers"].setdefault(call.key.item, {}).setdefault(str(call.key.part[0]), {})
        )
        slot[call.key.stage] = probabilities
        cost = results["cost"].setdefault(call.key.stage, {"calls": 0, "prompt": 0, "cached": 0})
        cost["calls"] += 1
        cost["prompt"] += reply.prompt_tokens
        cost["cached"] += reply.cached_tokens
    target.write_text(json.dumps(results), encoding="utf-8")
    print(f"{len(calls)} view calls in {seconds:.0f} s -> {target}")
    for stage, cost in results["cost"].items():
        n = max(1, cost["calls"])
        print(
            f"  {stage}: per claim {cost['prompt'] / n:.0f} prompt tokens, "
            f"{(cost['prompt'] - cost['cached']) / n:.0f} computed"
        )


# a claim's score from (stored per-chunk p, joined p, null p); None views fall back to chunk
Combiner = Callable[[float, float | None, float | None], float]


def _or_chunk(f: Callable[[float, float], float]) -> Combiner:
    return lambda c, j, n: c if j is None else f(c, j)


COMBINERS: dict[str, Combiner] = {
    "chunk (today)": lambda c, j, n: c,
    "joined": lambda c, j, n: c if j is None else j,
    "max(chunk, joined)": _or_chunk(max),
    "mean(chunk, joined)": _or_chunk(lambda c, j: (c + j) / 2),
    "geo(chunk, joined)": _or_chunk(lambda c, j: (c * j) ** 0.5),
    "chunk - 0.5 null": lambda c, j, n: c if n is None else c - 0.5 * n,
    "chunk / null^0.5": lambda c, j, n: c if n is None else c / max(n, 1e-3) ** 0.5,
    "mean(c,j) - 0.5 null": lambda c, j, n: (
        (c if j is None else (c + j) / 2) - (0 if n is None else 0.5 * n)
    ),
}


def answer_scores(run_dir: Path, combine: Combiner) -> dict[str, float]:
    """Per answer: the lowest claim score (abstentions by their verdict, guards kept)."""
    items = {item.id: item for item in items_from_run(run_dir)}
    views = json.loads((run_dir / "views.json").read_text())["answers"]
    scores = {}
    for row in read_jsonl(run_dir / "checks.jsonl"):
        item = items[row["id"]]
        joined = "\n\n".join(text for _, text in item.chunks)
        values = []
        for index, claim in enumerate(row["claims"]):
            if claim["verdict"] == "unverifiable":
                continue
            if claim["kind"] == "abstention":
                values.append(0.0 if claim["verdict"] == "contradicted" else 1.0)
                continue
            c = claim["p_supported"]
            if c is None:
                values.append(1.0 if claim["verdict"] == "supported" else 0.0)
                continue
            view = views.get(row["id"], {}).get(str(index), {})
            j = view.get("joined")
            n = view.get("null")
            pj = None if j is None else j["true"]
            if pj is not None and missing_figures(claim["text"], joined + "\n" + item.question):
                pj = 0.0
            if any(jd.get("misbound") for jd in claim["judgements"]):
                pj = 0.0  # a chunk gives the claim's figure to another subject
            values.append(combine(c, pj, None if n is None else n["true"]))
        scores[row["id"]] = min(values, default=1.0)
    return scores


def score(ragtruth_run: Path, contrast_run: Path | None) -> None:
    """Each combiner: RAGTruth 5-fold CV, then the contrast set at the threshold it picks on all
    150 RAGTruth answers (how the shipped threshold is chosen)."""
    from auditor.verify.thresholds import agreement, auroc, best_threshold
    from bench.agreement import DEV, FOLDS, fold_of
    from bench.contrast import CONTRAST

    def labelled(path: Path) -> dict[str, Any]:
        rows = (json.loads(x) for x in path.read_text().splitlines() if x.strip())
        return {r["id"]: r for r in rows}

    gold, contrast = labelled(DEV), labelled(CONTRAST)
    for name, combine in COMBINERS.items():
        scores = answer_scores(ragtruth_run, combine)
        ids = [i for i in scores if i in gold]
        labels = {i: bool(gold[i]["hallucinated"]) for i in ids}
        area = auroc([scores[i] for i in ids], [labels[i] for i in ids]) or 0.0
        folds = {i: fold_of(str(gold[i]["source_id"])) for i in ids}
        pairs = []
        for fold in range(FOLDS):
            train = [i for i in ids if folds[i] != fold]
            t = best_threshold([scores[i] for i in train], [labels[i] for i in train])
            pairs += [(labels[i], scores[i] < t) for i in ids if folds[i] == fold]
        a = agreement(pairs)
        t_all = best_threshold([scores[i] for i in ids], [labels[i] for i in ids])
        line = (
            f"{name:22s} RAGTruth CV BA {a.balanced_accuracy:.3f} "
            f"({a.interval[0]:.3f}-{a.interval[1]:.3f}) AUROC {area:.3f} "
            f"recall {a.recall:.3f} spec {a.specificity:.3f} | t {t_all:.3f}"
        )
        if contrast_run is not None:
            cs = answer_scores(contrast_run, combine)
            cids = [i for i in cs if i in contrast]
            wrong = [cs[i] < t_all for i in cids if contrast[i]["hallucinated"]]
            right = [cs[i] < t_all for i in cids if not contrast[i]["hallucinated"]]
            carea = auroc([cs[i] for i in cids], [bool(contrast[i]["hallucinated"]) for i in cids])
            line += (
                f" | contrast AUROC {carea or 0.0:.3f} wrong {sum(wrong) / max(1, len(wrong)):.3f}"
                f" correct {sum(right) / max(1, len(right)):.3f}"
            )
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[])
    parser.add_argument("--score", action="store_true", help="RUN_DIR is a RAGTruth run: score.")
    parser.add_argument("--contrast", type=Path, help="The contrast set's run, scored too.")
    args = parser.parse_args()
    if args.score:
        score(args.run_dir, args.contrast)
    else:
        judge_views(args.run_dir, args.set_items)


if __name__ == "__main__":
    main()
