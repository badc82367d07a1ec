"""How well the default judge decides: the measurements `make test` does not run (`make bench-judge`).

    .venv/bin/python bench/judge_quality.py [--parts smoke,floors,fresh,ragtruth] [--out DIR]
        [--name NAME] [--judge J.toml] [--set KEY=VALUE ...]

Four parts on one judge engine, each printed PASS or FAIL (exit code 1 when one fails):
  smoke     the verdict cases any working judge decides (auditor.verdict_cases: the suite's
            smoke, more invented negative facts, a correct answer beside its question's
            premise, one RAGTruth answer of each kind);
  floors    24 answers of the bundled contrast set (both answers of the first two questions of
            each error kind) against the floors `make test` held until the suite was cut to its
            smoke: wrong answers flagged >= 0.58, correct ones <= 0.50, three answers apart;
  fresh     the fresh contrast set (80 answers written before any tuning): the shares of wrong
            and of correct answers flagged, each with its 95 % interval; PASS when today's
            reference figure (its results file) lies inside the interval: the same within noise;
  ragtruth  the 150 RAGTruth QA dev answers, 5-fold cross-validated by question (thresholds
            chosen on four folds, scored on the fifth): balanced accuracy and AUROC against the
            reference results file, PASS when each reference lies inside the new interval.
Claims are checked for faithfulness (what the figures score); the smoke computes every default
metric, as the suite's does. Run dirs go under --out and resume. On 2 AVX2 cores in float32:
smoke ~3 min, floors ~9, fresh ~40, ragtruth ~85 (bfloat16 CPUs: ~5x faster).
Any change under auditor/verify/ comes with this bench's results file (docs/development.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.config import EmbedderConfig, JudgeConfig, load_judge, parse_set_option
from auditor.ingest.embed import load_embedder
from auditor.store import read_jsonl
from auditor.verdict_cases import (
    VerdictCase,
    case_failures,
    negation_cases,
    ragtruth_cases,
    smoke_cases,
)
from auditor.verify.base import Judge
from auditor.verify.check import check_items, import_answers
from auditor.verify.judges import make_judge
from auditor.verify.thresholds import contrast_figures

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
REPO = Path(__file__).resolve().parents[1]
KESTREL = REPO / "corpora" / "kestrel"
DEV = REPO.parent / "shared" / "datasets" / "ragtruth-qa" / "dev.jsonl"
PARTS = ("smoke", "floors", "fresh", "ragtruth")
# the suite's RAGTruth pair (tests/e2e/test_check_real.py): the shortest answer of each kind
RAGTRUTH_PAIR = ("ragtruth-qa-12233-gpt-3.5-turbo-0613", "ragtruth-qa-15254-mistral-7B-instruct")
# the contrast floors `make test` held (a 24-answer sample: two answers of slack on 12 each way)
WRONG_FLAGGED_FLOOR = 0.58
CORRECT_FLAGGED_CEILING = 0.5
# today's figures, each from its results file (bench/results/), and where in it
REFERENCES = {
    "fresh": "fresh-contrast-listed-vs-sentences-2026-12-06.json",  # figures.*.before
    "ragtruth": "ragtruth-qa-cv-2026-12-05.2.json",  # figures.balanced_accuracy, figures.auroc
}


def _reference(part: str) -> dict[str, Any]:
    path = REPO / "bench" / "results" / REFERENCES[part]
    figures: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["figures"]
    if part == "fresh":
        return {
            key: figures[key]["before"]["value"] for key in ("wrong_flagged", "correct_flagged")
        }
    return {key: figures[key]["value"] for key in ("balanced_accuracy", "auroc")}


def _within(reference: float, low: float, high: float) -> bool:
    return low - 1e-9 <= reference <= high + 1e-9


class Bench:
    """One judge engine and embedder for every part; each part's run dir under `out`."""

    def __init__(self, out: Path, judge_path: Path | None, sets: dict[str, Any]) -> None:
        self.out = out
        self.config = load_judge(judge_path, sets)  # every default metric: the smoke's
        self.faithfulness = load_judge(judge_path, sets | {"metrics": ["faithfulness"]})
        self.embedder = load_embedder(EmbedderConfig())
        self.judge: Judge = make_judge(self.config)

    def check(self, part: str, items: list[Any], config: JudgeConfig) -> list[dict[str, Any]]:
        run = self.out / part
        check_items(items, run, config, self.judge, lambda texts: self.embedder.embed(texts))
        return read_jsonl(run / "checks.jsonl")

    def check_file(self, part: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Labelled answers (id, question, contexts, answer) checked for faithfulness."""
        answers = self.out / f"{part}.answers.jsonl"
        answers.parent.mkdir(parents=True, exist_ok=True)
        keep = ("id", "question", "contexts", "answer")
        answers.write_text(
            "".join(json.dumps({k: r[k] for k in keep}) + "\n" for r in rows), encoding="utf-8"
        )
        return self.check(part, import_answers(answers, self.out / part), self.faithfulness)

    def smoke(self) -> dict[str, Any]:
        cases: list[VerdictCase] = smoke_cases() + negation_cases()
        cases += ragtruth_cases(DEV, RAGTRUTH_PAIR)
        rows = {row["id"]: row for row in self.check("smoke", [c.item for c in cases], self.config)}
        failures = case_failures(cases, rows)
        for line in failures:
            print(f"  {line}")
        print(f"smoke: {len(cases) - len({f.split(':')[0] for f in failures})}/{len(cases)} cases")
        return {"cases": len(cases), "failures": failures, "passed": not failures}

    def floors(self) -> dict[str, Any]:
        rows = _contrast_rows(KESTREL / "contrast.jsonl")
        chosen: dict[str, list[str]] = {}
        for row in rows:
            if row["hallucinated"]:
                picked = chosen.setdefault(row["kind"], [])
                if len(picked) < 2:
                    picked.append(row["id"].rsplit("-", 1)[0])
        questions = {q for picked in chosen.values() for q in picked}
        sample = [row for row in rows if row["id"].rsplit("-", 1)[0] in questions]
        checks = self.check_file("floors", sample)
        figures = contrast_figures(
            {r["id"]: r for r in sample}, checks, self.faithfulness.support_threshold
        )
        gap = figures["wrong_flagged"] - figures["correct_flagged"]
        passed = (
            figures["wrong_flagged"] >= WRONG_FLAGGED_FLOOR
            and figures["correct_flagged"] <= CORRECT_FLAGGED_CEILING
            and gap >= 0.25 - 1e-9
        )
        print(
            f"floors: {len(sample)} answers: wrong flagged {figures['wrong_flagged']:.3f} "
            f"(floor {WRONG_FLAGGED_FLOOR}), correct flagged {figures['correct_flagged']:.3f} "
            f"(ceiling {CORRECT_FLAGGED_CEILING}), gap {gap:.3f} (>= 0.25)"
        )
        return _plain(figures) | {"passed": passed}

    def fresh(self) -> dict[str, Any]:
        rows = _contrast_rows(KESTREL / "contrast-fresh.jsonl")
        checks = self.check_file("fresh", rows)
        figures = contrast_figures(
            {r["id"]: r for r in rows}, checks, self.faithfulness.support_threshold
        )
        reference = _reference("fresh")
        passed = True
        for key, interval in (("wrong", "wrong_interval"), ("correct", "correct_interval")):
            low, high = figures[interval]
            same = _within(reference[f"{key}_flagged"], low, high)
            passed &= same
            print(
                f"fresh: {key} answers flagged {figures[f'{key}_flagged']:.3f} "
                f"(95% CI {low:.3f}-{high:.3f}) of {figures[key]}; reference "
                f"{reference[f'{key}_flagged']:.3f}: {'within' if same else 'OUTSIDE'}"
            )
        return _plain(figures) | {"reference": reference, "passed": passed}

    def ragtruth(self) -> dict[str, Any]:
        from bench.agreement import load_rows, report_cv

        rows = load_rows([DEV], None)
        checks = self.check_file("ragtruth", rows)
        gold = {r["id"]: r for r in rows}
        figures: dict[str, Any] = {"answers": len(checks)}
        report_cv(gold, checks, None, figures)
        reference = _reference("ragtruth")
        passed = True
        for key in ("balanced_accuracy", "auroc"):
            found = figures[key]
            same = _within(reference[key], found["low"], found["high"])
            passed &= same
            print(
                f"ragtruth: {key} {found['value']:.3f} ({found['low']:.3f}-{found['high']:.3f}); "
                f"reference {reference[key]:.3f}: {'within' if same else 'OUTSIDE'}"
            )
        return figures | {"reference": reference, "passed": passed}

    def close(self) -> None:
        self.judge.close()


def _contrast_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _plain(figures: dict[str, Any]) -> dict[str, Any]:
    """contrast_figures as JSON (tuples become lists)."""
    return json.loads(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"Comma-separated, of {', '.join(PARTS)}."
    )
    parser.add_argument("--out", type=Path, help="Run dirs to write/resume (default: temp).")
    parser.add_argument("--judge", type=Path)
    parser.add_argument("--set", dest="set_items", action="append", default=[])
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    parser.add_argument("--note", default="", help="What was measured, for the results file.")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"--parts: {unknown[0]!r} is not one of {', '.join(PARTS)}")
    if ("ragtruth" in parts or "smoke" in parts) and not DEV.is_file():
        parser.error(f"{DEV}: RAGTruth QA dev is missing (../shared/datasets/ragtruth-qa/)")
    out = args.out or Path(tempfile.mkdtemp(prefix="auditor-judge-quality-"))
    bench = Bench(out, args.judge, dict(parse_set_option(s) for s in args.set_items))
    figures: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    try:
        for part in parts:
            started = time.perf_counter()
            figures[part] = getattr(bench, part)()
            seconds[part] = round(time.perf_counter() - started, 1)
            verdict = "PASS" if figures[part]["passed"] else "FAIL"
            print(f"{verdict} {part} ({seconds[part]:.0f} s; run dir {out / part})")
    finally:
        identity = bench.judge.identity()
        bench.close()
    if args.name:
        from bench.harness import write_result

        write_result(
            args.name,
            "judge_quality",
            figures,
            note=args.note,
            data=[KESTREL / "contrast.jsonl", KESTREL / "contrast-fresh.jsonl", DEV],
            dtype=identity.get("dtype"),
            judge=identity,
            seconds=seconds,
            settings={"parts": parts, "set": args.set_items},
        )
    sys.exit(0 if all(f["passed"] for f in figures.values()) else 1)


if __name__ == "__main__":
    main()
