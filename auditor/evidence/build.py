"""`auditor bundle`: plan a bundle (every input read and checked, nothing written), then write
it: the bag's files, the statement over them, the bundler's signature, one tar.

Same inputs, same bytes: the report and each summary.json are stamped with the audit's end
time (not the clock), the bundler's signature carries that time too, every tar header has it as
mtime, and Ed25519 signatures are deterministic.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from auditor import __version__
from auditor.calibrate import Calibration
from auditor.errors import BadInput
from auditor.evidence.bag import ENVELOPE, bag_tag_files, tar_bytes
from auditor.evidence.canonical import canonical_json
from auditor.evidence.dsse import PAYLOAD_TYPE, Envelope, sign_payload
from auditor.evidence.figures import gate_results, headline_figures, summarize_runs
from auditor.evidence.statement import merkle_root, run_predicate, statement
from auditor.files import Read, check_output_file
from auditor.gates import Gate
from auditor.ingest.manifest import MANIFEST_NAME, read_manifest
from auditor.report import refuse_shared_names, render_report
from auditor.results import SUMMARY, RunArtifacts, load_run
from auditor.review import REVIEW, ReviewLabel, read_checked_review
from auditor.store import CHECK_MANIFEST, CHECKS, MANIFEST, RECORDS
from auditor.versions import package_versions

__all__ = ["RUN_FILES", "BundlePlan", "plan_bundle", "write_bundle", "write_file_atomic"]

# what a run dir contributes (engine.log, third-party output, is left out); summary.json is the
# one computed at bundling, from these
RUN_FILES = (MANIFEST, RECORDS, CHECKS, CHECK_MANIFEST, REVIEW)
REPORT = "data/report.html"
LABELS = "data/labels/labels.jsonl"
CALIBRATION = "data/calibration/calibration.json"
EVIDENCE_PACKAGES = ("cryptography", "rfc8785")


@dataclass
class BundlePlan:
    """A bundle ready to write: its payload files (bag paths) and predicate."""

    payload: dict[str, bytes]
    predicate: dict[str, Any]
    audit_end: str
    runs: list[RunArtifacts] = field(default_factory=list)

    @property
    def mtime(self) -> int:
        """The tar entries' mtime: the audit's end (0 when no run records one)."""
        return epoch_of(self.audit_end)


def epoch_of(stamp: str | None) -> int:
    """An artifact's ISO-8601 time as whole epoch seconds (0 when absent or unreadable)."""
    if not stamp:
        return 0
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror}); give a readable one") from exc


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _checked_run(run_dir: Path) -> RunArtifacts:
    """A run dir that is complete, checked and undamaged; BadInput naming what is not."""
    run = load_run(run_dir)  # the typed readers: shapes, consistency
    if run.damaged:
        raise BadInput(
            f"{run.damaged[0]}; a damaged run dir is not bundled: re-run into a new --out"
        )
    if run.manifest.get("status") in ("running", "partial"):
        raise BadInput(
            f"{run_dir / MANIFEST}: the run is {run.manifest['status']}, not complete; finish it "
            f"(re-run the same command) before bundling"
        )
    if run.check_manifest is None:
        raise BadInput(f"{run_dir}: not checked; check it with `auditor check {run_dir}` first")
    if run.check_manifest.get("status") != "complete":
        raise BadInput(
            f"{run_dir / CHECK_MANIFEST}: the check is {run.check_manifest.get('status')!r}, not "
            f"complete; finish it with `auditor check {run_dir}` first"
        )
    name = run.name
    if name in (".", "..") or "/" in name or "\\" in name or not name.strip():
        raise BadInput(f"{run_dir}: pipeline name {name!r} cannot name a folder; rename it")
    return run


def _knowledge_base(
    run: RunArtifacts, index_dir: Path | None, with_documents: bool, payload: dict[str, bytes]
) -> dict[str, Any] | None:
    """The run's index manifest (and documents) into `payload`, and what the predicate says of
    it; None for answers imported without an index."""
    section = run.manifest.get("index") or {}
    if not section.get("manifest_sha256"):
        return None
    where = index_dir or Path(str(section.get("path")))
    path = where / MANIFEST_NAME
    if not path.is_file():
        raise BadInput(
            f"{run.run_dir}: its index {where} is not here (no {MANIFEST_NAME}); give the index "
            "dir with --index"
        )
    data = _read(path, "the index manifest")
    if _sha256(data) != section["manifest_sha256"]:
        raise BadInput(
            f"{path}: not the index {run.run_dir} was run against (its manifest changed since: "
            "re-ingested?); give that index's dir with --index"
        )
    manifest = read_manifest(where)  # validated as ingest wrote it
    folder = f"data/index/{section['manifest_sha256'][:16]}"
    payload[f"{folder}/{MANIFEST_NAME}"] = data
    documents = [(doc.path, doc.sha256) for doc in manifest.documents]
    if with_documents:
        corpus = Path(manifest.corpus_dir)
        for doc in manifest.documents:
            relative = PurePosixPath(doc.path)
            if relative.is_absolute() or ".." in relative.parts:
                raise BadInput(f"{path}: document path {doc.path!r} leaves the corpus; re-ingest")
            content = _read(corpus / doc.path, "an indexed document")
            if _sha256(content) != doc.sha256:
                raise BadInput(
                    f"{corpus / doc.path}: changed since it was indexed (sha256 differs from "
                    f"{path}); bundle without --with-documents, or re-ingest and audit again"
                )
            payload[f"{folder}/documents/{relative.as_posix()}"] = content
    return {
        "index_manifest": f"{folder}/{MANIFEST_NAME}",
        "manifest_sha256": section["manifest_sha256"],
        "documents": len(documents),
        "chunks": section.get("chunks"),
        "embedder": section.get("embedder"),
        "documents_merkle_root": merkle_root(documents),
        "documents_included": with_documents,
    }


