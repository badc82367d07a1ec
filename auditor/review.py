"""People's review of a run: the random sample to review (`review.json`) and their labels.

`auditor review RUN_DIR --sample N --seed S` puts the run's checked answers in a random order
and draws the first N: each answer's place is the sha256 of the seed and its id (a random key),
so the order of the answers does not depend on which others are there. The same seed gives the
same order; a larger N extends the sample; a run that grew (more questions asked and checked)
keeps every answer already drawn, in the same order, with the new answers placed among them by
their keys (the first N of keys drawn at random are a uniform sample of every size). Each
answer's inclusion probability (N / answers) is recorded.

review.json names what it was drawn on: the run's fingerprint, the check's (the judge and its
settings that made the claims people mark) and a hash of the answers it was drawn from. It is
refused on another run or another check, and a grown run must be drawn again (`auditor review`
extends it) before its labels make a rate.

Only the drawn order's labelled prefix makes a rate: the first n drawn answers, all labelled.
A label past the first drawn answer nobody labelled is shown and counted in the judge's
agreement, never in the rate (a reviewer who skipped answers would otherwise have picked).

Labels: `auditor.labels` (one reader for every command). With `--second-review SHARE` a stable
random share of the drawn answers is marked for a blind second review.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from auditor.claim_rows import Claim, flagged_at
from auditor.errors import BadInput
from auditor.files import utc_now, write_json_atomic
from auditor.labels import ClaimMark, ReviewLabel, read_labels, settle
from auditor.store import read_json_artifact, read_run_manifest

__all__ = [
    "OUTSIDE_SAMPLE",
    "REVIEW",
    "ClaimMark",
    "ReviewLabel",
    "ReviewSample",
    "assign_labels",
    "check_audit_labels",
    "check_fingerprint",
    "choose_sample",
    "draw_review",
    "label_pipeline",
    "population_sha256",
    "read_review",
    "read_review_labels",
    "refuse_other_run",
    "run_fingerprint",
    "write_review",
]

REVIEW = "review.json"
log = logging.getLogger(__name__)
# 2: random keys (sha256 of seed and id) instead of a permutation of the sorted ids; the run's,
# the check's and the population's fingerprints; the second review
REVIEW_SCHEMA_VERSION = 2


@dataclass
class ReviewSample:
    """The answers of one run chosen for review, in the order they were drawn."""

    seed: int
    population: list[str]  # every checked answer's id
    order: list[str]  # the population in drawn order (by random key)
    size: int
    fingerprint: str
    check_fingerprint: str | None = None
    second_share: float = 0.0  # the share of drawn answers reviewed a second time, blind
    created_at: str = field(default_factory=utc_now)

    @property
    def sample(self) -> list[str]:
        return self.order[: self.size]

    @property
    def inclusion_probability(self) -> float:
        return self.size / len(self.population) if self.population else 0.0

    @property
    def second_review(self) -> list[str]:
        """The drawn answers marked for a second review: each by a key of its own (stable as
        the sample grows), in drawn order."""
        if self.second_share <= 0:
            return []
        return [i for i in self.sample if _key("second", self.seed, i) < self.second_share]

    def to_json(self) -> dict[str, Any]:
        probability = round(self.inclusion_probability, 6)
        return {
            "schema_version": REVIEW_SCHEMA_VERSION,
            "method": "uniform",
            "order": "sha256 keys of seed and id",
            "seed": self.seed,
            "size": self.size,
            "population": len(self.population),
            "population_sha256": population_sha256(self.population),
            "fingerprint": self.fingerprint,
            "check_fingerprint": self.check_fingerprint,
            "created_at": self.created_at,
            "sample": [{"id": i, "inclusion_probability": probability} for i in self.sample],
            "second_review": (
                {"share": self.second_share, "ids": self.second_review}
                if self.second_share > 0
                else None
            ),
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


def check_fingerprint(check_manifest: dict[str, Any] | None) -> str | None:
    """A short id of a run's check (check.json): the judge's settings, its examples, the
    sources and knowledge base it read, the verdict logic, and when the check began (a re-check
    from nothing begins anew: its claims are other claims). None for a run never checked. A
    resumed or grown check keeps it."""
    if check_manifest is None:
        return None
    judge = check_manifest.get("judge") or {}
    basis = {
        "judge": judge.get("sha256"),
        "examples": (judge.get("examples") or {}).get("sha256"),
        "verdict_logic": judge.get("verdict_logic"),
        "sources": check_manifest.get("sources"),
        "kb": (check_manifest.get("kb") or {}).get("manifest_sha256"),
        "started_at": check_manifest.get("started_at"),
        "check_id": check_manifest.get("check_id"),
    }
    encoded = json.dumps(basis, sort_keys=True, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def population_sha256(ids: list[str]) -> str:
    """A hash of the answers a sample was drawn from (sorted ids)."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def _key(kind: str, seed: int, ident: str) -> float:
    """A uniform number in [0, 1) for an answer, from the seed and its id alone."""
    digest = hashlib.sha256(f"{kind}:{seed}:{ident}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def choose_sample(
    population: list[str],
    size: int,
    seed: int,
    fingerprint: str,
    check: str | None = None,
    second_share: float = 0.0,
) -> ReviewSample:
    """`size` answers drawn uniformly at random: the `size` with the smallest random keys."""
    ids = sorted(population)
    order = sorted(ids, key=lambda i: (_key("review", seed, i), i))
    return ReviewSample(
        seed, ids, order, min(size, len(ids)), fingerprint, check, second_share=second_share
    )


