"""The shapes of a run dir's artifacts, checked as they are read (`auditor.results.load_run`).

A run dir is written by the auditor, but a hand edit, a copy cut short or another tool can
leave rows that are valid JSON of the wrong shape. Every figure is computed from these rows,
so such a row is a one-line refusal naming the file, the line and the field, never a
traceback and never a silently wrong figure: records and checks are objects with an id, a
check's claims a list of claims each with a verdict, each answer once in each file, every
checked answer among the records, and the manifests' sections of the kinds the code reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from auditor.errors import BadInput
from auditor.verify.base import Verdict

__all__ = ["check_manifests", "check_row", "check_run_rows", "record_row"]

VERDICTS = set(get_args(Verdict))
FIX = "the file was edited by hand? re-run into a new --out"


def _id(where: str, row: Any, what: str) -> None:
    if not isinstance(row, dict):
        raise BadInput(f"{where}: a {what} must be a JSON object, not {type(row).__name__}; {FIX}")
    ident = row.get("id")
    valid = isinstance(ident, str) and bool(ident.strip())
    if not (valid or (isinstance(ident, int) and not isinstance(ident, bool))):
        raise BadInput(f'{where}: a {what} without "id" (a string or an integer); {FIX}')


def record_row(where: str, row: Any) -> None:
    """A records.jsonl row: an object with an id."""
    _id(where, row, "record")


def check_row(where: str, row: Any) -> None:
    """A checks.jsonl row: an object with an id and a list of claims, each an object with a
    known verdict and its text."""
    _id(where, row, "check row")
    claims = row.get("claims")
    if not isinstance(claims, list):
        raise BadInput(f'{where}: "claims" must be a list (empty for none); {FIX}')
    for number, claim in enumerate(claims):
        if not isinstance(claim, dict) or not isinstance(claim.get("text"), str):
            raise BadInput(f'{where}: claim {number} must be an object with "text"; {FIX}')
        if claim.get("verdict") not in VERDICTS:
            raise BadInput(
                f"{where}: claim {number} has verdict {claim.get('verdict')!r}, not one of "
                f"{', '.join(sorted(VERDICTS))}; {FIX}"
            )


def check_run_rows(
    run_dir: Path, records: list[dict[str, Any]], checks: list[dict[str, Any]]
) -> None:
    """Each answer once in records.jsonl and in checks.jsonl, every checked answer among the
    records (a checks.jsonl with rows beside an empty records.jsonl included)."""
    for name, rows in (("records.jsonl", records), ("checks.jsonl", checks)):
        seen: set[str] = set()
        for row in rows:
            ident = str(row["id"])
            if ident in seen:
                raise BadInput(f"{run_dir / name}: answer {ident!r} is in it twice; {FIX}")
            seen.add(ident)
    recorded = {str(row["id"]) for row in records}
    stray = [str(row["id"]) for row in checks if str(row["id"]) not in recorded]
    if stray:
        raise BadInput(
            f"{run_dir / 'checks.jsonl'}: {len(stray)} checked answer(s) not in records.jsonl "
            f"({', '.join(repr(s) for s in stray[:3])}); the two files are of different runs? {FIX}"
        )


# the manifest sections the figures read: required of a run of a pipeline (`auditor run`,
# `audit`), of the right kind where present in a run of imported answers (`check --answers`)
_MANIFEST_SECTIONS = {
    "pipeline": dict,
    "questions": dict,
    "sessions": list,
    "model": dict,
    "source": dict,
}
_PIPELINE_RUN = ("pipeline", "questions", "sessions")


def check_manifests(
    run_dir: Path, manifest: dict[str, Any], check_manifest: dict[str, Any] | None
) -> dict[str, Any]:
    """The manifest's sections the figures read, and check.json's judge, of the right kind;
    the manifest returned without the sections that are null where none is needed (a run of
    imported answers has no pipeline: null is no section)."""
    required = _PIPELINE_RUN if manifest.get("kind") != "answers" else ()
    for key, kind in _MANIFEST_SECTIONS.items():
        value = manifest.get(key)
        if value is None and key not in required:
            continue
        if not isinstance(value, kind):
            shape = "an object" if kind is dict else "a list"
            raise BadInput(
                f'{run_dir / "manifest.json"}: "{key}" must be {shape}, not '
                f"{'missing' if value is None else type(value).__name__}; {FIX}"
            )
    if check_manifest is not None and not isinstance(check_manifest.get("judge"), dict):
        raise BadInput(
            f'{run_dir / "check.json"}: "judge" must be an object; remove check.json and '
            f"checks.jsonl, then check again (auditor check {run_dir})"
        )
    return {k: v for k, v in manifest.items() if not (v is None and k in _MANIFEST_SECTIONS)}
