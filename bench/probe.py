"""A linear probe on the judge's own hidden states: does what it computes know more than it says?

    .venv/bin/python bench/probe.py extract --cache DIR [--data F ...] [--sample N] [--limit N]
    .venv/bin/python bench/probe.py score --cache DIR [--checks RUN] [--seeds 5] [--save-scores F]
    .venv/bin/python bench/probe.py pair --scores F [--cache DIR]

Design (b): one teacher-forced pass of the judge's weights per answer over its
passages, question and answer (the judge's chat template, the answer as the assistant's turn),
no claim list needed. `extract` keeps, for the answer's tokens, the hidden states of a few
layers (float16, one .npz per answer, resumable: a cached answer is never recomputed) with a
label per token (inside a human-labelled span or not) and the seconds the pass took. Run it in
slices; it is never part of CI.

`score` fits standardise -> PCA -> L2 logistic regression on token states and scores an answer
by its most suspicious sentence (the mean token probability per sentence, the maximum over
sentences). Two arms, each on RAGTruth QA dev:
  - transfer: trained on summary + data-to-text only, scored on every cached QA answer;
  - nested CV: 5 folds by question, repeated over seeds; the layer and C chosen in inner folds
    of the training part (other tasks + the QA training folds), never on the fold scored.
With --checks RUN (a bench/agreement.py run dir over the same QA answers) today's logic is
scored on the same answers and the paired gain printed with a bootstrap interval.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.claim_rows import Claim, ranking_score
from auditor.store import read_jsonl
from auditor.verify.claims import sentence_spans
from auditor.verify.thresholds import auroc, balanced_accuracy, best_threshold
from bench.agreement import DEV

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
OTHER = DEV.parents[1] / "ragtruth-other"
LAYERS = (12, 16, 20, 24)
MODEL = Path.home() / ".cache" / "auditor" / "models" / "qwen2.5-coder-1.5b-instruct"
SYSTEM = "Answer the question using only the passages."


def stratified(rows: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """`count` rows, half hallucinated where the file has them, picked by a hash of the id."""
    by_hash = sorted(rows, key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
    bad = [r for r in by_hash if r["hallucinated"]]
    good = [r for r in by_hash if not r["hallucinated"]]
    take_bad = min(len(bad), max(count // 2, count - len(good)))
    return bad[:take_bad] + good[: count - take_bad]


def teacher_forced(
    tokenizer: Any, row: dict[str, Any]
) -> tuple[list[int], int, list[tuple[int, int]]]:
    """(token ids, index of the answer's first token, each answer token's characters in the
    answer) for the judge's chat template with the answer as the assistant's turn."""
    passages = "\n\n".join(f"Passage {n}:\n{c}" for n, c in enumerate(row["contexts"], 1))
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{passages}\n\nQuestion: {row['question']}"},
        {"role": "assistant", "content": row["answer"]},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    start = text.rindex(row["answer"])
    encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
    end = start + len(row["answer"])
    first = next(i for i, (a, b) in enumerate(offsets) if b > start)
    answer = [(max(a, start) - start, min(b, end) - start) for a, b in offsets[first:] if a < end]
    return ids, first, answer


def token_labels(chars: list[tuple[int, int]], spans: list[dict[str, Any]]) -> np.ndarray:
    """1 for an answer token inside a human-labelled hallucinated span."""
    ranges = [(s["start"], s["end"]) for s in spans]
    return np.array([any(a < e and s < b for s, e in ranges) for a, b in chars], dtype=np.int8)


def extract(args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(len(os.sched_getaffinity(0)))
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.bfloat16).eval()
    layers = [int(x) for x in args.layers.split(",")]
    args.cache.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for path in args.data or [DEV, OTHER / "summary.jsonl", OTHER / "data2txt.jsonl"]:
        picked = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        rows += stratified(picked, args.sample) if args.sample and path != DEV else picked
    done = 0
    for row in rows[: args.limit]:
        target = args.cache / f"{row['id']}.npz"
        if target.exists():
            continue
        ids, first, chars = teacher_forced(tokenizer, row)
        ids = ids[: args.max_tokens]
        started = time.perf_counter()
        with torch.inference_mode():
            out = model.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        seconds = time.perf_counter() - started
        count = max(0, min(len(chars), len(ids) - first))
        states = np.stack(
            [out.hidden_states[n][0, first : first + count].float().numpy() for n in layers]
        ).astype(np.float16)
        np.savez(
            target,
            states=states,
            layers=np.array(layers),
            labels=token_labels(chars[:count], row["spans"]),
            chars=np.array(chars[:count], dtype=np.int32).reshape(-1, 2),
            seconds=seconds,
            tokens=len(ids),
        )
        meta = {k: row[k] for k in ("id", "task", "source_id", "hallucinated", "answer")}
        target.with_suffix(".json").write_text(json.dumps(meta), encoding="utf-8")
        done += 1
        print(f"{row['id']}: {len(ids)} tokens, {count} answer tokens, {seconds:.1f} s", flush=True)
    print(f"{done} answers extracted into {args.cache}")


def load_cache(cache: Path) -> list[dict[str, Any]]:
    answers = []
    for path in sorted(cache.glob("*.npz")):
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        with np.load(path) as data:
            answers.append(meta | {k: data[k] for k in data.files})
    return answers


def sentence_groups(answer: dict[str, Any]) -> list[np.ndarray]:
    """Token indices of each answer sentence (a token belongs where its first character is)."""
    starts = answer["chars"][:, 0]
    groups = []
    for a, b in sentence_spans(answer["answer"]) or [(0, len(answer["answer"]))]:
        members = np.nonzero((starts >= a) & (starts < b))[0]
        if len(members):
            groups.append(members)
    return groups or [np.arange(len(starts))]


def answer_support(token_p: np.ndarray, groups: list[np.ndarray]) -> float:
    """The answer's score on the check's scale (lower: more likely hallucinated): 1 - its most
    suspicious sentence's mean token probability of being in a hallucinated span."""
    return 1.0 - float(max(token_p[g].mean() for g in groups)) if len(token_p) else 1.0


