"""Where an audit's time went: wall seconds per stage, measured around the work itself.

`StageTimes` holds one row per stage, planned before the work starts so that every stage is
present (0 s when it had nothing to do: a resumed pipeline, a model already prepared, a judge
on the pipeline's engine). `time()` adds the seconds of the block it wraps; a block timed
inside another is taken out of the outer one, so the rows add up to the audit's wall time
("other" is the rest: manifests, records). Work done in the background (a model
prepared while another engine starts) is not on that path: its row holds what the audit
waited for it, and `background_s` what the work took; the difference is the work that
overlapped other stages. Stages that ran before the command (`make demo`'s set-up and ingest) are kept apart
in `before`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from auditor.files import utc_now

__all__ = ["TIMINGS", "Stage", "StageTimes"]

TIMINGS = "timings.json"  # in an audit's out dir, beside report.html


@dataclass
class Stage:
    """One row: a stage, of a pipeline or of the whole audit, with its seconds."""

    stage: str
    pipeline: str | None = None
    seconds: float = 0.0
    background_s: float | None = None  # the work's own seconds, when done in the background
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.pipeline}: {self.stage}" if self.pipeline else self.stage


class StageTimes:
    """The stages of one audit (see the module doc); safe to time from several threads."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._local = threading.local()
        self.started = now()
        self.started_at = utc_now()
        self.stopped: float | None = None
        self.rows: list[Stage] = []
        self.before: dict[str, float] = {}

    def plan(self, stage: str, pipeline: str | None = None, *, note: str = "") -> Stage:
        """The row of `stage` (of `pipeline`), added at 0 s where it is not yet."""
        with self._lock:
            for row in self.rows:
                if row.stage == stage and row.pipeline == pipeline:
                    row.note = note or row.note
                    return row
            row = Stage(stage, pipeline, note=note)
            self.rows.append(row)
            return row

    @contextmanager
    def time(self, stage: str, pipeline: str | None = None, *, note: str = "") -> Iterator[Stage]:
        """Add the wall seconds of the block to the row (the seconds of blocks timed inside
        it on this thread are theirs, not its)."""
        row = self.plan(stage, pipeline, note=note)
        stack: list[list[float]] = self._local.__dict__.setdefault("stack", [])
        frame = [self._now(), 0.0]  # started, seconds of the blocks inside
        stack.append(frame)
        try:
            yield row
        finally:
            stack.pop()
            elapsed = self._now() - frame[0]
            with self._lock:
                row.seconds += max(0.0, elapsed - frame[1])
            if stack:
                stack[-1][1] += elapsed

    def background(self, stage: str, seconds: float, pipeline: str | None = None) -> Stage:
        """Add the seconds of work done in the background to a row (what the audit waited
        for it is timed with `time`)."""
        row = self.plan(stage, pipeline)
        with self._lock:
            row.background_s = (row.background_s or 0.0) + max(0.0, seconds)
        return row

    def stop(self) -> None:
        """The audit is over: its wall time is fixed."""
        if self.stopped is None:
            self.stopped = self._now()

    @property
    def wall_s(self) -> float:
        return (self.stopped if self.stopped is not None else self._now()) - self.started

    @property
    def other_s(self) -> float:
        """The audit's wall time that no row holds (manifests, records between the stages)."""
        return max(0.0, self.wall_s - sum(r.seconds for r in self.rows))

    def lines(self) -> list[str]:
        """The table: the stages before the command, one line per stage in the order
        planned, the rest ("other"), the audit's wall time and, with stages before, the
        whole."""
        labels = [r.label for r in self.rows] + list(self.before) + ["with the stages before"]
        width = max(len(label) for label in labels)

        def line(label: str, seconds: float, note: str = "") -> str:
            return f"  {label:<{width}}  {seconds:7.1f} s" + (f"  ({note})" if note else "")

        lines = [line(name, secs, "before the audit") for name, secs in self.before.items()]
        for row in self.rows:
            notes = [row.note] if row.note else []
            if row.background_s is not None:
                notes.append(f"waited; {row.background_s:.1f} s of work in the background")
            lines.append(line(row.label, row.seconds, "; ".join(notes)))
        lines.append(line("other", self.other_s, "between the stages: manifests, records"))
        lines.append(line("audit (wall)", self.wall_s))
        if self.before:
            lines.append(line("with the stages before", self.wall_s + sum(self.before.values())))
        return lines

    def to_json(self, **extra: Any) -> dict[str, Any]:
        """What `timings.json` holds: every row, the rest, the wall time, the stages before."""
        rows = [
            {
                "stage": r.stage,
                "pipeline": r.pipeline,
                "seconds": round(r.seconds, 3),
                "background_s": None if r.background_s is None else round(r.background_s, 3),
                "note": r.note,
            }
            for r in self.rows
        ]
        before = {name: round(secs, 3) for name, secs in self.before.items()}
        data: dict[str, Any] = {
            "started_at": self.started_at,
            "finished_at": utc_now(),
            "stages": rows,
            "other_s": round(self.other_s, 3),
            "wall_s": round(self.wall_s, 3),
            "before": before,
        }
        if before:
            data["with_before_s"] = round(self.wall_s + sum(before.values()), 3)
        return data | extra
