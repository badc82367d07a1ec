"""`auditor audit --traces`: the periodic audit of real traffic in one command.

Each window (`--window NAME=SINCE..UNTIL`, or one over the whole export) is imported from the
trace exports into OUT/NAME (`auditor.traces`, no engine), its sample checked by the judge,
then summaries, gates, history and the report as for pipelines (`audit.finish_audit`): two
windows (last week, this week) side by side as two pipelines are. Every input, every window
and every import is validated and written before the judge starts; an interrupted audit
resumes (imports are idempotent, checks resume).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.errors import BadInput
from auditor.traces import TraceImport, Window, import_traces, parse_moment
from auditor.verify.answers import choose_sources, items_from_run

__all__ = ["TrafficWindow", "import_windows", "parse_window", "traffic_targets"]

# a window's name is its run dir's name and the pipeline column's
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class TrafficWindow:
    """A named window of traffic: OUT/NAME holds its import."""

    name: str
    window: Window


def parse_window(text: str) -> TrafficWindow:
    """`NAME=SINCE..UNTIL` (either side may be empty: open); BadInput naming the fix."""
    name, equals, span = text.partition("=")
    since, dots, until = span.partition("..")
    if not equals or not dots or not _NAME.fullmatch(name.strip()):
        raise BadInput(
            f"--window {text!r}: give NAME=SINCE..UNTIL, e.g. "
            "this-week=2026-11-30..2026-12-07 (NAME: letters, digits, . _ -)"
        )
    window = Window(
        parse_moment(since, "--window") if since.strip() else None,
        parse_moment(until, "--window") if until.strip() else None,
    )
    if window.since and window.until and window.since >= window.until:
        raise BadInput(f"--window {text!r}: its start is not before its end")
    return TrafficWindow(name.strip(), window)


def import_windows(
    exports: Sequence[Path],
    windows: Sequence[TrafficWindow],
    out_dir: Path,
    *,
    service: str | None,
    sample: int | None,
    seed: int,
    slo: dict[str, float] | None,
    on_stage: Callable[[str], None],
) -> list[tuple[Path, TraceImport]]:
    """Each window imported into OUT/NAME; (run dir, what the import found) per window."""
    names = [w.name for w in windows]
    if len(set(names)) != len(names):
        raise BadInput(
            f"--window: two windows are named {sorted(n for n in names if names.count(n) > 1)[0]!r}; names must differ"
        )
    done = []
    for traffic in windows:
        run_dir = out_dir / traffic.name
        found = import_traces(
            list(exports),
            run_dir,
            window=traffic.window,
            service=service,
            sample=sample,
            seed=seed,
            slo=slo,
            progress=on_stage,
        )
        on_stage(f"window {traffic.name} ({traffic.window.words()}) -> {run_dir}")
        for line in found.lines():
            on_stage(f"  {line}")
        done.append((run_dir, found))
    return done


def traffic_targets(
    run_dirs: Sequence[Path], sources: str, kb_index: Path | None
) -> list[tuple[Path, list[Any]]]:
    """The check's targets: each window's sampled answers with what they are checked against
    (refused, before the judge starts, when a trace holds no passages and no --index is
    given)."""
    targets = []
    for run_dir in run_dirs:
        items = items_from_run(run_dir)
        choose_sources(items, run_dir, sources, kb_index)
        targets.append((run_dir, items))
    return targets
