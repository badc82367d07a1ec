"""Trace exports in, a run dir out (kind "traces"): the window's answers, its population,
what was skipped and why, and the drawn sample.

The export is streamed twice over disk, never held: pass 1 reads every span once and spills
what the import needs of it (`SpanFacts`) into buckets by trace id under the run dir; pass 2
reads one bucket at a time, joins each trace's spans into answers (`assemble`), keeps the
traces that start in the window (and, with --service, hold a span of that service), and
spills each bucket's population rows and skips sorted, merged into their files at the end.
Memory is one line's request plus one bucket (about BUCKET_BYTES of spans) plus each
answer's id (for the sample's draw).

The run dir holds:
- records.jsonl: the answers checked: every one of the window, or a uniform sample of
  `--sample N` drawn with `--seed` (`draw_sample`, recomputed by every reader from
  population.jsonl), each with its question, answer, passages, model, start and timings;
- population.jsonl: one row per answer of the window (id, start, timings; no content): the
  population the sample and every latency figure of the window refer to;
- skipped.jsonl: every trace (or turn) of the window not imported, with its reason;
- manifest.json: kind "traces", the sources (path, bytes read, sha256 of them), the window,
  the service, the population counts and the sample.
Importing again the same exports with the same options resumes; an export that grew
(appended to) adds its new answers; one rewritten, or other options, is refused.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from auditor.errors import BadInput
from auditor.files import utc_now
from auditor.store import MANIFEST, RECORDS, read_records, read_run_manifest, write_run_manifest
from auditor.traces.assemble import SKIP_REASONS, Assembled, assemble
from auditor.traces.conventions import SpanFacts
from auditor.traces.otlp import Reading, read_export
from auditor.versions import package_versions

__all__ = [
    "POPULATION",
    "SKIPPED",
    "TraceImport",
    "Window",
    "draw_sample",
    "import_traces",
    "parse_moment",
]

POPULATION = "population.jsonl"
SKIPPED = "skipped.jsonl"
BUCKET_BYTES = 32 << 20  # spans spilled per bucket (what pass 2 holds at once), about
MAX_BUCKETS = 1024
KIND = "traces"


@dataclass(frozen=True)
class Window:
    """[since, until) in UTC; None: open on that side."""

    since: datetime | None = None
    until: datetime | None = None

    def holds(self, start_s: float) -> bool:
        return (self.since is None or start_s >= self.since.timestamp()) and (
            self.until is None or start_s < self.until.timestamp()
        )

    def to_json(self) -> dict[str, str | None]:
        return {
            "since": None if self.since is None else self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
        }

    def words(self) -> str:
        since = "the start" if self.since is None else self.since.isoformat()
        until = "the end" if self.until is None else self.until.isoformat()
        return f"{since} .. {until}"


def parse_moment(text: str, option: str) -> datetime:
    """A --since/--until value: an ISO date or date-time (UTC unless it says)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadInput(
            f"{option} {text!r}: not an ISO date or date-time (e.g. 2026-12-01 or "
            "2026-12-01T09:00:00Z)"
        ) from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass
class TraceImport:
    """What an import found and wrote (the terminal's lines and the manifest's counts)."""

    out_dir: Path
    traces_seen: int = 0  # distinct traces in the exports (of --service, when given)
    traces_in_window: int = 0
    traces_imported: int = 0  # traces of the window that gave at least one answer
    answers: int = 0  # answers of the window (the population)
    records: int = 0  # records.jsonl's rows (the sample, or every answer)
    added: int = 0  # rows this import appended
    skipped: Counter[str] = field(default_factory=Counter)
    duplicate_spans: int = 0
    clock_skew: int = 0
    torn: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    first_start: str | None = None
    last_start: str | None = None

    def lines(self) -> list[str]:
        """What the terminal says: imported, skipped and why, sampled, noticed."""
        answers = "" if self.answers == self.traces_imported else f" ({self.answers:,} answers)"
        said = [
            f"imported {self.traces_imported:,} of {self.traces_in_window:,} traces in the "
            f"window{answers}"
            + (f"; skipped {sum(self.skipped.values()):,}:" if self.skipped else "")
        ]
        said += [
            f"  {count:,} {SKIP_REASONS[reason]}" for reason, count in self.skipped.most_common()
        ]
        if self.records != self.answers:
            said.append(f"sampled {self.records:,} of {self.answers:,} answers for checking")
        if self.duplicate_spans:
            said.append(f"{self.duplicate_spans:,} repeated span(s) dropped (an exporter's retry)")
        if self.clock_skew:
            said.append(
                f"{self.clock_skew:,} trace(s) with a span starting before its parent (clock "
                "skew between hosts): their start is the root span's"
            )
        said += [f"{where}: a last line still being written, left out" for where in self.torn]
        return said


