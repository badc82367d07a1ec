"""`auditor report`, `auditor history`, `auditor baseline`: reports and the audit history."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from auditor.audit import finish_audit
from auditor.cli.options import (
    calibration_option,
    labels_option,
    load_calibration_option,
    load_labels_option,
)
from auditor.config import CONTEXT_PRECISION_VERDICTS
from auditor.evidence.extracted import bundle_inputs
from auditor.files import Read, check_output_file, refuse_given_twice, refuse_output_on_input
from auditor.gates import parse_gate
from auditor.history import accept_baseline, default_history_path, list_audits
from auditor.results import SUMMARY

__all__ = [
    "baseline",
    "exit_on_failed_gates",
    "format_table",
    "gate_option",
    "history",
    "history_option",
    "report",
]


def history_option(func: Any) -> Any:
    return click.option(
        "--history",
        "history_path",
        type=click.Path(path_type=Path),
        default=None,
        help="Audit history database (default: $AUDITOR_HISTORY or reports/history.sqlite).",
    )(func)


def gate_option(func: Any) -> Any:
    return click.option(
        "--gate",
        "gate_texts",
        multiple=True,
        metavar="EXPR",
        help="A condition every pipeline must meet, e.g. 'faithfulness>=0.95', "
        "'ttft_p95_ms<=1500'; exit code 1 when one fails (the output is written all the same).",
    )(func)


def _history_path(given: Path | None) -> Path:

    return given or default_history_path()


def _value(summary: dict[str, Any], name: str) -> float | None:
    value = summary["metrics"][name]["value"]
    return None if value is None else float(value)


def format_table(runs: Sequence[Any]) -> str:
    """The comparison table of DESIGN.md, for the terminal (with the corrected rate and
    goodput beside the judged ones, and the calibration's domain under the table, when a
    calibration was given)."""
    calibrated = any(run.summary.get("calibration") for run in runs)
    reviewed = any(run.summary.get("reviewed") for run in runs)
    header: tuple[str, ...] = (
        "pipeline",
        "tok/s",
        "TTFT p95",
        "halluc. claims",
        *(("corrected",) if calibrated else ()),
        "ctx precision",
        "goodput tok/s",
        *(("corrected",) if calibrated else ()),
        *(("reviewed halluc. answers", "goodput reviewed") if reviewed else ()),
        "SLO goodput req/s",
    )
    rows = [header]
    for run in runs:
        s = run.summary

        def shown(name: str, fmt: str, scale: float = 1.0, s: dict[str, Any] = s) -> str:
            value = _value(s, name)
            if value is None:
                return (
                    "not measured"
                    if not s["throughput_measured"] and not name.startswith("hallucination_rate")
                    else "n/a"
                )
            return format(value * scale, fmt)

        rows.append(
            (
                run.name,
                shown("tps", ".1f"),
                shown("ttft_p95_ms", ".2f", 1 / 1000)
                + ("" if _value(s, "ttft_p95_ms") is None else " s"),
                shown("hallucination_rate", ".1%"),
                *((shown("hallucination_rate_corrected", ".1%"),) if calibrated else ()),
                shown("context_precision", ".2f"),
                shown("goodput_tps", ".1f"),
                *((shown("goodput_tps_corrected", ".1f"),) if calibrated else ()),
                *(_reviewed_cells(s) if reviewed else ()),
                shown("slo_goodput_rps", ".3f"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    table = "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )
    calibration = next(
        (run.summary["calibration"] for run in runs if run.summary.get("calibration")), None
    )
    if calibration is not None:
        table += f"\ncorrected with calibration {calibration.get('name') or calibration['path']} ({_domain(calibration)})"
    method = _context_precision_method(runs)
    return table if method is None else f"{table}\n{method}"


def _context_precision_method(runs: Sequence[Any]) -> str | None:
    """How the table's context precision verdicts were made: one line, naming each pipeline
    where they differ (None: no summary records it, e.g. one from before the setting)."""
    recorded = {
        run.name: CONTEXT_PRECISION_VERDICTS[verdict]
        for run in runs
        if (verdict := run.summary.get("context_precision_verdict")) in CONTEXT_PRECISION_VERDICTS
    }
    if not recorded:
        return None
    if len(set(recorded.values())) == 1:
        return f"ctx precision: {next(iter(recorded.values()))}"
    return "ctx precision: " + "; ".join(f"{name}, {how}" for name, how in recorded.items())


def _reviewed_cells(summary: dict[str, Any]) -> tuple[str, str]:
    """The reviewed answer rate with its interval and the number of labels behind it, and the
    goodput from the reviewed rate (n/a where the pipeline has no labels)."""
    review = summary.get("reviewed")
    if not review:
        return "no labels", "n/a"
    rate = review["answer_rate"]
    if rate is None:  # labels, none of them counting in a rate
        return "not reviewed", "n/a"
    goodput = review.get("goodput_tps")
    return (
        f"{rate['value']:.1%} ({rate['low']:.0%}-{rate['high']:.0%}, n={review['labels']})",
        "not measured" if goodput is None else f"{goodput:.1f}",
    )


def _reviewed_cell(summary: dict[str, Any]) -> str:
    review = summary.get("reviewed")
    if not review or not review.get("answer_rate"):
        return "-"
    return f"{review['answer_rate']['value']:.1%} ({review['labels']})"


def _domain(calibration: dict[str, Any]) -> str:
    """Where a calibration's labels come from, as a summary records it."""
    return str(calibration.get("domain") or f"labels {calibration['labels'].get('path')}")


