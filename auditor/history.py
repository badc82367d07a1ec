"""Audit history in SQLite: one row per audited run dir, baselines, regressions against them.

The database is a plain file (default `reports/history.sqlite`, or `AUDITOR_HISTORY`); every
write is one transaction, so an interrupted audit never leaves a half-written row. Re-recording
the same run dir (a resumed audit) updates its row instead of adding a second one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.errors import BadInput
from auditor.files import utc_now
from auditor.goodput import CORRECTED, METRICS

__all__ = [
    "AuditRow",
    "Regression",
    "accept_baseline",
    "check_history",
    "default_history_path",
    "list_audits",
    "record_audit",
    "record_statement",
    "regressions",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audits (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    recorded_at TEXT NOT NULL,
    run_dir TEXT NOT NULL UNIQUE,
    run_id TEXT,
    pipeline TEXT NOT NULL,
    kind TEXT NOT NULL,
    config_sha256 TEXT,
    index_sha256 TEXT,
    questions_sha256 TEXT,
    model_sha256 TEXT,
    judge_sha256 TEXT,
    gates_passed INTEGER,
    baseline INTEGER NOT NULL DEFAULT 0,
    summary TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audits_pipeline ON audits (pipeline, recorded_at);
"""
# columns added after the first release, each with its type: a database without one gets it
# (ALTER TABLE ... ADD COLUMN, NULL in earlier rows) when it is next opened to write or list
_ADDED_COLUMNS = {"statement_sha256": "TEXT"}  # the signed bundle's statement (auditor bundle)

# the figures a trend shows and regressions are looked for in (corrected ones are None for an
# audit that no calibration applied to, reviewed ones for an audit nobody reviewed: skipped)
KEY_METRICS = (
    "tps",
    "goodput_tps",
    "goodput_tps_corrected",
    "hallucination_rate",
    "hallucination_rate_corrected",
    "reviewed_hallucination_rate",
    "goodput_tps_reviewed",
    "context_precision",
    "ttft_p95_ms",
    "slo_goodput_rps",
)


DEFAULT_HISTORY = "reports/history.sqlite"


def default_history_path() -> Path:
    return Path(os.environ.get("AUDITOR_HISTORY", DEFAULT_HISTORY))


@dataclass
class AuditRow:
    """One recorded audit of one pipeline."""

    id: int
    recorded_at: str
    run_dir: str
    pipeline: str
    kind: str
    config_sha256: str | None
    model_sha256: str | None
    gates_passed: bool | None
    baseline: bool
    summary: dict[str, Any]
    statement_sha256: str | None = None  # the bundle's signed statement, when one was made

    def value(self, metric: str) -> float | None:
        entry = self.summary.get("metrics", {}).get(metric) or {}
        value = entry.get("value")
        return None if value is None else float(value)


@dataclass
class Regression:
    """A key figure worse than the baseline's beyond this audit's 95 % interval."""

    metric: str
    baseline: float
    current: float
    interval: tuple[float, float] | None


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        connection = sqlite3.connect(path)
        connection.executescript(_SCHEMA)
        present = {row[1] for row in connection.execute("PRAGMA table_info(audits)")}
        for name, kind in _ADDED_COLUMNS.items():
            if name not in present:
                connection.execute(f"ALTER TABLE audits ADD COLUMN {name} {kind}")
    except sqlite3.DatabaseError as exc:
        raise BadInput(
            f"{path}: not an audit history database ({exc}); pass --history another path"
        ) from exc
    try:
        with connection:  # one transaction: committed on success, rolled back on error
            yield connection
    finally:
        connection.close()


def check_history(path: Path) -> None:
    """Refuse, before any work, a history path the audit could not record into at its end: an
    existing file that is not an audit history, or a place no database can be created (read
    only: nothing is created here)."""
    if path.exists():
        if not path.is_file():
            raise BadInput(f"{path}: not a file; pass --history a database file path")
        try:
            with contextlib.closing(
                sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            ) as db:
                db.execute(f"SELECT {_COLUMNS} FROM audits LIMIT 0")
        except sqlite3.DatabaseError as exc:
            raise BadInput(
                f"{path}: not an audit history database ({exc}); pass --history another path"
            ) from exc
        return
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise BadInput(
            f"{path}: cannot create the history database ({parent} is not a writable dir); "
            "pass --history another path"
        )


def _row(values: tuple[Any, ...]) -> AuditRow:
    ident, recorded, run_dir, pipeline, kind, config, model, passed, baseline, summary = values[:10]
    return AuditRow(
        id=ident,
        recorded_at=recorded,
        run_dir=run_dir,
        pipeline=pipeline,
        kind=kind,
        config_sha256=config,
        model_sha256=model,
        gates_passed=None if passed is None else bool(passed),
        baseline=bool(baseline),
        summary=_summary(summary, ident),
        statement_sha256=values[10] if len(values) > 10 else None,
    )


def _summary(text: str, ident: int) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise BadInput(
            f"audit {ident} in the history holds a corrupt summary ({exc}); record it again "
            "with `auditor report RUN_DIR --record`"
        ) from exc
    return data if isinstance(data, dict) else {}


_COLUMNS = (
    "id, recorded_at, run_dir, pipeline, kind, config_sha256, model_sha256, "
    "gates_passed, baseline, summary"
)