def draw_sample(ids: Sequence[str], size: int | None, seed: int) -> list[str]:
    """The answers checked: `size` of `ids` drawn uniformly without replacement with `seed`
    (every answer when `size` is None or not smaller), in the ids' sorted order; a function
    of its arguments, so any reader recomputes it."""
    ordered = sorted(ids)
    if size is None or size >= len(ordered):
        return ordered
    chosen = np.random.default_rng(seed).permutation(len(ordered))[:size]
    return [ordered[k] for k in sorted(chosen)]


def import_traces(
    exports: Sequence[Path],
    out_dir: Path,
    *,
    window: Window = Window(),
    service: str | None = None,
    sample: int | None = None,
    seed: int = 0,
    slo: dict[str, float] | None = None,
    progress: Callable[[str], None] | None = None,
) -> TraceImport:
    """Import trace exports into `out_dir` (see the module doc); BadInput before anything is
    written on damage, on a window without traces, or a dir of another import."""
    if sample is not None and sample < 1:
        raise BadInput(f"--sample {sample}: give a number of answers of at least 1")
    settings = {"window": window.to_json(), "service": service, "sample": sample, "seed": seed}
    held = _held(out_dir, settings)
    found = TraceImport(out_dir)
    readings = [Reading(path) for path in exports]
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(".import-*"):  # an import killed mid-way left its spill
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=".import-", dir=out_dir) as spill:
        buckets = _spill(exports, readings, Path(spill), progress)
        ids, runs, candidates = _join(buckets, Path(spill), window, service, found)
        found.torn = [r.torn for r in readings if r.torn]
        found.services = sorted(set().union(*(r.services for r in readings)))
        found.answers = len(ids)
        _refuse_empty(exports, window, service, found)
        sources = [_source(r, held) for r in readings]
        chosen = draw_sample(ids, sample, seed)
        del ids
        _refuse_changed(out_dir, held, set(chosen))
        found.records = len(chosen)
        manifest = _manifest(out_dir, held, settings, sources, found, chosen)
        # the latency SLO the figures use: not an import setting, so a later import may change it
        manifest["slo"] = slo if slo is not None else (held or {}).get("slo") or {}
        # "running" until every chosen row is in: a reader then holds no more rows than
        # sample.records, and exactly as many once "complete" (run_shapes.check_totals)
        write_run_manifest(out_dir, manifest | {"status": "running"})
        _write_merged(out_dir / POPULATION, runs[POPULATION])
        _write_merged(out_dir / SKIPPED, runs[SKIPPED])
        found.added = _write_records(out_dir, candidates, chosen)
    write_run_manifest(out_dir, manifest | {"status": "complete", "finished_at": utc_now()})
    return found


