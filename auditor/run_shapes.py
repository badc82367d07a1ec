"""The shapes of a run dir's artifacts, checked as they are read (`auditor.store` readers and
`auditor.results.load_run`).

A run dir is written by the auditor, but a hand edit, a copy cut short or another tool can
leave rows that are valid JSON of the wrong shape. Every figure is computed from these rows,
so such a row is a one-line refusal naming the file, the line and the field, never a
traceback and never a silently wrong figure. Each file's shape is a pydantic model of the
fields the figures and the report read (strict kinds, other keys kept): `Record`, `CheckRow`
(with `CheckClaim`), `RunManifest`, `CheckManifest`; across files, each answer once and every
checked answer among the records. `bench/fault_probe.py` damages every field to test it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from auditor.claim_rows import ClaimKind, ClaimOrigin, Verdict
from auditor.errors import BadInput

__all__ = [
    "ArtifactPart",
    "check_manifests",
    "check_row",
    "check_run_rows",
    "record_row",
]

VERDICTS = set(get_args(Verdict))
FIX = "the file was edited by hand? re-run into a new --out"


class ArtifactPart(BaseModel):
    """A part of a run-dir JSON file that the figures or the report read: each field of the
    kind the code uses (None where a run has none), any other key kept unchecked."""

    model_config = ConfigDict(extra="allow", strict=True)


class RetrievedChunk(ArtifactPart):
    chunk_id: str
    text: str
    document: str | None = None
    page: int | str | None = None
    score: float | None = None


class Record(ArtifactPart):
    """A records.jsonl row: one question's answer and how it was served."""

    id: str | int
    question: str
    answer: str | None = None
    reference: str | None = None
    error: str | None = None
    retrieval: str | None = None
    contexts_returned: bool | None = None
    retrieved: list[RetrievedChunk]
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    arrival_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] | None = None
    attempts: int | None = None
    endpoint: str | None = None

    @model_validator(mode="after")
    def _answered_or_failed(self) -> Record:
        if self.answer is None and self.error is None:
            raise ValueError('"answer" is missing and no "error" says why')
        return self


class CheckClaim(ArtifactPart):
    """A claim as `auditor.claim_rows.Claim.to_json` writes it."""

    text: str
    verdict: Verdict
    span: list[int] | None = Field(None, min_length=2, max_length=2)
    kind: ClaimKind = "fact"
    origin: ClaimOrigin = "judge"
    p_supported: float | None = Field(None, ge=0, le=1)
    reason: str = ""
    evidence: str = ""
    supporting_chunks: list[str] = Field(default_factory=list)
    contradicting_chunks: list[str] = Field(default_factory=list)
    checked_chunks: list[str] = Field(default_factory=list)
    chunk_sources: dict[str, str] = Field(default_factory=dict)
    judgements: list[dict[str, Any]] = Field(default_factory=list)
    quote: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None


class ClaimCounts(ArtifactPart):
    supported: int = Field(ge=0)
    unsupported: int = Field(ge=0)
    contradicted: int = Field(ge=0)
    unverifiable: int = Field(ge=0)


class ContextVerdict(ArtifactPart):
    chunk_id: str
    useful: bool | None = None
    reason: str | None = None


class ListingError(ArtifactPart):
    """A listed claim the answer does not make, dropped (verify.listing)."""

    text: str
    checked_instead: str | None = None


# how an answer was handled (auditor.verify.claims.answer_outcome, verify.record, verify.pipeline)
Outcome = Literal[
    "checked",
    "refusal",
    "no_context",
    "truncated",
    "empty_answer",
    "generation_error",
    "judge_failed",
]


class CheckRow(ArtifactPart):
    """A checks.jsonl row: one answer's claims, verdicts and metrics."""

    id: str | int
    outcome: Outcome
    claims: list[CheckClaim]
    claim_counts: ClaimCounts
    hallucinated: bool | None = None
    faithfulness: float | None = None
    support_score: float | None = None
    context_precision: float | None = None
    context_precision_with_reference: float | None = None
    answer_relevancy: float | None = None
    context_recall: float | None = None
    answer_correctness: float | None = None
    context_verdicts: list[ContextVerdict] = Field(default_factory=list)
    context_verdicts_with_reference: list[ContextVerdict] = Field(default_factory=list)
    judge: dict[str, Any] | None = None
    judge_failures: list[Any] = Field(default_factory=list)
    listed_claims: int | None = None
    listing_errors: list[ListingError] = Field(default_factory=list)
    sources: str | None = None


