"""The judge-default yardstick: candidate ways of judging claims against the default, paired,
on every labelled answer we may use, decided by the rule in docs/judge-accuracy.md.

    .venv/bin/python bench/agreement.py --cv --data ../shared/datasets/ragtruth-qa/dev.jsonl \\
        --data ../shared/datasets/ragtruth-qa/siblings.jsonl --set 'metrics=["faithfulness"]' \\
        --set 'claims="sentences"' --set chunks_per_claim=2 --set 'short_clauses="all"' --out RUN
    .venv/bin/python bench/yardstick.py RUN [RUN_IN_THE_OTHER_DTYPE] [--name NAME] \\
        [--write-calibration ARM DIR]

Each RUN is one check of the 396 RAGTruth QA answers (dev and siblings) with every clause
checked (`short_clauses = "all"`) against its two likeliest chunks, in one dtype. The arms are
subsets of its calls, judged once (what the prefix cache's last digits change is not
reproduced): `two` keeps both chunks, `one` each claim's likeliest chunk (`rank_chunks`, then
`redecide`, as bench/fewer_chunks.py); `skipped` drops clauses of fewer than four content words,
`facts` keeps those with a figure, a date, a name or a negation, `all` keeps every one. An
answer whose clauses are all short keeps them in every arm (the check's fallback: its bare
sentences). The default is `two+skipped`; each candidate is scored out-of-fold (thresholds
chosen on four folds by question) and compared paired, with bootstrap intervals over questions
(bench/paired.py). The rule: a candidate replaces the default only when, in every dtype given,
the balanced accuracy gain is >= 0 with its 95 % lower bound above -0.03 and AUROC drops by no
more than 0.01. Figures per dtype, with dev and siblings apart, go to bench/results/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.claim_rows import Claim
from auditor.config import EmbedderConfig, JudgeConfig
from auditor.store import read_jsonl
from auditor.verify.answers import AnswerItem, items_from_run
from auditor.verify.evidence import rank_chunks
from auditor.verify.extraction import ShortClauses, is_short_clause, short_clause_is_claim
from auditor.verify.verdicts import redecide
from bench.paired import _out_of_fold, paired_figures

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "ragtruth-qa"
DATA = [SHARED / "dev.jsonl", SHARED / "siblings.jsonl"]
DEFAULT = "two+skipped"
CANDIDATES = ["one+skipped", "two+facts", "one+facts", "two+all"]
# the rule, as docs/judge-accuracy.md states it
MIN_GAIN = 0.0
MIN_LOW = -0.03
MAX_AUROC_DROP = 0.01

Rows = dict[str, dict[str, Any]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs", type=Path, nargs="+", help="Run dirs (those of one dtype are pooled)."
    )
    parser.add_argument("--data", type=Path, action="append", help="The labelled answers.")
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    parser.add_argument("--note", default="")
    parser.add_argument(
        "--write-calibration",
        nargs=2,
        metavar=("ARM", "DIR"),
        help="Write each run's calibration of this arm to DIR/<judge>.<dtype>.json.",
    )
    parser.add_argument(
        "--calibration-only",
        action="store_true",
        help="With --write-calibration: write the calibrations, compute no figures.",
    )
    parser.add_argument(
        "--candidates",
        help=f"Comma-separated arms to compare with the default (default: {','.join(CANDIDATES)}).",
    )
    args = parser.parse_args()
    candidates = args.candidates.split(",") if args.candidates else CANDIDATES
    data = args.data or DATA
    gold = {
        row["id"]: row
        for path in data
        for row in (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    }
    from auditor.ingest.embed import load_embedder

    only = args.write_calibration[0] if args.calibration_only and args.write_calibration else None
    wanted = [only] if only else [*candidates, *(args.write_calibration or [])[:1]]
    # one chunk's arms need the embedder (each claim's likeliest chunk ranked again)
    needs_one = any(arm.startswith("one") for arm in wanted)
    embed = load_embedder(EmbedderConfig()).embed if needs_one else None
    by_dtype: dict[str, Any] = {}
    arms_of: dict[str, dict[str, Rows]] = {}
    runs_of: dict[str, list[Path]] = {}
    for run in args.runs:
        dtype, arms = run_arms(run, gold, embed)
        runs_of.setdefault(dtype, []).append(run)
        merged = arms_of.setdefault(dtype, {})
        for arm, rows in arms.items():
            merged.setdefault(arm, {}).update(rows)
    for dtype, arms in arms_of.items():
        print(f"{dtype}: {len(arms[DEFAULT])} answers from {', '.join(map(str, runs_of[dtype]))}")
        if not only:
            by_dtype[dtype] = dtype_figures(gold, arms, data, candidates)
    decision = decide(by_dtype, candidates)
    figures = {"default": DEFAULT, "rule": rule_text(), "dtypes": by_dtype, "decision": decision}
    print(json.dumps({"decision": decision}, indent=1))
    if args.write_calibration:
        arm, folder = args.write_calibration
        for dtype, runs in runs_of.items():
            write_calibration(runs[0], arms_of[dtype][arm], gold, Path(folder), arm, data)
    if args.name:
        from bench.harness import write_result
        from bench.paired import _judge

        write_result(
            args.name,
            "yardstick",
            figures,
            note=args.note,
            data=data,
            dtype=", ".join(by_dtype),
            answers=len(next(iter(arms_of.values()))[DEFAULT]),
            judge=_judge(args.runs[0]),
        )


def rule_text() -> str:
    return (
        f"a candidate replaces the default only when, in every dtype, its paired balanced "
        f"accuracy gain is >= {MIN_GAIN} with the 95 % lower bound above {MIN_LOW}, and its "
        f"AUROC gain is >= -{MAX_AUROC_DROP}"
    )


def run_arms(run: Path, gold: dict[str, Any], embed: Any) -> tuple[str, dict[str, Rows]]:
    """The run's dtype and its rows decided as each arm would have decided them."""
    manifest = json.loads((run / "check.json").read_text(encoding="utf-8"))
    config = JudgeConfig.model_validate(manifest["judge"]["config"])
    if config.chunks_per_claim != 2 or config.short_clauses != "all":
        sys.exit(
            f"{run}: checked with {config.chunks_per_claim} chunks, short clauses "
            f"{config.short_clauses!r}; the yardstick needs 2 and 'all'"
        )
    items = {item.id: item for item in items_from_run(run)}
    rows = {r["id"]: r for r in read_jsonl(run / "checks.jsonl") if r["id"] in gold}
    unchecked = len(items) - len(rows)
    if unchecked:
        print(f"{run}: {unchecked} of its answers not checked (yet); scored without them")
    one = (
        {
            i: row | {"claims": one_chunk_claims(row, items[i], config, embed)}
            for i, row in rows.items()
        }
        if embed is not None
        else {}
    )
    arms: dict[str, Rows] = {}
    for chunks, source in (("two", rows), ("one", one)):
        for rule in ("skipped", "facts", "all"):
            arms[f"{chunks}+{rule}"] = {
                i: row | {"claims": kept_claims(row["claims"], rule)} for i, row in source.items()
            }
    return _dtype(run), arms


