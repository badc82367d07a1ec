"""Run dirs that lie in an extracted bundle: what its statement names for the report to render
(`bundle_inputs`: the bag's labels, calibration and gates), and whether the report shows what
the statement signed (`bundle_of`). The report names the signers only when every file of the
bag is the one the statement lists, no file the report read is outside it, and what the
report shows of each run (figures, reviewers, judge, inputs) and the gates are the statement's;
else it says what differs on its first screen, and names no signer. The signers are as claimed:
`auditor verify` checks them against their public keys."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.errors import AuditorError
from auditor.evidence.bag import BAGIT_TXT, ENVELOPE
from auditor.evidence.canonical import canonical_json
from auditor.evidence.dsse import Envelope, EnvelopeError
from auditor.evidence.figures import compare, gate_results
from auditor.evidence.statement import CALIBRATION, LABELS, run_predicate
from auditor.evidence.verify import read_statement
from auditor.gates import GateResult, parse_gate
from auditor.results import SUMMARY, RunArtifacts
from auditor.review import OUTSIDE_SAMPLE

__all__ = ["BundleInputs", "bundle_inputs", "bundle_of", "bundle_root"]

# what `auditor report` writes into an extracted bundle's run dirs: derived, never subjects
_WRITTEN_BY_REPORT = (SUMMARY, "report.html")
_SHOWN_PROBLEMS = 5


def bundle_root(run_dirs: Sequence[Path]) -> Path | None:
    """The bag the first run dir was extracted into (BAG/data/runs/NAME, with BAG's bagit.txt
    and envelope), None when it is none."""
    if not run_dirs:
        return None
    run_dir = Path(run_dirs[0]).resolve()
    if run_dir.parent.name != "runs" or run_dir.parent.parent.name != "data":
        return None
    root = run_dir.parents[2]
    if not (root / BAGIT_TXT).is_file() or not (root / ENVELOPE).is_file():
        return None
    return root


def _statement(root: Path) -> tuple[Envelope, dict[str, Any]]:
    """The envelope and the statement it carries (unverified); AuditorError when unreadable."""
    try:
        envelope = Envelope.from_bytes((root / ENVELOPE).read_bytes())
    except (OSError, EnvelopeError) as exc:
        raise AuditorError(f"{ENVELOPE}: cannot be read ({exc})") from exc
    return envelope, read_statement(root / ENVELOPE, envelope.payload)


@dataclass(frozen=True)
class BundleInputs:
    """What the statement computed its figures with, as files of the extracted bag."""

    labels: Path | None
    labels_outside: str
    calibration: Path | None
    gates: list[str]


def bundle_inputs(run_dirs: Sequence[Path]) -> BundleInputs | None:
    """The labels, calibration and gates the bundle's statement names, for `report` to render
    the signed figures of an extracted bundle without flags; None outside a bundle or when its
    statement cannot be read (the report then says so)."""
    root = bundle_root(run_dirs)
    if root is None:
        return None
    try:
        _, data = _statement(root)
    except AuditorError:
        return None
    predicate = data["predicate"]
    labels = predicate.get("labels") if isinstance(predicate.get("labels"), dict) else None
    outside = str((labels or {}).get("outside_sample"))
    gates = predicate.get("gates") if isinstance(predicate.get("gates"), list) else []
    texts = dict.fromkeys(str(g.get("gate")) for g in gates if isinstance(g, dict))
    return BundleInputs(
        labels=root / LABELS if labels and (root / LABELS).is_file() else None,
        labels_outside=outside if outside in OUTSIDE_SAMPLE else "refuse",
        calibration=root / CALIBRATION
        if predicate.get("calibration") and (root / CALIBRATION).is_file()
        else None,
        # a gate that does not parse is left out: the report then says its gates differ
        gates=[text for text in texts if _parses(text)],
    )


def _parses(gate: str) -> bool:
    try:
        parse_gate(gate)
    except AuditorError:
        return False
    return True


def _file_problems(
    root: Path, subjects: list[Any], runs: Sequence[RunArtifacts]
) -> tuple[list[str], dict[str, bytes]]:
    """Each subject missing or changed, each file under data/ that no subject lists (but what
    `report` itself writes), and each run dir the report read that is not one of the bag's;
    and the payload as the statement lists it (where it is all there, unchanged)."""
    problems: list[str] = []
    listed: dict[str, str] = {}
    for subject in subjects:
        name = subject.get("name") if isinstance(subject, dict) else None
        digest = (subject.get("digest") or {}).get("sha256") if isinstance(subject, dict) else None
        if not isinstance(name, str) or not isinstance(digest, str):
            problems.append(f"a subject of the statement is malformed: {subject!r}")
            continue
        listed[name] = digest
    payload: dict[str, bytes] = {}
    for name, digest in sorted(listed.items()):
        path = root.joinpath(*name.split("/"))
        data = path.read_bytes() if path.is_file() else None
        if data is None:
            problems.append(f"{name}: missing (the statement lists it)")
        elif hashlib.sha256(data).hexdigest() != digest:
            problems.append(f"{name}: changed (sha256 differs from the statement)")
        elif name.startswith("data/"):
            payload[name] = data
    folder = root / "data"
    for path in sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []:
        name = path.relative_to(root).as_posix()
        parts = name.split("/")
        written = len(parts) == 4 and parts[1] == "runs" and parts[3] in _WRITTEN_BY_REPORT
        if name not in listed and not written:
            problems.append(f"{name}: not in the statement (added)")
    for run in runs:
        if run.run_dir.resolve().parent != root / "data" / "runs":
            problems.append(f"{run.run_dir}: not a run dir of this bundle")
    return problems, payload


def _shown_problems(
    predicate: dict[str, Any],
    payload: dict[str, bytes],
    runs: Sequence[RunArtifacts],
    results: Sequence[GateResult],
) -> list[str]:
    """Where what the report shows differs from the statement although its files are the
    signed ones (other labels, calibration or gates given to `report`): each run's predicate
    (figures, reviewers, judge, inputs) computed from what the report read, and the gates."""
    problems: list[str] = []
    recorded = {
        str(r.get("pipeline")): r for r in predicate.get("runs") or [] if isinstance(r, dict)
    }
    for run in runs:
        if run.name not in recorded:
            problems.append(f"{run.name}: a pipeline the statement does not name")
            continue
        try:
            shown = json.loads(canonical_json(run_predicate(run, payload)))
        except AuditorError as exc:
            problems.append(str(exc))
            continue
        if found := compare(recorded[run.name], shown, f"runs[{run.name}]"):
            problems.append(found)
    names = {run.name for run in runs}
    signed = [
        g
        for g in predicate.get("gates") or []
        if isinstance(g, dict) and g.get("pipeline") in names
    ]
    if found := compare(signed, json.loads(canonical_json(gate_results(results))), "gates"):
        problems.append(found)
    return problems


def bundle_of(
    runs: Sequence[RunArtifacts], results: Sequence[GateResult] = ()
) -> dict[str, Any] | None:
    """{root, statement_sha256, signers, problems} of the bundle the runs (summaries computed)
    were extracted from, None when they are none. `problems` (at most a few, then how many
    more): where the files differ from the statement, or what the report shows from what it
    signed; the report names the signers only without any."""
    root = bundle_root([run.run_dir for run in runs])
    if root is None:
        return None
    try:
        envelope, data = _statement(root)
    except AuditorError as exc:
        said = str(exc).replace(f"{root}/", "")
        return {"root": str(root), "statement_sha256": None, "signers": [], "problems": [said]}
    problems, payload = _file_problems(root, data["subject"], runs)
    if not problems:  # what the report shows, once it shows the signed files
        problems = _shown_problems(data["predicate"], payload, runs, results)
    if len(problems) > _SHOWN_PROBLEMS:
        more = len(problems) - _SHOWN_PROBLEMS
        problems = [*problems[:_SHOWN_PROBLEMS], f"and {more} more"]
    return {
        "root": str(root),
        "statement_sha256": envelope.statement_sha256,
        "signers": [
            {"fingerprint": s.keyid, "role": s.role, "signed_at": s.signed_at}
            for s in envelope.signatures
        ],
        "problems": problems,
    }