def echo_outcome(outcome: Any, timings: Sequence[str] = ()) -> None:
    """Table, gate verdicts, where the report is and (an audit's) where the time went; exit
    code 1 when a gate failed."""
    click.echo(format_table(outcome.runs))
    for result in outcome.gate_results:
        click.echo(result.describe())
    click.echo(f"report: {outcome.report_path.resolve()}")
    for line in timings:
        click.echo(line)
    exit_on_failed_gates(outcome.gate_results)


def exit_on_failed_gates(results: Sequence[Any]) -> None:
    """`Error: gate failed: ...` on stderr and exit code 1 when a gate of `results` failed,
    as every command with --gate ends (audit, report, bundle)."""
    failed = [f"{r.gate} on {r.pipeline}" for r in results if not r.passed]
    if failed:
        click.echo(f"Error: gate failed: {'; '.join(failed)}", err=True)
        sys.exit(1)


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path),
    default=None,
    help="HTML file to write (default: report.html in the first run dir).",
)
@gate_option
@history_option
@calibration_option("report")
@labels_option
@click.option(
    "--record", is_flag=True, help="Also record these runs in the audit history (as an audit does)."
)
def report(
    run_dirs: tuple[Path, ...],
    out_path: Path | None,
    gate_texts: tuple[str, ...],
    history_path: Path | None,
    calibration_name: str | None,
    labels_path: Path | None,
    labels_outside: str,
    record: bool,
) -> None:
    """Render one self-contained HTML report from run dirs (no engine needed).

    Each RUN_DIR is a dir written by `auditor run` + `auditor check`, `auditor audit`, or
    `auditor check --answers`. Writes summary.json in each and the report to --out. Run dirs
    of an extracted bundle (BAG/data/runs/*) take the bundle's labels, calibration and gates
    unless given, and the report says whether it shows what the bundle's statement signed.
    """

    # run dirs of an extracted bundle: its labels, calibration and gates unless given, so that
    # the report shows the figures its statement signed (the report says where it does not)
    signed = bundle_inputs(run_dirs)
    if signed is not None:
        taken = []
        if labels_path is None and signed.labels is not None:
            labels_path, labels_outside = signed.labels, signed.labels_outside
            taken.append(f"--labels {labels_path}")
        if calibration_name is None and signed.calibration is not None:
            calibration_name = str(signed.calibration)
            taken.append(f"--calibration {calibration_name}")
        if not gate_texts and signed.gates:
            gate_texts = tuple(signed.gates)
            taken += [f"--gate '{text}'" for text in gate_texts]
        if taken:
            click.echo(f"from the bundle's statement: {' '.join(taken)}")
    gates = [parse_gate(text) for text in gate_texts]
    calibration = load_calibration_option(calibration_name)
    labels = load_labels_option(labels_path)
    history_db = _history_path(history_path)
    refuse_given_twice("RUN_DIR", run_dirs)
    # no output lands on an input or on another output: the run dirs take summary.json and
    # report.html alone, the history is read (and written with --record) whether or not it
    # exists yet
    target = out_path or run_dirs[0] / "report.html"
    files = [
        Read("--labels", labels_path),
        Read("--calibration", None if calibration is None else calibration.path),
    ]
    reads = [*(Read("RUN_DIR", d, folder=True, writes=("report.html",)) for d in run_dirs), *files]
    history = Read("--history", history_db, written=record)
    if out_path is not None:
        check_output_file(out_path, "--out", [*reads, history])
    report_file = Read("--out", target, written=True)  # given or not
    refuse_output_on_input(
        history_db, "--history", [*reads, report_file] if record else [report_file]
    )
    for run_dir in run_dirs:  # each run's summary.json
        refuse_output_on_input(run_dir, "RUN_DIR", [*files, history, report_file], (SUMMARY,))
    outcome = finish_audit(
        list(run_dirs),
        target,
        gates,
        history_db,
        record,
        calibration,
        labels=labels,
        labels_path=labels_path,
        labels_outside=labels_outside,
    )
    echo_outcome(outcome)


