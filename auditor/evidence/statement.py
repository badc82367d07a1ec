"""The in-toto Statement v1 of a bundle and its predicate: what an auditor asks of an audit.

The predicate is a function of the bag's files alone (`predicate`): `bundle` computes it from
the files it puts in the bag, `verify` computes it again from the files it finds there and
compares every field. A field that no file of the bag gives is not in the predicate. Its type
is versioned (`PREDICATE_TYPE`); `verify` refuses a newer one (exit 2) rather than half-check
it. Every path in the predicate is a bag path (data/...).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from auditor.calibrate import Calibration
from auditor.errors import AuditorError, BadInput
from auditor.evidence.figures import gate_results, headline_figures
from auditor.gates import GateResult
from auditor.ingest.manifest import MANIFEST_NAME, parse_manifest
from auditor.results import RunArtifacts
from auditor.review import REVIEW, ReviewLabel, read_checked_review
from auditor.store import CHECK_MANIFEST, CHECKS, MANIFEST, RECORDS
from auditor.traces.importer import POPULATION, SKIPPED

__all__ = [
    "BAG_AGENT",
    "CALIBRATION",
    "LABELS",
    "PREDICATE_PREFIX",
    "PREDICATE_TYPE",
    "PREDICATE_VERSION",
    "RUN_FILES",
    "STATEMENT_TYPE",
    "BagMismatch",
    "accounted_files",
    "audit_period",
    "index_folder",
    "merkle_root",
    "moment",
    "predicate",
    "predicate_version",
    "questions_name",
    "run_folder",
    "run_predicate",
    "statement",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_PREFIX = "https://auditor.invalid/audit-bundle/v"
PREDICATE_VERSION = 1
PREDICATE_TYPE = f"{PREDICATE_PREFIX}{PREDICATE_VERSION}"

# what a run dir contributes: its records, nothing derived (summary.json and the report are
# rendered from these by `auditor report`; engine.log, third-party output, is left out)
# (a run of imported traces adds its window's population and skips: figures read them)
RUN_FILES = (MANIFEST, RECORDS, CHECKS, CHECK_MANIFEST, REVIEW, POPULATION, SKIPPED)
LABELS = "data/labels/labels.jsonl"
CALIBRATION = "data/calibration/calibration.json"
NO_TIME = "1970-01-01T00:00:00+00:00"  # the audit's end when nothing records one
# bag-info.txt's Bag-Software-Agent: no version, so that verify can write the tag files again
# from the payload alone (no field says which auditor bundled: nothing in the bag proves it)
BAG_AGENT = "auditor"


class BagMismatch(AuditorError):
    """The bag's files disagree with each other (a document and its index manifest's sha256,
    a question set and its run's): the message names the file."""


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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def moment(stamp: Any) -> datetime | None:
    """An artifact's ISO-8601 time as an aware datetime (None when absent, unreadable or
    without a zone)."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        found = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo is not None else None


def run_folder(name: str) -> str:
    """A run's folder in the bag."""
    return f"data/runs/{name}"


def index_folder(manifest_sha256: str) -> str:
    """An index's folder in the bag."""
    return f"data/index/{manifest_sha256[:16]}"


def questions_name(sha256: str) -> str:
    """A question set's file in the bag."""
    return f"data/questions/{sha256[:16]}.jsonl"


def _knowledge_base(run: RunArtifacts, files: Mapping[str, bytes]) -> dict[str, Any] | None:
    """What the run's index manifest in the bag says of the knowledge base (None for answers
    imported without an index); BagMismatch when the manifest is not the one the run names,
    or a document in the bag is not the one it lists."""
    section = run.manifest.get("index") or {}
    digest = section.get("manifest_sha256")
    if not digest:
        return None
    folder = index_folder(str(digest))
    name = f"{folder}/{MANIFEST_NAME}"
    data = files.get(name)
    if data is None:
        raise BagMismatch(f"{name}: not in the bundle; the run {run.name} was run against it")
    if _sha256(data) != digest:
        raise BagMismatch(
            f"{name}: not the index manifest {run_folder(run.name)}/{MANIFEST} names (sha256 "
            "differs)"
        )
    try:
        manifest = parse_manifest(data.decode("utf-8"), name)
    except UnicodeDecodeError as exc:
        raise BagMismatch(f"{name}: not an index manifest ({exc})") from exc
    except BadInput as exc:
        raise BagMismatch(str(exc)) from exc
    documents = [(doc.path, doc.sha256) for doc in manifest.documents]
    listed = dict(documents)
    prefix = f"{folder}/documents/"
    present = {n[len(prefix) :]: n for n in files if n.startswith(prefix)}
    for path, where in sorted(present.items()):
        if path not in listed:
            raise BagMismatch(f"{where}: a document {name} does not list")
        if _sha256(files[where]) != listed[path]:
            raise BagMismatch(f"{where}: its sha256 differs from the one {name} lists")
    if present and (absent := sorted(listed.keys() - present.keys())):
        raise BagMismatch(f"{prefix}{absent[0]}: listed in {name}, missing from the bundle")
    return {
        "index_manifest": name,
        "manifest_sha256": digest,
        "documents": len(documents),
        "chunks": section.get("chunks"),
        "embedder": section.get("embedder"),
        "documents_merkle_root": merkle_root(documents),
        "documents_included": bool(present),
    }


