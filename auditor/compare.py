"""Can the audit tell two pipelines apart? Paired differences over the questions they share.

Both pipelines answered the same questions, so their figures are compared question by
question: a bootstrap resamples the shared questions and recomputes each pipeline's figure on
the same resample (throughput is measured once per run and held fixed; the quality weight and
the claim rate vary). The difference is told apart from noise when its 95 % interval excludes 0.
The questions needed to tell it apart at the observed rates scale with the square of the
interval's width: n x ((1.96 + 0.84) x SE / |difference|)^2 (5 % two-sided, 80 % power).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditor.claim_rows import Claim, flagged_at
from auditor.goodput import RequestRow, request_rows, sample_figures
from auditor.results import RunArtifacts, pipeline_settings
from auditor.reviewed import reviewed_difference

__all__ = ["PairedDifference", "compare_pair", "compare_reviewed", "headline", "reviewed_headline"]

Z_ALPHA, Z_POWER = 1.959964, 0.841621  # 5 % two-sided; 80 % power


@dataclass(frozen=True)
class PairedDifference:
    """figure(a) - figure(b) over the questions both answered."""

    figure: str
    a: str
    b: str
    value_a: float | None
    value_b: float | None
    interval: tuple[float, float] | None  # of the difference
    questions: int
    labels: int | None = None  # reviewed figures: the questions people labelled in both
    method: str | None = None  # reviewed figures: how the interval was made

    @property
    def difference(self) -> float | None:
        if self.value_a is None or self.value_b is None:
            return None
        return self.value_a - self.value_b

    @property
    def distinguishable(self) -> bool:
        return self.interval is not None and (self.interval[0] > 0 or self.interval[1] < 0)

    @property
    def questions_needed(self) -> int | None:
        """Shared questions that would tell this difference apart (5 %, 80 % power)."""
        if self.interval is None or not self.difference:
            return None
        se = (self.interval[1] - self.interval[0]) / (2 * Z_ALPHA)
        if se <= 0:
            return self.questions
        return math.ceil(self.questions * ((Z_ALPHA + Z_POWER) * se / abs(self.difference)) ** 2)


def _rows_by_id(run: RunArtifacts) -> dict[str, RequestRow]:
    rows = request_rows(run.records, run.checks)
    return {record["id"]: row for record, row in zip(run.records, rows, strict=True)}


def compare_pair(
    a: RunArtifacts, b: RunArtifacts, figure: str, *, rounds: int = 1000, seed: int = 0
) -> PairedDifference:
    """The paired difference of one summary figure between two runs with written summaries."""
    rows_a, rows_b = _rows_by_id(a), _rows_by_id(b)
    shared = sorted(set(rows_a) & set(rows_b))

    # each run's settings and throughput, read once (they do not vary across resamples)
    fixed = {
        id(run): (
            *pipeline_settings(run.manifest),
            run.summary["metrics"]["tps"]["value"],
            run.summary.get("generation_s"),
        )
        for run in (a, b)
    }

    def value(run: RunArtifacts, rows: dict[str, RequestRow], ids: Sequence[str]) -> float | None:
        slo, weights, tps, generation_s = fixed[id(run)]
        return sample_figures([rows[i] for i in ids], tps, generation_s, slo, weights)[figure]

    value_a, value_b = value(a, rows_a, shared), value(b, rows_b, shared)
    interval = None
    if shared and value_a is not None and value_b is not None:
        rng = np.random.default_rng(seed)
        differences = []
        for _ in range(rounds):
            ids = [shared[i] for i in rng.integers(0, len(shared), len(shared))]
            one, two = value(a, rows_a, ids), value(b, rows_b, ids)
            if one is not None and two is not None:
                differences.append(one - two)
        if differences:
            low, high = np.percentile(differences, [2.5, 97.5])
            interval = (float(low), float(high))
    return PairedDifference(figure, a.name, b.name, value_a, value_b, interval, len(shared))


def headline(pair: PairedDifference) -> str | None:
    """One plain sentence on a goodput pair (best first): which pipeline has the higher
    goodput, by how much, and whether the audit's sample can tell the two apart."""
    if pair.difference is None or pair.interval is None:
        return None
    low, high = pair.interval
    sentence = (
        f"{pair.a} has the higher goodput: {pair.value_a:.1f} vs {pair.value_b:.1f} tok/s for "
        f"{pair.b} ({pair.difference:+.1f}, 95 % CI {low:+.1f} to {high:+.1f} over the "
        f"{pair.questions} questions both answered); "
    )
    if pair.distinguishable:
        return sentence + "this audit tells them apart."
    needed = pair.questions_needed
    more = f"; about {needed} questions would at these rates" if needed else ""
    return sentence + f"this audit cannot tell them apart{more}."


def _judge_flags(run: RunArtifacts) -> dict[str, bool]:
    threshold = float(
        ((run.check_manifest or {}).get("judge", {}).get("config", {})).get(
            "support_threshold", 0.5
        )
    )
    return {
        str(row["id"]): flagged_at([Claim.from_json(c) for c in row["claims"]], threshold)
        for row in run.checks
    }


def _counted(label: Any) -> bool:
    return bool(getattr(label, "counted", True))


def compare_reviewed(a: RunArtifacts, b: RunArtifacts) -> PairedDifference | None:
    """The paired difference of two runs' reviewed answer rates, over the questions people
    labelled in both, narrowed by the judge's flags on every question both answered (None
    when no question was labelled in both)."""
    # the labels that count in a rate (the drawn order's labelled prefix), as each rate has
    labels_a = {label.id: label.hallucinated for label in a.labels if _counted(label)}
    labels_b = {label.id: label.hallucinated for label in b.labels if _counted(label)}
    flags_a, flags_b = _judge_flags(a), _judge_flags(b)
    both = sorted(set(labels_a) & set(labels_b) & set(flags_a) & set(flags_b))
    shared = sorted(set(flags_a) & set(flags_b))
    if not both:
        return None
    value, low, high, method = reviewed_difference(
        [float(labels_a[i]) - float(labels_b[i]) for i in both],
        [float(flags_a[i]) - float(flags_b[i]) for i in both],
        [float(flags_a[i]) - float(flags_b[i]) for i in shared],
    )
    rate_a = a.summary["reviewed"]["answer_rate"]["value"]
    return PairedDifference(
        "reviewed_hallucination_rate",
        a.name,
        b.name,
        rate_a,
        rate_a - value,  # so that `difference` is the paired estimate
        (low, high),
        len(shared),
        labels=len(both),
        method=method,
    )


def reviewed_headline(pair: PairedDifference) -> str | None:
    """One plain sentence on the reviewed rates of the two best pipelines, by people's
    labels: which hallucinates in fewer answers, and whether the review tells them apart."""
    if pair.difference is None or pair.interval is None or pair.labels is None:
        return None
    low, high = pair.interval
    fewer, more = (pair.a, pair.b) if pair.difference <= 0 else (pair.b, pair.a)
    lead = (
        f"{pair.a} and {pair.b} hallucinate in as many answers"
        if pair.difference == 0
        else f"{fewer} hallucinates in fewer answers than {more}"
    )
    sentence = (
        f"By people's review, {lead}: "
        f"{pair.a} minus {pair.b} {pair.difference:+.1%} (95 % CI {low:+.1%} to {high:+.1%}, "
        f"{pair.labels} questions labelled in both); "
    )
    if pair.distinguishable:
        return sentence + "the review tells them apart."
    return sentence + "the review cannot tell them apart; label more questions in both."
