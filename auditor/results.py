"""A run dir's results: its artifacts as one object, and the summary computed from them.

`report` renders these, `compare` pairs them, `audit` writes them; none of them reads a run
dir's files itself. summary.json is the one file written here (goodput with intervals).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from auditor.calibrate import Calibration
from auditor.config import GoodputConfig, PipelineConfig, SLOConfig, format_validation_error
from auditor.errors import BadInput
from auditor.files import read_regular_file, utc_now
from auditor.goodput import summarize
from auditor.review import ReviewLabel, read_checked_review
from auditor.reviewed import review_summary
from auditor.run_shapes import check_manifests, check_run_rows, check_totals
from auditor.store import (
    MANIFEST,
    read_check_manifest,
    read_checks,
    read_records,
    read_run_manifest,
    torn_note,
)
from auditor.traffic import (
    add_traffic,
    is_traffic,
    read_population,
    traffic_figures,
    traffic_slo,
)
from auditor.versions import package_versions

__all__ = [
    "SUMMARY",
    "RunArtifacts",
    "load_run",
    "pipeline_settings",
    "say_damaged_summary",
    "summarize_run",
]

SUMMARY = "summary.json"
log = logging.getLogger(__name__)


@dataclass
class RunArtifacts:
    """Everything the report reads of one run dir."""

    run_dir: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    check_manifest: dict[str, Any] | None
    summary: dict[str, Any] = field(default_factory=dict)
    labels: list[ReviewLabel] = field(default_factory=list)  # people's, with --labels
    damaged: list[str] = field(default_factory=list)  # torn last lines left out (store.torn_note)
    # imported traces: every answer of the window (population.jsonl), the sample's population
    population: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.manifest.get("pipeline", {}).get("name") or self.run_dir.name)

    @property
    def judge_sha256(self) -> str | None:
        if self.check_manifest is None:
            return None
        sha = self.check_manifest.get("judge", {}).get("sha256")
        return None if sha is None else str(sha)

    @property
    def context_precision_verdict(self) -> str | None:
        """How the check rated chunks for context precision (judge `context_precision_verdict`;
        "reason" for a check from before the setting); None when the run was not checked."""
        if self.check_manifest is None:
            return None
        config = self.check_manifest.get("judge", {}).get("config", {})
        return str(config.get("context_precision_verdict", "reason"))


def pipeline_settings(
    manifest: dict[str, Any], run_dir: Path | None = None
) -> tuple[SLOConfig, GoodputConfig]:
    """The SLO and goodput weights of the pipeline a run recorded; BadInput naming the key and
    the auditor version that wrote it when that config no longer validates here."""
    config = manifest.get("pipeline", {}).get("config")
    if is_traffic(manifest):  # imported traces: the SLO given to `auditor traces --slo`
        return traffic_slo(manifest, run_dir), GoodputConfig()
    if not config:
        return SLOConfig(), GoodputConfig()
    try:
        pipeline = PipelineConfig.model_validate(config)
    except ValidationError as exc:
        where = str((run_dir or Path(".")) / MANIFEST)
        problem = format_validation_error(where, exc, PipelineConfig)
        wrote = manifest.get("packages", {}).get("auditor", "an unknown version")
        raise BadInput(
            f"{problem} (this run was written by auditor {wrote}; this is auditor "
            f"{package_versions().get('auditor', '?')}); re-run the pipeline into a new --out "
            "with this auditor"
        ) from exc
    return pipeline.slo, pipeline.goodput


def load_run(run_dir: Path) -> RunArtifacts:
    """The artifacts of a run dir; a dir without records is a one-line error naming the fix."""
    manifest = read_run_manifest(run_dir)
    if manifest is None or not (run_dir / "records.jsonl").is_file():
        raise BadInput(
            f"{run_dir}: not a run dir (no manifest.json or records.jsonl); "
            "give a dir written by `auditor run`, `auditor audit` or `auditor check --answers`"
        )
    torn: list[str] = []
    # every field the report reads present (None, or its default, where a writer left it out)
    records = read_records(run_dir, torn=torn.append, filled=True)
    checks = read_checks(run_dir, torn=torn.append, filled=True)
    check_manifest = read_check_manifest(run_dir)
    # shapes and consistency before any figure is computed or file written (run_shapes)
    check_run_rows(run_dir, records, checks, torn)
    manifest = check_manifests(run_dir, manifest, check_manifest)
    check_totals(run_dir, manifest, records, checks, check_manifest, torn)
    damaged = [torn_note(where) for where in torn]
    for note in damaged:
        log.warning(note)  # on the terminal; the report shows it beside the run as well
    population = read_population(run_dir, manifest, records) if is_traffic(manifest) else []
    return RunArtifacts(
        run_dir=run_dir,
        manifest=manifest,
        records=records,
        checks=checks,
        check_manifest=check_manifest,
        damaged=damaged,
        population=population,
    )


def say_damaged_summary(run_dir: Path) -> None:
    """summary.json is derived: no command reads it, each rewrites it from the run's records
    and checks. One that is damaged (a hand edit, a copy cut short) is said on the terminal
    before it is regenerated, so the user knows the old file was not what it claimed."""
    path = run_dir / SUMMARY
    if not path.exists():
        return
    try:
        data = json.loads(read_regular_file(path).decode("utf-8"))
    except (BadInput, UnicodeDecodeError, ValueError, RecursionError) as exc:
        log.warning("%s: damaged (%s); regenerated from the run's records and checks", path, exc)
        return
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        log.warning(
            "%s: damaged (not a summary); regenerated from the run's records and checks", path
        )


def summarize_run(
    run: RunArtifacts,
    calibration: Calibration | None = None,
    labels: list[ReviewLabel] | None = None,
) -> dict[str, Any]:
    """Compute the run's summary (deterministic: seeded bootstrap) into `run.summary`; nothing
    is written, so a command can refuse any of its runs before it writes one.

    Rates are as judged unless a calibration is given (`--calibration`: none applies by
    itself); then they are also given corrected for the judge's error, and a calibration that
    does not apply to the run's judge is refused naming the setting that differs and the fix.
    """
    slo, weights = pipeline_settings(run.manifest, run.run_dir)
    accuracy = None
    if calibration is not None:
        if run.checks and (reason := calibration.mismatch(run.check_manifest)):
            raise BadInput(f"{calibration.label}: does not apply to {run.run_dir}: {reason}")
        accuracy = calibration.claim_accuracy
    summary = summarize(run.manifest, run.records, run.checks, slo, weights, calibration=accuracy)
    if is_traffic(run.manifest):
        traffic = traffic_figures(run.manifest, run.population, run.records, run.checks, slo)
        add_traffic(summary, traffic)
    summary["calibration"] = None if calibration is None else calibration.provenance()
    summary |= {
        "pipeline": run.name,
        "generated_at": utc_now(),
        "config_sha256": run.manifest.get("pipeline", {}).get("sha256"),
        "model": run.manifest.get("model", {}),
        "judge": (run.check_manifest or {}).get("judge", {}).get("identity"),
        "judge_sha256": run.judge_sha256,
        "context_precision_verdict": run.context_precision_verdict,
    }
    summary["reviewed"] = None
    run.labels = list(labels or [])
    if labels:
        judge = (run.check_manifest or {}).get("judge", {}).get("config", {})
        tps = summary["metrics"]["tps"]["value"]
        reviewed = review_summary(
            labels,
            run.checks,
            float(judge.get("support_threshold", 0.5)),
            tps,
            _sample(run),
            window=len(run.population) if is_traffic(run.manifest) else None,
        )
        summary["reviewed"] = reviewed
        rate = reviewed["answer_rate"]
        if rate is not None:  # None: no label counts in a rate, not reviewed (and not 0 %)
            summary["metrics"]["reviewed_hallucination_rate"] |= {
                "value": rate["value"],
                "ci95": [rate["low"], rate["high"]],
            }
        if reviewed["goodput_tps"] is not None:
            summary["metrics"]["goodput_tps_reviewed"] |= {
                "value": reviewed["goodput_tps"],
                "ci95": reviewed["goodput_tps_interval"],
            }
    run.summary = summary
    return summary


def _sample(run: RunArtifacts) -> dict[str, Any] | None:
    """Where the review sample came from (review.json, drawn again from its seed), without its
    list of ids."""
    review = read_checked_review(run)
    if review is None:
        return None
    kept = ("method", "order", "seed", "size", "population", "population_sha256")
    second = review.get("second_review") or {}
    return {k: review.get(k) for k in (*kept, "fingerprint", "check_fingerprint", "created_at")} | {
        "second_review": {"share": second["share"], "answers": len(second.get("ids") or [])}
        if second
        else None
    }