def _questions_file(run: RunArtifacts, files: Mapping[str, bytes]) -> str | None:
    """The question set's file in the bag (None: not included); BagMismatch when it is not the
    set the run asked."""
    digest = (run.manifest.get("questions") or {}).get("sha256")
    if not digest:
        return None
    name = questions_name(str(digest))
    if name not in files:
        return None
    if _sha256(files[name]) != digest:
        raise BagMismatch(
            f"{name}: not the question set {run_folder(run.name)}/{MANIFEST} names (sha256 differs)"
        )
    return name


def run_predicate(run: RunArtifacts, files: Mapping[str, bytes]) -> dict[str, Any]:
    """One audited run, from its files in the bag (summary computed): system, inputs, judge,
    figures, review design and reviewers."""
    manifest = run.manifest
    judge = (run.check_manifest or {}).get("judge", {})
    reviewed = run.summary.get("reviewed") or {}
    questions = manifest.get("questions") or manifest.get("source") or {}
    review = read_checked_review(run)
    return {
        "pipeline": run.name,
        "run_dir": run_folder(run.name),
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
        # imported traces: the traffic audited (its window, the exports read, the population
        # and the checked sample); None for a run the auditor drove
        "traffic": None
        if manifest.get("kind") != "traces"
        else {
            key: manifest.get(key)
            for key in ("window", "import", "sources", "population", "sample", "slo")
        },
        "questions": {
            "sha256": questions.get("sha256"),
            "count": questions.get("count"),
            "file": _questions_file(run, files),
        },
        "knowledge_base": _knowledge_base(run, files),
        "judge": {
            "identity": judge.get("identity") or {},
            "config_sha256": judge.get("sha256"),
            "verdict_logic": judge.get("verdict_logic"),
            "support_threshold": (judge.get("config") or {}).get("support_threshold"),
            "sources": (run.check_manifest or {}).get("sources"),
        },
        "figures": headline_figures(run),
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


def audit_period(
    runs: Sequence[RunArtifacts], labels: Sequence[ReviewLabel] | None
) -> dict[str, Any]:
    """From the first run's start to the last time any record of the audit gives: a run or a
    check finished, or a label was made (so that every label predates the bundler's signing
    time, which is this end)."""
    ends = [
        stamp
        for run in runs
        for stamp in (
            run.manifest.get("finished_at"),
            (run.check_manifest or {}).get("finished_at"),
        )
    ] + [label.labelled_at for label in labels or ()]
    starts = [run.manifest.get("started_at") for run in runs]
    known_ends = [(when, str(s)) for s in ends if (when := moment(s))]
    known_starts = [(when, str(s)) for s in starts if (when := moment(s))]
    return {
        "start": min(known_starts, key=lambda k: k[0])[1] if known_starts else None,
        "end": max(known_ends, key=lambda k: k[0])[1] if known_ends else NO_TIME,
    }


def predicate(
    runs: Sequence[RunArtifacts],
    files: Mapping[str, bytes],
    results: Sequence[GateResult],
    labels: Sequence[ReviewLabel] | None,
    labels_outside: str,
    calibration: Calibration | None,
) -> dict[str, Any]:
    """The predicate of a bag: `runs` are its run dirs (loaded, summaries computed with
    `labels` and `calibration` as read from the bag's files), `files` its payload (bag path:
    bytes), `results` the gates evaluated on the summaries. Every field is computed from these;
    BagMismatch when the files disagree with each other."""
    return {
        "audit_period": audit_period(runs, labels),
        "runs": [run_predicate(run, files) for run in runs],
        "labels": None
        if LABELS not in files
        else {
            "file": LABELS,
            "sha256": _sha256(files[LABELS]),
            "count": len(labels or ()),
            "outside_sample": labels_outside,
        },
        "calibration": None
        if calibration is None or CALIBRATION not in files
        else {
            "file": CALIBRATION,
            "sha256": _sha256(files[CALIBRATION]),
            "threshold": calibration.data.get("threshold"),
            "domain": calibration.domain,
        },
        "gates": gate_results(results),
    }


def accounted_files(predicate: Mapping[str, Any], files: Mapping[str, bytes]) -> set[str]:
    """The payload files a predicate is computed from: each run's records, the index
    manifests and documents, the question sets, the labels and the calibration. A payload
    file outside this set is one the statement says nothing of."""
    found: set[str] = set()
    for run in predicate.get("runs") or []:
        folder = str(run.get("run_dir"))
        found.update(f"{folder}/{name}" for name in RUN_FILES)
        base = run.get("knowledge_base") or {}
        if base.get("index_manifest"):
            index = str(base["index_manifest"]).rsplit("/", 1)[0]
            found.add(str(base["index_manifest"]))
            found.update(n for n in files if n.startswith(f"{index}/documents/"))
        if (run.get("questions") or {}).get("file"):
            found.add(str(run["questions"]["file"]))
    for key in ("labels", "calibration"):
        if predicate.get(key):
            found.add(str(predicate[key]["file"]))
    return found & files.keys()


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
