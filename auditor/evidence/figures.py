"""The headline figures of a bundle, computed by the code the audit and the report use
(`review.assign_labels`, `results.summarize_run`, `gates.evaluate_gates`): `bundle` puts them
in the predicate and `verify` computes them again from the bundle's own files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from auditor.calibrate import Calibration
from auditor.gates import Gate, GateResult, evaluate_gates, parse_gate
from auditor.results import RunArtifacts, summarize_run
from auditor.review import ReviewLabel, assign_labels, read_checked_review

__all__ = ["MISSING", "compare", "gate_results", "gates_of", "headline_figures", "summarize_runs"]


class _Missing:
    """A field one side of a comparison does not have (unlike a field that is null)."""

    def __repr__(self) -> str:
        return "no such field"


MISSING: Any = _Missing()


def summarize_runs(
    runs: Sequence[RunArtifacts],
    calibration: Calibration | None,
    labels: list[ReviewLabel] | None,
    labels_path: Path | None,
    labels_outside: str,
    gates: Sequence[Gate],
) -> list[GateResult]:
    """Every run's summary (into `run.summary`) and the gates' results, as `finish_audit`
    computes them; nothing is written."""
    by_pipeline = (
        assign_labels(labels, list(runs), labels_path or Path("labels"), labels_outside)
        if labels
        else {}
    )
    for run in runs:
        read_checked_review(run)  # review.json is the draw of its seed, labelled or not
        summarize_run(run, calibration, by_pipeline.get(run.name))
    return evaluate_gates(gates, {run.name: run.summary for run in runs})


def headline_figures(run: RunArtifacts) -> dict[str, Any]:
    """What the statement holds of a summary: every figure with its interval, the counts they
    come from, and the number of people's labels behind the reviewed rates."""
    summary = run.summary
    reviewed = summary.get("reviewed") or {}
    return {
        "metrics": {
            name: {"value": entry["value"], "ci95": entry["ci95"]}
            for name, entry in sorted(summary["metrics"].items())
        },
        "claims": summary["claims"],
        "requests": summary["requests"],
        "errors": summary["errors"],
        "checked_answers": summary["checked_answers"],
        "reviewed_labels": reviewed.get("labels"),
    }


def gate_results(results: Sequence[GateResult]) -> list[dict[str, Any]]:
    """Gate results as the statement records them (the expression parses back with
    `parse_gate`)."""
    return [
        {"gate": str(r.gate), "pipeline": r.pipeline, "value": r.value, "passed": r.passed}
        for r in results
    ]


def gates_of(recorded: Sequence[dict[str, Any]]) -> list[Gate]:
    """The gates a statement records, each once, in order."""
    return [parse_gate(text) for text in dict.fromkeys(str(g["gate"]) for g in recorded)]


def compare(recorded: Any, computed: Any, where: str) -> str | None:
    """The first field where `recorded` (the statement's) and `computed` differ, with both
    values (None: equal); a field only one side has is named as such. Numbers compare by
    value: canonical JSON writes 2.0 as 2."""
    if recorded is MISSING and computed is not MISSING:
        return f"{where}: not in the statement, {computed!r} recomputed"
    if computed is MISSING and recorded is not MISSING:
        return (
            f"{where}: {recorded!r} in the statement, a field no file of the bundle gives "
            "(verify checks every field)"
        )
    if isinstance(recorded, dict) and isinstance(computed, dict):
        for key in sorted(recorded.keys() | computed.keys()):
            found = compare(
                recorded.get(key, MISSING), computed.get(key, MISSING), f"{where}.{key}"
            )
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(computed, list):
        if len(recorded) != len(computed):
            return (
                f"{where}: {len(recorded)} entries in the statement, {len(computed)} "
                "recomputed from the bundle's files"
            )
        for n, (one, other) in enumerate(zip(recorded, computed, strict=True)):
            found = compare(one, other, f"{where}[{n}]")
            if found:
                return found
        return None
    numbers = (int, float)
    same = (
        recorded == computed
        if isinstance(recorded, numbers)
        and isinstance(computed, numbers)
        and not isinstance(recorded, bool)
        and not isinstance(computed, bool)
        else type(recorded) is type(computed) and recorded == computed
    )
    return None if same else f"{where}: {recorded!r} in the statement, {computed!r} recomputed"
