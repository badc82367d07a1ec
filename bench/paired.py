"""Two verdict logics on the same answers, paired: the gain and its 95 % interval.

    .venv/bin/python bench/paired.py agreement BEFORE_DIR AFTER_DIR [--data F ...] [--name N]
    .venv/bin/python bench/paired.py contrast BEFORE_DIR AFTER_DIR [--data F] [--name N] \\
        [--threshold-before T] [--threshold-after T]

BEFORE_DIR and AFTER_DIR are run dirs of `bench/agreement.py --out` or `bench/contrast.py --out`
over the same answers (each made by its own code). `agreement`: each arm's 5-fold
cross-validated flags (thresholds chosen on four folds by question, as `agreement.py --cv`),
balanced accuracy and AUROC with their intervals, and the paired gain (after - before) with a
bootstrap interval over questions (all answers to one question resampled together).
`contrast`: the shares of wrong and of correct answers flagged at each arm's threshold, and the
paired change of each. Both print the share of listed claims the premise check dropped (where
the arm made one) and write the figures, with the date, CPU and package versions, to
bench/results/NAME.json (docs/evidence.md is built from those files).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.claim_rows import flagged_at, ranking_score
from auditor.store import read_jsonl
from auditor.verify.thresholds import auroc, balanced_accuracy, best_threshold
from bench.agreement import DEV, FOLDS, _claims, fold_of
from bench.harness import write_result

ROUNDS = 2000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["agreement", "contrast"])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--data", type=Path, action="append", help="The labelled answers.")
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    parser.add_argument("--note", default="", help="What the two arms are, for the results file.")
    parser.add_argument("--threshold-before", type=float, default=0.264)
    parser.add_argument("--threshold-after", type=float, default=0.264)
    args = parser.parse_args()

    default = DEV if args.kind == "agreement" else CONTRAST
    gold = {
        row["id"]: row
        for path in args.data or [default]
        for row in (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    }
    before = _rows(args.before, gold)
    after = _rows(args.after, gold)
    shared = sorted(set(before) & set(after))
    if not shared:
        sys.exit(f"{args.before} and {args.after} share no checked answer")
    before = {i: before[i] for i in shared}
    after = {i: after[i] for i in shared}
    if args.kind == "agreement":
        figures = compare_agreement(gold, before, after)
    else:
        figures = compare_contrast(gold, before, after, args.threshold_before, args.threshold_after)
    figures["listing"] = {"before": _listing(before), "after": _listing(after)}
    print(json.dumps(figures, indent=1))
    if args.name:
        write_result(
            args.name,
            f"paired {args.kind}",
            figures,
            note=args.note,
            data=args.data or [default],
            dtype=_dtype(args.after),
            answers=len(shared),
            judge=_judge(args.after),
        )


CONTRAST = Path(__file__).resolve().parents[1] / "corpora" / "kestrel" / "contrast.jsonl"


def _rows(out: Path, gold: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in read_jsonl(out / "checks.jsonl") if r["id"] in gold}


def _listing(rows: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Listed claims and the share the premise check dropped (None: the arm made none)."""
    if not any("listed_claims" in r for r in rows.values()):
        return None
    listed = sum(r.get("listed_claims", 0) for r in rows.values())
    dropped = sum(len(r.get("listing_errors", [])) for r in rows.values())
    answers = sum(bool(r.get("listing_errors")) for r in rows.values())
    return {
        "listed_claims": listed,
        "dropped": dropped,
        "share_dropped": round(dropped / listed, 4) if listed else None,
        "answers_with_a_drop": answers,
    }


def _out_of_fold(
    gold: dict[str, Any], rows: dict[str, dict[str, Any]]
) -> tuple[dict[str, bool], dict[str, float]]:
    """Each answer's flag at the threshold chosen on the other folds, and its score."""
    scores = {i: ranking_score(_claims(r)) for i, r in rows.items()}
    labels = {i: bool(gold[i]["hallucinated"]) for i in rows}
    folds = {i: fold_of(str(gold[i]["source_id"])) for i in rows}
    flags: dict[str, bool] = {}
    for fold in range(FOLDS):
        train = [i for i in rows if folds[i] != fold]
        t = best_threshold([scores[i] for i in train], [labels[i] for i in train])
        flags.update({i: flagged_at(_claims(rows[i]), t) for i in rows if folds[i] == fold})
    return flags, scores


