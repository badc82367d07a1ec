"""`auditor sign`: a countersignature (reviewer, approver) added to a bundle's envelope.

The signer signs the same statement as the bundler (DSSE allows several signatures); before
that, the bundle's files are checked against the statement's subjects and the statement against
the records (as `verify` does), so nobody countersigns a bundle that was changed, or a statement
its records do not give. The tar is written again with the same entries and headers.
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from auditor.errors import BadInput
from auditor.evidence.bag import ENVELOPE, tar_bytes
from auditor.evidence.build import epoch_of, write_file_atomic
from auditor.evidence.dsse import Envelope, sign_payload
from auditor.evidence.keys import fingerprint
from auditor.evidence.verify import (
    VerificationFailed,
    check_contents,
    check_subjects,
    read_bundle,
    read_statement,
)

__all__ = ["countersign"]


def countersign(path: Path, key: Ed25519PrivateKey, role: str, signed_at: str) -> Envelope:
    """`path` with one more signature by `key` in `role`; the new envelope. BadInput when the
    key already signed in that role; VerificationFailed when the bundle is damaged."""
    files, envelope = read_bundle(path)
    data = read_statement(path, envelope.payload)
    check_subjects(path, files, data["subject"])
    check_contents(path, files, data["predicate"])  # the statement follows from the records
    keyid = fingerprint(key.public_key())
    if any(s.keyid == keyid and s.role == role for s in envelope.signatures):
        raise BadInput(f"{path}: already signed by key {keyid[:16]} as {role}; nothing to add")
    entry = sign_payload(key, envelope.payload_type, envelope.payload, role, signed_at)
    signed = envelope.with_signature(entry)
    end = (data["predicate"].get("audit_period") or {}).get("end")
    if not isinstance(end, str):
        raise VerificationFailed(f"{path}: the statement has no audit_period.end")
    write_file_atomic(path, tar_bytes({**files, ENVELOPE: signed.to_bytes()}, epoch_of(end)))
    return signed