def _held(out_dir: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest of an earlier import into `out_dir` with the same settings (None: a new
    dir); BadInput for a dir of something else, or of other settings."""
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"{out_dir}: not a directory; give --out a dir to write")
    manifest = read_run_manifest(out_dir) if out_dir.is_dir() else None
    if manifest is None:
        if (out_dir / RECORDS).exists():
            raise BadInput(f"{out_dir}: holds records.jsonl but no manifest; use another --out")
        return None
    if manifest.get("kind") != KIND:
        raise BadInput(
            f"{out_dir / MANIFEST}: this dir holds a run of kind {manifest.get('kind', 'run')!r}, "
            "not imported traces; use another --out"
        )
    before = manifest.get("import") or {}
    for key, value in settings.items():
        if before.get(key) != value:
            raise BadInput(
                f"{out_dir / MANIFEST}: imported with {key} {before.get(key)!r}, now "
                f"{value!r}; give the same options to add to it, or another --out"
            )
    return manifest


def _spill(
    exports: Sequence[Path],
    readings: list[Reading],
    spill: Path,
    progress: Callable[[str], None] | None,
) -> int:
    """Pass 1: every span's facts into bucket files by trace id; the number of buckets."""
    size = sum(_expected_bytes(path) for path in exports)
    buckets = max(1, min(MAX_BUCKETS, math.ceil(size / BUCKET_BYTES)))
    handles = [(spill / f"{n}.jsonl").open("ab") for n in range(buckets)]
    try:
        for path, reading in zip(exports, readings, strict=True):
            for count, (_, facts) in enumerate(read_export(path, reading), start=1):
                bucket = int(facts.trace_id[-8:], 16) % buckets
                handles[bucket].write(orjson.dumps(facts.to_json()) + b"\n")
                if progress is not None and count % 100_000 == 0:
                    progress(f"{path}: {count:,} spans read")
    finally:
        for handle in handles:
            handle.close()
    return buckets


def _expected_bytes(path: Path) -> int:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the trace export ({exc.strerror})") from exc
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    return size * 8 if gzipped else size  # text spans compress about 8-fold


def _join(
    buckets: int, spill: Path, window: Window, service: str | None, found: TraceImport
) -> tuple[list[str], dict[str, list[Path]], Path]:
    """Pass 2: each bucket's traces joined; the ids of the window's answers, the files of its
    population rows and of its skips (one run per bucket, each sorted: merged when written),
    and a file of its records (one JSON line each, for the chosen to be copied)."""
    ids: list[str] = []
    runs: dict[str, list[Path]] = {POPULATION: [], SKIPPED: []}
    candidates = spill / "records.jsonl"
    first: float | None = None
    last: float | None = None
    with candidates.open("wb") as out:
        for n in range(buckets):
            population: list[dict[str, Any]] = []
            skips: list[dict[str, Any]] = []
            for trace in _traces(spill / f"{n}.jsonl"):
                if service is not None and service not in trace.services:
                    continue
                found.traces_seen += 1
                if not window.holds(trace.start_s):
                    continue
                found.traces_in_window += 1
                first = trace.start_s if first is None else min(first, trace.start_s)
                last = trace.start_s if last is None else max(last, trace.start_s)
                found.duplicate_spans += trace.duplicate_spans
                found.clock_skew += trace.clock_skew
                for skip in trace.skips:
                    found.skipped[skip.reason] += 1
                    skips.append(skip.to_json())
                found.traces_imported += bool(trace.records)
                for record in trace.records:
                    out.write(orjson.dumps(record) + b"\n")
                    population.append(_population_row(record))
                    ids.append(record["id"])
            (spill / f"{n}.jsonl").unlink()
            population.sort(key=_population_key)
            skips.sort(key=_skip_key)
            for name, rows in ((POPULATION, population), (SKIPPED, skips)):
                runs[name].append(spill / f"{name}.{n}")
                runs[name][-1].write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    if first is not None and last is not None:
        found.first_start = datetime.fromtimestamp(first, UTC).isoformat()
        found.last_start = datetime.fromtimestamp(last, UTC).isoformat()
    return ids, runs, candidates


def _population_key(row: dict[str, Any]) -> tuple[float, str]:
    return (row["arrival_time"], row["id"])


def _skip_key(row: dict[str, Any]) -> tuple[str, str]:
    return (row["trace_id"], row.get("span_id", ""))


def _write_merged(path: Path, runs: list[Path]) -> None:
    """`path` (atomically, as write_text_atomic) from runs of rows each sorted: merged, in
    the order one sort of them all gives (a tie stays in one run: one trace, one bucket)."""
    key = _population_key if path.name == POPULATION else _skip_key

    def rows(run: Path) -> Iterator[tuple[Any, bytes]]:
        with run.open("rb") as handle:
            for line in handle:
                yield key(orjson.loads(line)), line

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for _, line in heapq.merge(*(rows(run) for run in runs), key=itemgetter(0)):
                out.write(line)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the file is meant to be read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _traces(bucket: Path) -> Iterator[Assembled]:
    spans: dict[str, list[SpanFacts]] = {}
    with bucket.open("rb") as handle:
        for line in handle:
            facts = SpanFacts.from_json(orjson.loads(line))
            spans.setdefault(facts.trace_id, []).append(facts)
    for trace_id in sorted(spans):
        yield assemble(trace_id, spans.pop(trace_id))


# what population.jsonl keeps of a record: enough for every latency figure of the window
POPULATION_FIELDS = (
    "id",
    "trace_id",
    "arrival_time",
    "ttft_s",
    "e2e_s",
    "tpot_s",
    "output_tokens",
)


def _population_row(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record.get(key) for key in POPULATION_FIELDS}


def _refuse_empty(
    exports: Sequence[Path], window: Window, service: str | None, found: TraceImport
) -> None:
    named = ", ".join(str(p) for p in exports)
    if service is not None and found.traces_seen == 0:
        seen = ", ".join(found.services) or "none"
        raise BadInput(
            f"{named}: no trace holds a span of service {service!r} (services seen: {seen}); "
            "give --service one of them"
        )
    if found.traces_seen == 0:
        raise BadInput(f"{named}: no spans; {named} holds no traces to import")
    if found.traces_in_window == 0:
        raise BadInput(
            f"{named}: no trace starts in the window {window.words()}; widen --since/--until"
        )
    if found.answers == 0:
        reasons = "; ".join(
            f"{count:,} {SKIP_REASONS[reason]}" for reason, count in found.skipped.most_common()
        )
        raise BadInput(
            f"{named}: none of the window's {found.traces_in_window:,} traces holds an answer "
            f"to check ({reasons})"
        )


def _source(reading: Reading, held: dict[str, Any] | None) -> dict[str, Any]:
    """What was read of an export: its path, bytes, lines and their sha256. An export read
    before must begin with the bytes read then (appended to, never rewritten)."""
    digest = _digest(reading.path, reading.bytes_read)
    before = next(
        (
            s
            for s in (held or {}).get("sources") or []
            if isinstance(s, dict) and s.get("path") == str(reading.path)
        ),
        None,
    )
    if before is not None and _digest(reading.path, int(before["bytes"])) != before["sha256"]:
        raise BadInput(
            f"{reading.path}: differs from the export imported into this dir before (its first "
            f"{before['bytes']:,} bytes changed: rewritten, not appended to); import it into "
            "another --out"
        )
    return {
        "path": str(reading.path),
        "bytes": reading.bytes_read,
        "lines": reading.lines,
        "sha256": digest,
        "torn_last_line": reading.torn is not None,
    }


def _digest(path: Path, size: int) -> str:
    """sha256 of the first `size` bytes of the export as read (decompressed, for .gz)."""
    digest = hashlib.sha256()
    with path.open("rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw) if gzipped else raw
        left = size
        while left > 0:
            block = stream.read(min(left, 1 << 20))
            if not block:
                break
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def _refuse_changed(out_dir: Path, held: dict[str, Any] | None, chosen: set[str]) -> None:
    """The answers held must all be among those chosen now: a sample drawn again from a
    window that gained answers is another sample."""
    if held is None:
        return
    have = {str(row["id"]) for row in read_records(out_dir, repair=True)}
    gone = sorted(have - chosen)
    if gone:
        raise BadInput(
            f"{out_dir}: holds {len(gone)} answer(s) this import would not choose now "
            f"({gone[0]!r}...): the window gained answers, and a sample is drawn from the "
            "whole window; import after the window closes, or into another --out"
        )


def _manifest(
    out_dir: Path,
    held: dict[str, Any] | None,
    settings: dict[str, Any],
    sources: list[dict[str, Any]],
    found: TraceImport,
    chosen: list[str],
) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "kind": KIND,
        "run_id": out_dir.name,
        "started_at": (held or {}).get("started_at") or utc_now(),
        "import": settings,
        "sources": sources,
        "load_regime": {"mode": "traffic"},
        "window": {
            **settings["window"],
            "first_start": found.first_start,
            "last_start": found.last_start,
        },
        "population": {
            "traces_seen": found.traces_seen,
            "traces_in_window": found.traces_in_window,
            "traces_imported": found.traces_imported,
            "answers": found.answers,
            "skipped": dict(sorted(found.skipped.items())),
            "duplicate_spans": found.duplicate_spans,
            "clock_skew": found.clock_skew,
            "services": found.services,
        },
        "sample": {
            "size": settings["sample"],
            "seed": settings["seed"],
            "records": len(chosen),
            "of": found.answers,
        },
        "packages": package_versions(),
    }


def _write_records(out_dir: Path, candidates: Path, chosen: list[str]) -> int:
    """Append the chosen answers records.jsonl lacks (in start order); how many."""
    have = {str(row["id"]) for row in read_records(out_dir, repair=True)}
    wanted = set(chosen) - have
    rows = []
    with candidates.open("rb") as handle:
        for line in handle:
            if not wanted:
                break
            row = orjson.loads(line)
            if row["id"] in wanted:
                wanted.discard(row["id"])
                rows.append(row)
    rows.sort(key=lambda row: (row["arrival_time"], row["id"]))
    with (out_dir / RECORDS).open("ab") as out:
        for row in rows:
            out.write(orjson.dumps(row) + b"\n")
        out.flush()
    return len(rows)
