"""`auditor audit`: run, check and report, chained over one or several pipelines.

Engines run one after another (2-core machines hold one at a time): every pipeline's
generator answers and is freed, then one judge checks every run dir. A pipeline whose
in-process engine is the judge's (same weights, dtype and engine settings: the demo's 1.5B)
generates last and its engine stays up to check (`SharedEngine`): one engine start fewer.
Each stage resumes from its artifacts, so re-running an interrupted audit picks up where it
stopped. The packaged models are prepared ahead in a background thread, while the pipelines
before them retrieve and start their engines (`PreparedAhead`; never while an engine
generates or checks), and every stage is timed (`StageTimes`, OUT/timings.json).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from contextlib import ExitStack, closing, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor import generate
from auditor.calibrate import Calibration
from auditor.config import JudgeConfig, PipelineConfig, VLLMGeneratorConfig
from auditor.errors import AuditorError, BadInput
from auditor.files import check_output_dir, check_output_file, write_json_atomic, write_text_atomic
from auditor.gates import Gate, GateResult, evaluate_gates
from auditor.generate.vllm_offline import VLLMGenerator, engine_settings
from auditor.history import check_history, list_audits, record_audit
from auditor.models import PACKAGED_MODELS, prepare_model
from auditor.models.prepare import PreparedAhead
from auditor.report import refuse_shared_names, render_report
from auditor.results import SUMMARY, RunArtifacts, load_run, say_damaged_summary, summarize_run
from auditor.review import ReviewLabel, assign_labels, draw_review, write_review
from auditor.run import RunCallbacks, plan_run, run_pipeline
from auditor.scale.checking import ray_runner
from auditor.scale.generation import cluster_generators
from auditor.store import read_records
from auditor.timings import TIMINGS, StageTimes
from auditor.verify import judges
from auditor.verify.answers import choose_sources
from auditor.verify.base import Judge
from auditor.verify.check import OnStageCalls, check_run, items_from_run
from auditor.verify.examples import ExampleBook

__all__ = [
    "AUDIT_FILES",
    "AuditOutcome",
    "SharedEngine",
    "finish_audit",
    "generation_order",
    "plan_audit",
    "run_audit",
]

AUDIT_FILES = ("report.html", TIMINGS)  # what an audit writes in its out dir beside the run dirs


@dataclass
class AuditOutcome:
    """What an audit produced: the runs with their summaries, gate results, the report."""

    runs: list[RunArtifacts]
    gate_results: list[GateResult]
    report_path: Path
    times: StageTimes | None = field(default=None, compare=False)

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.gate_results)


def finish_audit(
    run_dirs: Sequence[Path],
    report_path: Path,
    gates: Sequence[Gate] = (),
    history_path: Path | None = None,
    record: bool = False,
    calibration: Calibration | None = None,
    labels: list[ReviewLabel] | None = None,
    labels_path: Path | None = None,
    review: int | None = None,
    labels_outside: str = "refuse",
) -> AuditOutcome:
    """Summaries, gates, history and the HTML report for run dirs that were run and checked;
    with `review`, each run's review sample of that many answers is drawn first (`auditor
    review`), so the report's review section shows it.

    Every refusal (a damaged run dir, a report path that cannot be written, two runs of one
    pipeline, a calibration that does not apply, a history that is no audit history) comes
    before the first file is written.
    """
    runs = [load_run(run_dir) for run_dir in run_dirs]
    check_output_file(report_path, "--out")
    refuse_shared_names(runs)
    drawn = [(run, *draw_review(run, review, None)) for run in runs] if review else []
    if history_path is not None:
        check_history(history_path)
    by_pipeline = (
        assign_labels(labels, runs, labels_path or Path("labels"), labels_outside) if labels else {}
    )
    for run in runs:
        summarize_run(run, calibration, by_pipeline.get(run.name))
    results = evaluate_gates(gates, {run.name: run.summary for run in runs})
    for run in runs:
        say_damaged_summary(run.run_dir)
        write_json_atomic(run.run_dir / SUMMARY, run.summary)
    for run, sample, earlier in drawn:
        write_review(run.run_dir, sample, earlier)
    if record and history_path is not None:
        for run in runs:
            mine = [r for r in results if r.pipeline == run.name]
            record_audit(
                history_path,
                run.run_dir,
                run.manifest,
                run.summary,
                run.judge_sha256,
                all(r.passed for r in mine) if mine else None,
            )
    history = list_audits(history_path) if history_path is not None else []
    report_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(report_path, render_report(runs, results, history))
    return AuditOutcome(runs, results, report_path)


def plan_audit(
    pipelines: Sequence[PipelineConfig],
    questions_path: Path,
    index_dir: Path,
    out_dir: Path,
    limit: int | None = None,
    history_path: Path | None = None,
) -> list[Path]:
    """The run dir of each pipeline, every input validated and nothing written (names,
    questions, index, run dirs, the history database): `audit` calls it before any file is
    written or engine started."""
    names = [p.name for p in pipelines]
    if len(set(names)) != len(names):
        raise BadInput(
            f"two pipelines share the name {sorted(n for n in names if names.count(n) > 1)[0]!r}; names must differ"
        )
    for name in names:
        if name in AUDIT_FILES:
            raise BadInput(
                f"pipeline name {name!r} is the name of a file the audit writes in --out; "
                "rename the pipeline"
            )
    run_dirs = [out_dir / name for name in names]
    check_output_dir(out_dir, "--out")
    for config, run_dir in zip(pipelines, run_dirs, strict=True):
        plan_run(config, questions_path, index_dir, run_dir, limit)
    if history_path is not None:
        check_history(history_path)
    return run_dirs


class SharedEngine:
    """The in-process engine the judge and some pipelines start alike: lent to each such
    pipeline's generation (its close then frees nothing), handed to the judge (whose close
    frees it), and freed by `close` whatever happened. Started by the first that needs it;
    the judge starts its own when no pipeline had answers left to generate."""

    def __init__(
        self,
        judge_generator: VLLMGeneratorConfig,
        on_stage: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.settings = engine_settings(judge_generator)
        self.on_stage = on_stage
        self.engine: Any = None

    def serves(self, generator: Any) -> bool:
        """Whether a pipeline's generator config starts this engine."""
        return isinstance(generator, VLLMGeneratorConfig) and (
            engine_settings(generator) == self.settings
        )

    def generator(self, cfg: VLLMGeneratorConfig, **callbacks: Any) -> Any:
        """`run_pipeline`'s generator factory: this engine with the pipeline's sampling."""
        if self.engine is None:
            self.engine = VLLMGenerator.from_config(cfg, **callbacks)
            return _Lent(self.engine)
        self.on_stage(f"reusing the vLLM engine for {cfg.model}")
        return _Lent(self.engine.sharing(cfg))

    def judge(self, config: JudgeConfig) -> Judge:
        """`check_run`'s judge factory: the judge on this engine when it is up."""
        if self.engine is None:
            return judges.make_judge(config)
        assert isinstance(config.generator, VLLMGeneratorConfig)
        self.on_stage(f"the judge checks on the engine that generated ({config.generator.model})")
        return judges.GeneratorJudge(self.engine.sharing(config.generator))

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


class _Lent:
    """A generator on a shared engine whose close leaves the engine up."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    def __getattr__(self, name: str) -> Any:
        return getattr(self.generator, name)

    def close(self) -> None:
        pass


def generation_order(pipelines: Sequence[PipelineConfig], shared: SharedEngine | None) -> list[int]:
    """The pipelines' indices in the order they generate: those on the judge's engine last,
    so that engine is the one still up when checking starts."""
    if shared is None:
        return list(range(len(pipelines)))
    on_judge = [shared.serves(p.generator) for p in pipelines]
    return sorted(range(len(pipelines)), key=lambda i: on_judge[i])


def run_audit(
    pipelines: Sequence[PipelineConfig],
    questions_path: Path,
    index_dir: Path,
    out_dir: Path,
    judge_config: JudgeConfig,
    *,
    gates: Sequence[Gate] = (),
    history_path: Path | None = None,
    limit: int | None = None,
    run_callbacks: RunCallbacks | None = None,
    on_stage: Callable[[str], None] = lambda message: None,
    on_check_start: Callable[[str, int], None] = lambda name, total: None,
    on_check_batch: Callable[[int], None] | None = None,
    on_check_calls: OnStageCalls | None = None,
    judge_factory: Callable[[JudgeConfig], Any] | None = None,
    embed: Callable[[list[str]], Any] | None = None,
    generator_factory: Callable[..., Any] | None = None,
    calibration: Calibration | None = None,
    labels: list[ReviewLabel] | None = None,
    labels_path: Path | None = None,
    review: int | None = None,
    sources: str = "auto",
    ray: str | None = None,
    ray_actors: int | None = None,
    examples: ExampleBook | None = None,
    labels_outside: str = "refuse",
    times: StageTimes | None = None,
    prepare: Callable[..., Any] | None = None,
    prepare_ahead: bool = True,
) -> AuditOutcome:
    """Run every pipeline into OUT/<name>/, check each, write OUT/report.html (see module doc).

    `sources` (`--sources`) says what claims are checked against; the audit's index is the
    trusted knowledge base.

    With a calibration, the judge decides at the calibration's threshold (its sensitivity and
    specificity were measured there) and the summaries carry corrected rates.

    Where the time went is timed stage by stage into `times` and written to OUT/timings.json
    (also when the audit fails after its inputs were validated).

    `prepare(name, on_stage=, on_bytes=, stop=, idle=)` prepares a packaged model (default:
    `prepare_model` when the audit starts its own engines; none with `generator_factory` or
    Ray: the factory does). With `prepare_ahead`, the packaged models of the pipelines with
    questions left, and the judge's, are prepared one after another in a background thread
    from the start, so a model is converted while the previous pipeline retrieves and its
    engine starts; nothing runs in the background while an engine generates or checks (the
    audit waits for it first: the measured throughput is the engine's alone). A failure
    there is raised where the audit next waits; an interrupted audit stops it and leaves no
    half model.
    """

    if calibration is not None:
        judge_config = calibration.judge_config(judge_config)  # refuses another judge's settings

    run_dirs = plan_audit(pipelines, questions_path, index_dir, out_dir, limit, history_path)
    times = times or StageTimes()
    shared = (
        SharedEngine(judge_config.generator, on_stage)
        if ray is None
        and generator_factory is None
        and judge_factory is None
        and isinstance(judge_config.generator, VLLMGeneratorConfig)
        else None
    )
    if prepare is None and ray is None and generator_factory is None:
        prepare = prepare_model
    order = generation_order(pipelines, shared)
    owners = _models_needed(
        [pipelines[i] for i in order],
        [run_dirs[i] for i in order],
        questions_path,
        index_dir,
        limit,
        judge_config if judge_factory is None and ray is None else None,
    )
    for index in order:
        for stage in (
            "retrieval",
            "model preparation",
            "engine start",
            "generation",
            "engine stop",
        ):
            times.plan(stage, pipelines[index].name)
    times.plan("checking set-up")
    if "judge" in owners.values():  # the judge's model, prepared for an engine of its own
        times.plan("model preparation", "judge")
    times.plan("judge start")
    for config in pipelines:
        times.plan("checking", config.name)
    times.plan("summaries, gates and report")
    status = "failed"
    models = None if prepare is None else _Models(prepare, owners, times, prepare_ahead, on_stage)
    try:
        with (
            cluster_generators(ray, ray_actors) as on_cluster,
            closing(shared) if shared is not None else nullcontext(),
        ):
            for index in order:
                config, run_dir = pipelines[index], run_dirs[index]
                on_stage(f"pipeline {config.name}: retrieval and generation -> {run_dir}")
                factory = generator_factory or on_cluster
                if shared is not None and shared.serves(config.generator):
                    factory = shared.generator
                run_pipeline(
                    config,
                    questions_path,
                    index_dir,
                    run_dir,
                    limit=limit,
                    callbacks=_QuietGeneration(run_callbacks or RunCallbacks(), models),
                    generator_factory=_preparing(factory, config.name, models),
                    times=times,
                )
            if models is not None:
                models.quiet()

            with times.time("checking set-up"), ExitStack() as checking:
                targets = []
                for run_dir in run_dirs:
                    items = items_from_run(run_dir)
                    choose_sources(items, run_dir, sources, index_dir)
                    targets.append((run_dir, items))

                def check_start(name: str, total: int) -> None:
                    checking.close()  # the previous pipeline's checking ends
                    checking.enter_context(times.time("checking", name))
                    on_check_start(name, total)

                base_judge = shared.judge if shared is not None else judge_factory

                def start_judge(config: JudgeConfig) -> Any:
                    with times.time("judge start"):
                        if shared is not None and shared.engine is not None:
                            times.plan("judge start", note="on the engine that generated")
                        if base_judge is None:
                            start = _preparing(judges.make_judge, "judge", models)
                            return (start or judges.make_judge)(config)
                        return base_judge(config)

                check_run(
                    targets,
                    judge_config,
                    kb_index=index_dir,
                    judge_factory=start_judge,
                    embed=embed,
                    on_stage=on_stage,
                    on_check_start=check_start,
                    on_batch=on_check_batch,
                    on_calls=on_check_calls,
                    open_runner=(
                        None
                        if ray is None
                        else ray_runner(ray, ray_actors, judge_config, index_dir, on_stage=on_stage)
                    ),
                    examples=examples,
                )
        with times.time("summaries, gates and report"):
            on_stage("summaries, gates and report")
            outcome = finish_audit(
                run_dirs,
                out_dir / "report.html",
                gates,
                history_path,
                record=True,
                calibration=calibration,
                labels=labels,
                labels_path=labels_path,
                review=review,
                labels_outside=labels_outside,
            )
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if models is not None:
            models.close()  # an interrupted or failed audit stops the background first
        times.stop()
        out_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out_dir / TIMINGS, times.to_json(status=status))
    outcome.times = times
    return outcome


def _models_needed(
    pipelines: Sequence[PipelineConfig],
    run_dirs: Sequence[Path],
    questions_path: Path,
    index_dir: Path,
    limit: int | None,
    judge_config: JudgeConfig | None,
) -> dict[str, str]:
    """The packaged models the audit will start engines with, in generation order, each with
    the pipeline that needs it first ("judge" for the judge's own): those of pipelines with
    questions left, and the judge's when there are (new answers are checked)."""
    owners: dict[str, str] = {}
    for config, run_dir in zip(pipelines, run_dirs, strict=True):
        generator = config.generator
        if not isinstance(generator, VLLMGeneratorConfig):
            continue
        if generator.model not in PACKAGED_MODELS or generator.model in owners:
            continue
        questions, _ = plan_run(config, questions_path, index_dir, run_dir, limit)
        try:
            done = {r["id"] for r in read_records(run_dir)} if run_dir.is_dir() else set()
        except AuditorError:  # a damaged record: the run repairs it and answers again
            done = set()
        if {q.id for q in questions} - done:
            owners[generator.model] = config.name
    judge = None if judge_config is None else judge_config.generator
    if owners and isinstance(judge, VLLMGeneratorConfig) and judge.model in PACKAGED_MODELS:
        owners.setdefault(judge.model, "judge")
    return owners


class _Models:
    """Packaged models made ready before their engines start: prepared ahead in a background
    thread (`PreparedAhead`), or here when asked. Each wait or preparation is timed in the
    "model preparation" row of the pipeline that needs the model first; the background's own
    seconds go to the same row (`StageTimes.background`)."""

    def __init__(
        self,
        prepare: Callable[..., Any],
        owners: dict[str, str],
        times: StageTimes,
        ahead: bool,
        on_stage: Callable[[str], None],
    ) -> None:
        self.prepare, self.owners, self.times = prepare, owners, times
        self.ahead = (
            PreparedAhead(
                list(owners),
                prepare,
                on_stage=lambda message: on_stage(f"in the background: {message}"),
                on_done=lambda name, seconds: times.background(
                    "model preparation", seconds, owners[name]
                ),
            )
            if ahead and owners
            else None
        )

    def ready(self, name: str, pipeline: str, **callbacks: Any) -> None:
        """Block until `name` is prepared (raising its failure)."""
        with self.times.time("model preparation", self.owners.get(name, pipeline)):
            if self.ahead is not None and name in self.ahead:
                if not self.ahead.ready(name):
                    _import_engine()
                self.ahead.wait(name)
            else:
                self.prepare(name, **callbacks)

    def quiet(self) -> None:
        """Wait until nothing is prepared in the background (an engine is about to generate
        or check, and its throughput is measured)."""
        if self.ahead is None:
            return
        for name in self.ahead.names:
            with self.times.time("model preparation", self.owners[name]):
                self.ahead.wait(name)

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()


def _import_engine() -> None:
    """Import vLLM while a model it is about to start is still being prepared: its imports
    (~16 CPU s in the auditor's process on 2 cores, bench/engine_start.py) take the core the
    preparation leaves idle instead of following it."""
    with suppress(ImportError):  # an install without the engine: its start says so
        importlib.import_module("vllm")


class _QuietGeneration(RunCallbacks):
    """A run's callbacks; generation starts once the background is idle (`_Models.quiet`)."""

    def __init__(self, inner: RunCallbacks, models: _Models | None) -> None:
        self.inner, self.models = inner, models

    def stage(self, message: str) -> None:
        self.inner.stage(message)

    def bytes(self, done: int, total: int) -> None:
        self.inner.bytes(done, total)

    def start_generation(self, total: int) -> None:
        if self.models is not None:
            self.models.quiet()
        self.inner.start_generation(total)

    def result(self, record: dict[str, Any]) -> None:
        self.inner.result(record)


def _preparing(
    factory: Callable[..., Any] | None, pipeline: str, models: _Models | None
) -> Callable[..., Any] | None:
    """`factory` (an engine's start; None: `run_pipeline`'s default), with its packaged model
    made ready first (a judge's factory takes the judge's config)."""
    if models is None:
        return factory
    base = factory or generate.make_generator

    def start(cfg: Any, **callbacks: Any) -> Any:
        generator = getattr(cfg, "generator", cfg)  # a judge's config holds its generator's
        if isinstance(generator, VLLMGeneratorConfig) and generator.model in PACKAGED_MODELS:
            assert models is not None
            models.ready(
                generator.model,
                pipeline,
                on_stage=callbacks.get("on_stage"),
                on_bytes=callbacks.get("on_bytes"),
            )
        return base(cfg, **callbacks)

    return start
