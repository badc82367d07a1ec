"""`auditor config show PIPELINE`: the resolved pipeline configuration."""

from __future__ import annotations

import json

import click

from auditor.cli.options import resolve_config
from auditor.config import config_sha256

__all__ = ["config"]


@click.group()
def config() -> None:
    """Inspect pipeline configuration."""


@config.command("show")
@click.argument("pipeline")
@click.option(
    "--set", "set_items", multiple=True, metavar="KEY=VALUE", help="Override a key, dotted."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML.")
def show(pipeline: str, set_items: tuple[str, ...], as_json: bool) -> None:
    """Print PIPELINE with every default filled in, and its sha256.

    PIPELINE is a file, or a NAME: NAME.toml from the first of $AUDITOR_PIPELINES,
    ./pipelines and the auditor's pipelines/ that has it.
    """
    import tomli_w

    resolved = resolve_config(pipeline, set_items, {})
    data = resolved.model_dump(mode="json", exclude_none=True)
    if as_json:
        click.echo(json.dumps(data | {"sha256": config_sha256(resolved)}, indent=2))
    else:
        click.echo(f"# resolved from {pipeline}; sha256 {config_sha256(resolved)}")
        click.echo(tomli_w.dumps(data), nl=False)
