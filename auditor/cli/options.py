"""Option sets shared by several commands, and how they become a resolved config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from auditor.config import (
    PipelineConfig,
    load_pipeline,
    parse_set_option,
    resolve_pipeline_path,
    validate_pipeline,
)

__all__ = ["pipeline_options", "resolve_config"]

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


def resolve_config(
    pipeline: str | None, set_items: tuple[str, ...], flags: dict[str, Any]
) -> PipelineConfig:
    """defaults < pipeline file < --set < explicit flags (None means the flag was not given)."""
    overrides = dict(parse_set_option(item) for item in set_items)
    overrides |= {key: value for key, value in flags.items() if value is not None}
    if pipeline is None:
        return validate_pipeline({"name": "default"}, "(defaults)", overrides)
    return load_pipeline(resolve_pipeline_path(pipeline), overrides)
