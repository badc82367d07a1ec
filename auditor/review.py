"""People's review of a run: the random sample to review (`review.json`) and their labels.

`auditor review RUN_DIR --sample N --seed S` picks N of the run's checked answers uniformly at
random: a seeded permutation of the answer ids, of which the sample is the first N. The same
seed gives the same sample, and a larger N extends it (the first N stay in). Each answer's
inclusion probability (N / answers) is recorded, so the rates can weight it.

Labels (`report --labels`, `calibrate --labels`): one JSON object per line with `id`,
`hallucinated` (true/false), optional `pipeline` (required when a report has several runs),
`claims` (per claim of the check, in order: `{"index": K, "judge_right": true|false}`),
`spans`, `note`, and `fingerprint` (written by the report's review page: the run it was
reviewed on). Labels with no `review.json` beside the run count as a uniform random sample.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from auditor.errors import BadInput
from auditor.files import utc_now, write_json_atomic
from auditor.jsonl import iter_objects, unique_id
from auditor.store import read_json_artifact, read_run_manifest

__all__ = [
    "OUTSIDE_SAMPLE",
    "REVIEW",
    "ClaimMark",
    "ReviewLabel",
    "ReviewSample",
    "check_audit_labels",
    "choose_sample",
    "draw_review",
    "label_pipeline",
    "read_review",
    "read_review_labels",
    "refuse_other_run",
    "run_fingerprint",
    "write_review",
]

REVIEW = "review.json"
REVIEW_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ClaimMark:
    """A reviewer's word on one of the judge's claim verdicts."""

    index: int
    judge_right: bool


@dataclass(frozen=True)
class ReviewLabel:
    """A person's label of one answer."""

    id: str
    hallucinated: bool
    pipeline: str | None = None
    claims: tuple[ClaimMark, ...] = ()
    note: str = ""
    fingerprint: str | None = None
    where: str = ""  # file:line, for messages
    reviewer: str | None = None  # who labelled it (the review page asks once)
    labelled_at: str | None = None  # when (ISO 8601, UTC)
    # False: outside the run's drawn sample, kept with `--labels-outside-sample keep`: counted
    # in the judge's agreement, never in a rate
    in_sample: bool = True


@dataclass
class ReviewSample:
    """The answers of one run chosen for review, in the order they were drawn."""

    seed: int
    population: list[str]  # every checked answer's id
    order: list[str]  # the seeded permutation of `population`
    size: int
    fingerprint: str
    created_at: str = field(default_factory=utc_now)

    @property
    def sample(self) -> list[str]:
        return self.order[: self.size]

    @property
    def inclusion_probability(self) -> float:
        return self.size / len(self.population) if self.population else 0.0

    def to_json(self) -> dict[str, Any]:
        probability = round(self.inclusion_probability, 6)
        return {
            "schema_version": REVIEW_SCHEMA_VERSION,
            "method": "uniform",
            "seed": self.seed,
            "size": self.size,
            "population": len(self.population),
            "fingerprint": self.fingerprint,
            "created_at": self.created_at,
            "sample": [{"id": i, "inclusion_probability": probability} for i in self.sample],
        }


