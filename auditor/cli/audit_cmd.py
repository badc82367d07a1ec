"""`auditor audit`: run, check and report over one or several pipelines, with gates."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from auditor.audit import AUDIT_FILES, AuditOutcome, finish_audit, plan_audit, run_audit
from auditor.calibrate import Calibration
from auditor.cli.bundle_cmd import passphrase_option, read_passphrase
from auditor.cli.options import (
    calibration_option,
    check_ray_option,
    examples_option,
    judge_option,
    labels_option,
    load_calibration_option,
    load_examples_option,
    load_judge_option,
    load_labels_option,
    ray_options,
    sources_option,
)
from auditor.cli.progress import StderrProgress
from auditor.cli.report_cmd import _history_path, echo_outcome, gate_option, history_option
from auditor.cli.run_cmd import _RunProgress
from auditor.cli.terminal import engine_output_to
from auditor.cli.traces_cmd import TRACES_WRITES
from auditor.config import load_pipeline, resolve_pipeline_path
from auditor.errors import BadInput
from auditor.evidence.build import check_bundle_output, plan_bundle, write_bundle
from auditor.evidence.keys import load_private_key
from auditor.files import (
    Read,
    check_output_dir,
    refuse_given_twice,
    refuse_output_on_input,
    write_json_atomic,
)
from auditor.gates import Gate, parse_gate
from auditor.history import check_history, record_statement
from auditor.questions import load_questions
from auditor.results import SUMMARY
from auditor.review import REVIEW, ReviewLabel, check_audit_labels, check_audit_sample
from auditor.store import CHECK_MANIFEST, CHECKS, ENGINE_LOG, MANIFEST, RECORDS
from auditor.timings import TIMINGS, StageTimes
from auditor.traces import Window
from auditor.traffic import parse_slo
from auditor.traffic_audit import TrafficWindow, import_windows, parse_window, traffic_targets
from auditor.verify.answers import AnswerItem
from auditor.verify.check import check_run

__all__ = ["audit"]


@click.command()
@click.option(
    "--pipeline",
    "pipelines",
    multiple=True,
    metavar="PIPELINE",
    help="A pipeline to audit: a file, or a NAME: NAME.toml from the first of "
    "$AUDITOR_PIPELINES, ./pipelines and the auditor's pipelines/ that has it; repeat to "
    "compare several.",
)
@click.option(
    "--questions",
    "questions_path",
    type=click.Path(path_type=Path),
    help="Question set (JSONL: id, question, optional reference); with --pipeline.",
)
@click.option(
    "--index",
    "index_dir",
    type=click.Path(path_type=Path),
    help="Index dir from `auditor ingest` (with --traces: the knowledge base that traces "
    "recording no passages are checked against).",
)
@click.option(
    "--traces",
    "trace_exports",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="EXPORT",
    help="Audit real traffic instead of pipelines: an OTLP JSON trace export (repeat for "
    "several files of one export); see `auditor traces`.",
)
@click.option(
    "--window",
    "window_texts",
    multiple=True,
    metavar="NAME=SINCE..UNTIL",
    help="With --traces: a window of traffic to audit, named (repeat to compare, e.g. "
    "last-week=2026-11-23..2026-11-30 this-week=2026-11-30..2026-12-07); one over the whole "
    "export when left out.",
)
@click.option("--service", help="With --traces: only traces with a span of this service.")
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    help="With --traces: check N answers of each window, drawn uniformly (seed --seed).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample's draw.")
@click.option(
    "--slo",
    "slo_items",
    multiple=True,
    metavar="KEY=MS",
    help="With --traces: a latency SLO (ttft_ms, tpot_ms, e2e_ms), e.g. --slo ttft_ms=1500.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Audit dir: one run dir per pipeline and report.html (re-run to resume).",
)
@judge_option
@click.option(
    "--judge-set",
    "judge_set",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a judge config key, e.g. --judge-set 'metrics=[\"faithfulness\"]'.",
)
@click.option("--limit", type=click.IntRange(1), help="Only the first N questions.")
@sources_option
@gate_option
@history_option
@calibration_option("audit")
@examples_option
@labels_option
@click.option(
    "--review",
    "review",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Also draw N answers of each pipeline for people to review (as `auditor review`): "
    "the report's review section shows them.",
)
@ray_options("audit")
@click.option(
    "--bundle",
    "bundle_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="OUT",
    help="Also write the signed audit bundle (as `auditor bundle`) to OUT at the end, and "
    "record its statement digest in the history; needs --key.",
)
@click.option(
    "--key",
    "key_path",
    type=click.Path(path_type=Path),
    default=None,
    help="The private key that signs --bundle (auditor keygen).",
)
@passphrase_option
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def audit(
    pipelines: tuple[str, ...],
    questions_path: Path | None,
    index_dir: Path | None,
    out_dir: Path,
    judge_path: Path | None,
    judge_set: tuple[str, ...],
    limit: int | None,
    sources: str,
    gate_texts: tuple[str, ...],
    history_path: Path | None,
    calibration_name: str | None,
    examples_path: Path | None,
    labels_path: Path | None,
    labels_outside: str,
    review: int | None,
    ray: str | None,
    ray_actors: int | None,
    bundle_path: Path | None,
    key_path: Path | None,
    passphrase_env: str | None,
    quiet: bool,
    trace_exports: tuple[Path, ...] = (),
    window_texts: tuple[str, ...] = (),
    service: str | None = None,
    sample: int | None = None,
    seed: int = 0,
    slo_items: tuple[str, ...] = (),
) -> None:
    """Audit pipelines end to end: answer, check every claim, report, record, gate.

    Writes OUT/<pipeline>/ (records.jsonl, checks.jsonl, summary.json) for each pipeline and
    OUT/report.html; records the audit in the history database; ends with where the time
    went, stage by stage (also in OUT/timings.json). Exit code 0 when every gate holds, 1 when
    one fails, 2 on bad input.
    """

    times = StageTimes()  # the audit's clock starts with the command
    times.before = stages_before(os.environ.get(MAKE_CLOCK), os.environ.get(MAKE_STARTED))
    traffic_given = bool(window_texts or service or sample or slo_items)
    if trace_exports:
        _refuse_with_traces(pipelines, questions_path, limit, labels_path, ray, bundle_path)
        outcome = _audit_traffic(
            trace_exports,
            [parse_window(text) for text in window_texts],
            out_dir,
            index_dir=index_dir,
            service=service,
            sample=sample,
            seed=seed,
            slo=parse_slo(slo_items) if slo_items else None,
            judge_path=judge_path,
            judge_set=judge_set,
            sources=sources,
            gate_texts=gate_texts,
            history_path=_history_path(history_path),
            calibration_name=calibration_name,
            examples_path=examples_path,
            review=review,
            quiet=quiet,
            times=times,
        )
        _finish(outcome, review, out_dir, times, [])
        return
    if traffic_given:
        raise BadInput(
            "--window, --service, --sample and --slo go with --traces; give --traces EXPORT"
        )
    for given, option in (
        (pipelines, "--pipeline"),
        (questions_path, "--questions"),
        (index_dir, "--index"),
    ):
        if not given:
            raise BadInput(f"missing option {option} (or audit real traffic with --traces EXPORT)")
    assert questions_path is not None and index_dir is not None
    with times.time("input checks"):
        gates = [parse_gate(text) for text in gate_texts]  # bad gates fail before any engine
        configs = [load_pipeline(resolve_pipeline_path(p)) for p in pipelines]
        judge_config = load_judge_option(judge_path, judge_set, "--judge-set")
        calibration = load_calibration_option(calibration_name)
        if calibration is not None:  # another judge's calibration fails before any engine
            judge_config = calibration.judge_config(judge_config, flag="--judge-set")
        labels = load_labels_option(labels_path)
        reads = [  # no file it writes lands on one it reads
            *(Read("--pipeline", resolve_pipeline_path(p)) for p in pipelines),
            Read("--questions", questions_path),
            Read("--index", index_dir, folder=True),
            Read("--judge", judge_path),
            Read("--calibration", None if calibration is None else calibration.path),
            Read("--examples", examples_path),
            Read(
                "the judge's examples",
                None if judge_config.examples is None else Path(judge_config.examples),
            ),
            Read("--labels", labels_path),
            Read("--key", key_path),
        ]
        per_run = (MANIFEST, RECORDS, CHECKS, CHECK_MANIFEST, SUMMARY, REVIEW, ENGINE_LOG)
        written = [f"{c.name}/{name}" for c in configs for name in per_run]
        out_files = [*AUDIT_FILES, ENGINE_LOG, *written]
        check_output_dir(out_dir, "--out", reads, out_files)
        # the history is written too (existing or not): on no input, and on none of --out's files
        history = Read("--history", _history_path(history_path), written=True)
        outputs = [Read("--out", out_dir / name, written=True) for name in out_files]
        assert history.path is not None
        refuse_output_on_input(history.path, "--history", [*reads, *outputs])
        signing_key = _bundle_key(bundle_path, key_path, passphrase_env, out_dir, [*reads, history])
        # every input is validated before a file is written or an engine started
        run_dirs = plan_audit(
            configs, questions_path, index_dir, out_dir, limit, _history_path(history_path)
        )
        questions = load_questions(questions_path)[:limit]
        if labels:
            names = [config.name for config in configs]
            by_name = dict(zip(names, run_dirs, strict=True))
            check_audit_labels(labels, by_name, [q.id for q in questions])
            check_audit_sample(labels, by_name, [q.id for q in questions], review, labels_outside)
        # the answers to come, as examples see them: by question text (run records carry no
        # source_id)
        asked = [AnswerItem(q.id, q.question, "", q.reference, []) for q in questions]
        judge_config, examples = load_examples_option(examples_path, judge_config, asked)
        check_ray_option(ray)
    with engine_output_to(out_dir / ENGINE_LOG), StderrProgress(enabled=not quiet) as display:

        def on_check_start(name: str, total: int) -> None:
            display.bar(f"checking {name}", total)

        outcome = run_audit(
            configs,
            questions_path,
            index_dir,
            out_dir,
            judge_config,
            gates=gates,
            history_path=_history_path(history_path),
            limit=limit,
            run_callbacks=_RunProgress(display),
            on_stage=display.say,
            on_check_start=on_check_start,
            on_check_batch=display.advance,
            on_check_calls=display.step,
            calibration=calibration,
            labels=labels,
            labels_path=labels_path,
            labels_outside=labels_outside,
            review=review,
            sources=sources,
            ray=ray,
            ray_actors=ray_actors,
            examples=examples,
            times=times,
        )
    notes = []
    if bundle_path is not None and signing_key is not None:
        with times.time("bundle"):
            notes.append(
                _write_bundle(
                    outcome,
                    bundle_path,
                    signing_key,
                    calibration,
                    labels,
                    labels_path,
                    labels_outside,
                    gates,
                    index_dir,
                    questions_path,
                    _history_path(history_path),
                )
            )
    _finish(outcome, review, out_dir, times, notes)


def _finish(
    outcome: AuditOutcome, review: int | None, out_dir: Path, times: StageTimes, notes: list[str]
) -> None:
    """The results on stdout (exit 1 when a gate failed), where the time went on stderr."""
    if review:
        notes.append(
            f"review: {review} answers of each pipeline drawn; open "
            f"{(outcome.report_path.resolve()).as_uri()}#review, mark each (y/n), Download "
            f"labels, then: auditor report {' '.join(str(r.run_dir) for r in outcome.runs)} "
            "--labels labels.jsonl"
        )
    try:
        echo_outcome(outcome, notes)  # exits 1 when a gate failed
    finally:  # where the time went, last, on stderr (stdout keeps the results)
        click.echo(f"where the time went (wall seconds; also in {out_dir / TIMINGS}):", err=True)
        for line in times.lines():
            click.echo(line, err=True)


def _refuse_with_traces(
    pipelines: tuple[str, ...],
    questions_path: Path | None,
    limit: int | None,
    labels_path: Path | None,
    ray: str | None,
    bundle_path: Path | None,
) -> None:
    """What an audit of traffic does not take, refused in one line with where it goes."""
    for given, option, instead in (
        (pipelines, "--pipeline", "audit pipelines and traffic apart, then `auditor report` both"),
        (questions_path, "--questions", "traffic brings its own questions"),
        (limit, "--limit", "give --sample N"),
        (labels_path, "--labels", "give the labels to `auditor report RUN_DIR... --labels`"),
        (ray, "--ray", "import with `auditor traces`, then `auditor check RUN_DIR --ray`"),
        (bundle_path, "--bundle", "bundle the run dirs with `auditor bundle`"),
    ):
        if given:
            raise BadInput(f"{option} does not go with --traces: {instead}")


def _audit_traffic(
    exports: tuple[Path, ...],
    windows: list[TrafficWindow],
    out_dir: Path,
    *,
    index_dir: Path | None,
    service: str | None,
    sample: int | None,
    seed: int,
    slo: dict[str, float] | None,
    judge_path: Path | None,
    judge_set: tuple[str, ...],
    sources: str,
    gate_texts: tuple[str, ...],
    history_path: Path,
    calibration_name: str | None,
    examples_path: Path | None,
    review: int | None,
    quiet: bool,
    times: StageTimes,
) -> AuditOutcome:
    """Import each window, check its sample, then summaries, gates, history and the report;
    every input checked and every import written before the judge starts."""
    windows = windows or [TrafficWindow(service or "traffic", Window())]
    with times.time("input checks"):
        gates = [parse_gate(text) for text in gate_texts]
        judge_config = load_judge_option(judge_path, judge_set, "--judge-set")
        calibration = load_calibration_option(calibration_name)
        if calibration is not None:
            judge_config = calibration.judge_config(judge_config, flag="--judge-set")
        refuse_given_twice("--traces", list(exports))
        for path in exports:
            if not path.is_file():
                raise BadInput(f"--traces {path}: no such trace export (give OTLP JSON files)")
        reads = [
            *(Read("--traces", path) for path in exports),
            Read("--index", index_dir, folder=True),
            Read("--judge", judge_path),
            Read("--calibration", None if calibration is None else calibration.path),
            Read("--examples", examples_path),
        ]
        per_run = (*TRACES_WRITES, CHECKS, CHECK_MANIFEST, SUMMARY, REVIEW, ENGINE_LOG)
        out_files = [*AUDIT_FILES, ENGINE_LOG, *(f"{w.name}/{n}" for w in windows for n in per_run)]
        for window in windows:
            if window.name in AUDIT_FILES:
                raise BadInput(
                    f"--window {window.name}: the name of a file the audit writes; rename it"
                )
        check_output_dir(out_dir, "--out", reads, out_files)
        outputs = [Read("--out", out_dir / name, written=True) for name in out_files]
        refuse_output_on_input(history_path, "--history", [*reads, *outputs])
        check_history(history_path)
    # engine output to the log first, then the progress (as run_audit): the progress writes
    # to the terminal the redirection keeps
    with engine_output_to(out_dir / ENGINE_LOG), StderrProgress(enabled=not quiet) as display:
        with times.time("import"):
            imported = import_windows(
                exports,
                windows,
                out_dir,
                service=service,
                sample=sample,
                seed=seed,
                slo=slo,
                on_stage=display.say,
            )
        run_dirs = [run_dir for run_dir, _ in imported]
        with times.time("checking set-up"):
            targets = traffic_targets(run_dirs, sources, index_dir)
            asked = [item for _, items in targets for item in items]
            judge_config, examples = load_examples_option(examples_path, judge_config, asked)
        with times.time("checking"):
            check_run(
                targets,
                judge_config,
                kb_index=index_dir,
                on_stage=display.say,
                on_check_start=lambda name, total: display.bar(f"checking {name}", total),
                on_batch=display.advance,
                on_calls=display.step,
                examples=examples,
            )
        with times.time("summaries, gates and report"):
            outcome = finish_audit(
                run_dirs,
                out_dir / "report.html",
                gates,
                history_path,
                record=True,
                calibration=calibration,
                review=review,
            )
    times.stop()
    write_json_atomic(out_dir / TIMINGS, times.to_json(status="complete"))
    outcome.times = times
    return outcome


def _bundle_key(
    bundle_path: Path | None,
    key_path: Path | None,
    passphrase_env: str | None,
    out_dir: Path,
    reads: list[Read],
) -> Ed25519PrivateKey | None:
    """The key that signs --bundle, read (passphrase asked) before any engine starts, and the
    bundle's path checked; None without --bundle."""
    if (bundle_path is None) != (key_path is None):
        raise BadInput("--bundle and --key go together: give both, or neither")
    if bundle_path is None or key_path is None:
        return None
    check_bundle_output(
        bundle_path, False, [*reads, Read("--out", out_dir, folder=True)], "--bundle", ""
    )
    return load_private_key(key_path, read_passphrase(passphrase_env))


