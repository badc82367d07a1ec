"""Ed25519 signing keys: made by `auditor keygen`, kept as passphrase-encrypted PKCS#8 PEM
(the private key, mode 0600) beside KEY.pub (the public key, SubjectPublicKeyInfo PEM).

A key's fingerprint (also the DSSE `keyid`) is the sha256 of its 32 raw public bytes, in hex:
what `verify` prints per signer, and what a team writes down when it hands a key to an auditor.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from auditor.errors import BadInput

__all__ = [
    "fingerprint",
    "generate_key",
    "load_private_key",
    "load_public_key",
    "public_key_path",
    "read_passphrase_env",
]


def public_key_path(key: Path) -> Path:
    """Where keygen writes the public half of `key`: KEY.pub beside it."""
    return key.with_name(key.name + ".pub")


def fingerprint(public_key: Ed25519PublicKey) -> str:
    """sha256 of the raw public key, hex: the key's name in envelopes and in verify's lines."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def read_passphrase_env(name: str) -> bytes:
    """The passphrase in environment variable `name` (CI use); BadInput when unset or empty."""
    value = os.environ.get(name)
    if not value:
        raise BadInput(
            f"--passphrase-env {name}: the environment variable is unset or empty; export the "
            "key's passphrase in it, or leave --passphrase-env out to be asked"
        )
    return value.encode("utf-8")


def generate_key(out: Path, passphrase: bytes, force: bool = False) -> str:
    """A new Ed25519 key pair at `out` (encrypted PKCS#8 PEM, 0600) and `out`.pub; its
    fingerprint. Both paths are checked before either is written."""
    if not passphrase:
        raise BadInput("the passphrase is empty; give a passphrase to encrypt the key with")
    public = public_key_path(out)
    for path in (out, public):
        if os.path.lexists(path) and not force:
            raise BadInput(
                f"--out {out}: {path} exists; give another --out, or --force to replace it"
            )
        if os.path.isdir(path):
            raise BadInput(f"--out {out}: {path} is a directory; give --out a file path")
    if not out.parent.is_dir():
        raise BadInput(f"--out {out}: {out.parent} is not a directory; give --out a path in one")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(passphrase),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write(out, private_pem, 0o600)
    _write(public, public_pem, 0o644)
    return fingerprint(key.public_key())


def _write(path: Path, data: bytes, mode: int) -> None:
    """Atomic write with `mode` from the start: the private key is never readable by others,
    not even while it is written."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_pem(path: Path, option: str) -> bytes:
    if not path.is_file():
        raise BadInput(
            f"{option} {path}: no such key file; make one with `auditor keygen --out KEY`"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot be read ({exc.strerror})") from exc


def load_private_key(path: Path, passphrase: bytes) -> Ed25519PrivateKey:
    """The private key at `path`; BadInput (one line) when missing, not a key, of another
    algorithm, or the passphrase is wrong."""
    data = _read_pem(path, "--key")
    if b"PRIVATE KEY" not in data:
        raise BadInput(
            f"--key {path}: not a private key (a public key? sign with the private KEY, not KEY.pub)"
        )
    try:
        key = serialization.load_pem_private_key(data, passphrase or None)
    except TypeError as exc:  # unencrypted key given a passphrase, or the reverse
        raise BadInput(f"--key {path}: {exc}; use a key made by `auditor keygen`") from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise BadInput(
            f"--key {path}: wrong passphrase, or not a key `auditor keygen` made; give the "
            "passphrase the key was made with"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(
            f"--key {path}: not an Ed25519 key; make one with `auditor keygen --out KEY`"
        )
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The public key at `path` (KEY.pub); BadInput when missing or not an Ed25519 public key."""
    data = _read_pem(path, "--key")
    if b"PRIVATE KEY" in data:
        raise BadInput(f"--key {path}: a private key; verify with the public key ({path}.pub)")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise BadInput(
            f"--key {path}: not a PEM public key; give the KEY.pub keygen wrote"
        ) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(f"--key {path}: not an Ed25519 public key; give the KEY.pub keygen wrote")
    return key
