"""`auditor run`: retrieval-augmented generation with per-request throughput and latency."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from auditor.cli.options import (
    check_ray_option,
    index_option,
    pipeline_options,
    questions_option,
    ray_options,
    resolve_config,
)
from auditor.cli.progress import StderrProgress
from auditor.cli.terminal import engine_output_to
from auditor.config import resolve_pipeline_path
from auditor.files import Read, check_output_dir
from auditor.formatting import format_duration_ms
from auditor.run import RunCallbacks, RunSummary, plan_run, run_pipeline
from auditor.scale.generation import cluster_generators
from auditor.store import ENGINE_LOG, MANIFEST, RECORDS

__all__ = ["run"]


@click.command()
@pipeline_options("run")
@questions_option
@index_option
@click.option(
    "--out",
    "run_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Run dir to write (or resume).",
)
@click.option("--limit", type=click.IntRange(1), help="Only the first N questions.")
@ray_options("run")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def run(
    pipeline: str | None,
    set_items: tuple[str, ...],
    questions_path: Path,
    index_dir: Path,
    run_dir: Path,
    limit: int | None,
    ray: str | None,
    ray_actors: int | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Answer every question through the pipeline and record timings per request.

    Writes RUN_DIR/manifest.json and RUN_DIR/records.jsonl. Re-running the same command
    resumes an interrupted run without duplicating or losing a record.
    """

    if pipeline is None:
        raise click.UsageError(
            "--pipeline is required (a file, or NAME.toml in $AUDITOR_PIPELINES, ./pipelines or "
            "the auditor's pipelines/)"
        )
    config = resolve_config(pipeline, set_items, {})
    reads = [  # no file it writes lands on one it reads
        Read("--pipeline", resolve_pipeline_path(pipeline)),
        Read("--questions", questions_path),
        Read("--index", index_dir, folder=True),
    ]
    check_output_dir(run_dir, "--out", reads, (MANIFEST, RECORDS, ENGINE_LOG))
    # every input is validated before a file is written or a cluster joined
    plan_run(config, questions_path, index_dir, run_dir, limit)
    check_ray_option(ray)
    with (
        engine_output_to(run_dir / ENGINE_LOG),
        StderrProgress(enabled=not quiet) as display,
        cluster_generators(ray, ray_actors) as on_cluster,
    ):
        summary = run_pipeline(
            config,
            questions_path,
            index_dir,
            run_dir,
            limit=limit,
            callbacks=_RunProgress(display),
            generator_factory=on_cluster,
        )
    if as_json:
        click.echo(json.dumps(asdict(summary) | {"run_dir": str(summary.run_dir)}, indent=2))
    else:
        click.echo(format_summary(config.name, summary))


def _ms(seconds: float | None) -> str:

    return format_duration_ms(None if seconds is None else seconds * 1000)


def format_summary(name: str, summary: RunSummary) -> str:
    """A few lines: throughput with its load regime, TTFT p50/p95, errors."""
    regime = summary.regime
    if regime.get("mode") == "server":
        rate = regime.get("request_rate")
        load = f"server, concurrency {regime.get('concurrency')}" + (
            f", {rate:g} req/s" if rate else ""
        )
    elif regime.get("mode") == "in-process":
        load = f"in-process pipeline, concurrency {regime.get('concurrency')}"
    elif regime.get("engines"):
        load = (
            f"offline batch over {regime['engines']} engine{'s' if regime['engines'] != 1 else ''} "
            "(Ray), "
            f"up to {regime.get('batch_size')} requests each"
        )
    elif regime:
        load = f"offline batch of {regime.get('batch_size')}"
    else:
        load = "no generation this session"
    tps = "n/a" if summary.tokens_per_s is None else f"{summary.tokens_per_s:.1f} tok/s"
    lines = [
        f"{name}: {summary.completed}/{summary.requests} answered, {summary.errors} errors "
        f"-> {summary.run_dir}",
        f"  throughput {tps} ({summary.output_tokens} output tokens in {summary.generation_s:.1f} s; {load})",
        f"  TTFT p50 {_ms(summary.ttft_p50_s)}, p95 {_ms(summary.ttft_p95_s)}; "
        f"TPOT p50 {_ms(summary.tpot_p50_s)}; e2e p95 {_ms(summary.e2e_p95_s)}",
    ]
    if summary.skipped:
        lines.append(f"  {summary.skipped} questions were already recorded (resumed)")
    return "\n".join(lines)


class _RunProgress(RunCallbacks):
    """Stage lines, model preparation and generation bars, error warnings: all on stderr."""

    def __init__(self, display: StderrProgress) -> None:
        self.display = display

    def stage(self, message: str) -> None:
        self.display.say(message)

    def bytes(self, done: int, total: int) -> None:
        if not self.display.active:
            self.display.bar("  joining model parts", total, unit="bytes")
        self.display.update(done)

    def start_generation(self, total: int) -> None:
        self.display.bar("generating", total)

    def result(self, record: dict[str, Any]) -> None:
        self.display.advance()
        if record.get("error") and self.display.enabled:
            self.display.warn(f"{record['id']}: {record['error']}")
