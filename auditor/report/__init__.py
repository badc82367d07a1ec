"""`auditor report`: one self-contained HTML file from run dirs' artifacts alone.

Reads manifest.json, records.jsonl, checks.jsonl (and check.json) of each run dir, writes its
summary.json (goodput with intervals), and renders `templates/report.html.j2` with Jinja2
(autoescape on, undefined names are errors). No engine, no network: charts are inline SVG,
styles and the few lines of script are inline, and everything from a model or a document is
escaped by the template.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.config import GoodputConfig, PipelineConfig, SLOConfig
from auditor.errors import BadInput
from auditor.gates import GateResult
from auditor.goodput import METRICS, summarize
from auditor.history import KEY_METRICS, AuditRow, Regression, regressions
from auditor.ingest.manifest import utc_now, write_json_atomic
from auditor.store import read_jsonl, read_run_manifest

__all__ = ["RunArtifacts", "load_run", "render_report", "write_summary"]

if TYPE_CHECKING:
    from auditor.calibrate import Calibration

SUMMARY = "summary.json"
_VERDICT_RANK = {"contradicted": 3, "unsupported": 2, "unverifiable": 1, "supported": 0}


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
    check_manifest_path = run_dir / "check.json"
    return RunArtifacts(
        run_dir=run_dir,
        manifest=manifest,
        records=read_jsonl(run_dir / "records.jsonl"),
        checks=read_jsonl(checks_path) if checks_path.is_file() else [],
        check_manifest=json.loads(check_manifest_path.read_text(encoding="utf-8"))
        if check_manifest_path.is_file()
        else None,
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


def _segments(answer: str, claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answer cut at claim span edges; each piece carries the claims covering it.

    Several claims often map to one sentence; a piece shows the worst verdict among its
    claims and links to the first of them.
    """
    edges = {0, len(answer)}
    for claim in claims:
        if claim.get("span"):
            start, end = claim["span"]
            edges.update({max(0, min(start, len(answer))), max(0, min(end, len(answer)))})
    cuts = sorted(edges)
    pieces: list[dict[str, Any]] = []
    for start, end in itertools.pairwise(cuts):
        covering = [
            n
            for n, claim in enumerate(claims)
            if claim.get("span") and claim["span"][0] <= start and end <= claim["span"][1]
        ]
        if pieces and pieces[-1]["claims"] == covering:
            pieces[-1]["text"] += answer[start:end]
            continue
        verdict = (
            max((claims[n]["verdict"] for n in covering), key=_VERDICT_RANK.__getitem__)
            if covering
            else None
        )
        pieces.append({"text": answer[start:end], "claims": covering, "verdict": verdict})
    return pieces


def _question_views(run: RunArtifacts, index: int) -> dict[str, dict[str, Any]]:
    """Per question id: what this pipeline answered, its claims and its sources."""
    checks = {row["id"]: row for row in run.checks}
    views = {}
    for record in run.records:
        check = checks.get(record["id"])
        # where a chunk came from, said beside it: the pipeline's own retrieval, or the trusted
        # knowledge base the auditor searched for the claim (--sources kb / both)
        returned_by = "the service" if record.get("retrieval") == "target" else "the pipeline"
        chunks = {
            c["chunk_id"]: c | {"origin": f"returned by {returned_by}"}
            for c in record.get("retrieved", [])
        }
        for c in (check or {}).get("kb_chunks", []):
            chunks.setdefault(c["chunk_id"], c | {"origin": "knowledge base"})
        claims = check["claims"] if check else []
        precision = {
            v["chunk_id"]: v for v in (check or {}).get("context_verdicts", []) if "chunk_id" in v
        }
        views[record["id"]] = {
            "pipeline": run.name,
            "pipeline_index": index,
            "answer": record.get("answer") or "",
            "error": record.get("error"),
            "segments": _segments(record.get("answer") or "", claims),
            "claims": [
                {"p_supported": None, "kind": "fact", "origin": "judge", "evidence": ""}
                | claim
                | {
                    "sources": [
                        chunks[c] for c in claim.get("supporting_chunks", []) if c in chunks
                    ],
                    "against": [
                        chunks[c] for c in claim.get("contradicting_chunks", []) if c in chunks
                    ],
                }
                for claim in claims
            ],
            "chunks": [
                chunk | {"precision": precision.get(chunk["chunk_id"])}
                for chunk in record.get("retrieved", [])
            ],
            "contexts_returned": record.get("contexts_returned", True),
            "checked": check is not None,
            "outcome": (check or {}).get("outcome", "not checked"),
            "hallucinated": (check or {}).get("hallucinated"),
            "faithfulness": (check or {}).get("faithfulness"),
            "support_score": (check or {}).get("support_score"),
            "context_precision": (check or {}).get("context_precision"),
            "judge_failures": (check or {}).get("judge_failures", []),
            # listed claims the answer does not make (premise check): dropped, shown apart
            "listing_errors": (check or {}).get("listing_errors", []),
            "output_tokens": record.get("output_tokens"),
            "ttft_s": record.get("ttft_s"),
            "e2e_s": record.get("e2e_s"),
        }
    return views