def read_review(run_dir: Path) -> dict[str, Any] | None:
    """A run's review.json (None without one); BadInput when damaged or of another auditor."""
    path = run_dir / REVIEW
    fix = f"remove it and run `auditor review {run_dir}` again (the same --seed draws the same)"
    data = read_json_artifact(path, "review sample", fix)
    if data is None:
        return None
    if data.get("schema_version") == 1:
        raise BadInput(
            f"{path}: drawn by an earlier auditor, which did not record the check it was drawn "
            f"on; {fix}"
        )
    if data.get("schema_version") != REVIEW_SCHEMA_VERSION:
        raise BadInput(f"{path}: not a review sample of this auditor (schema); {fix}")
    for key in ("seed", "size", "population"):
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadInput(f'{path}: "{key}" must be a whole number >= 0; {fix}')
    sample = data.get("sample")
    if not isinstance(sample, list) or not all(
        isinstance(e, dict) and isinstance(e.get("id"), str) for e in sample
    ):
        raise BadInput(f'{path}: "sample" must be a list of {{"id": ...}}; {fix}')
    ids = [e["id"] for e in sample]
    if len(set(ids)) != len(ids) or len(ids) != data["size"]:
        raise BadInput(f'{path}: "sample" must hold "size" different answers; {fix}')
    for key in ("fingerprint", "population_sha256"):
        if not isinstance(data.get(key), str):
            raise BadInput(f'{path}: "{key}" must be a string; {fix}')
    second = data.get("second_review")
    if second is not None and not (
        isinstance(second, dict)
        and isinstance(second.get("ids"), list)
        and set(map(str, second["ids"])) <= set(ids)
    ):
        raise BadInput(f'{path}: "second_review" must list drawn answers; {fix}')
    return data


def refuse_stale_review(run: Any, review: dict[str, Any]) -> None:
    """BadInput when review.json was drawn on another run, another check of it, or other
    answers than the run's checked ones now (a run that grew, or a check row lost)."""
    path = run.run_dir / REVIEW
    here = run_fingerprint(run.manifest)
    if review["fingerprint"] != here:
        raise BadInput(
            f"{path}: drawn on another run (fingerprint {review['fingerprint']}, this run is "
            f"{here}); remove it and draw this run's: auditor review {run.run_dir}"
        )
    check = check_fingerprint(run.check_manifest)
    if review.get("check_fingerprint") != check:
        raise BadInput(
            f"{path}: drawn on check {review.get('check_fingerprint')}, but {run.run_dir}'s "
            f"claims are now of check {check} (checked again); its labels and claim marks "
            f"are of the old claims: remove it and draw again (auditor review {run.run_dir})"
        )
    population = reviewable_ids(run)
    if review["population_sha256"] != population_sha256(population):
        missing = [e["id"] for e in review["sample"] if e["id"] not in set(population)]
        if missing:
            raise BadInput(
                f"{path}: drawn answer {missing[0]!r} is no longer among {run.run_dir}'s "
                "checked answers (a check row lost or cut off?); repair the run "
                f"(auditor check {run.run_dir}) before its labels make a rate"
            )
        raise BadInput(
            f"{path}: drawn from {review['population']} answers, the run has "
            f"{len(population)} checked now; extend the sample over them "
            f"(auditor review {run.run_dir} --sample {review['size']}: every drawn answer stays)"
        )