def record_audit(
    path: Path,
    run_dir: Path,
    manifest: dict[str, Any],
    summary: dict[str, Any],
    judge_sha256: str | None,
    gates_passed: bool | None,
) -> AuditRow:
    """Add (or, for a run dir already recorded, update) the audit of one run dir."""
    pipeline = manifest.get("pipeline", {}).get("name") or manifest.get("run_id") or run_dir.name
    model = manifest.get("model", {})
    values = {
        "recorded_at": utc_now(),
        "run_dir": str(run_dir.resolve()),
        "run_id": manifest.get("run_id"),
        "pipeline": pipeline,
        "kind": manifest.get("kind", "run"),
        "config_sha256": manifest.get("pipeline", {}).get("sha256"),
        "index_sha256": manifest.get("index", {}).get("manifest_sha256"),
        "questions_sha256": manifest.get("questions", {}).get("sha256")
        or manifest.get("source", {}).get("sha256"),
        "model_sha256": model.get("weights_sha256") or model.get("gguf_sha256"),
        "judge_sha256": judge_sha256,
        "gates_passed": None if gates_passed is None else int(gates_passed),
        "summary": json.dumps(summary, sort_keys=True),
        "statement_sha256": None,  # a bundle of the earlier figures no longer says these
    }
    names = ", ".join(values)
    marks = ", ".join(f":{name}" for name in values)
    updates = ", ".join(f"{name} = excluded.{name}" for name in values if name != "run_dir")
    with _connect(path) as db:
        db.execute(
            f"INSERT INTO audits ({names}) VALUES ({marks}) "
            f"ON CONFLICT(run_dir) DO UPDATE SET {updates}",
            values,
        )
        found = db.execute(
            f"SELECT {_COLUMNS} FROM audits WHERE run_dir = ?", (values["run_dir"],)
        ).fetchone()
    return _row(found)


def record_statement(path: Path, run_dirs: list[Path], statement_sha256: str) -> None:
    """The statement digest of the bundle made of these recorded run dirs, on their rows."""
    with _connect(path) as db:
        db.executemany(
            "UPDATE audits SET statement_sha256 = ? WHERE run_dir = ?",
            [(statement_sha256, str(run_dir.resolve())) for run_dir in run_dirs],
        )


def list_audits(path: Path, pipeline: str | None = None) -> list[AuditRow]:
    """Recorded audits, oldest first (optionally of one pipeline)."""
    if not path.exists():
        return []
    with _connect(path) as db:
        query = f"SELECT {_COLUMNS}, statement_sha256 FROM audits"
        args: tuple[Any, ...] = ()
        if pipeline is not None:
            query += " WHERE pipeline = ?"
            args = (pipeline,)
        return [_row(v) for v in db.execute(query + " ORDER BY recorded_at, id", args)]


def accept_baseline(path: Path, run_dir: Path) -> AuditRow:
    """Make the audit of `run_dir` its pipeline's baseline (the previous one stops being it)."""
    target = str(run_dir.resolve())
    if not path.is_file():
        raise BadInput(
            f"{path}: no such audit history database; pass the --history your audits were "
            f"recorded in (default: $AUDITOR_HISTORY or {DEFAULT_HISTORY})"
        )
    with _connect(path) as db:
        found = db.execute(f"SELECT {_COLUMNS} FROM audits WHERE run_dir = ?", (target,)).fetchone()
        if found is None:
            raise BadInput(
                f"{run_dir}: not in the audit history {path}; audit it first "
                f"(auditor audit ... or auditor report {run_dir} --record)"
            )
        row = _row(found)
        db.execute("UPDATE audits SET baseline = 0 WHERE pipeline = ?", (row.pipeline,))
        db.execute("UPDATE audits SET baseline = 1 WHERE id = ?", (row.id,))
    row.baseline = True
    return row


def regressions(current: dict[str, Any], baseline: AuditRow) -> list[Regression]:
    """Key figures worse than the baseline's, where the baseline lies outside this audit's interval.

    Figures with no interval (throughput, measured once) regress when worse by more than 10 %.
    """
    found = []
    for metric in KEY_METRICS:
        if metric in CORRECTED and not _same_calibration(current, baseline.summary):
            continue  # corrected by another calibration: not comparable
        if metric in CONTEXT_PRECISION and _precision_verdict(current) != _precision_verdict(
            baseline.summary
        ):
            continue  # chunks rated another way (reasoned vs first token): not comparable
        entry = current.get("metrics", {}).get(metric) or {}
        value, interval = entry.get("value"), entry.get("ci95")
        before = baseline.value(metric)
        if value is None or before is None:
            continue
        higher_is_better = METRICS[metric][1]
        worse = value < before if higher_is_better else value > before
        if not worse:
            continue
        if interval is not None:
            low, high = interval
            beyond = before > high if higher_is_better else before < low
        else:
            beyond = abs(value - before) > 0.10 * abs(before)
        if beyond:
            bounds = (float(interval[0]), float(interval[1])) if interval else None
            found.append(Regression(metric, before, float(value), bounds))
    return found


CONTEXT_PRECISION = frozenset(["context_precision", "context_precision_with_reference"])


def _precision_verdict(summary: dict[str, Any]) -> str:
    """How a summary's context precision rated chunks (summaries before the setting: reason)."""
    return str(summary.get("context_precision_verdict") or "reason")


def _same_calibration(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two summaries' figures were corrected with the same judge error rates."""
    first, second = one.get("calibration") or {}, other.get("calibration") or {}
    keys = ("labels", "threshold", "claim_level")
    return bool(first) and all(first.get(k) == second.get(k) for k in keys)
