"""One progress display for every command: stage lines and a bar, both on the terminal's
stderr (even while engine output goes to a log, see `terminal`)."""

from __future__ import annotations

from typing import Any

import click

from auditor.cli.terminal import terminal

__all__ = ["StderrProgress"]


class StderrProgress:
    """Stage lines and at most one rich progress bar at a time, on stderr (stdout stays clean)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._task: Any = None
        self._step: Any = None  # the current stage's row under the bar
        self._step_label = ""

    def __enter__(self) -> StderrProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
            self._step = None

    def say(self, message: str) -> None:
        """A line on stderr (ends the current bar)."""
        self.stop()
        if self.enabled:
            click.echo(message, file=terminal())

    def warn(self, message: str) -> None:
        """A warning line on stderr, shown even when progress is off."""
        click.echo(f"warning: {message}", file=terminal())

    def bar(self, label: str, total: int, unit: str = "count") -> None:
        """Start a bar; `unit` is "count" (done/total, elapsed, ETA) or "bytes"."""
        self.stop()
        if not self.enabled or total <= 0:
            return
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: tuple[Any, ...] = (
            (DownloadColumn(),)
            if unit == "bytes"
            else (MofNCompleteColumn(), _rate_column(), TimeElapsedColumn(), TimeRemainingColumn())
        )
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            *columns,
            console=Console(file=terminal()),
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(escape(label), total=total)

    def step(self, label: str, done: int, total: int) -> None:
        """The current stage's progress, on a row under the bar (a new label starts a new row:
        its rate and ETA are the stage's own)."""
        if self._bar is None or total <= 0:
            return
        from rich.markup import escape

        if self._step is None or label != self._step_label:
            if self._step is not None:
                self._bar.remove_task(self._step)
            self._step = self._bar.add_task(f"  {escape(label)}", total=total)
            self._step_label = label
        self._bar.update(self._step, completed=done)

    def advance(self, count: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, count)

    def update(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done)

    @property
    def active(self) -> bool:
        return self._bar is not None


def _rate(speed: float | None) -> str:
    """Items per second as a person reads it: "2.5/s", "12/min", "3.0/h"."""
    if not speed:
        return ""
    if speed >= 1:
        return f"{speed:.1f}/s"
    if speed * 60 >= 1:
        return f"{speed * 60:.1f}/min"
    return f"{speed * 3600:.1f}/h"


def _rate_column() -> Any:
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(_rate(task.finished_speed or task.speed))

    return RateColumn()
