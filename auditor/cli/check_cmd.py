"""`auditor check`: every claim of every answer verified against its sources (checks.jsonl)."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict
from pathlib import Path

import click

from auditor.cli.options import (
    calibration_option,
    check_ray_option,
    examples_option,
    judge_options,
    judge_set_items,
    load_calibration_option,
    load_examples_option,
    load_judge_option,
    ray_options,
    sources_option,
)
from auditor.cli.progress import StderrProgress
from auditor.cli.terminal import engine_output_to
from auditor.errors import AuditorError
from auditor.files import Read, check_output_dir, refuse_output_on_input
from auditor.ingest.manifest import read_manifest
from auditor.scale.checking import ray_runner
from auditor.store import (
    CHECK_MANIFEST,
    CHECKS,
    ENGINE_LOG,
    MANIFEST,
    RECORDS,
    refuse_other_records,
    share_records,
)
from auditor.verify.answers import (
    choose_sources,
    items_from_rows,
    read_answers,
    refuse_other_answers,
)
from auditor.verify.check import (
    CheckSummary,
    check_run,
    import_answers,
    items_from_run,
    refuse_other_check,
    refuse_unresumable,
)

__all__ = ["check"]

CHECK_WRITES = (CHECKS, CHECK_MANIFEST, ENGINE_LOG)
"""What `check` writes in a run dir (`--answers` adds the run's manifest and records)."""


@click.command()
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option(
    "--answers",
    "answers_path",
    type=click.Path(path_type=Path),
    help="Audit answers produced elsewhere (JSONL: id, question, contexts, answer, reference?).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="Where --answers writes its run dir; with RUN_DIR, a new run dir sharing its records "
    "(manifest and answers copied), checked anew: with another judge, calibration or examples "
    "than the one that checked RUN_DIR.",
)
@click.option(
    "--index",
    "kb_index",
    type=click.Path(path_type=Path),
    help="The trusted knowledge base (an index dir) that claims are looked up in.",
)
@sources_option
@judge_options
@calibration_option("check")
@examples_option
@ray_options("check")
@click.option("--limit", type=click.IntRange(1), help="Only the first N answers.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def check(
    run_dir: Path | None,
    answers_path: Path | None,
    out_dir: Path | None,
    kb_index: Path | None,
    sources: str,
    judge_path: Path | None,
    judge_set: tuple[str, ...],
    set_alias: tuple[str, ...],
    calibration_name: str | None,
    examples_path: Path | None,
    ray: str | None,
    ray_actors: int | None,
    limit: int | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Split each answer of RUN_DIR into claims and check each against the retrieved chunks.

    Writes RUN_DIR/checks.jsonl (claims with spans, verdicts, reasons and supporting chunk
    ids; faithfulness, context precision, answer relevancy, context recall; judge usage).
    Re-running resumes (checks made by another judge configuration, calibration or examples are
    never resumed: check into a new run dir with --out). With --calibration the judge decides at the calibration's threshold,
    so that `auditor report --calibration` can correct the rates.
    """

    if (run_dir is None) == (answers_path is None):
        raise click.UsageError("give RUN_DIR, or --answers FILE with --out DIR")
    # RUN_DIR --out NEW: a new run dir sharing RUN_DIR's records, checked anew (another judge,
    # calibration or examples than the one that checked RUN_DIR)
    forked = run_dir is not None and out_dir is not None
    if answers_path is not None and out_dir is None:
        raise click.UsageError("--answers needs --out DIR")
    if out_dir is not None:
        check_output_dir(out_dir, "--out")
    config = load_judge_option(judge_path, *judge_set_items(judge_set, set_alias))
    calibration = load_calibration_option(calibration_name)
    if calibration is not None:  # another judge's calibration fails before any engine starts
        config = calibration.judge_config(config)
    # no file it writes lands on one it reads
    reads = [
        Read("RUN_DIR", run_dir, folder=True, writes=CHECK_WRITES),
        Read("--answers", answers_path),
        Read("--judge", judge_path),
        Read("--calibration", None if calibration is None else calibration.path),
        Read("--examples", examples_path),
        Read("the judge's examples", None if config.examples is None else Path(config.examples)),
        Read("--index", kb_index, folder=True),
    ]
    if out_dir is not None:
        refuse_output_on_input(out_dir, "--out", reads, (MANIFEST, RECORDS, *CHECK_WRITES))
    else:
        assert run_dir is not None
        refuse_output_on_input(run_dir, "RUN_DIR", reads, CHECK_WRITES)
    # every input is validated before a file is written, an engine started or a cluster joined
    answers = None
    if answers_path is not None:
        assert out_dir is not None
        answers, target = read_answers(answers_path), out_dir
        refuse_other_answers(answers, out_dir)
        items = items_from_rows(answers.rows, answers_path)
    else:
        assert run_dir is not None
        items, target = items_from_run(run_dir), out_dir if forked and out_dir else run_dir
        if forked:
            refuse_other_records(run_dir, target)
    if kb_index is not None:
        read_manifest(kb_index)  # BadInput naming the dir when it is no index
    check_ray_option(ray)
    choose_sources(items[:limit], target, sources, kb_index)
    refuse_unresumable(target, items[:limit], kb_index)
    config, examples = load_examples_option(examples_path, config, items[:limit])
    refuse_other_check(target, config, examples)
    if forked:
        assert run_dir is not None
        share_records(run_dir, target)
    if answers is not None:
        items = import_answers(answers, target)
    items = items[:limit]
    choose_sources(items, target, sources, kb_index)
    with engine_output_to(target / ENGINE_LOG), StderrProgress(enabled=not quiet) as display:
        (summary,) = check_run(
            [(target, items)],
            config,
            on_stage=display.say,
            on_check_start=lambda name, total: display.bar("checking answers", total),
            on_batch=display.advance,
            on_calls=display.step,
            kb_index=kb_index,
            open_runner=(
                None
                if ray is None
                else ray_runner(ray, ray_actors, config, kb_index, on_stage=display.say)
            ),
            examples=examples,
        )
    if as_json:
        click.echo(
            json.dumps(
                asdict(summary)
                | {"out_dir": str(target), "hallucination_rate": summary.hallucination_rate}
                | (
                    {}
                    if calibration is None
                    else {"calibration": calibration.label, "threshold": config.support_threshold}
                ),
                indent=2,
            )
        )
    else:
        _print_summary(summary, target)
        if calibration is not None:
            click.echo(
                f"  judged at calibration {calibration.label}'s threshold "
                f"{config.support_threshold:g}: `auditor report {shlex.quote(str(target))} "
                f"--calibration {shlex.quote(calibration.label)}` corrects the rates"
            )
    if summary.judge_failed_throughout:
        raise AuditorError(
            f"the judge failed on every claim ({summary.unverifiable} unverifiable, "
            f"{summary.outcomes.get('judge_failed', 0)} answers judge_failed): see judge_failures "
            f"in {target / 'checks.jsonl'}; fix the judge, remove that file and check again"
        )


def _print_summary(summary: CheckSummary, target: Path) -> None:
    rate = summary.hallucination_rate
    computed = (
        summary.judge_prompt_tokens - summary.judge_cached_tokens + summary.judge_completion_tokens
    )
    per_claim = computed / summary.claims if summary.claims else 0
    click.echo(
        f"checked {summary.answers} answers -> {target / 'checks.jsonl'}\n"
        f"  claims {summary.claims}: {summary.supported} supported, {summary.unsupported} unsupported, "
        f"{summary.contradicted} contradicted, {summary.unverifiable} unverifiable\n"
        f"  hallucinated-claim rate {'n/a' if rate is None else f'{rate:.3f}'}; outcomes "
        + ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items()))
        + f"\n  judge: {summary.judge_calls} calls, {per_claim:.0f} tokens computed per claim "
        f"({summary.judge_cached_tokens} prompt tokens from the prefix cache), {summary.judge_seconds:.1f} s"
    )