def _pipeline_view(
    run: RunArtifacts,
    gate_results: Sequence[GateResult],
    history: Sequence[AuditRow],
) -> dict[str, Any]:
    from markupsafe import Markup

    from auditor.report import charts

    past = [row for row in history if row.pipeline == run.name]
    baseline = next((row for row in reversed(past) if row.baseline), None)
    found: list[Regression] = regressions(run.summary, baseline) if baseline else []
    baseline_index = next((n for n, row in enumerate(past) if row.baseline), None)
    trend = [
        {
            "metric": metric,
            "values": [row.value(metric) for row in past],
            "svg": Markup(  # built with escaped labels
                charts.sparkline([row.value(metric) for row in past], metric, baseline_index)
            ),
        }
        for metric in KEY_METRICS
    ]
    return {
        "name": run.name,
        "run_dir": str(run.run_dir),
        "manifest": run.manifest,
        "check_manifest": run.check_manifest or {},
        "summary": run.summary,
        "gates": [g for g in gate_results if g.pipeline == run.name],
        "baseline": baseline,
        "regressions": found,
        "history": past,
        "trend": trend,
    }


def render_report(
    runs: Sequence[RunArtifacts],
    gate_results: Sequence[GateResult] = (),
    history: Sequence[AuditRow] = (),
) -> str:
    """The report's HTML for runs whose summaries were written (`write_summary`)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    from auditor import __version__
    from auditor.report import charts

    names = [run.name for run in runs]
    if len(set(names)) != len(names):
        raise BadInput(
            "two run dirs hold the same pipeline name "
            f"({', '.join(sorted({n for n in names if names.count(n) > 1}))}); "
            "report runs of different pipelines, or compare past audits with `auditor history`"
        )
    from auditor.compare import compare_pair, headline

    pipelines = [_pipeline_view(run, gate_results, history) for run in runs]
    ranked = sorted(
        (r for r in runs if r.summary["metrics"]["goodput_tps"]["value"] is not None),
        key=lambda r: -r.summary["metrics"]["goodput_tps"]["value"],
    )
    contrasts = (
        [compare_pair(ranked[0], ranked[1], f) for f in ("goodput_tps", "hallucination_rate")]
        if len(ranked) >= 2
        else []
    )
    questions: dict[str, dict[str, Any]] = {}
    for index, run in enumerate(runs):
        views = _question_views(run, index)
        for record in run.records:
            entry = questions.setdefault(
                record["id"],
                {
                    "id": record["id"],
                    "question": record.get("question", ""),
                    "reference": record.get("reference"),
                    "answers": [],
                },
            )
            entry["answers"].append(views[record["id"]])

    def metric(run: RunArtifacts, name: str) -> tuple[float | None, tuple[float, float] | None]:
        entry = run.summary["metrics"][name]
        low_high = entry["ci95"]
        return entry["value"], (low_high[0], low_high[1]) if low_high else None

    throughput_groups = [
        charts.BarGroup(
            label=run.name,
            values={
                "raw tok/s": metric(run, "tps")[0],
                "goodput tok/s": metric(run, "goodput_tps")[0],
            },
            intervals={"goodput tok/s": metric(run, "goodput_tps")[1]},
        )
        for run in runs
    ]
    figures = {
        "throughput": charts.grouped_bars(
            throughput_groups,
            ["raw tok/s", "goodput tok/s"],
            "Goodput against raw throughput",
            "tok/s",
        ),
        "verdicts": charts.stacked_shares(
            [(run.name, run.summary["claims"]) for run in runs], "Claim verdicts"
        ),
        "ttft": charts.latency_strips(
            [
                (
                    run.name,
                    [r["ttft_s"] for r in run.records if r.get("ttft_s") and not r.get("error")],
                )
                for run in runs
            ],
            "Time to first token per request",
        ),
        "e2e": charts.latency_strips(
            [
                (
                    run.name,
                    [r["e2e_s"] for r in run.records if r.get("e2e_s") and not r.get("error")],
                )
                for run in runs
            ],
            "End-to-end latency per request",
        ),
    }
    environment = Environment(
        loader=PackageLoader("auditor.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["num"] = _format_number
    environment.filters["duration"] = format_duration_ms
    environment.filters["pct"] = lambda v: "n/a" if v is None or math.isnan(v) else f"{v:.1%}"
    from markupsafe import Markup

    script = (files("auditor.report") / "templates" / "report.js").read_text(encoding="utf-8")

    return environment.get_template("report.html.j2").render(
        pipelines=pipelines,
        questions=list(questions.values()),
        figures={k: Markup(v) for k, v in figures.items()},  # built with escaped labels
        gate_results=list(gate_results),
        gates_passed=all(g.passed for g in gate_results),
        headline=headline(contrasts[0]) if contrasts else None,
        contrasts=contrasts,
        metrics=METRICS,
        key_metrics=KEY_METRICS,
        generated_at=utc_now(),
        version=__version__,
        script=Markup(script),  # our own static file, never model or document text
        # the CSP allows this one script by its hash instead of any inline script
        script_hash="sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode(),
    )


def format_duration_ms(value: float | None) -> str:
    """Milliseconds as a person reads them: "840 ms", "76.6 s", "12 min 5 s"."""
    if value is None or math.isnan(value):
        return "n/a"
    if abs(value) < 1000:
        return f"{value:.0f} ms"
    seconds = value / 1000
    if seconds < 600:
        return f"{seconds:.3g} s" if seconds < 100 else f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def _format_number(value: float | None, digits: int = 3) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"