def run_fingerprint(manifest: dict[str, Any]) -> str:
    """A short id of a run: what its review page writes into every label, so labels exported
    from another run's page are recognised."""
    keys = ("run_id", "started_at", "kind")
    basis = {k: manifest.get(k) for k in keys} | {
        section: (manifest.get(section) or {}).get("sha256")
        for section in ("pipeline", "questions", "source")
    }
    encoded = json.dumps(basis, sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def choose_sample(population: list[str], size: int, seed: int, fingerprint: str) -> ReviewSample:
    """`size` answers drawn uniformly at random: the first of a permutation seeded by `seed`
    (sorted ids first, so the order of the records does not matter)."""
    ids = sorted(population)
    order = [ids[k] for k in np.random.default_rng(seed).permutation(len(ids))]
    return ReviewSample(seed, ids, order, min(size, len(ids)), fingerprint)


def read_review(run_dir: Path) -> dict[str, Any] | None:
    """A run's review.json (None without one); BadInput when damaged."""
    data = read_json_artifact(
        run_dir / REVIEW, "review sample", f"remove it and run `auditor review {run_dir}` again"
    )
    if data is not None and data.get("schema_version") != REVIEW_SCHEMA_VERSION:
        raise BadInput(f"{run_dir / REVIEW}: not a review sample of this auditor (schema)")
    if data is not None:
        fix = f"remove it and run `auditor review {run_dir}` again (the same --seed draws the same)"
        for key in ("seed", "size"):
            value = data.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BadInput(f'{run_dir / REVIEW}: "{key}" must be a whole number >= 0; {fix}')
        if not isinstance(data.get("sample"), list):
            raise BadInput(f'{run_dir / REVIEW}: "sample" must be a list; {fix}')
    return data


def write_review(run_dir: Path, sample: ReviewSample, earlier: dict[str, Any] | None) -> None:
    """Write review.json; an earlier sample keeps its creation time."""
    if earlier is not None:
        sample.created_at = str(earlier.get("created_at") or sample.created_at)
    write_json_atomic(run_dir / REVIEW, sample.to_json())


def _claim_marks(where: str, value: Any) -> tuple[ClaimMark, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BadInput(f'{where}: "claims" must be a list of {{"index": K, "judge_right": bool}}')
    marks = []
    for mark in value:
        index = mark.get("index") if isinstance(mark, dict) else None
        right = mark.get("judge_right") if isinstance(mark, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise BadInput(f'{where}: each of "claims" needs "index", a claim number from 0')
        if not isinstance(right, bool):
            raise BadInput(f'{where}: each of "claims" needs "judge_right": true or false')
        marks.append(ClaimMark(index, right))
    return tuple(marks)


def read_review_labels(path: Path) -> list[ReviewLabel]:
    """Every label of a labels file; BadInput naming file and line on the first bad one. An
    id may appear once per pipeline (a duplicate with the same label is kept once; with
    another label it is refused, naming both lines)."""
    labels: dict[tuple[str | None, str], ReviewLabel] = {}
    for where, data in iter_objects(path, "id and hallucinated"):
        ident = unique_id(where, data.get("id"), {})
        hallucinated = data.get("hallucinated")
        if not isinstance(hallucinated, bool):
            raise BadInput(f'{where}: "hallucinated" must be true or false')
        pipeline = data.get("pipeline")
        if pipeline is not None and (not isinstance(pipeline, str) or not pipeline.strip()):
            raise BadInput(f'{where}: "pipeline" must be a pipeline name when present')
        note = data.get("note") or ""
        if not isinstance(note, str):
            raise BadInput(f'{where}: "note" must be a string when present')
        fingerprint = data.get("fingerprint")
        if fingerprint is not None and not isinstance(fingerprint, str):
            raise BadInput(f'{where}: "fingerprint" must be a string when present')
        reviewer, labelled_at = data.get("reviewer"), data.get("labelled_at")
        for name, value in (("reviewer", reviewer), ("labelled_at", labelled_at)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise BadInput(f'{where}: "{name}" must be a non-empty string when present')
        label = ReviewLabel(
            ident, hallucinated, pipeline, _claim_marks(where, data.get("claims")), note,
            fingerprint, where, reviewer, labelled_at,
        )  # fmt: skip
        key = (pipeline, ident)
        if key in labels:
            first = labels[key]
            if first.hallucinated != label.hallucinated or first.claims != label.claims:
                raise BadInput(
                    f"{where}: answer {ident!r} labelled again, differently (first on "
                    f"{first.where.rsplit(':', 1)[1] and 'line ' + first.where.rsplit(':', 1)[1]});"
                    " keep one label per answer"
                )
            continue
        labels[key] = label
    if not labels:
        raise BadInput(f"{path}: no labels; one JSON object per line with id and hallucinated")
    return list(labels.values())


def label_pipeline(label: ReviewLabel, names: list[str]) -> str:
    """The pipeline a label belongs to among the report's `names`; BadInput without
    `pipeline` when there are several, or with one not among them (`audit` asks it before
    any engine starts)."""
    name = label.pipeline
    if name is None:
        if len(names) > 1:
            raise BadInput(
                f'{label.where}: no "pipeline", and the report has {len(names)} runs '
                f"({', '.join(names)}); add the pipeline to each label"
            )
        return names[0]
    if name not in names:
        raise BadInput(
            f"{label.where}: pipeline {name!r} is not in this report "
            f"({', '.join(names)}); give its run dir, or drop its labels"
        )
    return name


OUTSIDE_SAMPLE = ("refuse", "keep")


def refuse_other_run(label: ReviewLabel, run_dir: Path, fingerprint: str | None) -> None:
    """BadInput when the label was made on the review page of another run than `run_dir`
    (`fingerprint` None: the run is not made yet, so no page of it can have been)."""
    if label.fingerprint is None or label.fingerprint == fingerprint:
        return
    here = f"{run_dir} is {fingerprint}" if fingerprint else f"{run_dir} is not run yet"
    raise BadInput(
        f"{label.where}: labelled on the review page of another run (fingerprint "
        f"{label.fingerprint}, {here}); report that run with --labels, or give these labels "
        "to the judge as --examples"
    )


def _refuse_claim_marks(label: ReviewLabel, claims: int, run_dir: Path) -> None:
    for mark in label.claims:
        if mark.index >= claims:
            raise BadInput(
                f"{label.where}: claim {mark.index} of answer {label.id!r} is marked, but its "
                f"check in {run_dir} has {claims} claim{'' if claims == 1 else 's'} (0 to "
                f"{claims - 1}); labels of another check? mark the claims on this run's report"
            )


def _drawn_ids(run_dir: Path) -> set[str] | None:
    """The ids of a run's drawn review sample (None without a review.json)."""
    review = read_review(run_dir)
    if review is None:
        return None
    return {str(e.get("id")) for e in review.get("sample") or [] if isinstance(e, dict)}


def assign_labels(
    labels: list[ReviewLabel], runs: list[Any], source: Path, outside: str = "refuse"
) -> dict[str, list[ReviewLabel]]:
    """{pipeline name: its labels}, every label matched to a run of the report; BadInput in one
    line for a label without `pipeline` when the report has several runs, a pipeline not in
    the report, an id not among the run's checked answers, a claim mark past the answer's
    claims, a label from another run's review page (its fingerprint), or labels of answers
    outside the run's drawn sample (review.json): a rate's interval holds only for the drawn
    sample. With `outside` "keep" those are kept, marked `in_sample=False` (the judge's
    agreement counts them, no rate does)."""
    by_name = {run.name: run for run in runs}
    assigned: dict[str, list[ReviewLabel]] = {name: [] for name in by_name}
    outside_of: dict[str, list[ReviewLabel]] = {}
    # per run: each checked answer's number of claims, its fingerprint, the drawn sample
    claims = {
        run.name: {str(row["id"]): len(row.get("claims") or []) for row in run.checks}
        for run in runs
    }
    fingerprints = {run.name: run_fingerprint(run.manifest) for run in runs}
    drawn = {run.name: _drawn_ids(run.run_dir) for run in runs}
    for label in labels:
        name = label_pipeline(label, list(by_name))
        run = by_name[name]
        if label.id not in claims[name]:
            raise BadInput(
                f"{label.where}: answer {label.id!r} is not among the checked answers of "
                f"{run.run_dir}; labels from another run?"
            )
        refuse_other_run(label, run.run_dir, fingerprints[name])
        _refuse_claim_marks(label, claims[name][label.id], run.run_dir)
        sample = drawn[name]
        if sample is not None and label.id not in sample:
            outside_of.setdefault(name, []).append(label)
            label = replace(label, in_sample=False)
        assigned[name].append(label)
    if outside_of and outside != "keep":
        name, found = next(iter(outside_of.items()))
        shown = ", ".join(repr(label.id) for label in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        raise BadInput(
            f"{found[0].where}: {len(found)} label{'s' if len(found) > 1 else ''} of {name} "
            f"for answers outside its drawn review sample ({shown}{more}; "
            f"{by_name[name].run_dir / REVIEW}): only the drawn sample makes a rate with an "
            "interval; drop them, or add --labels-outside-sample keep to count them in the "
            "judge's agreement only"
        )
    return {name: found for name, found in assigned.items() if found}


def check_audit_labels(
    labels: list[ReviewLabel], run_dirs: dict[str, Path], question_ids: list[str]
) -> None:
    """`audit --labels`, before any engine starts: each label names an audited pipeline (or
    the audit has one), an answer to one of the questions asked, and was not made on the
    review page of another run (a run dir the audit resumes has a fingerprint; a new one has
    none yet, so no page of it exists). BadInput in one line on the first that does not."""
    asked = set(question_ids)
    fingerprints: dict[str, str | None] = {}
    for label in labels:
        name = label_pipeline(label, list(run_dirs))
        run_dir = run_dirs[name]
        if label.id not in asked:
            raise BadInput(
                f"{label.where}: answer {label.id!r} is not among the questions this audit "
                "asks; labels of another question set (or past --limit)?"
            )
        if name not in fingerprints:
            manifest = read_run_manifest(run_dir)
            fingerprints[name] = None if manifest is None else run_fingerprint(manifest)
        refuse_other_run(label, run_dir, fingerprints[name])


def draw_review(
    run: Any, size: int, seed: int | None
) -> tuple[ReviewSample, dict[str, Any] | None]:
    """The review sample of a checked run (`auditor review`, `audit --review`), not yet
    written: `seed` None takes the one review.json records (else 0); another seed over an
    existing sample is refused (people may have reviewed it)."""
    if not run.checks:
        raise BadInput(
            f"{run.run_dir}: no checked answers; check it first (auditor check {run.run_dir})"
        )
    earlier = read_review(run.run_dir)
    if earlier is not None and seed is not None and seed != earlier.get("seed"):
        raise BadInput(
            f"{run.run_dir / REVIEW}: drawn with seed {earlier.get('seed')}; another seed would "
            "replace the sample people may have reviewed: remove the file first"
        )
    drawn = int((earlier or {}).get("size") or 0)
    if size < drawn:
        # answers people may have reviewed would drop out, and every inclusion probability
        # would change under their labels
        raise BadInput(
            f"{run.run_dir / REVIEW}: {drawn} answers are drawn; a sample only grows: give "
            f"--sample {drawn} or more (a larger N extends the same seeded order)"
        )
    chosen = seed if seed is not None else int((earlier or {}).get("seed", 0))
    ids = [str(row["id"]) for row in run.checks if not row.get("error")]
    return choose_sample(ids, size, chosen, run_fingerprint(run.manifest)), earlier
