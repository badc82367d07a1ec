"""A run dir's results: its artifacts as one object, and the summary computed from them.

`report` renders these, `compare` pairs them, `audit` writes them; none of them reads a run
dir's files itself. summary.json is the one file written here (goodput with intervals).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.calibrate import Calibration
from auditor.config import GoodputConfig, PipelineConfig, SLOConfig
from auditor.errors import BadInput
from auditor.files import utc_now, write_json_atomic
from auditor.goodput import summarize
from auditor.store import read_check_manifest, read_jsonl, read_run_manifest

__all__ = ["SUMMARY", "RunArtifacts", "load_run", "pipeline_settings", "write_summary"]

SUMMARY = "summary.json"


@dataclass
class RunArtifacts:
    """Everything the report reads of one run dir."""

    run_dir: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    check_manifest: dict[str, Any] | None
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.manifest.get("pipeline", {}).get("name") or self.run_dir.name)

    @property
    def judge_sha256(self) -> str | None:
        if self.check_manifest is None:
            return None
        sha = self.check_manifest.get("judge", {}).get("sha256")
        return None if sha is None else str(sha)


def pipeline_settings(manifest: dict[str, Any]) -> tuple[SLOConfig, GoodputConfig]:
    config = manifest.get("pipeline", {}).get("config")
    if not config:
        return SLOConfig(), GoodputConfig()
    pipeline = PipelineConfig.model_validate(config)
    return pipeline.slo, pipeline.goodput


def load_run(run_dir: Path) -> RunArtifacts:
    """The artifacts of a run dir; a dir without records is a one-line error naming the fix."""
    manifest = read_run_manifest(run_dir)
    if manifest is None or not (run_dir / "records.jsonl").is_file():
        raise BadInput(
            f"{run_dir}: not a run dir (no manifest.json or records.jsonl); "
            "give a dir written by `auditor run`, `auditor audit` or `auditor check --answers`"
        )
    checks_path = run_dir / "checks.jsonl"
    return RunArtifacts(
        run_dir=run_dir,
        manifest=manifest,
        records=read_jsonl(run_dir / "records.jsonl"),
        checks=read_jsonl(checks_path) if checks_path.is_file() else [],
        check_manifest=read_check_manifest(run_dir),
    )


def write_summary(run: RunArtifacts, calibration: Calibration | None = None) -> dict[str, Any]:
    """Compute the run's summary (deterministic: seeded bootstrap) and write summary.json.

    Rates are as judged unless a calibration is given (`--calibration`: none applies by
    itself); then they are also given corrected for the judge's error, and a calibration that
    does not apply to the run's judge is refused naming the setting that differs and the fix.
    """
    slo, weights = pipeline_settings(run.manifest)
    accuracy = None
    if calibration is not None:
        if run.checks and (reason := calibration.mismatch(run.check_manifest)):
            raise BadInput(f"{calibration.label}: does not apply to {run.run_dir}: {reason}")
        accuracy = calibration.claim_accuracy
    summary = summarize(run.manifest, run.records, run.checks, slo, weights, calibration=accuracy)
    summary["calibration"] = None if calibration is None else calibration.provenance()
    summary |= {
        "pipeline": run.name,
        "generated_at": utc_now(),
        "config_sha256": run.manifest.get("pipeline", {}).get("sha256"),
        "model": run.manifest.get("model", {}),
        "judge": (run.check_manifest or {}).get("judge", {}).get("identity"),
        "judge_sha256": run.judge_sha256,
    }
    write_json_atomic(run.run_dir / SUMMARY, summary)
    run.summary = summary
    return summary