def reviewable_ids(run: Any) -> list[str]:
    """The answers a review is drawn from: every checked answer without an error."""
    return [str(row["id"]) for row in run.checks if not row.get("error")]


def write_review(run_dir: Path, sample: ReviewSample, earlier: dict[str, Any] | None) -> None:
    """Write review.json; an earlier sample keeps its creation time."""
    if earlier is not None:
        sample.created_at = str(earlier.get("created_at") or sample.created_at)
    write_json_atomic(run_dir / REVIEW, sample.to_json())


def read_review_labels(path: Path, *, now: datetime | None = None) -> list[ReviewLabel]:
    """Every label of a labels file (`auditor.labels.read_labels`), settled per pipeline and
    answer as far as the file alone can say (`settle`); `assign_labels` settles again once
    each label's pipeline is known. `now`: no `labelled_at` may be ahead of it (default: this
    machine's clock)."""
    labels = read_labels(path, now=now)
    settle(labels, key=lambda label: (label.pipeline, label.id))  # refuse early, in file order
    return labels


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


def _refuse_claim_marks(
    label: ReviewLabel, claims: list[Claim], threshold: float, run: Any
) -> None:
    """A label's claim marks against the check's claims: every index a claim of the answer, and
    the answer's label not contradicting them (a claim the reviewer holds hallucinated makes a
    hallucinated answer; an answer held hallucinated with every claim marked needs one)."""
    count = len(claims)
    for mark in label.claims:
        if mark.index >= count:
            raise BadInput(
                f"{label.where}: claim {mark.index} of answer {label.id!r} is marked, but its "
                f"check in {run.run_dir} has {count} claim{'' if count == 1 else 's'} (0 to "
                f"{count - 1}); labels of another check? mark the claims on this run's report"
            )
    held = [mark_hallucinated(claims[m.index], m, threshold) for m in label.claims]
    judged = [m for m in label.claims if claims[m.index].verdict != "unverifiable"]
    if not label.hallucinated and any(held):
        bad = next(m.index for m, h in zip(label.claims, held, strict=True) if h)
        raise BadInput(
            f"{label.where}: answer {label.id!r} is labelled not hallucinated, but its claim "
            f"{bad} is marked hallucinated; fix the label or the claim mark"
        )
    every = {k for k, c in enumerate(claims) if c.verdict != "unverifiable"}
    if label.hallucinated and judged and {m.index for m in judged} >= every and not any(held):
        raise BadInput(
            f"{label.where}: answer {label.id!r} is labelled hallucinated, but every claim is "
            "marked as not hallucinated; mark the claim that is wrong, or label the answer not "
            "hallucinated"
        )


def mark_hallucinated(claim: Claim, mark: ClaimMark, threshold: float) -> bool:
    """A marked claim is hallucinated when the judge flagged it and was right, or passed it
    and was wrong."""
    return flagged_at([claim], threshold) == mark.judge_right


def _refuse_other_check(label: ReviewLabel, run: Any, check: str | None) -> None:
    """BadInput when the label was made on another check of the run (its claim marks would
    land on other claims), or marks claims without saying which check's."""
    if label.check_fingerprint is not None and label.check_fingerprint != check:
        raise BadInput(
            f"{label.where}: labelled on check {label.check_fingerprint}, but {run.run_dir}'s "
            f"claims are now of check {check} (checked again); review the answer again on "
            "this run's report"
        )
    if label.check_fingerprint is None and label.claims:
        raise BadInput(
            f"{label.where}: claim marks without the check they were made on "
            '("check_fingerprint"); mark the claims on the run\'s review page, or drop "claims"'
        )