def _id(where: str, row: Any, what: str) -> None:
    if not isinstance(row, dict):
        raise BadInput(f"{where}: a {what} must be a JSON object, not {type(row).__name__}; {FIX}")
    ident = row.get("id")
    valid = isinstance(ident, str) and bool(ident.strip())
    if not (valid or (isinstance(ident, int) and not isinstance(ident, bool))):
        raise BadInput(f'{where}: a {what} without "id" (a string or an integer); {FIX}')


def record_row(where: str, row: Any, filled: bool = False) -> dict[str, Any]:
    """A records.jsonl row: an object with an id, each field the figures and the report read
    of its kind (`Record`); returned as read, or `filled` with every such field (None, or its
    default, where an older or another writer left it out)."""
    _id(where, row, "record")
    return _fields(where, Record, row, filled)


def check_row(where: str, row: Any, filled: bool = False) -> dict[str, Any]:
    """A checks.jsonl row: an object with an id and a list of claims, each an object with a
    known verdict and its text, every field of its kind (`CheckRow`); see `record_row`."""
    _id(where, row, "check row")
    claims = row.get("claims")
    if not isinstance(claims, list):
        raise BadInput(f'{where}: "claims" must be a list (empty for none); {FIX}')
    for number, claim in enumerate(claims):
        if not isinstance(claim, dict) or not isinstance(claim.get("text"), str):
            raise BadInput(f'{where}: claim {number} must be an object with "text"; {FIX}')
        verdict = claim.get("verdict")
        if not isinstance(verdict, str) or verdict not in VERDICTS:
            raise BadInput(
                f"{where}: claim {number} has verdict {claim.get('verdict')!r}, not one of "
                f"{', '.join(sorted(VERDICTS))}; {FIX}"
            )
    return _fields(where, CheckRow, row, filled)


def _fields(
    where: str, model: type[BaseModel], row: dict[str, Any], filled: bool
) -> dict[str, Any]:
    try:
        checked = model.model_validate(row)
    except ValidationError as exc:
        raise BadInput(f"{where}: {_problems(exc)}; {FIX}") from exc
    return checked.model_dump() if filled else row


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


class PipelineSection(ArtifactPart):
    name: str
    sha256: str | None = None
    config: dict[str, Any] | None = None


class QuestionsSection(ArtifactPart):
    path: str | None = None
    sha256: str | None = None
    count: int | None = None


class IndexSection(ArtifactPart):
    path: str | None = None
    manifest_sha256: str | None = None
    generation: str | None = None
    embedder: dict[str, Any] | None = None
    documents: int | None = None
    chunks: int | None = None


class Session(ArtifactPart):
    generation_s: float = Field(ge=0)  # a session is written once it has generated
    started_at: str | None = None
    finished_at: str | None = None
    requests: int | None = None
    completed: int | None = None
    interrupted: bool | None = None


class ModelSection(ArtifactPart):
    name: str | None = None
    backend: str | None = None
    weights_sha256: str | None = None


class HostSection(ArtifactPart):
    hostname: str | None = None
    cpu: str | None = None
    cpu_count: int | None = None


class LoadRegime(ArtifactPart):
    mode: str | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    batch_size: int | None = None
    engines: int | None = None


class Totals(ArtifactPart):
    requests: int | None = None
    completed: int | None = None
    errors: int | None = None
    output_tokens: int | None = None
    generation_s: float | None = None
    tokens_per_s: float | None = None


class SourceSection(ArtifactPart):
    path: str | None = None
    sha256: str | None = None
    count: int | None = None