def fit(
    train: list[dict[str, Any]], layer: int, c: float, dims: int, other_weight: float = 1.0
) -> Any:
    """The head on `train`'s tokens; tokens of summary / data-to-text answers count
    `other_weight` each in the loss (QA tokens 1), so the other tasks can act as a regulariser."""
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = np.concatenate([_layer(a, layer) for a in train])
    y = np.concatenate([a["labels"] for a in train])
    weight = np.concatenate(
        [
            np.full(len(a["labels"]), 1.0 if a["id"].startswith("ragtruth-qa") else other_weight)
            for a in train
        ]
    )
    head = make_pipeline(
        StandardScaler(),
        PCA(
            n_components=min(dims, x.shape[1], len(x) - 1), svd_solver="randomized", random_state=0
        ),
        LogisticRegression(C=c, max_iter=2000, class_weight="balanced"),
    )
    return head.fit(x.astype(np.float32), y, logisticregression__sample_weight=weight)


def _layer(answer: dict[str, Any], layer: int) -> np.ndarray:
    return answer["states"][list(answer["layers"]).index(layer)].astype(np.float32)


def scores_of(head: Any, answers: list[dict[str, Any]], layer: int) -> list[float]:
    out = []
    for a in answers:
        p = head.predict_proba(_layer(a, layer))[:, 1] if len(a["labels"]) else np.zeros(0)
        out.append(answer_support(p, sentence_groups(a)))
    return out


def fold(answer: dict[str, Any], seed: int, folds: int = 5) -> int:
    key = f"fold:{seed}:{answer['source_id']}"
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % folds


def choose(
    train: list[dict[str, Any]], grid: list[tuple[int, float]], dims: int, other_weight: float = 1.0
) -> tuple[int, float]:
    """The (layer, C) with the best AUROC over 3 inner folds of `train` (by question)."""
    best, best_auc = grid[0], -1.0
    for layer, c in grid:
        scores: list[float] = []
        labels: list[bool] = []
        for inner in range(3):
            fit_on = [a for a in train if fold(a, 100, 3) != inner]
            held = [a for a in train if fold(a, 100, 3) == inner]
            head = fit(fit_on, layer, c, dims, other_weight)
            scores += scores_of(head, held, layer)
            labels += [bool(a["hallucinated"]) for a in held]
        value = auroc(scores, labels) or 0.0
        if value > best_auc:
            best, best_auc = (layer, c), value
    return best


