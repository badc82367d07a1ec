"""The `auditor` command group. Commands import heavy packages (torch, vLLM, FAISS) only when
they run, inside the functions that need them; `tests/test_imports.py` holds that rule."""

from __future__ import annotations

import logging
import os
from typing import Any

import click

from auditor import __version__
from auditor.cli.audit_cmd import audit
from auditor.cli.bundle_cmd import bundle, keygen, sign, verify
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
from auditor.cli.traces_cmd import traces
from auditor.errors import AuditorError
from auditor.interrupt import install_interrupt_handler

__all__ = ["cli", "main", "refuse_repeated_options"]


class _UsageFailure(click.ClickException):
    """Bad input: shown like any error, but with the usage exit code."""

    exit_code = 2


class AuditorGroup(click.Group):
    """Turns AuditorError into a one-line `Error: ...` with the error's exit code, and refuses
    an option of one value given twice, in any command (Click keeps the last silently)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:  # shell completion parses half-typed lines
            refuse_repeated_options(self, ctx, args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AuditorError as exc:
            failure = _UsageFailure if exc.exit_code == 2 else click.ClickException
            raise failure(shorten_message(str(exc))) from exc


LONGEST_WORD = 160


def shorten_message(message: str) -> str:
    """The error as one readable line: a value a file gave (an id, a name, a note) may be a
    megabyte long, and echoing it whole buries the fix; each run of characters without a space
    past LONGEST_WORD keeps its start and end with how much was cut between."""
    words = message.split(" ")
    for k, word in enumerate(words):
        if len(word) > LONGEST_WORD:
            cut = len(word) - 120
            words[k] = f"{word[:80]}...({cut:,} characters cut)...{word[-40:]}"
    return " ".join(words)


def refuse_repeated_options(command: click.Command, ctx: click.Context, args: list[str]) -> None:
    """A one-line usage error (exit code 2) naming an option of `command`, or of the
    subcommand `args` name (nested groups too), that takes one value and is given more than
    once: `--labels given twice (a.jsonl, b.jsonl); give it once`. Options that collect
    (`multiple`, `count`) may repeat. Click's own parser says which option each argument is;
    what it cannot parse is left to it."""
    try:
        _, rest, order = command.make_parser(ctx).parse_args(list(args))
    except click.UsageError:
        return
    single = [p for p in order if isinstance(p, click.Option) and not (p.multiple or p.count)]
    for param in dict.fromkeys(single):
        times = single.count(param)
        if times > 1:
            mine = args[: len(args) - len(rest)] if isinstance(command, click.Group) else args
            raise _UsageFailure(_repeated(param, _occurrences(command, ctx, param, mine), times))
    if isinstance(command, click.Group) and rest:
        sub = command.get_command(ctx, rest[0])
        if sub is not None:
            sub_ctx = sub.context_class(sub, info_name=rest[0], parent=ctx, **sub.context_settings)
            refuse_repeated_options(sub, sub_ctx, rest[1:])


def _repeated(param: click.Option, given: list[tuple[str, str | None]], times: int) -> str:
    """`--labels given twice (a.jsonl, b.jsonl); give it once`: the option as typed, and the
    values where it takes one."""
    named = "/".join(dict.fromkeys(spelling for spelling, _ in given)) or param.opts[0]
    count = "twice" if times == 2 else f"{times} times"
    values = [value for _, value in given if value is not None]
    shown = f" ({', '.join(values)})" if values and not param.is_flag else ""
    return f"{named} given {count}{shown}; give it once"


def _occurrences(
    command: click.Command, ctx: click.Context, param: click.Option, args: list[str]
) -> list[tuple[str, str | None]]:
    """Each time `param` is given in `args`: as typed, and its value (None: a flag, or an
    optional value left out). For the message only: Click's parser has found the repeat."""
    options = {
        spelling: option
        for option in command.get_params(ctx)
        if isinstance(option, click.Option)
        for spelling in (*option.opts, *option.secondary_opts)
    }
    found: list[tuple[str, str | None]] = []
    at = 0
    while at < len(args) and args[at] != "--":
        token, at = args[at], at + 1
        spelling, equals, value = (
            token.partition("=") if token.startswith("--") else (token, "", "")
        )
        if spelling not in options and token[:1] == "-" and token[:2] in options:
            spelling, equals, value = token[:2], token[2:3], token[2:]  # -k5
        option = options.get(spelling)
        if option is None:
            continue
        if not equals and (option.is_flag or option.count):
            value = ""
        elif not equals:  # the next argument, unless an optional value was left out
            optional = getattr(option, "_flag_needs_value", False)
            takes = at < len(args) and not (optional and args[at][:1] == "-")
            value, at = (args[at], at + 1) if takes else ("", at)
        if option is param:
            found.append((spelling, value or None))
    return found


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
    traces,
    check,
    calibrate,
    review,
    report,
    audit,
    history,
    baseline,
    keygen,
    bundle,
    sign,
    verify,
):
    cli.add_command(_command)


def main() -> None:
    """Console entry point."""
    cli(prog_name="auditor")
