"""Whether run dirs lie in an extracted bundle, and what its envelope claims: the report of an
extracted bundle shows the statement's digest and its signers (as claimed: `auditor verify`
checks them against the signers' public keys)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from auditor.evidence.bag import BAGIT_TXT, ENVELOPE
from auditor.evidence.dsse import Envelope, EnvelopeError

__all__ = ["bundle_of"]


def bundle_of(run_dirs: Sequence[Path]) -> dict[str, Any] | None:
    """{statement_sha256, signers, root} of the bundle the first run dir was extracted from
    (BAG/data/runs/NAME), None when it is none or its envelope cannot be read."""
    if not run_dirs:
        return None
    run_dir = run_dirs[0].resolve()
    if run_dir.parent.name != "runs" or run_dir.parent.parent.name != "data":
        return None
    root = run_dir.parents[2]
    if not (root / BAGIT_TXT).is_file() or not (root / ENVELOPE).is_file():
        return None
    try:
        envelope = Envelope.from_bytes((root / ENVELOPE).read_bytes())
    except (OSError, EnvelopeError):
        return None
    return {
        "root": str(root),
        "statement_sha256": envelope.statement_sha256,
        "signers": [
            {"fingerprint": s.keyid, "role": s.role, "signed_at": s.signed_at}
            for s in envelope.signatures
        ],
    }
