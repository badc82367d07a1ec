"""`auditor verify`: a bundle checked offline against the public keys the verifier brings.

In order, stopping at the first failure (`VerificationFailed`, exit 1, one line naming it):
every tar member is safe (before anything is extracted), the envelope is there, every
signature holds under a key given (never a key shipped in the bundle) and every key given
signed, the statement is ours, the bundle's files are exactly the statement's subjects with
their digests, the BagIt tag files are what the payload gives, the payload holds records only
(each run the predicate names and no other, nothing derived), and the whole predicate computed
again from those records (`statement.predicate`: the code `bundle` computed it with) equals
the signed one, field by field. So a key holder cannot sign a figure, a reviewer, a judge or a
file list that the bundle's records do not give. Labels are read as of the statement's audit
end (the bundler's signing time), not the verifier's clock. A bundle of a newer predicate
version is bad input (exit 2).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from auditor.calibrate import load_calibration
from auditor.errors import AuditorError, BadInput
from auditor.evidence.bag import ENVELOPE, BagError, bag_tag_files, extract_to, read_tar
from auditor.evidence.canonical import canonical_json
from auditor.evidence.dsse import PAYLOAD_TYPE, Envelope, EnvelopeError
from auditor.evidence.figures import MISSING, compare, gates_of, summarize_runs
from auditor.evidence.keys import fingerprint
from auditor.evidence.statement import (
    BAG_AGENT,
    CALIBRATION,
    LABELS,
    PREDICATE_VERSION,
    RUN_FILES,
    STATEMENT_TYPE,
    BagMismatch,
    accounted_files,
    moment,
    predicate,
    predicate_version,
)
from auditor.results import SUMMARY, load_run
from auditor.review import OUTSIDE_SAMPLE, read_review_labels

__all__ = [
    "Signer",
    "VerificationFailed",
    "Verified",
    "check_contents",
    "check_subjects",
    "read_bundle",
    "read_statement",
    "verify_bundle",
]


class VerificationFailed(AuditorError):
    """The bundle does not verify: the message names the first file, field or signature."""

    exit_code = 1


@dataclass(frozen=True)
class Signer:
    """A signature that held: who (key fingerprint, the key file given), in which role, and
    the time the signer's own clock gave (not proven)."""

    keyid: str
    role: str
    signed_at: str
    key: str
    rfc3161_timestamp: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.keyid,
            "role": self.role,
            "signed_at": self.signed_at,
            "key": self.key,
            "rfc3161_timestamp": self.rfc3161_timestamp,
        }


@dataclass(frozen=True)
class Verified:
    statement_sha256: str
    signers: list[Signer]
    files: int
    predicate: dict[str, Any]


def read_bundle(path: Path) -> tuple[dict[str, bytes], Envelope]:
    """A bundle's files (checked safe) and its parsed envelope; BadInput when `path` is no
    file, VerificationFailed when the tar or the envelope is unsafe or damaged."""
    if not path.is_file():
        raise BadInput(f"{path}: no such bundle; give the .tar `auditor bundle` wrote")
    try:
        files = read_tar(path)
    except BagError as exc:
        raise VerificationFailed(f"{path}: {exc}") from exc
    if ENVELOPE not in files:
        raise VerificationFailed(f"{path}: no {ENVELOPE} (the signed statement); not a bundle")
    try:
        envelope = Envelope.from_bytes(files[ENVELOPE])
    except EnvelopeError as exc:
        raise VerificationFailed(f"{path}: {ENVELOPE}: {exc}") from exc
    return files, envelope


def _check_signatures(
    path: Path, envelope: Envelope, keys: Sequence[tuple[str, Ed25519PublicKey]]
) -> list[Signer]:
    if envelope.payload_type != PAYLOAD_TYPE:
        raise VerificationFailed(
            f"{path}: {ENVELOPE}: payloadType {envelope.payload_type!r}, not {PAYLOAD_TYPE}"
        )
    if not envelope.signatures:
        raise VerificationFailed(f"{path}: {ENVELOPE}: no signature")
    by_id = {fingerprint(key): (name, key) for name, key in keys}
    signers = []
    for n, entry in enumerate(envelope.signatures, 1):
        what = f"{path}: signature {n} ({entry.role}, key {entry.keyid[:16]})"
        found = by_id.get(entry.keyid)
        if found is None:
            raise VerificationFailed(
                f"{what}: by no key given with --key; give the signer's public key, or the "
                "bundle is not signed by the keys you trust"
            )
        name, key = found
        problem = entry.verify(key, envelope.payload_type, envelope.payload)
        if problem:
            raise VerificationFailed(f"{what}: {problem} (key {name})")
        signers.append(
            Signer(entry.keyid, entry.role, entry.signed_at, name, entry.rfc3161_timestamp)
        )
    signed = {s.keyid for s in signers}
    for keyid, (name, _) in by_id.items():
        if keyid not in signed:
            raise VerificationFailed(f"{path}: --key {name} signed nothing in this bundle")
    return signers


