"""`auditor sign`: a countersignature (reviewer, approver) added to a bundle's envelope.

The signer signs the same statement as the bundler (DSSE allows several signatures). Before
that the bundle is verified as `auditor verify` verifies it, every check included: each
earlier signature must hold under a public key the signer trusts (`--trust KEY.pub`, the
signer's own key trusted without it), the files must be the statement's subjects, and the
figures must compute again from the bundle's files. A countersignature says "I checked this
audit, signed by these people, and approve it": nobody countersigns a changed bundle, figures
that do not follow from the records, or a signature they cannot check.

The bundle is written where it is: a symbolic link is followed and its target replaced, and
the target keeps its permission bits (a read-only 0444 bundle stays 0444: it is replaced by a
rename in its directory, which needs the directory writable, not the file). A bundle with
other hard links is refused: the rename gives the path a new file, so every other link would
keep the unsigned bundle; rewriting the file in place instead would keep the links but let a
crash or a full disk leave a torn bundle at every one of them. The tar is written again with
the same entries and headers.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from auditor.errors import BadInput
from auditor.evidence.bag import ENVELOPE, check_bounds, tar_bytes
from auditor.evidence.build import epoch_of, write_file_atomic
from auditor.evidence.dsse import Envelope, sign_payload
from auditor.evidence.keys import fingerprint
from auditor.evidence.verify import (
    VerificationFailed,
    check_subjects,
    read_bundle,
    read_statement,
    verify_bundle,
)

__all__ = ["countersign", "signing_target"]


def signing_target(path: Path) -> Path:
    """The file `sign` writes for `path`: the target of a symbolic link, a regular file with
    no other hard link, in a directory this process can replace it in. BadInput otherwise."""
    target = Path(os.path.realpath(path))
    if not target.is_file():
        raise BadInput(f"{path}: no such bundle; give the .tar `auditor bundle` wrote")
    links = os.stat(target).st_nlink
    if links > 1:
        raise BadInput(
            f"{path}: the bundle has {links} hard links, and signing replaces the file, so the "
            f"others would stay unsigned; sign a copy with one link (cp {path} COPY.tar), or "
            "remove the other links"
        )
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise BadInput(
            f"{path}: cannot replace {target} (its directory {target.parent} is not writable); "
            "copy the bundle to a writable directory and sign the copy"
        )
    return target


def _trusted_keys(
    path: Path,
    envelope: Envelope,
    key: Ed25519PrivateKey,
    trusted: Sequence[tuple[str, Ed25519PublicKey]],
) -> list[tuple[str, Ed25519PublicKey]]:
    """The keys verify checks the earlier signatures with: those given with --trust, and the
    signer's own where it signed before (in another role). BadInput when a signature is by a
    key not given and none was given; VerificationFailed when some were, as verify fails."""
    own = key.public_key()
    keys = {fingerprint(public): (name, public) for name, public in trusted}
    mine = fingerprint(own)
    if any(s.keyid == mine for s in envelope.signatures):
        keys.setdefault(mine, ("the signing key", own))
    for n, entry in enumerate(envelope.signatures, 1):
        if entry.keyid in keys:
            continue
        what = f"{path}: signature {n} ({entry.role}, key {entry.keyid[:16]})"
        if not trusted:
            raise BadInput(
                f"{what}: give the earlier signers' public keys with --trust KEY.pub (once per "
                "signer): a countersignature vouches for whose signatures it joins"
            )
        raise VerificationFailed(
            f"{what}: by no key given with --trust; give the signer's public key, or the "
            "bundle is not signed by the keys you trust"
        )
    signed = {s.keyid for s in envelope.signatures}
    for keyid, (name, _) in keys.items():
        if keyid not in signed:
            raise VerificationFailed(f"{path}: --trust {name} signed nothing in this bundle")
    return list(keys.values())


def countersign(
    path: Path,
    key: Ed25519PrivateKey,
    role: str,
    signed_at: str,
    trusted: Sequence[tuple[str, Ed25519PublicKey]] = (),
) -> Envelope:
    """`path` (a link followed) with one more signature by `key` in `role`, after the whole
    bundle verified with `trusted` (name, public key) for the earlier signatures; the new
    envelope. BadInput when the key already signed in that role, the bundle has other hard
    links, or no key to check an earlier signature was given; VerificationFailed when the
    bundle does not verify."""
    target = signing_target(path)
    before = os.stat(target)
    files, envelope = read_bundle(target)
    keyid = fingerprint(key.public_key())
    if any(s.keyid == keyid and s.role == role for s in envelope.signatures):
        raise BadInput(f"{path}: already signed by key {keyid[:16]} as {role}; nothing to add")
    verified = verify_bundle(target, _trusted_keys(path, envelope, key, trusted))
    after = os.stat(target)
    if (before.st_ino, before.st_size, before.st_mtime_ns) != (
        after.st_ino,
        after.st_size,
        after.st_mtime_ns,
    ) or verified.statement_sha256 != envelope.statement_sha256:
        raise VerificationFailed(f"{path}: changed while it was verified; sign it again")
    data = read_statement(target, envelope.payload)
    check_subjects(target, files, data["subject"])  # the bytes written are the bytes verified
    entry = sign_payload(key, envelope.payload_type, envelope.payload, role, signed_at)
    signed = envelope.with_signature(entry)
    end = (data["predicate"].get("audit_period") or {}).get("end")
    if not isinstance(end, str):
        raise VerificationFailed(f"{path}: the statement has no audit_period.end")
    written = {**files, ENVELOPE: signed.to_bytes()}
    if problem := check_bounds({name: len(content) for name, content in written.items()}):
        raise BadInput(f"{path}: {problem} once signed; not signed")
    write_file_atomic(target, tar_bytes(written, epoch_of(end)), stat.S_IMODE(before.st_mode))
    return signed
