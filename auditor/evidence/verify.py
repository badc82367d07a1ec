"""`auditor verify`: a bundle checked offline against the public keys the verifier brings.

In order, stopping at the first failure (`VerificationFailed`, exit 1, one line naming it):
every tar member is safe (before anything is extracted), the envelope is there, every
signature holds under a key given (never a key shipped in the bundle) and every key given
signed, the statement is ours, the bundle's files are exactly the statement's subjects with
their digests, and the figures computed again from the bundle's records, checks, labels and
calibration equal the statement's. A bundle of a newer predicate version is bad input (exit 2).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from auditor.calibrate import load_calibration
from auditor.errors import AuditorError, BadInput
from auditor.evidence.bag import ENVELOPE, BagError, extract_to, read_tar
from auditor.evidence.canonical import canonical_json
from auditor.evidence.dsse import PAYLOAD_TYPE, Envelope, EnvelopeError
from auditor.evidence.figures import (
    compare,
    gate_results,
    gates_of,
    headline_figures,
    summarize_runs,
)
from auditor.evidence.keys import fingerprint
from auditor.evidence.statement import (
    PREDICATE_VERSION,
    STATEMENT_TYPE,
    predicate_version,
)
from auditor.results import load_run
from auditor.review import read_review_labels

__all__ = ["Signer", "VerificationFailed", "Verified", "read_bundle", "verify_bundle"]


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


def _check_figures(path: Path, files: dict[str, bytes], predicate: dict[str, Any]) -> None:
    """The figures computed again, by the audit's own code, from the bundle's files."""
    referenced = [str(run.get("run_dir")) + "/manifest.json" for run in predicate["runs"]]
    referenced += [str(predicate[k]["file"]) for k in ("labels", "calibration") if predicate.get(k)]
    for name in referenced:
        if name not in files:  # every file the figures are computed from is a checked subject
            raise VerificationFailed(f"{path}: the statement names {name}, not in the bundle")
    with tempfile.TemporaryDirectory(prefix="auditor-verify-") as tmp:
        root = Path(tmp)
        extract_to(files, root)
        try:
            calibration = predicate.get("calibration")
            labels = predicate.get("labels")
            runs = [load_run(root / str(run["run_dir"])) for run in predicate["runs"]]
            results = summarize_runs(
                runs,
                None
                if not calibration
                else load_calibration(root / calibration["file"], calibration.get("name") or ""),
                None if not labels else read_review_labels(root / labels["file"]),
                None if not labels else root / labels["file"],
                "refuse" if not labels else str(labels.get("outside_sample", "refuse")),
                gates_of(predicate.get("gates") or []),
            )
        except (AuditorError, KeyError, TypeError) as exc:
            raise VerificationFailed(
                f"{path}: the figures cannot be computed again from the bundle ({exc})"
            ) from exc
        for recorded, run in zip(predicate["runs"], runs, strict=True):
            computed = json.loads(canonical_json(headline_figures(run)))
            problem = compare(recorded.get("figures"), computed, f"runs[{run.name}].figures")
            if problem:
                raise VerificationFailed(f"{path}: {problem}")
        computed_gates = json.loads(canonical_json(gate_results(results)))
        problem = compare(predicate.get("gates"), computed_gates, "gates")
        if problem:
            raise VerificationFailed(f"{path}: {problem}")


def verify_bundle(path: Path, keys: Sequence[tuple[str, Ed25519PublicKey]]) -> Verified:
    """The bundle at `path` checked against `keys` (name shown, public key)."""
    files, envelope = read_bundle(path)
    signers = _check_signatures(path, envelope, keys)
    data = read_statement(
        path, envelope.payload
    )  # the payload bytes the signatures were checked on
    check_subjects(path, files, data["subject"])
    runs = data["predicate"].get("runs")
    if not isinstance(runs, list) or not runs:
        raise VerificationFailed(f"{path}: the statement's predicate names no run")
    _check_figures(path, files, data["predicate"])
    return Verified(envelope.statement_sha256, signers, len(files), data["predicate"])