@click.command()
@history_option
@click.option(
    "--pipeline",
    metavar="NAME",
    help="Only audits of the pipeline of this name, as the pipeline column shows it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON on stdout.")
def history(history_path: Path | None, pipeline: str | None, as_json: bool) -> None:
    """List past audits, oldest first; * marks each pipeline's baseline."""

    path = _history_path(history_path)
    rows = list_audits(path, pipeline)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "recorded_at": r.recorded_at,
                        "pipeline": r.pipeline,
                        "run_dir": r.run_dir,
                        "baseline": r.baseline,
                        "gates_passed": r.gates_passed,
                        "statement_sha256": r.statement_sha256,
                        "metrics": {k: r.value(k) for k in r.summary.get("metrics", {})},
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
        return
    if not rows:
        click.echo(f"no audits recorded in {path}")
        return

    def cell(value: float | None, fmt: str) -> str:
        return "n/a" if value is None else format(value, fmt)

    click.echo(
        f"{'id':>4}  {'recorded (UTC)':<20} {'pipeline':<18} {'tok/s':>8} {'halluc.':>8} "
        f"{'corr.':>8} {'goodput':>8} {'corr.':>8} {'reviewed (n)':>14} {'gates':>5}  run dir"
    )
    for r in rows:
        gates = "-" if r.gates_passed is None else ("pass" if r.gates_passed else "FAIL")
        click.echo(
            f"{r.id:>4}{'*' if r.baseline else ' '} {r.recorded_at[:19]:<20} {r.pipeline:<18} "
            f"{cell(r.value('tps'), '.1f'):>8} {cell(r.value('hallucination_rate'), '.1%'):>8} "
            f"{cell(r.value('hallucination_rate_corrected'), '.1%'):>8} "
            f"{cell(r.value('goodput_tps'), '.1f'):>8} "
            f"{cell(r.value('goodput_tps_corrected'), '.1f'):>8} {_reviewed_cell(r.summary):>14} "
            f"{gates:>5}  {r.run_dir}"
        )


@click.group()
def baseline() -> None:
    """The audit each pipeline's later audits are compared with."""


@baseline.command("accept")
@click.argument("run_dir", type=click.Path(path_type=Path))
@history_option
def accept(run_dir: Path, history_path: Path | None) -> None:
    """Mark the recorded audit of RUN_DIR as its pipeline's baseline."""

    path = _history_path(history_path)
    row = accept_baseline(path, run_dir)
    click.echo(f"baseline for {row.pipeline}: audit {row.id} of {row.recorded_at} ({row.run_dir})")