def score(args: argparse.Namespace) -> None:
    answers = load_cache(args.cache)
    qa = [a for a in answers if a["id"].startswith("ragtruth-qa")]
    other = [a for a in answers if not a["id"].startswith("ragtruth-qa")]
    layers = sorted({int(n) for a in answers for n in a["layers"]})
    grid = [(layer, c) for layer in layers for c in args.cs]
    print(f"cached: {len(qa)} QA dev answers, {len(other)} summary / data-to-text answers")
    seconds = [float(a["seconds"]) for a in answers]
    print(
        f"extraction: {statistics.median(seconds):.1f} s per answer (median), "
        f"{statistics.median(float(a['tokens']) for a in answers):.0f} tokens"
    )

    def report(name: str, labels: list[bool], scores: list[float], threshold: float | None) -> None:
        ba = (
            ""
            if threshold is None
            else (
                f"BA {balanced_accuracy([(g, v < threshold) for g, v in zip(labels, scores, strict=True)]):.3f}, "
            )
        )
        print(f"{name}: {ba}AUROC {auroc(scores, labels) or float('nan'):.3f}")

    def threshold_on(head: Any, layer: int, train: list[dict[str, Any]]) -> float:
        return best_threshold(
            scores_of(head, train, layer), [bool(a["hallucinated"]) for a in train]
        )

    labels = [bool(a["hallucinated"]) for a in qa]
    if not args.skip_transfer:
        # transfer arm: the other tasks only, layer and C chosen in inner folds of them
        layer, c = choose(other, grid, args.dims)
        head = fit(other, layer, c, args.dims)
        report(
            f"transfer (trained on {len(other)} other-task answers; layer {layer}, C {c}; "
            "threshold from them)",
            labels,
            scores_of(head, qa, layer),
            threshold_on(head, layer, other),
        )

    # nested CV over seeds: trained on the other tasks + the QA training folds
    per_seed = []
    first_seed: dict[str, float] = {}
    other_train = other if args.other_weight > 0 else []
    for seed in range(args.seeds):
        pooled: dict[str, tuple[float, float]] = {}
        for outer in range(5):
            qa_train = [a for a in qa if fold(a, seed) != outer]
            held = [a for a in qa if fold(a, seed) == outer]
            layer, c = choose(other_train + qa_train, grid, args.dims, args.other_weight)
            head = fit(other_train + qa_train, layer, c, args.dims, args.other_weight)
            cut = threshold_on(head, layer, qa_train)
            for a, v in zip(held, scores_of(head, held, layer), strict=True):
                pooled[a["id"]] = (v, cut)
        scores = [pooled[a["id"]][0] for a in qa]
        if seed == 0:
            first_seed = {a["id"]: pooled[a["id"]][0] for a in qa}
        pairs = [
            (g, pooled[a["id"]][0] < pooled[a["id"]][1]) for a, g in zip(qa, labels, strict=True)
        ]
        per_seed.append((balanced_accuracy(pairs), auroc(scores, labels) or float("nan")))
        print(f"nested CV seed {seed}: BA {per_seed[-1][0]:.3f}, AUROC {per_seed[-1][1]:.3f}")
    bas, aucs = [p[0] for p in per_seed], [p[1] for p in per_seed]
    print(
        f"nested CV over {args.seeds} seeds, {len(qa)} QA answers: BA {statistics.mean(bas):.3f} "
        f"({min(bas):.3f}-{max(bas):.3f}), AUROC {statistics.mean(aucs):.3f} "
        f"({min(aucs):.3f}-{max(aucs):.3f})"
    )

    if args.checks:
        rows = {r["id"]: r for r in read_jsonl(args.checks / "checks.jsonl")}
        shared = [a for a in qa if a["id"] in rows]
        gold = [bool(a["hallucinated"]) for a in shared]
        today = [
            ranking_score([Claim.from_json(c) for c in rows[a["id"]]["claims"]]) for a in shared
        ]
        probe = [first_seed[a["id"]] for a in shared]
        scored = [
            {"id": a["id"], "source_id": a["source_id"], "hallucinated": g, "today": t, "probe": p}
            for a, g, t, p in zip(shared, gold, today, probe, strict=True)
        ]
        if args.save_scores:
            args.save_scores.write_text(json.dumps(scored, indent=0))
        paired(scored)


