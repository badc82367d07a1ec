"""`auditor bundle`: plan a bundle (every input read and checked, nothing written), then write
it: the bag's files, the statement over them, the bundler's signature, one tar.

The bag holds records only (nothing derived: no summary.json, no report; `auditor report`
renders them from the records), and the predicate is computed from the bag's files by
`statement.predicate`, the function `verify` computes it again with. Same inputs, same bytes:
the bundler's signature carries the audit's end (not the clock), every tar header has it as
mtime, and Ed25519 signatures are deterministic.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from auditor.calibrate import Calibration
from auditor.errors import BadInput
from auditor.evidence.bag import ENVELOPE, bag_tag_files, tar_bytes
from auditor.evidence.canonical import canonical_json
from auditor.evidence.dsse import PAYLOAD_TYPE, Envelope, sign_payload
from auditor.evidence.figures import summarize_runs
from auditor.evidence.statement import (
    BAG_AGENT,
    CALIBRATION,
    LABELS,
    RUN_FILES,
    index_folder,
    predicate,
    questions_name,
    run_folder,
    statement,
)
from auditor.files import Read, check_output_file
from auditor.gates import Gate
from auditor.ingest.manifest import MANIFEST_NAME, read_manifest
from auditor.report import refuse_shared_names
from auditor.results import RunArtifacts, load_run
from auditor.review import ReviewLabel
from auditor.store import CHECK_MANIFEST, MANIFEST

__all__ = ["RUN_FILES", "BundlePlan", "plan_bundle", "write_bundle", "write_file_atomic"]


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
) -> None:
    """The run's index manifest (and documents) into `payload`, each checked against what the
    run recorded; nothing for answers imported without an index."""
    section = run.manifest.get("index") or {}
    if not section.get("manifest_sha256"):
        return
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
    folder = index_folder(section["manifest_sha256"])
    payload[f"{folder}/{MANIFEST_NAME}"] = data
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


def _questions_file(run: RunArtifacts, payload: dict[str, bytes]) -> None:
    """The question set as asked into `payload`, when it is still where the run read it,
    unchanged (the digest in the predicate still names the set asked otherwise)."""
    section = run.manifest.get("questions") or {}
    path, digest = section.get("path"), section.get("sha256")
    if not path or not digest or not Path(path).is_file():
        return
    data = _read(Path(path), "the questions")
    if _sha256(data) == digest:
        payload[questions_name(digest)] = data


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
    payload: dict[str, bytes] = {}
    for run in runs:
        folder = run_folder(run.name)
        for name in RUN_FILES:
            if (run.run_dir / name).is_file():
                payload[f"{folder}/{name}"] = _read(run.run_dir / name, name)
        _knowledge_base(run, index_dir, with_documents, payload)
        _questions_file(run, payload)
    if labels_path is not None and labels:
        payload[LABELS] = _read(labels_path, "the labels")
    if calibration is not None:
        payload[CALIBRATION] = _read(calibration.path, "the calibration")
    found = predicate(
        runs,
        payload,
        results,
        labels if LABELS in payload else None,
        labels_outside,
        calibration,
    )
    return BundlePlan(payload, found, found["audit_period"]["end"], runs)


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
    tags = bag_tag_files(plan.payload, BAG_AGENT, plan.audit_end[:10])
    return {**plan.payload, **tags}


def write_bundle(plan: BundlePlan, key: Ed25519PrivateKey, out: Path) -> Envelope:
    """The signed bundle at `out` (atomic); its envelope."""
    payload = canonical_json(statement(_subjects(plan), plan.predicate))
    signature = sign_payload(key, PAYLOAD_TYPE, payload, "auditor", plan.audit_end)
    envelope = Envelope(PAYLOAD_TYPE, payload, (signature,))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(out, tar_bytes(bundle_files(plan, envelope), plan.mtime))
    return envelope
