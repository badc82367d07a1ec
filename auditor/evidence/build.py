"""`auditor bundle`: plan a bundle (every input read and checked, nothing written), then write
it: the bag's files, the statement over them, the bundler's signature, one tar.

The bag holds records only (nothing derived: no summary.json, no report; `auditor report`
renders them from the records), and the predicate is computed from the bag's files by
`statement.predicate`, the function `verify` computes it again with. Same inputs, same bytes:
the bundler's signature carries the audit's end (not the clock), every tar header has it as
mtime, and Ed25519 signatures are deterministic.

Wherever it is run from, a bundle holds the whole audit or is refused: the index, the question
set and (asked for) the documents are found from what the run's manifest and the index's
manifest recorded, each checked against its recorded sha256. A recorded path is absolute, or
relative to the directory the run (or ingest) ran in, which neither manifest records; so a
relative one is looked for under the current directory, then under each folder above the run
dir (and, for documents, above the index dir): a run dir is most often made under the
directory its command ran in. What is found nowhere is refused, naming the path and the option
that gives it (`--index DIR`, `--questions FILE`, `--with-documents DIR`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from auditor.calibrate import Calibration
from auditor.errors import BadInput
from auditor.evidence.bag import ENVELOPE, bag_tag_files, check_bounds, tar_bytes
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
from auditor.gates import Gate, GateResult
from auditor.ingest.manifest import MANIFEST_NAME, IndexManifest, read_manifest
from auditor.report import refuse_shared_names
from auditor.results import RunArtifacts, load_run
from auditor.review import ReviewLabel
from auditor.store import CHECK_MANIFEST, MANIFEST

__all__ = [
    "RUN_FILES",
    "BundlePlan",
    "bundle_member_count",
    "plan_bundle",
    "write_bundle",
    "write_file_atomic",
]


@dataclass
class BundlePlan:
    """A bundle ready to write: its payload files (bag paths) and predicate."""

    payload: dict[str, bytes]
    predicate: dict[str, Any]
    audit_end: str
    runs: list[RunArtifacts] = field(default_factory=list)
    gate_results: list[GateResult] = field(default_factory=list)

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


def _places(recorded: str, anchors: Sequence[Path]) -> list[Path]:
    """Where a path a manifest recorded may be now, likeliest first: an absolute one where it
    was; a relative one (relative to the directory its command ran in, which no manifest
    records) under the current directory, then under each of `anchors` and the folders above
    them. The caller keeps the first whose sha256 is the recorded one."""
    path = Path(recorded)
    if path.is_absolute():
        return [path]
    bases = [Path.cwd()]
    for anchor in anchors:
        where = anchor.resolve()
        bases += [where, *where.parents]
    return [base / path for base in dict.fromkeys(bases)]


def _find(
    places: Sequence[Path],
    accept: Callable[[Path], bool],
    exists: Callable[[Path], bool] = Path.is_file,
) -> tuple[Path | None, Path | None]:
    """(the first place `accept` takes, None) or (None, the first place that `exists` but was
    not taken: it changed since it was recorded)."""
    changed = None
    for place in places:
        if not exists(place):
            continue
        if accept(place):
            return place, None
        changed = changed or place
    return None, changed


def _knowledge_base(
    run: RunArtifacts,
    index_dir: Path | None,
    documents_dir: Path | None,
    with_documents: bool,
    payload: dict[str, bytes],
) -> None:
    """The run's index manifest (and documents) into `payload`, each found with the sha256 the
    run recorded; nothing for answers imported without an index."""
    section = run.manifest.get("index") or {}
    digest = str(section.get("manifest_sha256") or "")
    if not digest:
        return
    recorded = str(section.get("path"))
    places = [index_dir] if index_dir is not None else _places(recorded, [run.run_dir])

    def same_index(where: Path) -> bool:
        return _sha256(_read(where / MANIFEST_NAME, "the index manifest")) == digest

    where, changed = _find(places, same_index, lambda where: (where / MANIFEST_NAME).is_file())
    if where is None and changed is not None:
        raise BadInput(
            f"{changed / MANIFEST_NAME}: not the index {run.run_dir} was run against (its "
            "manifest changed since: re-ingested?); give that index's dir with --index"
        )
    if where is None:
        shown = index_dir if index_dir is not None else recorded
        raise BadInput(
            f"{run.run_dir}: its index {shown} is not here (no {MANIFEST_NAME} of sha256 "
            f"{digest[:16]} under this directory or the run dir's); give the index dir with "
            "--index"
        )
    path = where / MANIFEST_NAME
    data = _read(path, "the index manifest")
    manifest = read_manifest(where)  # validated as ingest wrote it
    folder = index_folder(digest)
    payload[f"{folder}/{MANIFEST_NAME}"] = data
    if with_documents:
        _documents(manifest, path, where, run.run_dir, documents_dir, folder, payload)


def _documents(
    manifest: IndexManifest,
    manifest_path: Path,
    index_dir: Path,
    run_dir: Path,
    documents_dir: Path | None,
    folder: str,
    payload: dict[str, bytes],
) -> None:
    """Every indexed document into `payload`, each found (`documents_dir`, else where ingest
    read it) with the sha256 the index records; BadInput naming the first one found nowhere or
    changed."""
    corpora = (
        [documents_dir]
        if documents_dir is not None
        else _places(manifest.corpus_dir, [index_dir, run_dir])
    )
    for doc in manifest.documents:
        relative = PurePosixPath(doc.path)
        if relative.is_absolute() or ".." in relative.parts:
            raise BadInput(
                f"{manifest_path}: document path {doc.path!r} leaves the corpus; re-ingest"
            )
        found: dict[Path, bytes] = {}

        def indexed(
            place: Path, digest: str = doc.sha256, found: dict[Path, bytes] = found
        ) -> bool:
            found[place] = _read(place, "an indexed document")
            return _sha256(found[place]) == digest

        where, changed = _find([corpus / doc.path for corpus in corpora], indexed)
        if where is not None:
            payload[f"{folder}/documents/{relative.as_posix()}"] = found[where]
            continue
        if changed is not None:
            raise BadInput(
                f"{changed}: changed since it was indexed (sha256 differs from "
                f"{manifest_path}); give the corpus as indexed with --with-documents DIR, "
                "bundle without --with-documents, or re-ingest and audit again"
            )
        shown = documents_dir if documents_dir is not None else manifest.corpus_dir
        raise BadInput(
            f"{Path(shown) / doc.path}: an indexed document is not here (nor under this "
            "directory or the index's); give the corpus dir it was indexed from with "
            "--with-documents DIR"
        )


def _questions_file(
    run: RunArtifacts, given: Sequence[Path], used: set[Path], payload: dict[str, bytes]
) -> str | None:
    """The question set as asked into `payload`: a `--questions` file, else where the run
    read it, of the sha256 the run recorded; None for answers imported without one. BadInput
    when it is found nowhere, or only changed."""
    section = run.manifest.get("questions") or {}
    recorded, digest = section.get("path"), str(section.get("sha256") or "")
    if not digest:
        return None
    found: dict[Path, bytes] = {}

    def asked(place: Path) -> bool:
        found[place] = _read(place, "the questions")
        return _sha256(found[place]) == digest

    places = [*given, *([] if not recorded else _places(str(recorded), [run.run_dir]))]
    where, changed = _find(places, asked)
    if where is None and changed is not None:
        raise BadInput(
            f"{changed}: not the question set {run.run_dir} asked (its sha256 differs from the "
            "run's manifest: changed since?); give the file as asked with --questions FILE"
        )
    if where is None:
        raise BadInput(
            f"{recorded}: {run.run_dir}'s question set is not here (nor under this directory "
            "or the run dir's); give it with --questions FILE"
        )
    used.update(p for p in given if p == where)
    name = questions_name(digest)
    payload[name] = found[where]
    return name


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
    documents_dir: Path | None = None,
    questions: Sequence[Path] = (),
) -> BundlePlan:
    """Everything a bundle holds, every input checked; nothing is written. `index_dir`,
    `documents_dir` and `questions` are where the index, the documents and the question
    set(s) are when not where the manifests recorded them."""
    runs = [_checked_run(run_dir) for run_dir in run_dirs]
    refuse_shared_names(runs)
    results = summarize_runs(runs, calibration, labels, labels_path, labels_outside, gates)
    payload: dict[str, bytes] = {}
    used: set[Path] = set()
    for run in runs:
        folder = run_folder(run.name)
        for name in RUN_FILES:
            if (run.run_dir / name).is_file():
                payload[f"{folder}/{name}"] = _read(run.run_dir / name, name)
        _knowledge_base(run, index_dir, documents_dir, with_documents, payload)
        _questions_file(run, questions, used, payload)
    if unused := [path for path in questions if path not in used]:
        raise BadInput(
            f"--questions {unused[0]}: the question set of no run given (its sha256 is none of "
            "their manifests'); give the file each run asked"
        )
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
    return BundlePlan(payload, found, found["audit_period"]["end"], runs, list(results))


def write_file_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """`path` replaced at once by `data` (`mode`): a reader sees the old file or the new. The
    new file is renamed over `path` in its directory: a read-only `path` is replaced all the
    same, and a hard link to the old file keeps the old bytes."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
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


def bundle_member_count(plan: BundlePlan) -> int:
    """How many files the bundle's tar holds: the payload, the tag files and the envelope, as
    `verify` counts them."""
    return len(_subjects(plan)) + 1


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
    files = bundle_files(plan, envelope)
    if problem := check_bounds({name: len(data) for name, data in files.items()}):
        raise BadInput(
            f"{out}: {problem}, so `auditor verify` would refuse it: not written; bundle fewer "
            "runs, or leave the documents out"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(out, tar_bytes(files, plan.mtime))
    return envelope
