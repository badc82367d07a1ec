"""`auditor traces`: production traces (OTLP JSON exports) imported as a run dir."""

from __future__ import annotations

import json
from pathlib import Path

import click

from auditor.cli.terminal import terminal
from auditor.errors import BadInput
from auditor.files import Read, check_output_dir, refuse_given_twice
from auditor.traces import Window, import_traces, parse_moment
from auditor.traffic import parse_slo

__all__ = ["traces"]

# what `traces` writes in its --out dir
TRACES_WRITES = ("manifest.json", "records.jsonl", "population.jsonl", "skipped.jsonl")


@click.command()
@click.argument("exports", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="The run dir to write (importing again into it resumes, or adds what an export gained).",
)
@click.option("--since", help="Traces that start at or after this (ISO date or date-time, UTC).")
@click.option("--until", help="Traces that start before this (ISO date or date-time, UTC).")
@click.option(
    "--service",
    help="Only traces with a span of this service (resource service.name); all when left out.",
)
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    help="Check N answers drawn uniformly from the window (rates then refer to the window).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the --sample draw.")
@click.option(
    "--slo",
    "slo_items",
    multiple=True,
    metavar="KEY=MS",
    help="A latency SLO the window's requests are held to: ttft_ms, tpot_ms or e2e_ms "
    "(repeat for several), e.g. --slo ttft_ms=1500 --slo e2e_ms=6000.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was imported as JSON on stdout.")
def traces(
    exports: tuple[Path, ...],
    out_dir: Path,
    since: str | None,
    until: str | None,
    service: str | None,
    sample: int | None,
    seed: int,
    slo_items: tuple[str, ...],
    as_json: bool,
) -> None:
    """Import OpenTelemetry trace EXPORTS (OTLP JSON, the collector's file exporter; .gz too)
    into a run dir: one record per user request, with its question, answer, passages and the
    timings its spans hold; then `auditor check`, `review`, `report` as for any run.

    Reads OpenInference (LlamaIndex, Phoenix), OTel GenAI and vLLM server spans
    (docs/traces.md). Starts no engine.
    """
    window = Window(
        None if since is None else parse_moment(since, "--since"),
        None if until is None else parse_moment(until, "--until"),
    )
    if window.since and window.until and window.since >= window.until:
        raise BadInput(f"--since {since} is not before --until {until}; give a window")
    slo = parse_slo(slo_items) if slo_items else None
    refuse_given_twice("EXPORTS", list(exports))
    for path in exports:
        if not path.is_file():
            raise BadInput(f"{path}: no such trace export (give OTLP JSON files)")
    reads = [Read("EXPORTS", path) for path in exports]
    check_output_dir(out_dir, "--out", reads, TRACES_WRITES)
    said = terminal()
    found = import_traces(
        list(exports),
        out_dir,
        window=window,
        service=service,
        sample=sample,
        seed=seed,
        slo=slo,
        progress=lambda line: click.echo(line, file=said),
    )
    for line in found.lines():
        click.echo(line, file=said)
    click.echo(
        f"wrote {out_dir} ({found.added:,} new record(s)); next: auditor check {out_dir}", file=said
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "out": str(out_dir),
                    "traces_seen": found.traces_seen,
                    "traces_in_window": found.traces_in_window,
                    "traces_imported": found.traces_imported,
                    "answers": found.answers,
                    "records": found.records,
                    "added": found.added,
                    "skipped": dict(found.skipped),
                }
            )
        )
