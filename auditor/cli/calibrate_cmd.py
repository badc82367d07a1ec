"""`auditor calibrate`: the judge's sensitivity and specificity on answers people labelled."""

from __future__ import annotations

import json
from pathlib import Path

import click

from auditor.calibrate import (
    CALIBRATION,
    build_calibration,
    calibration_folds,
    judge_section,
    labels_sha256,
    read_labels,
    settled_labels,
)
from auditor.cli.options import (
    examples_option,
    judge_options,
    judge_set_items,
    load_examples_option,
    load_judge_option,
)
from auditor.cli.progress import StderrProgress
from auditor.cli.terminal import engine_output_to
from auditor.config import config_sha256
from auditor.files import Read, check_output_dir, utc_now, write_json_atomic
from auditor.store import (
    CHECK_MANIFEST,
    CHECKS,
    ENGINE_LOG,
    MANIFEST,
    RECORDS,
    read_check_manifest,
    read_checks,
)
from auditor.verify.answers import answers_from_labels, items_from_rows, refuse_other_answers
from auditor.verify.check import check_run, import_answers

__all__ = ["calibrate"]


@click.command()
@click.option(
    "--labels",
    "labels_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Labelled answers (JSONL: id, question, contexts, answer, hallucinated, spans?).",
)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(path_type=Path), help="Calibration dir."
)
@judge_options
@click.option(
    "--domain",
    metavar="TEXT",
    help="What the labelled answers are about (e.g. 'Kestrel product docs, support questions'); "
    "reports show it next to the corrected rates.",
)
@examples_option
@click.option("--limit", type=click.IntRange(1), help="Only the first N labelled answers.")
@click.option("--json", "as_json", is_flag=True, help="Print the calibration as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def calibrate(
    labels_path: Path,
    out_dir: Path,
    judge_path: Path | None,
    judge_set: tuple[str, ...],
    set_alias: tuple[str, ...],
    domain: str | None,
    examples_path: Path | None,
    limit: int | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Check answers that people labelled and measure how the judge agrees with them.

    Writes OUT/checks.jsonl (resumable, like `check`) and OUT/calibration.json: the judge's
    identity, fingerprint and verdict settings, the labels' hash, size and domain, the
    threshold with the highest balanced accuracy, and answer- and claim-level sensitivity and
    specificity out-of-fold (5 folds by question, each judged at the threshold chosen on the
    others) with 95 % intervals, and the ROC of the answer score.

    With --examples (the labels file itself works: each answer is judged with the labels of
    the other answers to its question, never its own), the calibration is of the judge with
    examples, and applies to checks made with examples.
    """

    config = load_judge_option(judge_path, *judge_set_items(judge_set, set_alias))
    reads = [  # no file it writes lands on one it reads (the labels as --examples is fine)
        Read("--labels", labels_path),
        Read("--judge", judge_path),
        Read("--examples", examples_path),
        Read("the judge's examples", None if config.examples is None else Path(config.examples)),
    ]
    written = (MANIFEST, RECORDS, CHECKS, CHECK_MANIFEST, ENGINE_LOG, CALIBRATION)
    check_output_dir(out_dir, "--out", reads, written)
    # a calibration measures claim verdicts: the other metrics would cost judge time for nothing
    # (the metrics are not part of the fingerprint, so it still applies to the judge as audited)
    config = config.model_copy(update={"metrics": ["faithfulness"]})
    # everything that depends on the labels alone is refused before any engine starts
    settled = settled_labels(labels_path)
    labels = read_labels(labels_path)
    answers = answers_from_labels(labels_path, settled)
    chosen = [row["id"] for row in answers.rows][:limit]
    calibration_folds(
        [labels[ident] for ident in chosen],
        labels_path,
        "" if limit is None else f" (--limit {limit})",
    )
    refuse_other_answers(answers, out_dir)
    wanted = set(chosen)
    # examples are read and matched before anything is written (as `check` does)
    given = [item for item in items_from_rows(answers.rows, labels_path) if item.id in wanted]
    config, examples = load_examples_option(examples_path, config, given)
    items = [item for item in import_answers(answers, out_dir) if item.id in wanted]
    with engine_output_to(out_dir / ENGINE_LOG), StderrProgress(enabled=not quiet) as display:
        check_run(
            [(out_dir, items)],
            config,
            on_stage=display.say,
            on_check_start=lambda name, total: display.bar("checking labelled answers", total),
            on_batch=display.advance,
            on_calls=display.step,
            examples=examples,
        )
    checks = [row for row in read_checks(out_dir) if row["id"] in wanted]
    figures = build_calibration(checks, labels, labels_path)
    check_manifest = read_check_manifest(out_dir) or {}
    calibration = {
        "schema_version": figures["schema_version"],
        "created_at": utc_now(),
        # as the judge will run where this calibration applies: at its threshold
        "judge": judge_section(check_manifest["judge"], figures["threshold"])
        | {"name": config.name, "sha256": config_sha256(config)},
        "labels": {"path": str(labels_path), "sha256": labels_sha256(labels_path)},
        "domain": f"{labels_path.name}: {domain}" if domain else labels_path.name,
        # labelled answers the judge had as examples (None: judged without)
        "examples": check_manifest["judge"].get("examples"),
    } | figures
    write_json_atomic(out_dir / CALIBRATION, calibration)
    if as_json:
        click.echo(json.dumps(calibration, indent=2))
        return
    answer = calibration["answer_level"]
    folds = figures["out_of_fold"]["folds"]
    lines = [
        f"calibrated {config.name} on {figures['answers']} labelled answers "
        f"({figures['hallucinated']} hallucinated) -> {out_dir / CALIBRATION}",
        f"  threshold {figures['threshold']:.3f} (highest balanced accuracy, chosen on all); "
        f"out-of-fold ({folds} folds by question): "
        f"sensitivity {_share(answer['sensitivity'], answer['sensitivity_interval'])}, "
        f"specificity {_share(answer['specificity'], answer['specificity_interval'])}, "
        f"AUROC {answer['auroc']:.3f}",
    ]
    claim = calibration["claim_level"]
    if claim is not None:
        lines.append(
            f"  claims ({claim['claims']}), out-of-fold: sensitivity "
            f"{_share(claim['sensitivity'], claim['sensitivity_interval'])}, specificity "
            f"{_share(claim['specificity'], claim['specificity_interval'])}"
        )
    else:
        lines.append(
            f"  no claim level (claim rates stay as judged): {figures['claim_level_absent']}"
        )
    if examples is not None:
        lines.append(
            f"  with examples from {examples.path} (judge examples_in = {config.examples_in}): "
            "it applies to checks made with examples"
        )
    lines.append(
        f"  domain: {calibration['domain']}; use it with --calibration {out_dir} "
        "(check, audit, report)"
    )
    click.echo("\n".join(lines))


def _share(value: float | None, interval: list[float] | tuple[float, float] | None) -> str:
    if value is None or interval is None:
        return "n/a"
    return f"{value:.3f} ({interval[0]:.3f}-{interval[1]:.3f})"