def one_chunk_claims(
    row: dict[str, Any], item: AnswerItem, config: JudgeConfig, embed: Any
) -> list[dict[str, Any]]:
    """The row's claims decided on each claim's likeliest chunk only."""
    claims = [Claim.from_json(c) for c in row["claims"]]
    returned = [text for _, text in item.chunks]
    if not claims or not returned:
        return row["claims"]
    ranked = rank_chunks(embed, [c.text for c in claims], returned, item.question, 1)
    ids = [chunk_id for chunk_id, _ in item.chunks]
    fewer = config.model_copy(update={"chunks_per_claim": 1})
    for claim, top in zip(claims, ranked, strict=True):
        wanted = {ids[i] for i in top}
        claim.judgements = [j for j in claim.judgements if j["chunk"] in wanted]
        redecide(claim, item, fewer)
    return [c.to_json() for c in claims]


def kept_claims(claims: list[dict[str, Any]], rule: ShortClauses) -> list[dict[str, Any]]:
    """The claims a short-clause rule checks (all of them when every clause is short)."""
    kept = [
        c
        for c in claims
        if c.get("origin") != "sentence"
        or not is_short_clause(c["text"])
        or short_clause_is_claim(c["text"], rule)
    ]
    return kept or claims


def dtype_figures(
    gold: dict[str, Any], arms: dict[str, Rows], data: list[Path], candidates: list[str]
) -> dict[str, Any]:
    """Each candidate against the default on all answers, and on each data file apart."""
    ids = sorted(arms[DEFAULT])
    files = {path.stem: _ids_of(path) for path in data}
    figures: dict[str, Any] = {"answers": len(ids), "cost": {}, "candidates": {}}
    for arm, rows in arms.items():
        figures["cost"][arm] = cost(rows)
    for candidate in candidates:
        found: dict[str, Any] = {}
        for part, members in [("all", set(ids)), *files.items()]:
            wanted = [i for i in ids if i in members]
            if not wanted:
                continue
            sides = {
                "before": _out_of_fold(gold, {i: arms[DEFAULT][i] for i in wanted}),
                "after": _out_of_fold(gold, {i: arms[candidate][i] for i in wanted}),
            }
            found[part] = paired_figures(gold, wanted, sides)
        figures["candidates"][candidate] = found
        print(_line(candidate, found["all"]))
    return figures


