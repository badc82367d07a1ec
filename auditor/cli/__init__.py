"""The `auditor` command group. Commands import heavy packages (torch, vLLM, FAISS) only when
they run, inside the functions that need them; `tests/test_imports.py` holds that rule."""

from __future__ import annotations

import logging
import os
from typing import Any

import click

from auditor import __version__
from auditor.cli.audit_cmd import audit
from auditor.cli.calibrate_cmd import calibrate
from auditor.cli.check_cmd import check
from auditor.cli.config_cmd import config
from auditor.cli.ingest import ingest
from auditor.cli.models_cmd import models
from auditor.cli.report_cmd import baseline, history, report
from auditor.cli.review_cmd import review
from auditor.cli.run_cmd import run
from auditor.cli.search import search
from auditor.cli.terminal import TerminalHandler, set_verbosity, terminal
from auditor.errors import AuditorError
from auditor.interrupt import install_interrupt_handler

__all__ = ["cli", "main"]


class _UsageFailure(click.ClickException):
    """Bad input: shown like any error, but with the usage exit code."""

    exit_code = 2


class AuditorGroup(click.Group):
    """Turns AuditorError into a one-line `Error: ...` with the error's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AuditorError as exc:
            failure = _UsageFailure if exc.exit_code == 2 else click.ClickException
            raise failure(str(exc)) from exc


@click.group(cls=AuditorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="auditor")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-vv for debug).")
def cli(verbose: int) -> None:
    """Audit a RAG pipeline: throughput weighted by how faithful its answers are."""
    # one Ctrl-C stops a command, even during an engine's start
    install_interrupt_handler(lambda line: click.echo(f"\n{line}", file=terminal()))
    set_verbosity(verbose)
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    own = logging.getLogger("auditor")  # our warnings stay on the terminal, engines' go to a log
    if not any(isinstance(h, TerminalHandler) for h in own.handlers):
        handler = TerminalHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        own.addHandler(handler)
        own.propagate = False
    # vLLM logs every engine step at INFO on stderr; keep it to warnings unless asked (-v).
    os.environ.setdefault("VLLM_LOGGING_LEVEL", logging.getLevelName(level))
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout is for --json


for _command in (
    ingest,
    search,
    config,
    models,
    run,
    check,
    calibrate,
    review,
    report,
    audit,
    history,
    baseline,
):
    cli.add_command(_command)


def main() -> None:
    """Console entry point."""
    cli(prog_name="auditor")
