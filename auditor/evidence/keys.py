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
    "MAX_PASSPHRASE_BYTES",
    "check_passphrase",
    "fingerprint",
    "generate_key",
    "load_private_key",
    "load_public_key",
    "public_key_path",
    "read_passphrase_env",
]


# the longest passphrase the cryptography library encrypts a key with (OpenSSL's PEM limit)
MAX_PASSPHRASE_BYTES = 1023


def check_passphrase(passphrase: bytes) -> None:
    """BadInput (one line) for a passphrase no key can be encrypted with: empty, or longer
    than `MAX_PASSPHRASE_BYTES` bytes in UTF-8."""
    if not passphrase:
        raise BadInput("the passphrase is empty; give a passphrase to encrypt the key with")
    if len(passphrase) > MAX_PASSPHRASE_BYTES:
        raise BadInput(
            f"the passphrase is {len(passphrase):,} bytes, longer than the {MAX_PASSPHRASE_BYTES:,} "
            "a key can be encrypted with; give a shorter one"
        )


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
    check_passphrase(passphrase)
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
    if len(passphrase) > MAX_PASSPHRASE_BYTES:  # no key keygen made has one this long
        raise BadInput(
            f"--key {path}: the passphrase given is {len(passphrase):,} bytes, longer than any "
            f"key can be encrypted with ({MAX_PASSPHRASE_BYTES:,}); give the key's passphrase"
        )
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


def load_public_key(path: Path, option: str = "--key") -> Ed25519PublicKey:
    """The public key at `path` (KEY.pub), given with `option`; BadInput when missing or not an
    Ed25519 public key."""
    data = _read_pem(path, option)
    if b"PRIVATE KEY" in data:
        raise BadInput(
            f"{option} {path}: a private key; give the public key ({path}.pub) with {option}"
        )
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise BadInput(
            f"{option} {path}: not a PEM public key; give the KEY.pub keygen wrote"
        ) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(f"{option} {path}: not an Ed25519 public key; give the KEY.pub keygen wrote")
    return key