def cost(rows: Rows) -> dict[str, Any]:
    """Claims and claim-chunk label calls an arm makes."""
    claims = sum(len(r["claims"]) for r in rows.values())
    calls = sum(len(c.get("judgements", [])) for r in rows.values() for c in r["claims"])
    return {
        "claims": claims,
        "label_calls": calls,
        "calls_per_answer": round(calls / max(1, len(rows)), 2),
    }


def passes(found: dict[str, Any]) -> bool:
    gain = found["balanced_accuracy"]["gain"]
    area = found["auroc"]["gain"]
    return bool(
        gain["value"] >= MIN_GAIN and gain["low"] > MIN_LOW and area["value"] >= -MAX_AUROC_DROP
    )


def decide(by_dtype: dict[str, Any], candidates: list[str]) -> dict[str, Any]:
    """Which candidates pass the rule in every dtype; the default they leave."""
    verdicts = {
        candidate: {
            dtype: passes(figures["candidates"][candidate]["all"])
            for dtype, figures in by_dtype.items()
        }
        for candidate in candidates
    }
    passed = [c for c, by in verdicts.items() if all(by.values())]
    return {"by_candidate": verdicts, "passed": passed, "dtypes": sorted(by_dtype)}


def _line(candidate: str, found: dict[str, Any]) -> str:
    ba, area = found["balanced_accuracy"], found["auroc"]
    return (
        f"{candidate} vs {DEFAULT}: BA {ba['after']['value']:.3f} vs {ba['before']['value']:.3f}, "
        f"gain {ba['gain']['value']:+.3f} ({ba['gain']['low']:+.3f}..{ba['gain']['high']:+.3f}); "
        f"AUROC {area['after']['value']:.3f} vs {area['before']['value']:.3f}, gain "
        f"{area['gain']['value']:+.3f} ({area['gain']['low']:+.3f}..{area['gain']['high']:+.3f})"
        f" -> {'passes' if passes(found) else 'fails'} the rule"
    )


def _ids_of(path: Path) -> set[str]:
    return {json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()}


def _dtype(run: Path) -> str:
    manifest = json.loads((run / "check.json").read_text(encoding="utf-8"))
    identity = manifest["judge"].get("identity") or {}
    return str(identity.get("dtype") or manifest["judge"]["config"]["generator"]["dtype"])


def write_calibration(
    run: Path, rows: Rows, gold: dict[str, Any], folder: Path, arm: str, data: list[Path]
) -> None:
    """The calibration `auditor calibrate` would write for this arm's verdicts on these
    answers (out-of-fold figures, folds by question; the threshold chosen on all of them)."""
    from auditor.config import config_sha256
    from auditor.files import write_json_atomic
    from bench.agreement import calibration_of

    chunks, rule = arm.split("+")
    manifest = json.loads((run / "check.json").read_text(encoding="utf-8"))
    config = JudgeConfig.model_validate(manifest["judge"]["config"]).model_copy(
        update={"chunks_per_claim": 1 if chunks == "one" else 2, "short_clauses": rule}
    )
    if _dtype(run) == "float32" and config.generator.dtype == "float32":
        # a float32 run asked for on a CPU with bf16 is the default judge on a CPU without it
        # (its bfloat16 request runs in float32 there): recorded as that judge, so that the
        # calibration applies where the default runs in float32
        default = JudgeConfig().generator.dtype
        config = config.model_copy(
            update={"generator": config.generator.model_copy(update={"dtype": default})}
        )
    judge = manifest["judge"] | {
        "config": config.model_dump(mode="json"),
        "sha256": config_sha256(config),
    }
    used = [p for p in data if _ids_of(p) & set(rows)]  # the files its answers came from
    calibration = calibration_of(gold, list(rows.values()), judge, used)
    target = folder / f"{config.name}.{_dtype(run)}.json"
    write_json_atomic(target, calibration)
    print(f"calibration ({arm}) -> {target}: threshold {calibration['threshold']}")


if __name__ == "__main__":
    main()
