"""DSSE envelopes (https://github.com/secure-systems-lab/dsse, protocol v1.0.2) with several
signatures over one payload: the bundler's, then countersignatures (`auditor sign`).

Each signature is Ed25519 over PAE(payloadType, payload), as the protocol says. The envelope
format lets producers add fields, and each signature object carries four of ours:
`role` (auditor, reviewer, approver), `signed_at` (the signer's own clock: a signature proves
who, not when), `claim_sig` (the same key's Ed25519 signature over the PAE of the canonical
claim {keyid, role, signed_at, statement_sha256}, so a role or a time cannot be edited without
the key) and `rfc3161_timestamp` (null; room for a base64 RFC 3161 TimeStampToken over the
`sig` bytes where a team has a timestamp authority).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from auditor.evidence.canonical import canonical_json
from auditor.evidence.keys import fingerprint

__all__ = [
    "CLAIM_TYPE",
    "PAYLOAD_TYPE",
    "ROLES",
    "Envelope",
    "EnvelopeError",
    "SignatureEntry",
    "pae",
    "sign_payload",
]

PAYLOAD_TYPE = "application/vnd.in-toto+json"
# the payload type of a signature's claim: our own, so a claim's signature can never be taken
# for a statement's (PAE binds the type)
CLAIM_TYPE = "application/vnd.auditor.signature-claim+json"
ROLES = ("auditor", "reviewer", "approver")


class EnvelopeError(Exception):
    """An envelope that cannot be read or a signature that does not hold: what verify names."""


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body,
    lengths as ASCII decimals of byte counts."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def _b64decode(text: Any, what: str) -> bytes:
    """Standard or URL-safe base64 (the protocol says a verifier accepts either)."""
    if not isinstance(text, str):
        raise EnvelopeError(f"{what} is not a base64 string")
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EnvelopeError(f"{what} is not base64 ({exc})") from exc


@dataclass(frozen=True)
class SignatureEntry:
    """One signature of the envelope with the claim that names its role and time."""

    keyid: str
    sig: bytes
    role: str
    signed_at: str
    claim_sig: bytes
    rfc3161_timestamp: str | None = None

    def claim(self, statement_sha256: str) -> bytes:
        """The canonical claim `claim_sig` signs."""
        return canonical_json(
            {
                "keyid": self.keyid,
                "role": self.role,
                "signed_at": self.signed_at,
                "statement_sha256": statement_sha256,
            }
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "keyid": self.keyid,
            "sig": base64.b64encode(self.sig).decode("ascii"),
            "role": self.role,
            "signed_at": self.signed_at,
            "claim_sig": base64.b64encode(self.claim_sig).decode("ascii"),
            "rfc3161_timestamp": self.rfc3161_timestamp,
        }

    def verify(self, key: Ed25519PublicKey, payload_type: str, payload: bytes) -> str | None:
        """Why this signature does not hold under `key` (None: it holds, claim included)."""
        statement_sha256 = hashlib.sha256(payload).hexdigest()
        try:
            key.verify(self.sig, pae(payload_type, payload))
        except InvalidSignature:
            return "the signature does not match the statement"
        try:
            key.verify(self.claim_sig, pae(CLAIM_TYPE, self.claim(statement_sha256)))
        except InvalidSignature:
            return "its role or time was changed after signing (claim_sig does not match)"
        return None


def sign_payload(
    key: Ed25519PrivateKey, payload_type: str, payload: bytes, role: str, signed_at: str
) -> SignatureEntry:
    """A signature of `payload` by `key` in `role`, with its signed claim."""
    keyid = fingerprint(key.public_key())
    entry = SignatureEntry(keyid, key.sign(pae(payload_type, payload)), role, signed_at, b"")
    claim = entry.claim(hashlib.sha256(payload).hexdigest())
    return SignatureEntry(keyid, entry.sig, role, signed_at, key.sign(pae(CLAIM_TYPE, claim)), None)


@dataclass(frozen=True)
class Envelope:
    """A DSSE JSON envelope: the payload (bytes as signed), its type, the signatures."""

    payload_type: str
    payload: bytes
    signatures: tuple[SignatureEntry, ...]

    @property
    def statement_sha256(self) -> str:
        """sha256 of the payload bytes: the statement's digest, what history and reports show."""
        return hashlib.sha256(self.payload).hexdigest()

    def with_signature(self, entry: SignatureEntry) -> Envelope:
        return Envelope(self.payload_type, self.payload, (*self.signatures, entry))

    def to_bytes(self) -> bytes:
        """The envelope file: sorted keys, indented, one trailing newline (deterministic)."""
        data = {
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "payloadType": self.payload_type,
            "signatures": [s.to_json() for s in self.signatures],
        }
        return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Envelope:
        """Parse an envelope; EnvelopeError naming the field that is missing or malformed, or a
        signature that repeats another (the same key in the same role): `auditor sign` never
        writes one, so verify and sign both refuse it."""
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise EnvelopeError(f"not JSON ({exc})") from exc
        if not isinstance(raw, dict):
            raise EnvelopeError("not a JSON object")
        payload_type = raw.get("payloadType")
        if not isinstance(payload_type, str):
            raise EnvelopeError("payloadType is missing")
        payload = _b64decode(raw.get("payload"), "payload")
        signatures = raw.get("signatures")
        if not isinstance(signatures, list):
            raise EnvelopeError("signatures is missing")
        entries: list[SignatureEntry] = []
        for n, item in enumerate(signatures, 1):
            where = f"signature {n}"
            if not isinstance(item, dict):
                raise EnvelopeError(f"{where} is not an object")
            fields = {name: item.get(name) for name in ("keyid", "role", "signed_at")}
            for name, value in fields.items():
                if not isinstance(value, str):
                    raise EnvelopeError(f"{where}: {name} is missing")
            stamp = item.get("rfc3161_timestamp")
            first = next(
                (
                    k
                    for k, seen in enumerate(entries, 1)
                    if (seen.keyid, seen.role) == (item["keyid"], item["role"])
                ),
                None,
            )
            if first is not None:  # would list one signer twice with the one key given
                raise EnvelopeError(
                    f"{where} duplicates signature {first} (key {item['keyid'][:16]} as "
                    f"{item['role']}): a key signs once in a role, not twice; the envelope "
                    "was edited"
                )
            entries.append(
                SignatureEntry(
                    item["keyid"],
                    _b64decode(item.get("sig"), f"{where}: sig"),
                    item["role"],
                    item["signed_at"],
                    _b64decode(item.get("claim_sig"), f"{where}: claim_sig"),
                    stamp if isinstance(stamp, str) else None,
                )
            )
        return cls(payload_type, payload, tuple(entries))