def paired(scored: list[dict[str, Any]]) -> None:
    """The probe and its stack with today's logic against today's logic, on the same answers:
    ranking (AUROC, the rank mean of both scores: fits nothing) and decision (balanced accuracy
    of a stack whose two percentile scales and threshold come from the training folds only)."""
    gold = [bool(r["hallucinated"]) for r in scored]
    today = [float(r["today"]) for r in scored]
    probe = [float(r["probe"]) for r in scored]
    stacked = list((_ranks(today) + _ranks(probe)) / 2)
    rng = np.random.default_rng(0)
    gains: dict[str, list[float]] = {"probe": [], "stacked": []}
    for _ in range(2000):
        pick = rng.integers(0, len(scored), len(scored))
        g = [gold[i] for i in pick]
        base = auroc([today[i] for i in pick], g)
        for name, arm in (("probe", probe), ("stacked", stacked)):
            value = auroc([arm[i] for i in pick], g)
            if base is not None and value is not None:
                gains[name].append(value - base)
    print(f"on the {len(scored)} answers today's logic checked (nested CV seed 0 for the probe):")
    print(f"  today's logic AUROC {auroc(today, gold):.3f}")
    for name, arm, key in (("probe", probe, "probe"), ("rank mean of both", stacked, "stacked")):
        low, high = np.percentile(gains[key], [2.5, 97.5])
        print(
            f"  {name} AUROC {auroc(arm, gold):.3f}, paired gain "
            f"{auroc(arm, gold) - auroc(today, gold):+.3f} ({low:+.3f}..{high:+.3f})"
        )

    # decisions: 5 folds by question; percentiles and thresholds from the other four
    decided: dict[str, dict[str, bool]] = {"today": {}, "probe": {}, "stack": {}}
    stack_scores: dict[str, float] = {}
    for outer in range(5):
        train = [r for r in scored if fold(r, 0) != outer]
        held = [r for r in scored if fold(r, 0) == outer]
        labels = [bool(r["hallucinated"]) for r in train]
        ref_t = np.array([r["today"] for r in train])
        ref_p = np.array([r["probe"] for r in train])

        def stack(r: dict[str, Any], ref_t: np.ndarray = ref_t, ref_p: np.ndarray = ref_p) -> float:
            return (_percentile(ref_t, r["today"]) + _percentile(ref_p, r["probe"])) / 2

        cuts = {
            "today": best_threshold(list(ref_t), labels),
            "probe": best_threshold(list(ref_p), labels),
            "stack": best_threshold([stack(r) for r in train], labels),
        }
        for r in held:
            stack_scores[r["id"]] = stack(r)
            values = {"today": r["today"], "probe": r["probe"], "stack": stack_scores[r["id"]]}
            for arm, cut in cuts.items():
                decided[arm][r["id"]] = values[arm] < cut
    pairs = {
        arm: [(g, decided[arm][r["id"]]) for r, g in zip(scored, gold, strict=True)]
        for arm in decided
    }
    ba_gains = []
    for _ in range(2000):
        pick = rng.integers(0, len(scored), len(scored))
        ba_gains.append(
            balanced_accuracy([pairs["stack"][i] for i in pick])
            - balanced_accuracy([pairs["today"][i] for i in pick])
        )
    low, high = np.percentile(ba_gains, [2.5, 97.5])
    stack_auc = auroc([stack_scores[r["id"]] for r in scored], gold)
    print(
        "  decisions, thresholds and percentile scales from the training folds: BA today "
        f"{balanced_accuracy(pairs['today']):.3f}, probe {balanced_accuracy(pairs['probe']):.3f}, "
        f"stack {balanced_accuracy(pairs['stack']):.3f} (AUROC {stack_auc:.3f}); stack - today "
        f"{balanced_accuracy(pairs['stack']) - balanced_accuracy(pairs['today']):+.3f} "
        f"({low:+.3f}..{high:+.3f})"
    )


def _percentile(reference: np.ndarray, value: float) -> float:
    """The share of `reference` below `value` (ties count half): one answer's place on the
    training folds' scale, defined for a single answer as a rank is not."""
    return float((np.sum(reference < value) + 0.5 * np.sum(reference == value)) / len(reference))


def _ranks(values: list[float]) -> np.ndarray:
    order = np.argsort(np.argsort(values, kind="stable"), kind="stable")
    return order / max(1, len(values) - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("--cache", type=Path, required=True)
    ex.add_argument("--data", type=Path, action="append")
    ex.add_argument("--sample", type=int, help="Per other-task file: this many, stratified.")
    ex.add_argument("--limit", type=int)
    ex.add_argument("--layers", default=",".join(map(str, LAYERS)))
    ex.add_argument("--max-tokens", type=int, default=4096)
    sc = sub.add_parser("score")
    sc.add_argument("--cache", type=Path, required=True)
    sc.add_argument("--checks", type=Path)
    sc.add_argument("--seeds", type=int, default=5)
    sc.add_argument("--dims", type=int, default=64)
    sc.add_argument(
        "--other-weight",
        type=float,
        default=1.0,
        help="Loss weight of a summary / data-to-text token in the CV arm (0: QA folds only).",
    )
    sc.add_argument("--skip-transfer", action="store_true")
    sc.add_argument(
        "--save-scores", type=Path, help="Write each paired answer's two scores here (JSON)."
    )
    sc.add_argument(
        "--cs", type=lambda v: [float(x) for x in v.split(",")], default=[0.1], help="C grid."
    )
    pa = sub.add_parser("pair", help="The paired arm alone, from a --save-scores file.")
    pa.add_argument("--scores", type=Path, required=True)
    pa.add_argument("--cache", type=Path, help="Where to look up source ids missing in the file.")
    args = parser.parse_args()
    if args.command == "extract":
        extract(args)
    elif args.command == "score":
        score(args)
    else:
        scored = json.loads(args.scores.read_text(encoding="utf-8"))
        for r in scored:
            if "source_id" not in r and args.cache is not None:
                meta = json.loads((args.cache / f"{r['id']}.json").read_text(encoding="utf-8"))
                r["source_id"] = meta["source_id"]
        paired(scored)


if __name__ == "__main__":
    main()