def read_statement(path: Path, payload: bytes) -> dict[str, Any]:
    """The statement the payload holds, of a predicate version this auditor reads."""
    try:
        data = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise VerificationFailed(f"{path}: the signed statement is not JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("_type") != STATEMENT_TYPE:
        raise VerificationFailed(f"{path}: the signed statement is not an in-toto Statement v1")
    version = predicate_version(data.get("predicateType"))
    if version is None:
        raise VerificationFailed(
            f"{path}: predicateType {data.get('predicateType')!r} is not an auditor bundle's"
        )
    if version > PREDICATE_VERSION:
        raise BadInput(
            f"{path}: a bundle of predicate version {version}, from a newer auditor; this one "
            f"reads version {PREDICATE_VERSION}: verify it with a newer auditor"
        )
    if not isinstance(data.get("predicate"), dict) or not isinstance(data.get("subject"), list):
        raise VerificationFailed(f"{path}: the statement has no predicate or subjects")
    return data


def check_subjects(path: Path, files: dict[str, bytes], subjects: list[Any]) -> None:
    """The bundle's files (the envelope aside) are the subjects, each with its digest."""
    listed: dict[str, str] = {}
    for subject in subjects:
        name = subject.get("name") if isinstance(subject, dict) else None
        digest = (subject.get("digest") or {}).get("sha256") if isinstance(subject, dict) else None
        if not isinstance(name, str) or not isinstance(digest, str) or name in listed:
            raise VerificationFailed(
                f"{path}: a subject of the statement is malformed: {subject!r}"
            )
        listed[name] = digest
    present = set(files) - {ENVELOPE}
    for name in sorted(listed.keys() | present):
        if name not in present:
            raise VerificationFailed(f"{path}: {name}: in the statement, missing from the bundle")
        if name not in listed:
            raise VerificationFailed(f"{path}: {name}: in the bundle, not in the statement (added)")
        if hashlib.sha256(files[name]).hexdigest() != listed[name]:
            raise VerificationFailed(f"{path}: {name}: changed (sha256 differs from the statement)")


def _check_tag_files(path: Path, files: dict[str, bytes], end: str) -> None:
    """The BagIt tag files must be what the payload (data/...) gives, byte for byte, and
    nothing else may lie outside data/."""
    payload = {name: data for name, data in files.items() if name.startswith("data/")}
    tags = bag_tag_files(payload, BAG_AGENT, end[:10])
    for name in sorted((files.keys() - payload.keys() - {ENVELOPE}) | tags.keys()):
        if name not in tags:
            raise VerificationFailed(
                f"{path}: {name}: outside data/ and not a BagIt tag file; a bundle holds none"
            )
        if files.get(name) != tags[name]:
            raise VerificationFailed(
                f"{path}: {name}: not the BagIt tag file the payload gives (written from the "
                "payload's files and the audit's end)"
            )


def _run_folders(path: Path, payload: dict[str, bytes], runs: list[Any]) -> list[str]:
    """The run folders the predicate names, in its order; every run in the bag is one of them,
    and each holds records only."""
    named = [str(run.get("run_dir")) if isinstance(run, dict) else "" for run in runs]
    if len(set(named)) != len(named):
        raise VerificationFailed(f"{path}: the statement's predicate names a run twice")
    found: set[str] = set()
    for name in sorted(payload):
        parts = name.split("/")
        if parts[:2] != ["data", "runs"]:
            continue
        if len(parts) != 4:
            raise VerificationFailed(f"{path}: {name}: not a file of a run dir's records")
        folder = "/".join(parts[:3])
        found.add(folder)
        if parts[3] not in RUN_FILES:
            derived = parts[3] in (SUMMARY, "report.html")
            raise VerificationFailed(
                f"{path}: {name}: "
                + (
                    "derived from the records, which verify cannot check as signed; a bundle "
                    "holds none (`auditor report` renders it from the records)"
                    if derived
                    else "not a record of a run dir (" + ", ".join(RUN_FILES) + ")"
                )
            )
    if extra := sorted(found - set(named)):
        raise VerificationFailed(
            f"{path}: {extra[0]}: a run in the bundle that the statement's predicate omits"
        )
    if missing := [n for n in named if n not in found]:
        raise VerificationFailed(
            f"{path}: {missing[0]}: a run the statement names, not in the bundle"
        )
    return named


def _as_of(path: Path, recorded: dict[str, Any]) -> datetime:
    """The statement's audit end (the bundler's signing time): the time its labels are read as
    of, instead of this machine's clock."""
    period = recorded.get("audit_period")
    end = period.get("end") if isinstance(period, dict) else None
    when = moment(end)
    if when is None:
        raise VerificationFailed(
            f"{path}: the statement's audit_period.end {end!r} is not a time with a zone"
        )
    return when


def check_contents(path: Path, files: dict[str, bytes], recorded: dict[str, Any]) -> None:
    """The whole predicate computed again from the bag's records, by the code `bundle` used,
    compared with the signed one field by field; then every payload file must be one the
    predicate is computed from."""
    runs = recorded.get("runs")
    if not isinstance(runs, list) or not runs:
        raise VerificationFailed(f"{path}: the statement's predicate names no run")
    as_of = _as_of(path, recorded)
    payload = {name: data for name, data in files.items() if name.startswith("data/")}
    folders = _run_folders(path, payload, runs)
    _check_tag_files(path, files, str(recorded["audit_period"]["end"]))
    recorded_labels = recorded.get("labels")
    outside = (
        recorded_labels.get("outside_sample", "refuse")
        if isinstance(recorded_labels, dict)
        else "refuse"
    )
    if outside not in OUTSIDE_SAMPLE:
        raise VerificationFailed(
            f"{path}: labels.outside_sample {outside!r} in the statement is none of "
            + ", ".join(OUTSIDE_SAMPLE)
        )
    with tempfile.TemporaryDirectory(prefix="auditor-verify-") as tmp:
        root = Path(tmp)
        extract_to(payload, root)
        try:
            loaded = [load_run(root / folder) for folder in folders]
            labels = read_review_labels(root / LABELS, now=as_of) if LABELS in payload else None
            calibration = load_calibration(root / CALIBRATION) if CALIBRATION in payload else None
            results = summarize_runs(
                loaded,
                calibration,
                labels,
                root / LABELS if labels else None,
                outside,
                gates_of(recorded.get("gates") or []),
            )
            computed = json.loads(
                canonical_json(predicate(loaded, payload, results, labels, outside, calibration))
            )
        except BagMismatch as exc:
            raise VerificationFailed(f"{path}: {exc}") from exc
        except (AuditorError, KeyError, TypeError, ValueError) as exc:
            said = str(exc).replace(f"{root}/", "").replace(str(root), ".")
            raise VerificationFailed(
                f"{path}: the statement cannot be computed again from the bundle's files ({said})"
            ) from exc
    for mine, theirs in zip(runs, computed["runs"], strict=True):
        name = theirs["pipeline"]
        problem = compare(mine, theirs, f"runs[{name}]")
        if problem:
            raise VerificationFailed(f"{path}: {problem}")
    for key in sorted(recorded.keys() | computed.keys()):
        if key != "runs" and (
            problem := compare(recorded.get(key, MISSING), computed.get(key, MISSING), key)
        ):
            raise VerificationFailed(f"{path}: {problem}")
    accounted = accounted_files(computed, payload)
    if unaccounted := sorted(payload.keys() - accounted):
        raise VerificationFailed(
            f"{path}: {unaccounted[0]}: in the bundle, but no field of the statement is computed "
            "from it (a bundle holds the audit's records only)"
        )


def verify_bundle(path: Path, keys: Sequence[tuple[str, Ed25519PublicKey]]) -> Verified:
    """The bundle at `path` checked against `keys` (name shown, public key)."""
    files, envelope = read_bundle(path)
    signers = _check_signatures(path, envelope, keys)
    data = read_statement(
        path, envelope.payload
    )  # the payload bytes the signatures were checked on
    check_subjects(path, files, data["subject"])
    check_contents(path, files, data["predicate"])
    return Verified(envelope.statement_sha256, signers, len(files), data["predicate"])