class RunManifest(ArtifactPart):
    """manifest.json: a run of a pipeline (`auditor run`, `audit`) or of imported answers
    (`check --answers`, kind "answers")."""

    schema_version: int
    kind: str | None = None
    run_id: str | None = None
    status: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    pipeline: PipelineSection | None = None
    questions: QuestionsSection | None = None
    index: IndexSection | None = None
    sessions: list[Session] | None = None
    model: ModelSection | None = None
    host: HostSection | None = None
    packages: dict[str, str | None] | None = None
    load_regime: LoadRegime | None = None
    totals: Totals | None = None
    source: SourceSection | None = None


class JudgeSettings(ArtifactPart):
    name: str | None = None
    support_threshold: float = Field(ge=0, le=1)


class JudgeIdentity(ArtifactPart):
    name: str | None = None
    weights_sha256: str | None = None
    backend: str | None = None
    dtype: str | None = None


class JudgeSection(ArtifactPart):
    config: JudgeSettings
    # absent until a cluster's actors report it; never null
    identity: JudgeIdentity = Field(default_factory=JudgeIdentity)
    sha256: str | None = None
    verdict_logic: str | None = None


class CheckManifest(ArtifactPart):
    """check.json: the judge that wrote checks.jsonl."""

    schema_version: int | None = None
    judge: JudgeSection
    sources: list[str] | None = None
    status: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    packages: dict[str, str | None] | None = None


# a run of a pipeline has these; a run of imported answers has none of them
_PIPELINE_RUN = ("pipeline", "questions", "sessions")


def _shape(path: Path, model: type[BaseModel], data: dict[str, Any], fix: str) -> None:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        raise BadInput(f"{path}: {_problems(exc)}; {fix}") from exc


def _problems(exc: ValidationError) -> str:
    """The first three problems, each naming its field as a dotted path and what it must be."""
    problems = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error["loc"])
        given = error.get("input")
        if error["type"] == "missing":
            problems.append(f'"{where}" is required, missing')
        elif error["type"] in _KINDS:
            problems.append(f'"{where}" {_KINDS[error["type"]]}, not {_type_name(given)}')
        else:
            said = str(error["msg"]).removeprefix("Value error, ")  # our validators' own words
            problems.append(f'"{where}": {said}' if where else said)
    more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "; ".join(problems) + more


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# what a field must be, by pydantic's error type
_KINDS = {
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
}


def check_manifests(
    run_dir: Path, manifest: dict[str, Any], check_manifest: dict[str, Any] | None
) -> dict[str, Any]:
    """The manifest's sections the figures read, and check.json's judge, of the right kind;
    the manifest returned without the sections that are null where none is needed (a run of
    imported answers has no pipeline: null is no section)."""
    required = _PIPELINE_RUN if manifest.get("kind") != "answers" else ()
    for key in required:
        if manifest.get(key) is None:
            kind = "a list" if key == "sessions" else "an object"
            raise BadInput(
                f'{run_dir / "manifest.json"}: "{key}" must be {kind}, not missing; {FIX}'
            )
    _shape(run_dir / "manifest.json", RunManifest, manifest, FIX)
    if check_manifest is not None:
        _shape(
            run_dir / "check.json",
            CheckManifest,
            check_manifest,
            f"remove check.json and checks.jsonl, then check again (auditor check {run_dir})",
        )
        _refuse_edited_judge(run_dir, check_manifest["judge"])
    return {k: v for k, v in manifest.items() if not (v is None and k in RunManifest.model_fields)}


def _refuse_edited_judge(run_dir: Path, judge: dict[str, Any]) -> None:
    """check.json's judge settings must hash to the `sha256` the check recorded with them
    (`config.config_sha256`): a threshold edited by hand would change every flag, the judge's
    agreement and the reviewed rate's weights, while the check's fingerprint stays."""
    recorded, config = judge.get("sha256"), judge.get("config")
    if recorded is None or not isinstance(config, dict):
        return
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    if hashlib.sha256(canonical.encode()).hexdigest() != recorded:
        raise BadInput(
            f'{run_dir / "check.json"}: "judge.config" does not hash to "judge.sha256" (the '
            "settings were edited after the check); put them back, or check again with the "
            f"settings you want (auditor check {run_dir} --judge-set KEY=VALUE)"
        )
