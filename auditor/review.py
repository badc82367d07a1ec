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

The drawn sample is a function of the seed and the run, not a file: every reader of
review.json (`report`, `bundle`, `verify`, the review page, `auditor review` itself) goes
through `read_checked_review` / `check_review`, which draws it again from the seed over the
run's checked answers and refuses, naming the field, a sample, size, seed, method, population
or second review that is not that draw.

Labels: `auditor.labels` (one reader for every command). With `--second-review SHARE`,
round(SHARE x n) of the n drawn answers (at least 1) are marked for a blind second review: the
drawn answers with the smallest keys of their own (sha256 of "second", the seed and the id).
When the sample grows every answer marked before stays marked (the count may then pass
round(SHARE x n), as the sample may pass N in a run that grew).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
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
    "check_audit_sample",
    "check_fingerprint",
    "check_review",
    "choose_sample",
    "draw_review",
    "label_pipeline",
    "population_sha256",
    "read_checked_review",
    "read_review",
    "read_review_labels",
    "refuse_before_run",
    "refuse_other_run",
    "run_fingerprint",
    "second_review_count",
    "write_review",
]

REVIEW = "review.json"
log = logging.getLogger(__name__)
# 2: random keys (sha256 of seed and id) instead of a permutation of the sorted ids; the run's,
# the check's and the population's fingerprints; the second review
# 3: the second review is round(share x n) of the drawn answers by their second keys (2: each
# drawn answer whose second key fell below the share, a count left to chance); 2 is still read
REVIEW_SCHEMA_VERSION = 3
READ_SCHEMA_VERSIONS = (2, 3)
METHOD = "uniform"
ORDER = "sha256 keys of seed and id"


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
    # how many drawn answers are marked for a second review (None: round(share x size), at
    # least 1; more where a grown sample keeps those marked before)
    second_count: int | None = None

    @property
    def sample(self) -> list[str]:
        return self.order[: self.size]

    @property
    def inclusion_probability(self) -> float:
        return self.size / len(self.population) if self.population else 0.0

    @property
    def second_review(self) -> list[str]:
        """The drawn answers marked for a second review, in drawn order: the first
        round(share x n) (at least 1) of the drawn answers ordered by a key of their own, so
        that a sample that grows keeps them (`second_count` says how many where it grew)."""
        count = self.second_count
        if count is None:
            count = second_review_count(self.second_share, self.size)
        chosen = set(second_order(self.sample, self.seed)[:count])
        return [i for i in self.sample if i in chosen]

    def to_json(self) -> dict[str, Any]:
        probability = round(self.inclusion_probability, 6)
        return {
            "schema_version": REVIEW_SCHEMA_VERSION,
            "method": METHOD,
            "order": ORDER,
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


def drawn_order(population: list[str], seed: int) -> list[str]:
    """The answers in the order the seed draws them: by their random keys."""
    return sorted(population, key=lambda i: (_key("review", seed, i), i))


def second_order(sample: list[str], seed: int) -> list[str]:
    """The drawn answers in the order they are marked for a second review: by keys of their
    own, so that an answer's place among them does not depend on which others are drawn."""
    return sorted(sample, key=lambda i: (_key("second", seed, i), i))


def second_review_count(share: float, drawn: int) -> int:
    """How many of `drawn` answers a second-review share marks: share x drawn rounded half up
    (as a person counts: 0.5 of 5 is 3), at least 1 when share > 0; 0 without answers."""
    if share <= 0 or drawn <= 0:
        return 0
    return min(drawn, max(1, math.floor(share * drawn + 0.5 + 1e-9)))


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
    return ReviewSample(
        seed,
        ids,
        drawn_order(ids, seed),
        min(size, len(ids)),
        fingerprint,
        check,
        second_share=second_share,
    )


def read_review(run_dir: Path) -> dict[str, Any] | None:
    """A run's review.json as written (None without one); BadInput when damaged or of another
    auditor. Its shape only: what it says of the run is checked by `check_review` (every
    reader goes through `read_checked_review`)."""
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
    if data.get("schema_version") not in READ_SCHEMA_VERSIONS:
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
    if second is not None:
        share = second.get("share") if isinstance(second, dict) else None
        if not (
            isinstance(share, int | float)
            and not isinstance(share, bool)
            and math.isfinite(share)
            and 0 < share <= 1
        ):
            raise BadInput(
                f'{path}: "second_review" must have a "share" above 0 and at most 1 '
                f"(not {share!r}); {fix}"
            )
        listed = second.get("ids")
        if not (
            isinstance(listed, list)
            and all(isinstance(i, str) for i in listed)
            and len(set(listed)) == len(listed)
            and set(listed) <= set(ids)
        ):
            raise BadInput(f'{path}: "second_review" must list drawn answers, each once; {fix}')
    return data


def read_checked_review(run: Any) -> dict[str, Any] | None:
    """A run's review.json (None without one), drawn again from its seed over the run's
    checked answers and refused, naming the field, where it is not that draw
    (`check_review`): the one reader of review.json for every command and the review page."""
    review = read_review(run.run_dir)
    if review is not None:
        check_review(run, review)
    return review


def check_review(run: Any, review: dict[str, Any], grown: bool = False) -> None:
    """BadInput naming the field where review.json is not what `auditor review` draws on this
    run: drawn on another run or another check of it; a "method" or "order" of another draw;
    a "population" or "population_sha256" that is not the run's checked answers (a run that
    grew is told to extend the sample; a lost check row to repair the run); a "sample" that is
    not the first "size" of the seed's order over them; an "inclusion_probability" that is
    not size / population; a "second_review" that is not the draw of its share.

    `grown` (`auditor review` extending a sample): a run that grew since the draw is
    accepted where the sample is still the draw of its seed over the answers it was drawn
    from (the first `population` of the run's checked answers where their hash says so;
    else the sample in the seed's order with no more answers skipped than the run gained)."""
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
    seed, size, sample = review["seed"], review["size"], [str(e["id"]) for e in review["sample"]]
    again = f"remove it and draw again: auditor review {run.run_dir} --seed {seed} --sample {size}"
    for key, drawn_by in (("method", METHOD), ("order", ORDER)):
        if review.get(key) != drawn_by:
            raise BadInput(
                f'{path}: "{key}" is {review.get(key)!r}, but auditor review draws '
                f"{drawn_by!r}; {again}"
            )
    ids = reviewable_ids(run)
    known = set(ids)
    stray = next((i for i in sample if i not in known), None)
    matches = review["population_sha256"] == population_sha256(ids)
    if stray is not None:
        if matches:  # the answers it was drawn from are the run's: the sample names another
            raise BadInput(
                f'{path}: "sample" names answer {stray!r}, which is not among '
                f"{run.run_dir}'s {len(ids)} checked answers; {again}"
            )
        raise BadInput(
            f"{path}: drawn answer {stray!r} is no longer among {run.run_dir}'s checked "
            "answers (a check row lost or cut off?); repair the run "
            f"(auditor check {run.run_dir}) before its labels make a rate"
        )
    population = ids
    if not matches:
        recorded = review["population"]
        if recorded > len(ids):
            raise BadInput(
                f"{path}: drawn from {recorded} answers, the run has {len(ids)} checked now "
                f"(check rows lost or cut off?); repair the run (auditor check {run.run_dir}) "
                "before its labels make a rate"
            )
        if recorded == len(ids):
            raise BadInput(
                f'{path}: "population_sha256" is not the hash of {run.run_dir}\'s {len(ids)} '
                f"checked answers (edited, or check rows replaced?); {again}"
            )
        if not grown:
            raise BadInput(
                f"{path}: drawn from {recorded} answers, the run has {len(ids)} checked now; "
                f"extend the sample over them (auditor review {run.run_dir} --sample "
                f"{size}: every drawn answer stays)"
            )
        before = ids[:recorded]  # a run grows by checking more answers after its first
        if population_sha256(before) != review["population_sha256"]:
            _check_grown_sample(path, review, ids, again)
            _check_second_review(path, review, sample, again)
            return
        population = before
    if review["population"] != len(population):
        raise BadInput(
            f'{path}: "population" is {review["population"]}, but the answers it was drawn '
            f'from ("population_sha256") are {len(population)}; {again}'
        )
    expected = drawn_order(population, seed)[:size]
    if sample != expected:
        other_seed = _seed_that_drew(sample, population, seed)
        if other_seed is not None:
            raise BadInput(
                f'{path}: "seed" is {seed}, but "sample" is the draw of seed {other_seed} over '
                f"the run's {len(population)} checked answers (the seed edited?); write back "
                f'"seed": {other_seed}, or {again}'
            )
        chosen = set(expected)
        outside = next((i for i in sample if i not in chosen), None)
        if outside is not None:
            detail = f"answer {outside!r} is not among the first {size}"
        else:
            place = next(k for k, (a, b) in enumerate(zip(sample, expected, strict=True)) if a != b)
            detail = f"the same answers in another order: number {place + 1} is {expected[place]!r}"
        raise BadInput(
            f'{path}: "sample" is not the draw of seed {seed} over the run\'s '
            f"{len(population)} checked answers ({detail}); {again}"
        )
    probability = round(size / len(population), 6) if population else 0.0
    for entry in review["sample"]:
        given = entry.get("inclusion_probability", probability)
        if not isinstance(given, int | float) or isinstance(given, bool) or given != probability:
            raise BadInput(
                f'{path}: "inclusion_probability" of answer {entry["id"]!r} is {given!r}, but '
                f"{size} of {len(population)} answers drawn is {probability}; {again}"
            )
    _check_second_review(path, review, sample, again)


# seeds tried, and keys computed at most, to tell an edited seed from an edited sample
SEEDS_TRIED = 1000
KEYS_TRIED = 300_000


def _seed_that_drew(sample: list[str], population: list[str], seed: int) -> int | None:
    """Another seed (of the first SEEDS_TRIED) whose draw `sample` is, where one is found
    within KEYS_TRIED keys: the seed was edited, not the sample. None where none is, and
    where a sample this small would be some seed's draw by chance (fewer than a billion
    ordered samples of its size per seed tried: an edited sample, not an edited seed)."""
    orderings = math.prod(range(len(population) - len(sample) + 1, len(population) + 1))
    if not sample or orderings < 10**6 * SEEDS_TRIED:
        return None
    budget = KEYS_TRIED
    for other in range(SEEDS_TRIED):
        if other == seed:
            continue
        keys = []
        for ident in sample:  # the sample in its order by the other seed's keys, cheaply first
            keys.append(_key("review", other, ident))
            budget -= 1
            if len(keys) > 1 and keys[-1] < keys[-2]:
                break
        else:
            budget -= len(population)
            if budget < 0:
                return None
            if drawn_order(population, other)[: len(sample)] == sample:
                return other
        if budget < 0:
            return None
    return None


def _check_grown_sample(path: Path, review: dict[str, Any], ids: list[str], again: str) -> None:
    """A sample over a run that grew, the answers it was drawn from unknown (only their hash
    and number): the drawn answers in the seed's order over the run's answers now, with no
    more answers between them than the run gained (each a new one)."""
    order = drawn_order(ids, review["seed"])
    place = {ident: k for k, ident in enumerate(order)}
    sample = [str(e["id"]) for e in review["sample"]]
    places = [place[i] for i in sample]
    if places != sorted(places):
        bad = next(k for k in range(1, len(places)) if places[k] < places[k - 1])
        raise BadInput(
            f'{path}: "sample" is not the draw of seed {review["seed"]} (answer '
            f"{sample[bad]!r} comes before {sample[bad - 1]!r} in its order); {again}"
        )
    skipped = (places[-1] + 1 - len(places)) if places else 0
    gained = len(ids) - review["population"]
    if skipped > gained:
        raise BadInput(
            f'{path}: "sample" is not the draw of seed {review["seed"]} over the run\'s '
            f"{review['population']} checked answers it was drawn from ({skipped} answers "
            f"between the drawn ones, the run gained {gained}); {again}"
        )


def _check_second_review(path: Path, review: dict[str, Any], sample: list[str], again: str) -> None:
    """review.json's second review against its share: the first of the drawn answers by their
    second keys, round(share x n) of them at least (schema 2: those whose key fell below the
    share)."""
    second = review.get("second_review")
    if second is None:
        return
    share, listed = float(second["share"]), [str(i) for i in second["ids"]]
    ranked = second_order(sample, review["seed"])
    count = len(listed)
    fix = f"{again} --second-review {share:g}"
    outside = next((i for i in listed if i not in set(ranked[:count])), None)
    if outside is not None:
        raise BadInput(
            f'{path}: "second_review" is not the draw of seed {review["seed"]}: answer '
            f"{outside!r} is not among the first {count} of the drawn answers by their "
            f"second-review keys; {fix}"
        )
    if review["schema_version"] == 2:
        expected = [i for i in sample if _key("second", review["seed"], i) < share]
        if set(listed) != set(expected):
            raise BadInput(
                f'{path}: "second_review" names {count} answers, but a share of {share:g} '
                f"drew {len(expected)} of them; {fix}"
            )
        return
    needed = second_review_count(share, len(sample))
    if count < needed:
        raise BadInput(
            f'{path}: "second_review" names {count} answer{"s" if count != 1 else ""}, but '
            f"a share of {share:g} of the {len(sample)} drawn is {needed}; {fix}"
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


def _began(manifest: dict[str, Any] | None) -> datetime | None:
    """When a run began (its manifest's `started_at`), None where it does not say."""
    stamp = (manifest or {}).get("started_at")
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def refuse_before_run(label: ReviewLabel, run_dir: Path, manifest: dict[str, Any] | None) -> None:
    """BadInput when the label says it was made before the run began: a label cannot predate
    the answers it labels. A run of imported answers (`check --answers`) began after its
    answers were made, so there only a label made on its review page (`fingerprint`) is held
    to the run's start."""
    began = _began(manifest)
    if label.labelled_at is None or began is None:
        return
    if (manifest or {}).get("kind") == "answers" and label.fingerprint is None:
        return
    if datetime.fromisoformat(label.labelled_at) < began:
        raise BadInput(
            f'{label.where}: "labelled_at" {label.labelled_at} is before {run_dir} began '
            f"({began.astimezone(UTC).isoformat().replace('+00:00', 'Z')}): a label cannot "
            "predate the answers it labels; fix the reviewer's clock or the line"
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
    another run's review page or of another check, one made before the run began, claim marks
    past the answer's claims or contradicting its label, copies that disagree or an
    adjudication of no disagreement
    (`auditor.labels.settle`), a second review of an answer not drawn for one, a review.json
    that is not the draw of its seed on this run and check (`check_review`), labels of
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
        refuse_before_run(label, facts.run.run_dir, facts.run.manifest)
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
            check_review(facts.run, facts.review)
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
        # checked before any label is matched: a check row lost is said as such, not as a
        # label "not among the checked answers"
        review=read_checked_review(run),
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
    the audit has one), an answer to one of the questions asked, was not made on the
    review page of another run (a run dir the audit resumes has a fingerprint; a new one has
    none yet, so no page of it exists), and not before its run began (a new run begins after
    every label with a `labelled_at`). BadInput in one line on the first that does not."""
    asked = set(question_ids)
    manifests: dict[str, dict[str, Any] | None] = {}
    for label in labels:
        name = label_pipeline(label, list(run_dirs))
        run_dir = run_dirs[name]
        if label.id not in asked:
            raise BadInput(
                f"{label.where}: answer {label.id!r} is not among the questions this audit "
                "asks; labels of another question set (or past --limit)?"
            )
        if name not in manifests:
            manifests[name] = read_run_manifest(run_dir)
        manifest = manifests[name]
        refuse_other_run(label, run_dir, None if manifest is None else run_fingerprint(manifest))
        if manifest is not None:
            refuse_before_run(label, run_dir, manifest)
        elif label.labelled_at is not None:  # the run begins after this: the label predates it
            raise BadInput(
                f'{label.where}: "labelled_at" {label.labelled_at} is before {run_dir} began '
                "(it is not run yet): a label cannot predate the answers it labels; last "
                "week's labels belong to last week's run (report it with --labels)"
            )


def check_audit_sample(
    labels: list[ReviewLabel],
    run_dirs: dict[str, Path],
    question_ids: list[str],
    review: int | None,
    outside: str,
) -> None:
    """`audit --labels`, before any engine starts: the labels against the sample the audit
    will review, so that labels refused at the end are refused before the work. The sample is
    the one a resumed run's review.json drew (grown to `review`), or with `--review N` the
    first N of seed 0's order over the questions asked. An answer whose generation fails
    leaves the population and could let a later answer into the sample: such a label is
    refused here all the same (give it after the audit with `report --labels`). BadInput in
    one line for a label of an answer outside that sample (unless `outside` is "keep"), and
    for a second review or an adjudication where no answer is drawn for a second review."""
    for name, run_dir in run_dirs.items():
        mine = [label for label in labels if label_pipeline(label, list(run_dirs)) == name]
        if not mine:
            continue
        earlier = read_review(run_dir)
        if earlier is None and not review:
            continue  # no sample: the labels count as a uniform sample (said in the report)
        seed = int((earlier or {}).get("seed", 0))
        size = max(review or 0, int((earlier or {}).get("size", 0)))
        drawn = set(drawn_order(sorted(set(question_ids)), seed)[:size])
        drawn |= {str(e["id"]) for e in (earlier or {}).get("sample", [])}
        second = set(map(str, ((earlier or {}).get("second_review") or {}).get("ids") or []))
        where = run_dir / REVIEW if earlier is not None else f"--review {review}"
        for label in mine:
            if label.id not in drawn and outside != "keep":
                raise BadInput(
                    f"{label.where}: answer {label.id!r} of {name} is outside its drawn review "
                    f"sample (the {size} drawn: {where}): only the drawn sample makes a rate; "
                    "drop it, or add --labels-outside-sample keep to count it in the judge's "
                    "agreement only"
                )
            later = [r for r in label.reviews or (label,) if r.role != "first"]
            if later and label.id not in second:
                raise BadInput(
                    f"{later[0].where}: a {later[0].role} review of {label.id!r}, which is not "
                    "drawn "
                    f"for a second review ({where}); drop it, or draw second reviews with "
                    f"auditor review {run_dir} --second-review SHARE"
                )


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
        # the draw it says it is, on this run (a run that grew since is extended below)
        check_review(run, earlier, grown=True)
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
                f"{path}: a share of {before:g} is drawn for a second review; it only grows: "
                f"give --second-review {before:g} or more"
            )
        second_share = before if second_share is None else second_share
    chosen = seed if seed is not None else int((earlier or {}).get("seed", 0))
    ids = reviewable_ids(run)
    sample = choose_sample(ids, size, chosen, fingerprint, check, second_share or 0.0)
    if earlier is not None:
        position = {ident: k for k, ident in enumerate(sample.order)}
        drawn = [str(e["id"]) for e in earlier["sample"]]
        sample.size = max(sample.size, max((position[i] + 1 for i in drawn), default=0))
        # every answer marked for a second review before stays marked
        marked = [str(i) for i in (earlier.get("second_review") or {}).get("ids") or []]
        ranked = {ident: k for k, ident in enumerate(second_order(sample.sample, chosen))}
        sample.second_count = max(
            second_review_count(sample.second_share, sample.size),
            max((ranked[i] + 1 for i in marked), default=0),
        )
    return sample, earlier