def _write_bundle(
    outcome: AuditOutcome,
    bundle_path: Path,
    key: Ed25519PrivateKey,
    calibration: Calibration | None,
    labels: list[ReviewLabel] | None,
    labels_path: Path | None,
    labels_outside: str,
    gates: list[Gate],
    index_dir: Path,
    questions_path: Path,
    history: Path,
) -> str:
    """The audit's bundle, and its statement digest in each run's history row."""
    run_dirs = [run.run_dir for run in outcome.runs]
    plan = plan_bundle(
        run_dirs,
        calibration=calibration,
        labels=labels,
        labels_path=labels_path,
        labels_outside=labels_outside,
        gates=gates,
        index_dir=index_dir,
        questions=[questions_path],
    )
    envelope = write_bundle(plan, key, bundle_path)
    record_statement(history, run_dirs, envelope.statement_sha256)
    return f"bundle: {bundle_path} (statement sha256 {envelope.statement_sha256})"


# make demo's clock (the Makefile's setup recipe writes the file): set-up and ingest ran before
# this command; the table shows them above the audit's own stages
MAKE_CLOCK = "AUDITOR_MAKE_CLOCK"
MAKE_STARTED = "AUDITOR_MAKE_STARTED"


def stages_before(
    clock: str | None, make_started: str | None, now: float | None = None
) -> dict[str, float]:
    """The stages before the audit from a clock file of `NAME EPOCH_SECONDS` lines: `started`
    and `set-up` (when set-up began and ended); ingest is the rest up to now (with the two
    commands' own start-up). Nothing without the file, or when it was written before this
    make began (`make_started`, epoch seconds: set-up ran for another target)."""
    if not clock or not make_started:
        return {}
    try:
        began = float(make_started)
        lines = Path(clock).read_text(encoding="utf-8").splitlines()
        stamps = {name: float(value) for name, value in (line.split() for line in lines if line)}
    except (OSError, ValueError):
        return {}
    now = time.time() if now is None else now
    if not {"started", "set-up"} <= stamps.keys():
        return {}
    if not began - 1.0 <= stamps["started"] <= stamps["set-up"] <= now:
        return {}
    return {
        "make demo: set-up": stamps["set-up"] - stamps["started"],
        "make demo: ingest": now - stamps["set-up"],
    }
