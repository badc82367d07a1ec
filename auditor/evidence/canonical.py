"""RFC 8785 canonical JSON: the bytes a statement is signed as, the same on every machine."""

from __future__ import annotations

from typing import Any

import rfc8785

from auditor.errors import BadInput

__all__ = ["canonical_json"]


def canonical_json(value: Any) -> bytes:
    """`value` as RFC 8785 (JSON Canonicalization Scheme) bytes; BadInput when it holds what
    JSON cannot carry (NaN, infinities, integers past 2**53)."""
    try:
        return bytes(rfc8785.dumps(value))
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise BadInput(f"the audit statement cannot be written as canonical JSON ({exc})") from exc