@dataclass
class _RunLabels:
    """What assign_labels knows of one run."""

    run: Any
    claims: dict[str, list[Claim]]
    threshold: float
    fingerprint: str
    check: str | None
    review: dict[str, Any] | None


def assign_labels(
    labels: list[ReviewLabel], runs: list[Any], source: Path, outside: str = "refuse"
) -> dict[str, list[ReviewLabel]]:
    """{pipeline name: its labels, one per answer}, every label matched to a run of the report;
    BadInput in one line for a label without `pipeline` when the report has several runs, a
    pipeline not in the report, an id not among the run's checked answers, a label from
    another run's review page or of another check, claim marks past the answer's claims or
    contradicting its label, copies that disagree (`auditor.labels.settle`), a second review of
    an answer not drawn for one, a review.json of another run, check or population, labels of
    answers outside the drawn sample (with `outside` "keep": kept with `in_sample=False`, for
    the judge's agreement only), and labels none of which is in the drawn order's labelled
    prefix. Labels past the first unlabelled drawn answer are kept with `in_prefix=False` and
    said on the terminal: they count in no rate."""
    by_name = {run.name: run for run in runs}
    known = {run.name: _run_labels(run) for run in runs}
    placed: dict[str, list[ReviewLabel]] = {name: [] for name in by_name}
    for label in labels:
        name = label_pipeline(label, list(by_name))
        facts = known[name]
        if label.id not in facts.claims:
            raise BadInput(
                f"{label.where}: answer {label.id!r} is not among the checked answers of "
                f"{facts.run.run_dir}; labels from another run?"
            )
        refuse_other_run(label, facts.run.run_dir, facts.fingerprint)
        _refuse_other_check(label, facts.run, facts.check)
        _refuse_claim_marks(label, facts.claims[label.id], facts.threshold, facts.run)
        placed[name].append(replace(label, pipeline=name))
    assigned: dict[str, list[ReviewLabel]] = {}
    outside_of: dict[str, list[ReviewLabel]] = {}
    for name, found in placed.items():
        if not found:
            continue
        facts = known[name]
        settled = settle(found, key=lambda label: label.id)
        if facts.review is not None:
            refuse_stale_review(facts.run, facts.review)
            settled = _in_drawn_order(settled, facts, outside_of.setdefault(name, []))
        elif any(label.role != "first" for label in found):
            raise BadInput(
                f"{next(lb for lb in found if lb.role != 'first').where}: a second review needs "
                f"the run's drawn sample; draw it: auditor review {facts.run.run_dir} "
                "--sample N --second-review SHARE"
            )
        assigned[name] = settled
    outside_of = {name: found for name, found in outside_of.items() if found}
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
    return assigned


def _run_labels(run: Any) -> _RunLabels:
    judge = (run.check_manifest or {}).get("judge", {}).get("config", {})
    return _RunLabels(
        run=run,
        claims={
            str(row["id"]): [Claim.from_json(c) for c in row.get("claims") or []]
            for row in run.checks
        },
        threshold=float(judge.get("support_threshold", 0.5)),
        fingerprint=run_fingerprint(run.manifest),
        check=check_fingerprint(run.check_manifest),
        review=read_review(run.run_dir),
    )