def compare_agreement(
    gold: dict[str, Any], before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    ids = list(before)
    arms = {"before": _out_of_fold(gold, before), "after": _out_of_fold(gold, after)}
    labels = {i: bool(gold[i]["hallucinated"]) for i in ids}
    return {"answers": len(ids), "hallucinated": sum(labels.values())} | paired_figures(
        gold, ids, arms
    )


def paired_figures(
    gold: dict[str, Any], ids: list[str], arms: dict[str, tuple[dict[str, bool], dict[str, float]]]
) -> dict[str, Any]:
    """Balanced accuracy and AUROC of two arms ("before", "after": each answer's flag and
    score) and their paired gain, with bootstrap intervals over questions."""
    labels = {i: bool(gold[i]["hallucinated"]) for i in ids}

    def ba(arm: str, sample: list[str]) -> float:
        flags = arms[arm][0]
        return balanced_accuracy([(labels[i], flags[i]) for i in sample])

    def area(arm: str, sample: list[str]) -> float:
        scores = arms[arm][1]
        value = auroc([scores[i] for i in sample], [labels[i] for i in sample])
        return value if value is not None else 0.5

    clusters: dict[str, list[str]] = {}
    for i in ids:
        clusters.setdefault(str(gold[i]["source_id"]), []).append(i)
    figures: dict[str, Any] = {}
    for name, metric in (("balanced_accuracy", ba), ("auroc", area)):
        figures[name] = {
            arm: _with_interval(lambda s, a=arm, m=metric: m(a, s), ids, clusters)  # type: ignore[misc]
            for arm in arms
        }
        figures[name]["gain"] = _with_interval(
            lambda s, m=metric: m("after", s) - m("before", s),  # type: ignore[misc]
            ids,
            clusters,
        )
    return figures


def compare_contrast(
    gold: dict[str, Any],
    before: dict[str, dict[str, Any]],
    after: dict[str, dict[str, Any]],
    threshold_before: float,
    threshold_after: float,
) -> dict[str, Any]:
    ids = list(before)
    flags = {
        "before": {i: flagged_at(_claims(before[i]), threshold_before) for i in ids},
        "after": {i: flagged_at(_claims(after[i]), threshold_after) for i in ids},
    }
    figures: dict[str, Any] = {"thresholds": {"before": threshold_before, "after": threshold_after}}
    for group, wanted in (("wrong_flagged", True), ("correct_flagged", False)):
        members = [i for i in ids if bool(gold[i]["hallucinated"]) == wanted]
        clusters = {i: [i] for i in members}

        def share(arm: str, sample: list[str]) -> float:
            return sum(flags[arm][i] for i in sample) / max(1, len(sample))

        figures[group] = {
            arm: _with_interval(lambda s, a=arm: share(a, s), members, clusters)  # type: ignore[misc]
            for arm in flags
        }
        figures[group]["change"] = _with_interval(
            lambda s: share("after", s) - share("before", s), members, clusters
        )
    by_kind: dict[str, dict[str, list[int]]] = {}
    for i in ids:
        kind = by_kind.setdefault(gold[i]["kind"], {"before": [0, 0], "after": [0, 0]})
        for arm in flags:
            kind[arm][0] += flags[arm][i]
            kind[arm][1] += 1
    figures["flagged_by_kind"] = by_kind
    return figures


def _with_interval(
    statistic: Callable[[list[str]], float], ids: list[str], clusters: dict[str, list[str]]
) -> dict[str, float]:
    """The statistic on all ids, and its bootstrap 95 % interval over resampled clusters."""
    rng = random.Random(0)
    keys = sorted(clusters)
    values = []
    for _ in range(ROUNDS):
        sample = [i for _ in keys for i in clusters[keys[rng.randrange(len(keys))]]]
        values.append(statistic(sample))
    values.sort()
    return {
        "value": round(statistic(ids), 4),
        "low": round(values[int(0.025 * ROUNDS)], 4),
        "high": round(values[int(0.975 * ROUNDS) - 1], 4),
    }


def _judge(out: Path) -> dict[str, Any]:
    """The judge identity and verdict logic of a run dir's check.json."""
    manifest = json.loads((out / "check.json").read_text(encoding="utf-8"))
    judge = manifest.get("judge", {})
    return {"identity": judge.get("identity"), "verdict_logic": judge.get("verdict_logic")}


def _dtype(out: Path) -> str | None:
    """The judge engine's dtype, from a run dir's check.json."""
    manifest = json.loads((out / "check.json").read_text(encoding="utf-8"))
    generator = manifest.get("judge", {}).get("config", {}).get("generator", {})
    return generator.get("dtype")


if __name__ == "__main__":
    main()
