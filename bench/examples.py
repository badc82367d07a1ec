"""Labelled answers to the same question as a claim memory (way (b)), measured.

    .venv/bin/python bench/examples.py RUN_DIR [--name N]

RUN_DIR is a `bench/agreement.py --out` run over the 150 RAGTruth QA dev answers (its stored
claims and p_supported are reused: the memory judges nothing new). Each dev answer's examples
are the labelled answers to its question (siblings.jsonl, and the other dev answers of the
question; never itself). Each claim is compared with the sentences people accepted and marked
(`auditor.verify.examples`), and the memory weights and the support threshold are chosen on
four folds by question and scored on the fifth, paired against the same claims without memory
(thresholds chosen the same way): balanced accuracy and AUROC with bootstrap intervals over
questions. Also: siblings only as examples, a learning curve (0, 1, 2, all examples per
question), the weights chosen on all 150 (in-sample: what ships), and the memory's cost.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.claim_rows import Claim, flagged_at, ranking_score
from auditor.config import EmbedderConfig
from auditor.ingest.embed import load_embedder
from auditor.store import read_jsonl
from auditor.verify.examples import (
    NO_RECALL,
    Example,
    ExampleBook,
    MemoryWeights,
    Recall,
    recall,
    references,
    remembered_support,
)
from auditor.verify.thresholds import auroc, balanced_accuracy, best_threshold
from bench.agreement import DEV, FOLDS, _claims, fold_of
from bench.harness import write_result
from bench.paired import paired_figures

SIBLINGS = DEV.parent / "siblings.jsonl"
GRID = [
    MemoryWeights(similarity, accepted, marked)
    for similarity, accepted, marked in itertools.product(
        (0.6, 0.7, 0.8, 0.9), (0.0, 2.0, 5.0, 10.0, 20.0), (0.0, 2.0, 5.0, 10.0, 20.0)
    )
]
NONE = MemoryWeights()
# the first is the measurement planned before any run; the others were tried after it
VARIANTS = {
    "both sides": GRID,
    "marked only": [w for w in GRID if w.accepted == 0.0],
    "accepted only": [w for w in GRID if w.marked == 0.0],
}


def as_example(row: dict[str, Any]) -> Example:
    return Example(
        id=str(row["id"]),
        question=row["question"],
        answer=row["answer"],
        hallucinated=bool(row["hallucinated"]),
        spans=tuple((s["start"], s["end"]) for s in row.get("spans") or []),
        source_id=str(row["source_id"]),
        where=f"{row['id']}",
    )


def _rank(example_id: str) -> int:
    return int(hashlib.sha256(f"example:{example_id}".encode()).hexdigest(), 16)


def cached(embed: Any) -> Any:
    """The embedder with a memo: the same sentences recur across answers and arms."""
    memo: dict[str, Any] = {}

    def vectors(texts: list[str]) -> Any:
        missing = list(dict.fromkeys(t for t in texts if t not in memo))
        if missing:
            memo.update(zip(missing, embed(missing), strict=True))
        return np.stack([memo[t] for t in texts])

    return vectors


def memories(
    checks: dict[str, dict[str, Any]],
    gold: dict[str, dict[str, Any]],
    book: ExampleBook,
    embed: Any,
    per_question: int | None,
) -> tuple[dict[str, list[Recall]], dict[str, int], float]:
    """Each answer's claims' recalls with at most `per_question` examples (a fixed draw; None:
    all), the examples used per answer, and the seconds the memory took."""
    found: dict[str, list[Recall]] = {}
    used: dict[str, int] = {}
    started = time.perf_counter()
    for ident, row in checks.items():
        answer = gold[ident]
        examples = book.for_answer(ident, answer["question"], str(answer["source_id"]))
        examples = sorted(examples, key=lambda e: _rank(e.id))[:per_question]
        used[ident] = len(examples)
        found[ident] = recall([c["text"] for c in row["claims"]], references(examples), embed)
    return found, used, time.perf_counter() - started


def remembered(claims: list[Claim], found: list[Recall], weights: MemoryWeights) -> list[Claim]:
    return [
        c
        if c.p_supported is None
        else replace(c, p_supported=remembered_support(c.p_supported, r, weights))
        for c, r in zip(claims, found, strict=True)
    ]


class Arm:
    """One way of deciding: claims, their recalls, weights chosen on training folds."""

    def __init__(
        self,
        claims: dict[str, list[Claim]],
        found: dict[str, list[Recall]],
        labels: dict[str, bool],
        folds: dict[str, int],
        grid: list[MemoryWeights],
        objective: str = "balanced accuracy",
    ) -> None:
        self.objective = objective
        self.claims, self.found, self.labels, self.folds, self.grid = (
            claims,
            found,
            labels,
            folds,
            grid,
        )
        self.flags: dict[str, bool] = {}
        self.scores: dict[str, float] = {}
        self.chosen: list[dict[str, Any]] = []
        for fold in range(FOLDS):
            train = [i for i in claims if folds[i] != fold]
            weights, threshold = self.fit(train)
            self.chosen.append(weights.to_json() | {"threshold": round(threshold, 4)})
            for i in (i for i in claims if folds[i] == fold):
                moved = remembered(claims[i], found[i], weights)
                self.flags[i] = flagged_at(moved, threshold)
                self.scores[i] = ranking_score(moved)

    def fit(self, ids: list[str]) -> tuple[MemoryWeights, float]:
        """The weights (and threshold) with the best balanced accuracy on these answers; ties
        to the better AUROC, then the smaller weights."""
        best: tuple[Any, ...] | None = None
        for weights in self.grid:
            scores = [
                ranking_score(remembered(self.claims[i], self.found[i], weights)) for i in ids
            ]
            gold = [self.labels[i] for i in ids]
            threshold = best_threshold(scores, gold)
            ba = balanced_accuracy([(g, s < threshold) for s, g in zip(scores, gold, strict=True)])
            area = auroc(scores, gold) or 0.5
            first, second = (ba, area) if self.objective == "balanced accuracy" else (area, ba)
            key = (round(first, 9), round(second, 9), -(weights.accepted + weights.marked))
            if best is None or key > best[0]:
                best = (key, weights, threshold)
        assert best is not None
        return best[1], best[2]


def _logit(p: float) -> float:
    clipped = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(clipped / (1 - clipped))


def claim_features(claim: Claim, found: Recall, extra: float | None = None) -> list[float]:
    """What the combiner reads of one fact: the judge's log-odds, the similarity of the closest
    accepted and marked sentence, and (with examples in the prompt) that arm's log-odds."""
    assert claim.p_supported is not None
    row = [1.0, _logit(claim.p_supported), found.accepted, found.marked]
    return row + ([_logit(extra)] if extra is not None else [])


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method (the intercept unpenalised)."""
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + penalty * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w


class Combined:
    """A learned combiner (way (b)): a logistic regression from a fact's features to
    whether people marked it (claim labels from the answer's spans), fitted on four folds by
    question; each fact's p_supported becomes 1 - P(marked); the answer threshold is chosen on
    the same training folds. Figures on the fifth fold only."""

    def __init__(
        self,
        claims: dict[str, list[Claim]],
        found: dict[str, list[Recall]],
        labels: dict[str, bool],
        folds: dict[str, int],
        gold: dict[str, dict[str, Any]],
        extra: dict[str, list[Claim]] | None = None,
    ) -> None:
        self.claims = claims
        self.flags: dict[str, bool] = {}
        self.scores: dict[str, float] = {}
        self.chosen: list[dict[str, Any]] = []
        for fold in range(FOLDS):
            train = [i for i in claims if folds[i] != fold]
            x, y = [], []
            for i in train:
                spans = [(s["start"], s["end"]) for s in gold[i]["spans"]]
                for index, claim in self._facts(i):
                    if claim.span is None:
                        continue
                    start, end = claim.span
                    x.append(self._features(i, index, found, extra))
                    y.append(float(any(start < e and s < end for s, e in spans)))
            w = fit_logistic(np.array(x), np.array(y))
            scores = [ranking_score(self.moved(i, w, found, extra)) for i in train]
            gold_train = [labels[i] for i in train]
            threshold = best_threshold(scores, gold_train)
            self.chosen.append(
                {"weights": [round(float(v), 3) for v in w], "threshold": round(threshold, 4)}
            )
            for i in (i for i in claims if folds[i] == fold):
                moved = self.moved(i, w, found, extra)
                self.flags[i] = flagged_at(moved, threshold)
                self.scores[i] = ranking_score(moved)

    def _facts(self, ident: str) -> list[tuple[int, Claim]]:
        return [
            (index, c)
            for index, c in enumerate(self.claims[ident])
            if c.kind == "fact" and c.p_supported is not None and c.verdict != "unverifiable"
        ]

    def _features(
        self,
        ident: str,
        index: int,
        found: dict[str, list[Recall]],
        extra: dict[str, list[Claim]] | None,
    ) -> list[float]:
        other = None if extra is None else extra[ident][index].p_supported
        if extra is not None and other is None:
            other = self.claims[ident][index].p_supported
        return claim_features(self.claims[ident][index], found[ident][index], other)

    def moved(
        self,
        ident: str,
        w: np.ndarray,
        found: dict[str, list[Recall]],
        extra: dict[str, list[Claim]] | None,
    ) -> list[Claim]:
        claims = list(self.claims[ident])
        for index, claim in self._facts(ident):
            z = float(np.array(self._features(ident, index, found, extra)) @ w)
            claims[index] = replace(claim, p_supported=1.0 - 1.0 / (1.0 + math.exp(-z)))
        return claims


def gains(paired: dict[str, Any]) -> str:
    """One line of paired figures: BA and AUROC before -> after, with the gain's interval."""
    parts = []
    for name, key in (("BA", "balanced_accuracy"), ("AUROC", "auroc")):
        f = paired[key]
        gain = f["gain"]
        parts.append(
            f"{name} {f['before']['value']:.3f} -> {f['after']['value']:.3f} "
            f"(gain {gain['value']:+.3f}, {gain['low']:+.3f}..{gain['high']:+.3f})"
        )
    return "; ".join(parts) + f"; {paired['changed_verdicts']} verdicts changed"


def compare(before: Arm, after: Arm | Combined, gold: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ids = list(before.claims)
    arms = {"before": (before.flags, before.scores), "after": (after.flags, after.scores)}
    figures = paired_figures(gold, ids, arms)
    figures["changed_verdicts"] = sum(before.flags[i] != after.flags[i] for i in ids)
    figures["weights_by_fold"] = after.chosen
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="bench/agreement.py --out dir of the 150")
    parser.add_argument("--name", default="examples-memory")
    args = parser.parse_args()

    dev = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines()]
    siblings = [json.loads(line) for line in SIBLINGS.read_text(encoding="utf-8").splitlines()]
    gold = {str(r["id"]): r for r in dev}
    checks = {
        str(r["id"]): r
        for r in read_jsonl(args.run / "checks.jsonl")
        if str(r["id"]) in gold and r.get("claims") is not None
    }
    claims = {i: _claims(r) for i, r in checks.items()}
    labels = {i: bool(gold[i]["hallucinated"]) for i in checks}
    folds = {i: fold_of(str(gold[i]["source_id"])) for i in checks}
    embed = cached(load_embedder(EmbedderConfig()).embed)
    embed(["warm up"])
    books = {
        "siblings and the other dev answers": ExampleBook(
            SIBLINGS, [as_example(r) for r in siblings + dev]
        ),
        "siblings only": ExampleBook(SIBLINGS, [as_example(r) for r in siblings]),
    }
    nothing = {i: [NO_RECALL] * len(claims[i]) for i in claims}
    baseline = Arm(claims, nothing, labels, folds, [NONE])
    figures: dict[str, Any] = {"answers": len(checks), "hallucinated": sum(labels.values())}
    print(f"{len(checks)} answers ({sum(labels.values())} hallucinated), 5 folds by question")
    for name, book in books.items():
        for per_question in (None, 1, 2) if name.startswith("siblings and") else (None,):
            found, used, seconds = memories(checks, gold, book, embed, per_question)
            for (variant, grid), objective in itertools.product(
                VARIANTS.items(), ("balanced accuracy", "AUROC")
            ):
                if per_question is not None and (variant, objective) != (
                    "both sides",
                    "balanced accuracy",
                ):
                    continue  # the learning curve for the planned measurement only
                arm = Arm(claims, found, labels, folds, grid, objective)
                paired = compare(baseline, arm, gold)
                label = (
                    f"{name}, {'all' if per_question is None else per_question} per question; "
                    f"{variant}, fitted for {objective}"
                )
                total_claims = sum(len(c) for c in claims.values())
                paired["examples_per_answer"] = round(sum(used.values()) / len(used), 2)
                paired["memory_seconds_per_answer"] = round(seconds / len(checks), 4)
                paired["memory_seconds_per_claim"] = round(seconds / max(1, total_claims), 5)
                figures[label] = paired
                ba, area = paired["balanced_accuracy"], paired["auroc"]
                print(
                    f"{label}: {paired['examples_per_answer']} examples/answer; "
                    f"BA {ba['before']['value']:.3f} -> {ba['after']['value']:.3f} "
                    f"(gain {ba['gain']['value']:+.3f}, {ba['gain']['low']:+.3f}..{ba['gain']['high']:+.3f}); "
                    f"AUROC {area['before']['value']:.3f} -> {area['after']['value']:.3f} "
                    f"(gain {area['gain']['value']:+.3f}, {area['gain']['low']:+.3f}..{area['gain']['high']:+.3f}); "
                    f"{paired['changed_verdicts']} verdicts changed; "
                    f"memory {paired['memory_seconds_per_answer']:.3f} s/answer",
                    flush=True,
                )
                print(f"  weights by fold: {paired['weights_by_fold']}", flush=True)
    for name, book in books.items():
        found, used, _ = memories(checks, gold, book, embed, None)
        combined = compare(baseline, Combined(claims, found, labels, folds, gold), gold)
        combined["examples_per_answer"] = round(sum(used.values()) / len(used), 2)
        label = (
            f"{name}, all per question; learned combiner (logistic over the judge's log-odds "
            "and both similarities)"
        )
        figures[label] = combined
        print(f"{label}: {gains(combined)}", flush=True)
    found, _, _ = memories(checks, gold, books["siblings and the other dev answers"], embed, None)
    everything = Arm(claims, found, labels, folds, GRID)
    weights, threshold = everything.fit(list(claims))
    figures["chosen_on_all_in_sample"] = weights.to_json() | {"threshold": round(threshold, 4)}
    print(
        f"weights chosen on all {len(claims)} answers (in-sample): {figures['chosen_on_all_in_sample']}"
    )
    manifest = json.loads((args.run / "check.json").read_text(encoding="utf-8"))
    write_result(
        args.name,
        "examples",
        figures,
        note="way (b): labelled answers to the same question as a claim memory, 5-fold CV "
        "by question, paired against the same claims without it",
        data=[DEV, SIBLINGS],
        dtype=(manifest.get("judge", {}).get("identity") or {}).get("dtype"),
        judge={"verdict_logic": manifest.get("judge", {}).get("verdict_logic")},
    )


if __name__ == "__main__":
    main()
