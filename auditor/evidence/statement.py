"""The in-toto Statement v1 of a bundle and its predicate: what an auditor asks of an audit.

The predicate's type is versioned (`PREDICATE_TYPE`); `verify` refuses a newer one (exit 2)
rather than half-check it. Figures come from `figures.headline_figures`, the same function
verify recomputes them with; every path in the predicate is a bag path (data/...).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from auditor.results import RunArtifacts

__all__ = [
    "PREDICATE_PREFIX",
    "PREDICATE_TYPE",
    "PREDICATE_VERSION",
    "STATEMENT_TYPE",
    "merkle_root",
    "predicate_version",
    "statement",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_PREFIX = "https://auditor.invalid/audit-bundle/v"
PREDICATE_VERSION = 1
PREDICATE_TYPE = f"{PREDICATE_PREFIX}{PREDICATE_VERSION}"


def predicate_version(predicate_type: Any) -> int | None:
    """The version of one of our predicate types (None: not ours)."""
    if not isinstance(predicate_type, str) or not predicate_type.startswith(PREDICATE_PREFIX):
        return None
    number = predicate_type[len(PREDICATE_PREFIX) :]
    return int(number) if number.isdigit() else None


def merkle_root(documents: Sequence[tuple[str, str]]) -> str:
    """RFC 6962 §2.1 Merkle tree hash over documents (path, sha256 hex) sorted by path: leaf =
    SHA-256(0x00 || path UTF-8 || 0x00 || digest bytes), node = SHA-256(0x01 || left || right),
    split at the largest power of two below n; SHA-256 of nothing for no documents. One
    document's inclusion can be shown with log2(n) hashes, without the others."""
    leaves = [
        hashlib.sha256(b"\x00" + path.encode("utf-8") + b"\x00" + bytes.fromhex(digest)).digest()
        for path, digest in sorted(documents)
    ]

    def tree(nodes: list[bytes]) -> bytes:
        if len(nodes) == 1:
            return nodes[0]
        split = 1 << ((len(nodes) - 1).bit_length() - 1)
        return hashlib.sha256(b"\x01" + tree(nodes[:split]) + tree(nodes[split:])).digest()

    return (tree(leaves) if leaves else hashlib.sha256(b"").digest()).hex()


def _generator(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The system under test's generator as configured: kind, model, endpoints (no secrets:
    configs name environment variables, never keys)."""
    generator = (config or {}).get("generator") or {}
    keep = ("kind", "model", "endpoints", "base_url", "dtype", "module", "function")
    return {k: generator[k] for k in keep if k in generator}


def run_predicate(
    run: RunArtifacts,
    bag_dir: str,
    figures: dict[str, Any],
    knowledge_base: dict[str, Any] | None,
    questions_file: str | None,
    review: dict[str, Any] | None,
) -> dict[str, Any]:
    """One audited run: system, inputs, judge, figures, review design and reviewers."""
    manifest = run.manifest
    judge = (run.check_manifest or {}).get("judge", {})
    reviewed = run.summary.get("reviewed") or {}
    questions = manifest.get("questions") or manifest.get("source") or {}
    return {
        "pipeline": run.name,
        "run_dir": bag_dir,
        "kind": manifest.get("kind", "run"),
        "run_id": manifest.get("run_id"),
        "started_at": manifest.get("started_at"),
        "finished_at": manifest.get("finished_at"),
        "checked_at": [
            (run.check_manifest or {}).get("started_at"),
            (run.check_manifest or {}).get("finished_at"),
        ],
        "system": {
            "pipeline_config_sha256": (manifest.get("pipeline") or {}).get("sha256"),
            "generator": _generator((manifest.get("pipeline") or {}).get("config")),
            "model": manifest.get("model") or {},
            "load_regime": manifest.get("load_regime") or {},
        },
        "questions": {
            "sha256": questions.get("sha256"),
            "count": questions.get("count"),
            "file": questions_file,
        },
        "knowledge_base": knowledge_base,
        "judge": {
            "identity": judge.get("identity") or {},
            "config_sha256": judge.get("sha256"),
            "verdict_logic": judge.get("verdict_logic"),
            "support_threshold": (judge.get("config") or {}).get("support_threshold"),
            "sources": (run.check_manifest or {}).get("sources"),
        },
        "figures": figures,
        # the drawn sample's design (review.json), labelled or not yet
        "review": None
        if review is None
        else {
            k: review.get(k) for k in ("method", "seed", "size", "population", "population_sha256")
        },
        "reviewers": reviewed.get("reviewers") or [],
        "host": manifest.get("host") or {},
        "packages": manifest.get("packages") or {},
    }


def statement(subjects: Mapping[str, bytes], predicate: dict[str, Any]) -> dict[str, Any]:
    """The Statement: every file (bag path) with its sha256, sorted by name, and the predicate."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": hashlib.sha256(subjects[name]).hexdigest()}}
            for name in sorted(subjects)
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }
