"""Reviewed rates on real labelled answers: how wide, and how often right, per way of drawing
and rating a review of n of the N answers, over many random reviews of one stored check run.

    .venv/bin/python bench/review.py RUN_DIR [--data dev.jsonl] [--sizes 20 40 60]
        [--reviews 1000] [--name NAME]

RUN_DIR is a check run of labelled answers (`bench/agreement.py --out RUN_DIR`, e.g. the 150
RAGTruth QA dev answers); the truth is the share of its answers people labelled hallucinated.
For each review size n, `--reviews` random reviews, each drawn twice (uniformly, and
stratified on the judge's score), each arm's 95 % interval on the same draws; per arm the
coverage (share of reviews whose interval holds the truth), the mean width, and the width
against today's estimator (`today_rate`: PPI++ with the verdict, as shipped before the
finite-population estimators):
- uniform draw: the labels alone, Wilson (today's: no finite-population correction below
  half the answers) and Wilson with the correction (`labels_only_interval`); today's PPI++
  with the verdict and with the answer score; the difference estimator with the correction
  (`reviewed_rate`) with the verdict and with the answer score;
- stratified draw (`stratified_order`: 4 strata of the answer score, proportional
  allocation, every prefix of the order such a sample): the stratified estimator
  (`stratified_rate`) and the labels alone with the correction;
- and, from earlier measurements: PPI++ with a sample stratified by the verdict (half the
  reviews among flagged answers, weighted by inverse inclusion probability); active (answers
  the judge is least sure of more likely picked: Poisson sampling, inclusion probability
  proportional to sqrt(s (1 - s)) of the answer score s, floored at 0.2 of the mean, weighted
  by inverse inclusion probability; Zrnic and Candes 2024); Rogan-Gladen (the judged rate of
  all answers corrected with the judge's sensitivity and specificity measured on the review).
Writes bench/results/NAME.json.

    .venv/bin/python bench/review.py RUN_DIR --as-people-work [--sizes 20 40 60] [--reviews 1000]

The loop as a team runs it, on a copy of RUN_DIR: each review drawn by `auditor review COPY
--sample N --seed K` (K = 0, 1, ...), the drawn answers' labels written as the report's review
page writes them (people's labels from --data), and the reviewed rate that `auditor report
COPY --labels` gives: literally, through the command, for the first `--full-reports` reviews of
each size, and through the same functions it calls (`assign_labels`, `review_summary`) for
the rest, asserting the two agree where both ran. Coverage, mean width, the width against the
labels alone and against today's estimator on the same labels, and the labels advised for
+-0.05 and +-0.10 (`labels_for`), per size.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.calibration import JudgeAccuracy, corrected_rate_interval, wilson_interval
from auditor.claim_rows import Claim, flagged_at, ranking_score
from auditor.files import utc_now
from auditor.review import check_fingerprint, run_fingerprint
from auditor.reviewed import labels_only_interval, reviewed_rate, wilson_at
from auditor.store import read_check_manifest, read_jsonl
from bench.agreement import DEV
from bench.harness import write_result

Arm = Callable[[np.random.Generator, int], tuple[float, float]]
STRATA = 4
TODAY = "uniform: PPI++ with the verdict (today)"


def today_rate(
    labels: np.ndarray, predictions: np.ndarray, everyone: np.ndarray
) -> tuple[float, float, str]:
    """The reviewed rate's interval as shipped before the finite-population estimators: plain
    Wilson below half the answers reviewed (the correction from half on), Wilson under 10
    labels, else `ppi_py`'s PPI++ (no correction), the labels' where it is no narrower."""
    from ppi_py import ppi_mean_ci

    n, population = len(labels), len(everyone)
    positives = int(labels.sum())
    if n == 0:
        return 0.0, 1.0, "no labels"
    if n / population >= 0.5:
        low, high = labels_only_interval(positives, n, population)
        return low, high, "labels (finite population)"
    low, high = wilson_interval(positives, n) or (0.0, 1.0)
    if n < 10 or positives in (0, n) or (np.ptp(predictions) == 0 and np.ptp(everyone) == 0):
        return low, high, "labels (Wilson)"
    ppi_low, ppi_high = (
        float(v[0]) for v in ppi_mean_ci(labels, predictions, everyone, alpha=0.05)
    )
    if ppi_high - ppi_low >= high - low:
        return low, high, "labels (Wilson)"
    return max(0.0, ppi_low), min(1.0, ppi_high), "ppi++"


def stratified_order(
    scores: np.ndarray, rng: np.random.Generator, strata: int = STRATA
) -> tuple[np.ndarray, np.ndarray]:
    """(the order answers are drawn in, each answer's stratum): strata of equal size by the
    judge's score (ties in a random order), each stratum's answers in a random order, the
    strata interleaved so that every prefix holds each stratum in proportion to its size
    (largest deficit first), so the first n are a proportional stratified sample for any n."""
    total = len(scores)
    ranked = np.lexsort((rng.random(total), scores))
    stratum = np.empty(total, dtype=int)
    stratum[ranked] = np.arange(total) * strata // total
    members = [rng.permutation(np.flatnonzero(stratum == h)) for h in range(strata)]
    sizes = np.array([len(m) for m in members])
    taken = np.zeros(strata, dtype=int)
    order = []
    for k in range(1, total + 1):
        h = int(np.argmax(k * sizes / total - taken))
        order.append(members[h][taken[h]])
        taken[h] += 1
    return np.array(order), stratum


def stratified_rate(
    labels: np.ndarray, labelled_strata: np.ndarray, strata_sizes: list[int]
) -> tuple[float, float, str]:
    """The stratified estimator of a proportional stratified sample (`stratified_order`'s
    first n): sum_h W_h mean(y_h), variance sum_h W_h^2 (1 - n_h/N_h) s2_h / n_h, Wilson's
    interval at its effective sample size p (1 - p) / v, as `reviewed_rate` makes the
    difference estimator's; the labels alone (conservative under proportional allocation)
    under 10 labels, with every label alike, a stratum with fewer than 2 labels, no variance,
    or where they are narrower. (low, high, method)."""
    n, population = len(labels), sum(strata_sizes)
    positives = int(labels.sum())
    low, high = labels_only_interval(positives, n, population)
    alone = (low, high, "labels (Wilson, finite population)")
    groups = [labels[labelled_strata == h] for h in range(len(strata_sizes))]
    if n < 10 or positives in (0, n) or min(len(g) for g in groups) < 2:
        return alone
    value, variance = 0.0, 0.0
    for group, size in zip(groups, strata_sizes, strict=True):
        weight = size / population
        value += weight * float(group.mean())
        variance += weight**2 * (1 - len(group) / size) * float(group.var(ddof=1)) / len(group)
    if variance <= 0 or value in (0.0, 1.0):
        return alone
    low, high = wilson_at(value, value * (1 - value) / variance)
    if high - low >= alone[1] - alone[0]:
        return alone
    return low, high, "stratified (finite population)"


def design_arms(
    y: np.ndarray, flag: np.ndarray, score: np.ndarray, rng: np.random.Generator, n: int
) -> dict[str, tuple[float, float, str]]:
    """One review of n answers drawn uniformly and one drawn stratified on the score: every
    estimator's (low, high, method) on the draw it is made for."""
    total = len(y)
    picked = rng.choice(total, n, replace=False)
    labels = y[picked]
    positives = int(labels.sum())
    found: dict[str, tuple[float, float, str]] = {}
    plain = wilson_interval(positives, n) or (0.0, 1.0)
    found["uniform: labels alone, Wilson (today)"] = (*plain, "labels (Wilson)")
    fpc = labels_only_interval(positives, n, total)
    found["uniform: labels alone, Wilson with the correction"] = (*fpc, "labels (FPC)")
    found[TODAY] = today_rate(labels, flag[picked], flag)
    found["uniform: PPI++ with the answer score (today's estimator)"] = today_rate(
        labels, score[picked], score
    )
    for name, predictions in (("verdict", flag), ("answer score", score)):
        rate = reviewed_rate(
            labels.astype(bool).tolist(), predictions[picked].tolist(), predictions.tolist()
        )
        found[f"uniform: difference (finite population) with the {name}"] = (
            rate.low,
            rate.high,
            rate.method,
        )
    order, stratum = stratified_order(score, rng)
    drawn = order[:n]
    sizes = np.bincount(stratum, minlength=STRATA).tolist()
    found["stratified on the score: stratified estimator"] = stratified_rate(
        y[drawn], stratum[drawn], sizes
    )
    fpc = labels_only_interval(int(y[drawn].sum()), n, total)
    found["stratified on the score: labels alone, Wilson with the correction"] = (
        *fpc,
        "labels (FPC)",
    )
    return found


def load(run_dir: Path, data: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(people's label, the judge's flag, the judge's score of being hallucinated) of every
    checked answer with a label."""
    gold = {str(r["id"]): bool(r["hallucinated"]) for r in read_jsonl(data)}
    threshold = float(read_check_manifest(run_dir)["judge"]["config"]["support_threshold"])  # type: ignore[index]
    labels, flags, scores = [], [], []
    for row in read_jsonl(run_dir / "checks.jsonl"):
        if str(row["id"]) not in gold:
            continue
        claims = [Claim.from_json(c) for c in row["claims"]]
        labels.append(gold[str(row["id"])])
        flags.append(float(flagged_at(claims, threshold)))
        scores.append(1.0 - ranking_score(claims))
    return np.array(labels, dtype=float), np.array(flags), np.array(scores)


def arms(y: np.ndarray, flag: np.ndarray, score: np.ndarray) -> dict[str, Arm]:
    """Earlier arms, each on its own draws: weighted PPI++ and Rogan-Gladen."""
    total = len(y)

    def weighted(
        rng: np.random.Generator, picked: np.ndarray, pi: np.ndarray
    ) -> tuple[float, float]:
        from ppi_py import ppi_mean_ci

        if len(picked) < 2 or np.ptp(y[picked]) == 0:
            return labels_only_interval(int(y[picked].sum()), len(picked), total)
        low, high = ppi_mean_ci(y[picked], flag[picked], flag, alpha=0.05, w=1.0 / pi[picked])
        return max(0.0, float(low[0])), min(1.0, float(high[0]))

    def stratified(rng: np.random.Generator, n: int) -> tuple[float, float]:
        flagged, passed = np.flatnonzero(flag == 1), np.flatnonzero(flag == 0)
        k = min(len(flagged), n // 2)
        picked = np.concatenate(
            [rng.choice(flagged, k, replace=False), rng.choice(passed, n - k, replace=False)]
        )
        pi = np.where(flag == 1, k / max(1, len(flagged)), (n - k) / max(1, len(passed)))
        return weighted(rng, picked, pi)

    def active(rng: np.random.Generator, n: int) -> tuple[float, float]:
        doubt = np.sqrt(score * (1 - score))
        doubt = np.maximum(doubt, 0.2 * doubt.mean() + 1e-9)
        pi = np.minimum(1.0, n * doubt / doubt.sum())
        picked = np.flatnonzero(rng.random(total) < pi)
        return weighted(rng, picked, pi)

    def rogan_gladen_arm(rng: np.random.Generator, n: int) -> tuple[float, float]:
        picked = rng.choice(total, n, replace=False)
        g, f = y[picked] == 1, flag[picked] == 1
        accuracy = JudgeAccuracy(
            int((g & f).sum()), int(g.sum()), int((~g & ~f).sum()), int((~g).sum())
        )
        interval = corrected_rate_interval(int(flag.sum()), total, accuracy, rounds=400)
        return interval if interval is not None else (0.0, 1.0)

    return {
        "PPI++, sample stratified by the verdict": stratified,
        "active (inverse-probability weighted PPI++)": active,
        "Rogan-Gladen, se/sp from the review": rogan_gladen_arm,
    }


def simulate_designs(
    y: np.ndarray, flag: np.ndarray, score: np.ndarray, n: int, reviews: int
) -> dict[str, Any]:
    """`reviews` draws of each design at size n (seeded by n): per estimator its coverage,
    mean width, width against today's on the same uniform draws, and methods used."""
    truth = float(y.mean())
    rng = np.random.default_rng(n)
    found: dict[str, list[tuple[float, float, str]]] = {}
    for _ in range(reviews):
        for name, interval in design_arms(y, flag, score, rng, n).items():
            found.setdefault(name, []).append(interval)
    today = float(np.mean([high - low for low, high, _ in found[TODAY]]))
    row: dict[str, Any] = {}
    for name, intervals in found.items():
        cover = float(np.mean([low <= truth <= high for low, high, _ in intervals]))
        width = float(np.mean([high - low for low, high, _ in intervals]))
        methods = [m for _, _, m in intervals]
        row[name] = {
            "coverage": round(cover, 3),
            "mean_width": round(width, 4),
            "width_vs_today": round(width / today, 3),
            "methods": {m: methods.count(m) for m in sorted(set(methods))},
        }
        print(
            f"N={n:>3}  {name:<68} coverage {cover:.3f}  mean width {width:.3f}  "
            f"x today {width / today:.3f}"
        )
    return row


def judge_dtype(run_dir: Path) -> str | None:
    """The dtype the run's judge ran in, as its check manifest records it."""
    judge = (read_check_manifest(run_dir) or {}).get("judge", {})
    return judge.get("identity", {}).get("dtype")


def page_labels(run: Any, drawn: list[str], truth: dict[str, bool]) -> list[dict[str, Any]]:
    """The drawn answers' labels as the review page writes them (the fields `report` reads):
    the run's and the check's fingerprints, the first review's role."""
    fingerprint = run_fingerprint(run.manifest)
    check = check_fingerprint(run.check_manifest)
    return [
        {
            "id": ident,
            "pipeline": run.name,
            "fingerprint": fingerprint,
            "check_fingerprint": check,
            "role": "first",
            "hallucinated": truth[ident],
            "reviewer": "bench/review.py",
            "labelled_at": utc_now(),  # after the run began
        }
        for ident in drawn
    ]


def as_people_work(
    run_dir: Path, data: Path, sizes: list[int], reviews: int, full_reports: int
) -> dict[str, Any]:
    """Each review drawn by `auditor review`, its labels as the page writes them, its rate as
    `auditor report --labels` gives it (see the module doc)."""
    import shutil
    import tempfile

    from click.testing import CliRunner

    from auditor.cli import cli
    from auditor.results import load_run
    from auditor.review import REVIEW, assign_labels, read_review_labels
    from auditor.reviewed import review_summary

    truth = {str(r["id"]): bool(r["hallucinated"]) for r in read_jsonl(data)}
    runner = CliRunner()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / run_dir.name
        shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns(REVIEW, "summary.json"))
        run = load_run(copy)
        judge = (run.check_manifest or {}).get("judge", {}).get("config", {})
        threshold = float(judge.get("support_threshold", 0.5))  # as summarize_run reads it
        gold = [truth[str(row["id"])] for row in run.checks]
        rate_true = float(np.mean(gold))
        flag = {
            str(row["id"]): float(
                flagged_at([Claim.from_json(c) for c in row["claims"]], threshold)
            )
            for row in run.checks
        }
        flags = np.array(list(flag.values()))
        labels_path = Path(scratch) / "labels.jsonl"
        for n in sizes:
            intervals, alone, methods, today, advised = [], [], [], [], []
            for seed in range(reviews):
                (copy / REVIEW).unlink(missing_ok=True)
                drawn = runner.invoke(
                    cli, ["review", str(copy), "--sample", str(n), "--seed", str(seed)]
                )
                assert drawn.exit_code == 0, drawn.output
                sample = [e["id"] for e in json.loads((copy / REVIEW).read_text())["sample"]]
                rows = page_labels(run, sample, truth)
                labels_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
                labels = read_review_labels(labels_path)
                assigned = assign_labels(labels, [run], labels_path)
                # the reviewed block as summarize_run makes it (its other figures are not
                # needed here; the full command below checks the two agree)
                rate = review_summary(assigned[run.name], run.checks, threshold, None, None)[
                    "answer_rate"
                ]
                if seed < full_reports:
                    done = runner.invoke(
                        cli,
                        [
                            *("report", str(copy), "--labels", str(labels_path)),
                            *("--out", str(Path(scratch) / "report.html")),
                            *("--history", str(Path(scratch) / "history.sqlite")),
                        ],
                    )
                    assert done.exit_code in (0, 1), done.output
                    reported = json.loads((copy / "summary.json").read_text())["reviewed"]
                    assert reported["answer_rate"] == rate, (reported["answer_rate"], rate)
                intervals.append((rate["low"], rate["high"]))
                alone.append(tuple(rate["labels_only"]))
                methods.append(rate["method"])
                advised.append(rate["labels_for"])
                labelled = np.array([float(truth[i]) for i in sample])
                low, high, _ = today_rate(labelled, np.array([flag[i] for i in sample]), flags)
                today.append((low, high))
            cover = float(np.mean([low <= rate_true <= high for low, high in intervals]))
            width = float(np.mean([high - low for low, high in intervals]))
            width_alone = float(np.mean([high - low for low, high in alone]))
            width_today = float(np.mean([high - low for low, high in today]))
            ratios = [
                (high - low) / (b - a)
                for (low, high), (a, b) in zip(intervals, alone, strict=True)
                if b > a
            ]
            row = {
                "coverage": round(cover, 3),
                "mean_width": round(width, 4),
                "labels_alone_coverage": round(
                    float(np.mean([a <= rate_true <= b for a, b in alone])), 3
                ),
                "labels_alone_mean_width": round(width_alone, 4),
                "today_coverage": round(float(np.mean([a <= rate_true <= b for a, b in today])), 3),
                "today_mean_width": round(width_today, 4),
                "width_vs_today": round(width / width_today, 3),
                "labels_for_median": {
                    h: float(np.median([a[h] for a in advised])) for h in ("0.05", "0.10")
                },
                "width_ratio_mean": round(float(np.mean(ratios)), 3),
                "width_ratio_max": round(float(np.max(ratios)), 3),
                "methods": {m: methods.count(m) for m in sorted(set(methods))},
                "through_the_command": min(full_reports, reviews),
            }
            figures[f"N={n}"] = row
            print(
                f"N={n:>3}  drawn by `auditor review`, rated as `report --labels`: coverage "
                f"{cover:.3f}, mean width {width:.3f} (labels alone {width_alone:.3f}; ratio "
                f"mean {row['width_ratio_mean']:.3f}, max {row['width_ratio_max']:.3f}; today's "
                f"{width_today:.3f}, x{width / width_today:.3f}); methods {row['methods']}; "
                f"labels for +-0.05 / +-0.10 (median) {row['labels_for_median']}"
            )
        figures |= {"answers": len(gold), "true_rate": rate_true}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--data", type=Path, default=DEV)
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--reviews", type=int, default=1000)
    parser.add_argument("--name", default=None)
    parser.add_argument(
        "--as-people-work",
        action="store_true",
        help="Each review drawn by `auditor review` and rated as `auditor report --labels`.",
    )
    parser.add_argument("--full-reports", type=int, default=20)
    args = parser.parse_args()
    if args.as_people_work:
        sizes = args.sizes or [20, 40, 60]
        found = as_people_work(args.run_dir, args.data, sizes, args.reviews, args.full_reports)
        write_result(
            args.name or "review-as-people-work",
            "review",
            found,
            note=f"{args.reviews} reviews per size of the answers checked in "
            f"{args.run_dir.name}, each drawn by `auditor review --seed K` and rated as "
            f"`auditor report --labels` (through the command for the first "
            f"{args.full_reports}); truth = people's rate over all of them",
            data=[args.data],
            dtype=judge_dtype(args.run_dir),
            reviews=args.reviews,
        )
        return
    args.sizes = args.sizes or [20, 40, 60]
    args.name = args.name or "review-ragtruth-qa"
    y, flag, score = load(args.run_dir, args.data)
    truth = float(y.mean())
    judged = float(flag.mean())
    print(
        f"{len(y)} answers, true rate {truth:.3f}, judged {judged:.3f} (not a review: the judge's)"
    )
    figures: dict[str, Any] = {"answers": len(y), "true_rate": truth, "judged_rate": judged}
    for n in args.sizes:
        row = simulate_designs(y, flag, score, n, args.reviews)
        for name, arm in arms(y, flag, score).items():
            rng = np.random.default_rng(n)
            intervals = [arm(rng, n) for _ in range(args.reviews)]
            cover = float(np.mean([low <= truth <= high for low, high in intervals]))
            width = float(np.mean([high - low for low, high in intervals]))
            row[name] = {"coverage": round(cover, 3), "mean_width": round(width, 4)}
            print(f"N={n:>3}  {name:<68} coverage {cover:.3f}  mean width {width:.3f}")
        figures[f"N={n}"] = row
    write_result(
        args.name,
        "review",
        figures,
        note=f"{args.reviews} random reviews per size of {len(y)} labelled answers checked in "
        f"{args.run_dir.name}; truth = people's rate over all of them",
        data=[args.data],
        dtype=judge_dtype(args.run_dir),
        reviews=args.reviews,
        check_run=json.dumps(
            {
                "verdict_logic": (read_check_manifest(args.run_dir) or {})
                .get("judge", {})
                .get("verdict_logic")
            }
        ),
    )


if __name__ == "__main__":
    main()