def _questions_file(run: RunArtifacts, payload: dict[str, bytes]) -> str | None:
    """The question set as asked, when it is still where the run read it, unchanged."""
    section = run.manifest.get("questions") or {}
    path, digest = section.get("path"), section.get("sha256")
    if not path or not digest or not Path(path).is_file():
        return None
    data = _read(Path(path), "the questions")
    if _sha256(data) != digest:
        return None  # the digest in the predicate still names the set asked
    name = f"data/questions/{digest[:16]}.jsonl"
    payload[name] = data
    return name


def _summary_bytes(summary: dict[str, Any]) -> bytes:
    """summary.json as `write_json_atomic` writes it."""
    return (json.dumps(summary, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def plan_bundle(
    run_dirs: Sequence[Path],
    *,
    calibration: Calibration | None = None,
    labels: list[ReviewLabel] | None = None,
    labels_path: Path | None = None,
    labels_outside: str = "refuse",
    gates: Sequence[Gate] = (),
    index_dir: Path | None = None,
    with_documents: bool = False,
) -> BundlePlan:
    """Everything a bundle holds, every input checked; nothing is written."""
    runs = [_checked_run(run_dir) for run_dir in run_dirs]
    refuse_shared_names(runs)
    results = summarize_runs(runs, calibration, labels, labels_path, labels_outside, gates)
    times = [
        stamp
        for run in runs
        for stamp in (
            run.manifest.get("finished_at"),
            (run.check_manifest or {}).get("finished_at"),
        )
        if stamp
    ]
    audit_end = max(times, key=epoch_of) if times else "1970-01-01T00:00:00+00:00"
    starts = [s for run in runs for s in (run.manifest.get("started_at"),) if s]
    audit_start = min(starts, key=epoch_of) if starts else None
    payload: dict[str, bytes] = {}
    predicate_runs = []
    for run in runs:
        run.summary["generated_at"] = audit_end  # the same bytes for the same inputs
        folder = f"data/runs/{run.name}"
        for name in RUN_FILES:
            if (run.run_dir / name).is_file():
                payload[f"{folder}/{name}"] = _read(run.run_dir / name, name)
        payload[f"{folder}/{SUMMARY}"] = _summary_bytes(run.summary)
        predicate_runs.append(
            run_predicate(
                run,
                folder,
                headline_figures(run),
                _knowledge_base(run, index_dir, with_documents, payload),
                _questions_file(run, payload),
                read_checked_review(run),
            )
        )
    payload[REPORT] = render_report(runs, results, generated_at=audit_end).encode("utf-8")
    if labels_path is not None and labels:
        payload[LABELS] = _read(labels_path, "the labels")
    if calibration is not None:
        payload[CALIBRATION] = _read(calibration.path, "the calibration")
    versions = package_versions()
    for name in EVIDENCE_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    predicate = {
        "audit_period": {"start": audit_start, "end": audit_end},
        "runs": predicate_runs,
        "report": REPORT,
        "labels": None
        if LABELS not in payload
        else {
            "file": LABELS,
            "sha256": _sha256(payload[LABELS]),
            "count": len(labels or []),
            "outside_sample": labels_outside,
        },
        "calibration": None
        if calibration is None
        else {
            "file": CALIBRATION,
            "sha256": _sha256(payload[CALIBRATION]),
            "name": calibration.label,
            "threshold": calibration.data.get("threshold"),
            "domain": calibration.domain,
        },
        "gates": gate_results(results),
        "tool": {"name": "auditor", "version": __version__, "packages": versions},
    }
    return BundlePlan(payload, predicate, audit_end, runs)


def write_file_atomic(path: Path, data: bytes) -> None:
    """`path` replaced at once by `data` (mode 0644): a reader sees the old file or the new."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_bundle_output(
    out: Path,
    force: bool,
    reads: Sequence[Read],
    option: str = "--out",
    force_flag: str = "--force",
) -> None:
    """An output path the bundle may be written at: not an input, a file path in a writable
    folder, and no existing file unless `force` (`force_flag` empty: the command has none)."""
    check_output_file(out, option, reads)
    if os.path.lexists(out) and not force:
        fix = f", or {force_flag} to replace it" if force_flag else ", or remove it"
        raise BadInput(f"{option} {out}: exists; give another path{fix}")


def bundle_files(plan: BundlePlan, envelope: Envelope) -> dict[str, bytes]:
    """Every file of the tar: the payload, the tag files, the envelope."""
    return {**_subjects(plan), ENVELOPE: envelope.to_bytes()}


def _subjects(plan: BundlePlan) -> dict[str, bytes]:
    tags = bag_tag_files(plan.payload, f"auditor {__version__}", plan.audit_end[:10])
    return {**plan.payload, **tags}


def write_bundle(plan: BundlePlan, key: Ed25519PrivateKey, out: Path) -> Envelope:
    """The signed bundle at `out` (atomic); its envelope."""
    payload = canonical_json(statement(_subjects(plan), plan.predicate))
    signature = sign_payload(key, PAYLOAD_TYPE, payload, "auditor", plan.audit_end)
    envelope = Envelope(PAYLOAD_TYPE, payload, (signature,))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(out, tar_bytes(bundle_files(plan, envelope), plan.mtime))
    return envelope
