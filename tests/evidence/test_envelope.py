"""The pieces by their specs: DSSE's PAE (the protocol's test vector), signatures with their
signed claims, RFC 8785 bytes, RFC 6962 Merkle roots, and the tar writer's fixed headers."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from auditor.errors import BadInput
from auditor.evidence.canonical import canonical_json
from auditor.evidence.dsse import PAYLOAD_TYPE, Envelope, EnvelopeError, pae, sign_payload
from auditor.evidence.statement import merkle_root, predicate_version


def test_pae_is_the_dsse_protocol_test_vector() -> None:
    assert (
        pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("t", b"") == b"DSSEv1 1 t 0 "
    assert pae("é", b"x") == "DSSEv1 2 é 1 x".encode()  # lengths in bytes


def test_a_signature_verifies_only_for_its_payload_key_role_and_time() -> None:
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    entry = sign_payload(key, PAYLOAD_TYPE, b"{}", "auditor", "2026-12-07T10:00:00+00:00")
    assert entry.verify(key.public_key(), PAYLOAD_TYPE, b"{}") is None
    assert entry.verify(other.public_key(), PAYLOAD_TYPE, b"{}") is not None
    assert entry.verify(key.public_key(), PAYLOAD_TYPE, b"{ }") is not None
    assert entry.verify(key.public_key(), "application/json", b"{}") is not None
    from dataclasses import replace

    later = replace(entry, signed_at="2030-01-01T00:00:00+00:00")
    assert "role or time" in (later.verify(key.public_key(), PAYLOAD_TYPE, b"{}") or "")
    # Ed25519 is deterministic: the same signature twice
    assert sign_payload(key, PAYLOAD_TYPE, b"{}", "auditor", entry.signed_at) == entry


def test_an_envelope_round_trips_and_accepts_url_safe_base64() -> None:
    key = Ed25519PrivateKey.generate()
    payload = b'{"a":"\xff\xfe?>"}'
    entry = sign_payload(key, PAYLOAD_TYPE, payload, "auditor", "t")
    envelope = Envelope(PAYLOAD_TYPE, payload, (entry,))
    again = Envelope.from_bytes(envelope.to_bytes())
    assert again == envelope
    raw = json.loads(envelope.to_bytes())
    raw["payload"] = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    assert Envelope.from_bytes(json.dumps(raw).encode()).payload == payload
    assert envelope.statement_sha256 == hashlib.sha256(payload).hexdigest()
    for broken in (b"[]", b"{}", json.dumps(raw | {"payload": "***"}).encode()):
        with pytest.raises(EnvelopeError):
            Envelope.from_bytes(broken)


def test_canonical_json_is_rfc_8785() -> None:
    assert (
        canonical_json({"b": [1.0, 1e21, 0.1], "a": "é"}) == '{"a":"é","b":[1,1e+21,0.1]}'.encode()
    )
    with pytest.raises(BadInput, match="canonical JSON"):
        canonical_json({"x": float("nan")})


def test_the_merkle_root_is_rfc_6962_over_sorted_documents() -> None:
    def leaf(path: str, digest: str) -> bytes:
        return hashlib.sha256(b"\x00" + path.encode() + b"\x00" + bytes.fromhex(digest)).digest()

    def node(left: bytes, right: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + left + right).digest()

    docs = [(f"d{k}.md", hashlib.sha256(bytes([k])).hexdigest()) for k in range(3)]
    a, b, c = (leaf(*d) for d in docs)
    assert merkle_root(docs) == node(node(a, b), c).hex()
    assert merkle_root(docs[::-1]) == merkle_root(docs)
    assert merkle_root(docs[:1]) == a.hex()
    assert merkle_root([]) == hashlib.sha256(b"").hexdigest()


def test_predicate_versions_are_read_from_the_type() -> None:
    assert predicate_version("https://auditor.invalid/audit-bundle/v1") == 1
    assert predicate_version("https://auditor.invalid/audit-bundle/v12") == 12
    assert predicate_version("https://slsa.dev/provenance/v1") is None