def _in_drawn_order(
    settled: list[ReviewLabel], facts: _RunLabels, outside: list[ReviewLabel]
) -> list[ReviewLabel]:
    """The labels in the drawn order, each marked in or out of the sample and of its labelled
    prefix; BadInput for a second review of an answer not drawn for one, or when labels of
    drawn answers exist but the first drawn answer has none."""
    assert facts.review is not None
    order = [str(e["id"]) for e in facts.review["sample"]]
    second = set(map(str, (facts.review.get("second_review") or {}).get("ids") or []))
    by_id = {label.id: label for label in settled}
    for label in settled:
        for review in label.reviews:
            if review.role == "second" and label.id not in second:
                raise BadInput(
                    f"{review.where}: a second review of {label.id!r}, which was not drawn for "
                    f"one ({facts.run.run_dir / REVIEW}); drop it, or draw second reviews "
                    "with auditor review --second-review SHARE"
                )
    result: list[ReviewLabel] = []
    gap: str | None = None
    for ident in order:
        found = by_id.pop(ident, None)
        if found is None:
            gap = gap or ident
            continue
        result.append(found if gap is None else replace(found, in_prefix=False))
    for label in by_id.values():  # not drawn at all
        outside.append(label)
        result.append(replace(label, in_sample=False))
    drawn = [label for label in result if label.in_sample]
    if drawn and not any(label.in_prefix for label in drawn):
        raise BadInput(
            f"{drawn[0].where}: the first drawn answer of {facts.run.name}, {order[0]!r}, has "
            "no label: only the drawn order's labelled prefix makes a rate (skipping a drawn "
            "answer would let a reviewer pick); review the answers in the order drawn"
        )
    skipped = [label for label in drawn if not label.in_prefix]
    if skipped:
        log.warning(
            "%s: %d label%s of %s past drawn answer %r, which has none, count in no rate; "
            "label it (and any after it) to count them",
            skipped[0].where,
            len(skipped),
            "s" if len(skipped) > 1 else "",
            facts.run.name,
            gap,
        )
    return result


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
    run: Any, size: int, seed: int | None, second_share: float | None = None
) -> tuple[ReviewSample, dict[str, Any] | None]:
    """The review sample of a checked run (`auditor review`, `audit --review`), not yet
    written: `seed` None takes the one review.json records (else 0); another seed over an
    existing sample is refused (people may have reviewed it), and so is a review.json of
    another run or check. Over a run that grew, every answer drawn before stays drawn, in
    order (the sample grows past `size` where new answers fall among them). `second_share`:
    the share of drawn answers reviewed a second time, blind (None: as drawn before, else 0);
    it may grow, not shrink."""
    if not run.checks:
        raise BadInput(
            f"{run.run_dir}: no checked answers; check it first (auditor check {run.run_dir})"
        )
    path = run.run_dir / REVIEW
    earlier = read_review(run.run_dir)
    fingerprint, check = run_fingerprint(run.manifest), check_fingerprint(run.check_manifest)
    if earlier is not None:
        if earlier["fingerprint"] != fingerprint or earlier.get("check_fingerprint") != check:
            what = "run" if earlier["fingerprint"] != fingerprint else "check of the run"
            raise BadInput(
                f"{path}: drawn on another {what} (labels made on it do not apply here); "
                "remove it and draw again"
            )
        if seed is not None and seed != earlier["seed"]:
            raise BadInput(
                f"{path}: drawn with seed {earlier['seed']}; another seed would replace the "
                "sample people may have reviewed: remove the file first"
            )
        if size < earlier["size"]:
            # answers people may have reviewed would drop out, and every inclusion probability
            # would change under their labels
            raise BadInput(
                f"{path}: {earlier['size']} answers are drawn; a sample only grows: give "
                f"--sample {earlier['size']} or more (a larger N extends the same order)"
            )
        before = float((earlier.get("second_review") or {}).get("share") or 0.0)
        if second_share is not None and second_share < before:
            raise BadInput(
                f"{path}: a share of {before} is drawn for a second review; it only grows: "
                f"give --second-review {before} or more"
            )
        second_share = before if second_share is None else second_share
    chosen = seed if seed is not None else int((earlier or {}).get("seed", 0))
    ids = reviewable_ids(run)
    sample = choose_sample(ids, size, chosen, fingerprint, check, second_share or 0.0)
    if earlier is not None:
        position = {ident: k for k, ident in enumerate(sample.order)}
        drawn = [str(e["id"]) for e in earlier["sample"]]
        lost = [ident for ident in drawn if ident not in position]
        if lost:
            raise BadInput(
                f"{path}: drawn answer {lost[0]!r} is no longer among {run.run_dir}'s checked "
                f"answers (a check row lost or cut off?); repair the run (auditor check "
                f"{run.run_dir}) and draw again"
            )
        sample.size = max(sample.size, max((position[i] + 1 for i in drawn), default=0))
    return sample, earlier
