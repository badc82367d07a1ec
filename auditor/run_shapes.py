"""The shapes of a run dir's artifacts, checked as they are read (`auditor.store` readers and
`auditor.results.load_run`).

A run dir is written by the auditor, but a hand edit, a copy cut short or another tool can
leave rows that are valid JSON of the wrong shape. Every figure is computed from these rows,
so such a row is a one-line refusal naming the file, the line and the field, never a
traceback and never a silently wrong figure. Each file's shape is a pydantic model of the
fields the figures and the report read (strict kinds, other keys kept): `Record`, `CheckRow`
(with `CheckClaim`), `RunManifest`, `CheckManifest`; across files, each answer once, every
checked answer among the records, and the rows as many as the manifests' totals say
(`check_totals`: a records.jsonl appended to, or a manifest of another run, would change every
throughput figure without a word). `bench/fault_probe.py` damages every field to test it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from auditor.claim_rows import ClaimKind, ClaimOrigin, Verdict
from auditor.errors import BadInput

__all__ = [
    "ArtifactPart",
    "check_manifests",
    "check_row",
    "check_run_rows",
    "check_totals",
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
    run_dir: Path,
    records: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    torn: Sequence[str] = (),
) -> None:
    """Each answer once in records.jsonl and in checks.jsonl, every checked answer among the
    records (a checks.jsonl with rows beside an empty records.jsonl included). `torn`: the
    `file:line` of torn last lines left out (`store.read_jsonl`); a checked answer missing
    from records.jsonl whose last line is cut off is blamed on the cut, not on another run."""
    for name, rows in (("records.jsonl", records), ("checks.jsonl", checks)):
        seen: set[str] = set()
        for row in rows:
            ident = str(row["id"])
            if ident in seen:
                raise BadInput(f"{run_dir / name}: answer {ident!r} is in it twice; {FIX}")
            seen.add(ident)
    recorded = {str(row["id"]) for row in records}
    stray = [str(row["id"]) for row in checks if str(row["id"]) not in recorded]
    cut = _torn_in(torn, "records.jsonl")
    if len(stray) == 1 and cut is not None:  # the one answer whose record was cut
        raise BadInput(
            f"{cut}: the last line is cut off (an interrupted write, or a copy cut short), "
            f"and checks.jsonl checks that answer ({stray[0]!r}); copy the run dir again, or "
            f"resume the run into the same --out to write it again (`auditor run ... --out "
            f"{run_dir}`; imported answers: `auditor check --answers FILE --out {run_dir}`) "
            f"and check it into a new dir (`auditor check {run_dir} --out NEW_DIR`)"
        )
    if stray:
        raise BadInput(
            f"{run_dir / 'checks.jsonl'}: {len(stray)} checked answer(s) not in records.jsonl "
            f"({', '.join(repr(s) for s in stray[:3])}); the two files are of different runs? {FIX}"
        )


def _torn_in(torn: Sequence[str], name: str) -> str | None:
    """The `file:line` among `torn` of the file called `name`, if any."""
    return next((where for where in torn if Path(where.rsplit(":", 1)[0]).name == name), None)


def check_totals(
    run_dir: Path,
    manifest: dict[str, Any],
    records: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    check_manifest: dict[str, Any] | None,
    torn: Sequence[str] = (),
) -> None:
    """The rows as many as the manifests say, each count and token total the figures use
    equal to what the rows hold; BadInput naming both numbers otherwise.

    manifest.json's `totals` (a run of a pipeline) are written at the end of each session
    (`auditor.run`), and each session is written before its first record: a session without
    "completed" was killed mid-answer, and records.jsonl may then hold up to its `requests`
    rows past the totals, never fewer than they say. Answers imported (`check --answers`) are
    as many as `source.count` once the import is "complete" (at most as many while
    "running"). check.json's `totals` (written when a check completes) are the rows of
    checks.jsonl and their claims. A torn last line, left out of the rows, may be one the
    totals count."""
    _check_record_totals(run_dir, manifest, records, torn)
    _check_check_totals(run_dir, checks, check_manifest, torn)


def _check_record_totals(
    run_dir: Path, manifest: dict[str, Any], records: list[dict[str, Any]], torn: Sequence[str]
) -> None:
    records_path = run_dir / "records.jsonl"
    cut = 1 if _torn_in(torn, "records.jsonl") else 0
    rows = len(records)
    if manifest.get("kind") == "traces":
        _check_trace_totals(records_path, manifest, rows, cut)
        return
    if manifest.get("kind") == "answers":
        source = manifest.get("source")
        count = source.get("count") if isinstance(source, dict) else None
        if _whole(count) and not (
            rows <= count and (manifest.get("status") == "running" or rows + cut >= count)
        ):
            raise BadInput(
                f"{records_path}: {_many(rows, 'row')}, but manifest.json says it imported "
                f"{_many(count, 'answer')} (source.count); {_why(rows > count)}; import them "
                "again into a new --out (auditor check --answers FILE --out NEW_DIR)"
            )
        return
    totals = manifest.get("totals") or {}
    requests = totals.get("requests") if isinstance(totals, dict) else None
    if not _whole(requests):
        return  # no session ended yet (the first one killed): nothing to hold the rows to
    sessions = [s for s in manifest.get("sessions") or [] if isinstance(s, dict)]
    killed = [s for s in sessions if s.get("completed") is None]
    slack = sum(s["requests"] for s in killed if _whole(s.get("requests")))
    if not requests - cut <= rows <= requests + slack:
        resume = (
            f" (a run killed mid-answer by an earlier auditor: resume it into the same --out, "
            f"auditor run ... --out {run_dir}, which brings the manifest up to date)"
            if rows > requests
            else ""
        )
        raise BadInput(
            f"{records_path}: {_many(rows, 'row')}, but manifest.json says "
            f"{_many(requests, 'request')} (totals.requests); {_why(rows > requests)}; re-run "
            f"into a new --out{resume}"
        )
    if killed or cut or rows != requests:
        return  # a killed session's rows are not in the totals yet
    answered = [r for r in records if not r.get("error")]
    found = {
        "completed": len(answered),
        "errors": rows - len(answered),
        "output_tokens": sum(int(r.get("output_tokens") or 0) for r in answered),
    }
    for key, value in found.items():
        said = totals.get(key)
        if _whole(said) and said != value:
            raise BadInput(
                f"{records_path}: its rows hold {value} {_TOTALS[key]}, but manifest.json says "
                f"{said} (totals.{key}); the records were edited, or the manifest is of another "
                "run; re-run into a new --out"
            )
    _check_times(run_dir, totals, sessions, found["output_tokens"])


def _check_trace_totals(records_path: Path, manifest: dict[str, Any], rows: int, cut: int) -> None:
    """Imported traces: as many rows as sample.records once "complete" (at most while
    "running": an import cut short)."""
    sample = manifest.get("sample")
    count = sample.get("records") if isinstance(sample, dict) else None
    if _whole(count) and not (
        rows <= count and (manifest.get("status") == "running" or rows + cut >= count)
    ):
        raise BadInput(
            f"{records_path}: {_many(rows, 'row')}, but manifest.json says the import chose "
            f"{_many(count, 'answer')} (sample.records); {_why(rows > count)}; import the "
            "traces again into a new --out (auditor traces EXPORT... --out NEW_DIR)"
        )


def _check_times(
    run_dir: Path, totals: dict[str, Any], sessions: list[dict[str, Any]], tokens: int
) -> None:
    """totals.generation_s is the sessions' generation seconds summed (the time tok/s divides
    by), and totals.tokens_per_s the tokens over it."""
    spent = sum(float(v) for s in sessions if _number(v := s.get("generation_s")))
    said = totals.get("generation_s")
    if _number(said) and abs(said - spent) > 1e-5:
        raise BadInput(
            f"{run_dir / 'manifest.json'}: its sessions generated for {spent:.6g} s, but it says "
            f"{said:.6g} s (totals.generation_s); {FIX}"
        )
    rate = totals.get("tokens_per_s")
    if _number(rate) and spent > 0 and abs(rate - tokens / spent) > 1e-6 * max(1.0, abs(rate)):
        raise BadInput(
            f"{run_dir / 'manifest.json'}: {tokens} output tokens over {spent:.6g} s make "
            f"{tokens / spent:.6g} tok/s, but it says {rate:.6g} (totals.tokens_per_s); {FIX}"
        )


def _check_check_totals(
    run_dir: Path,
    checks: list[dict[str, Any]],
    check_manifest: dict[str, Any] | None,
    torn: Sequence[str],
) -> None:
    if check_manifest is None or check_manifest.get("status") != "complete":
        return  # a check under way (or killed) has no totals yet
    totals = check_manifest.get("totals")
    if not isinstance(totals, dict):
        return  # written by an earlier auditor
    path = run_dir / "checks.jsonl"
    cut = 1 if _torn_in(torn, "checks.jsonl") else 0
    rows, answers = len(checks), totals.get("answers")
    fix = f"check it again into a new dir (auditor check {run_dir} --out NEW_DIR)"
    if _whole(answers) and not answers - cut <= rows <= answers:
        raise BadInput(
            f"{path}: {_many(rows, 'row')}, but check.json says it checked "
            f"{_many(answers, 'answer')} (totals.answers); "
            f"{_why(rows > answers, 'checks', 'check.json', 'check')}; {fix}"
        )
    claims = totals.get("claims")
    found = sum(len(row.get("claims") or []) for row in checks)
    if _whole(claims) and not cut and found != claims:
        raise BadInput(
            f"{path}: its rows hold {_many(found, 'claim')}, but check.json says {claims} "
            "(totals.claims); "
            f"the checks were edited, or check.json is of another check; {fix}"
        )


# what each total of manifest.json counts, for the refusal
_TOTALS = {
    "completed": "answered requests",
    "errors": "failed requests",
    "output_tokens": "output tokens",
}


def _many(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _whole(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _why(more: bool, rows: str = "records", manifest: str = "the manifest", of: str = "run") -> str:
    """Why a file holds more (or fewer) rows than its manifest says."""
    done = "appended to" if more else "cut or replaced"
    return f"the {rows} were {done}, or {manifest} is of another {of}"


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
    # written before its first record (0 s until it ends); one without "completed" was killed
    generation_s: float = Field(ge=0)
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
    """What records.jsonl holds when a session ended (`check_totals`)."""

    requests: int | None = Field(None, ge=0)
    completed: int | None = Field(None, ge=0)
    errors: int | None = Field(None, ge=0)
    output_tokens: int | None = Field(None, ge=0)
    generation_s: float | None = Field(None, ge=0)
    tokens_per_s: float | None = Field(None, ge=0)


class SourceSection(ArtifactPart):
    path: str | None = None
    sha256: str | None = None
    count: int | None = None


class TraceSample(ArtifactPart):
    """Imported traces: the answers chosen for checking of the window's population."""

    size: int | None = Field(None, ge=1)
    seed: int
    records: int = Field(ge=0)
    of: int = Field(ge=0)


class TracePopulation(ArtifactPart):
    traces_seen: int = Field(ge=0)
    traces_in_window: int = Field(ge=0)
    answers: int = Field(ge=0)
    skipped: dict[str, int]


class RunManifest(ArtifactPart):
    """manifest.json: a run of a pipeline (`auditor run`, `audit`), of imported answers
    (`check --answers`, kind "answers") or of imported traces (`auditor traces`, kind
    "traces")."""

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
    sample: TraceSample | None = None
    population: TracePopulation | None = None


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


class CheckTotals(ArtifactPart):
    """What checks.jsonl holds when the check completed (`check_totals`)."""

    answers: int | None = Field(None, ge=0)
    claims: int | None = Field(None, ge=0)


class CheckManifest(ArtifactPart):
    """check.json: the judge that wrote checks.jsonl."""

    schema_version: int | None = None
    judge: JudgeSection
    sources: list[str] | None = None
    status: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    packages: dict[str, str | None] | None = None
    totals: CheckTotals | None = None


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
    required = _PIPELINE_RUN if manifest.get("kind") not in ("answers", "traces") else ()
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
