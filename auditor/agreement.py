"""How far two people reviewing the same answers blind agree: Cohen's kappa and its interval.

`auditor review --second-review SHARE` picks part of the drawn sample for a second person to
review without seeing the first's labels (role "second"); where the two disagree an
adjudicator settles the answer (role "adjudicator"). From one run's labels,
`reviewer_agreement` takes the answers labelled both by a first and a second reviewer and
counts them in a 2x2 table (a: both hallucinated, b: only the first said so, c: only the
second, d: both clean). Then

- observed agreement  p_o = (a + d) / n
- chance agreement    p_e = ((a + b)(a + c) + (c + d)(b + d)) / n^2
- Cohen's kappa       (p_o - p_e) / (1 - p_e), undefined when p_e = 1 (both gave every answer
  the same one label: nothing to tell agreement from chance)
- positive agreement  2a / (2a + b + c), negative agreement 2d / (2d + b + c) (Cicchetti and
  Feinstein: kappa's two halves, which stay readable when one class is rare)

Kappa's 95 % interval is a percentile bootstrap over answers (each answer's pair of labels
resampled with replacement, seeded); when more than `MAX_UNDEFINED_SHARE` of the resamples
have no kappa (too few answers of one class), no interval is given and the reason says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from auditor.errors import BadInput

__all__ = ["MAX_UNDEFINED_SHARE", "ROLES", "kappa_of", "reviewer_agreement"]

ROLES = ("first", "second", "adjudicator")
# more resamples than this without a kappa and the answers cannot support an interval
MAX_UNDEFINED_SHARE = 0.025


def _role(label: Any) -> str:
    return str(getattr(label, "role", None) or "first")


def _name(label: Any) -> str:
    return str(getattr(label, "reviewer", None) or "(unnamed)")


def kappa_of(a: float, b: float, c: float, d: float) -> float | None:
    """Cohen's kappa of a 2x2 table (None when chance agreement is 1 or the table is empty)."""
    n = a + b + c + d
    if n <= 0:
        return None
    observed = (a + d) / n
    chance = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


def _share(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 6) if denominator else None


def _by_role(labels: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """{role: {answer id: its label}}; one answer labelled twice in one role differently is a
    BadInput naming both lines (the same label twice is kept once)."""
    found: dict[str, dict[str, Any]] = {role: {} for role in ROLES}
    for label in labels:
        role = _role(label)
        if role not in found:
            raise BadInput(
                f"{getattr(label, 'where', '') or 'a label'}: role {role!r} is not one of "
                f"{', '.join(ROLES)}"
            )
        ident = str(label.id)
        earlier = found[role].get(ident)
        if earlier is None:
            found[role][ident] = label
        elif bool(earlier.hallucinated) != bool(label.hallucinated):
            raise BadInput(
                f"{getattr(label, 'where', '') or 'a label'}: answer {ident!r} labelled again "
                f"by the {role} review, differently (first at "
                f"{getattr(earlier, 'where', '') or 'an earlier line'}); keep one"
            )
    return found


def _bootstrap(
    first: np.ndarray, second: np.ndarray, seed: int, rounds: int
) -> tuple[np.ndarray, int]:
    """Kappa of each of `rounds` resamples of the answers (with replacement): the defined
    ones, and how many had none."""
    n = len(first)
    picks = np.random.default_rng(seed).integers(0, n, size=(rounds, n))
    x, y = first[picks], second[picks]
    a = np.sum(x & y, axis=1).astype(float)
    b = np.sum(x & ~y, axis=1).astype(float)
    c = np.sum(~x & y, axis=1).astype(float)
    d = np.sum(~x & ~y, axis=1).astype(float)
    observed = (a + d) / n
    chance = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
    defined = chance < 1.0
    kappas = (observed[defined] - chance[defined]) / (1.0 - chance[defined])
    return kappas, int(rounds - defined.sum())


def reviewer_agreement(
    labels: Sequence[Any], seed: int = 0, rounds: int = 2000
) -> dict[str, Any] | None:
    """The agreement of the first and the second (blind) review on the answers both labelled,
    from one run's labels (objects with `id`, `hallucinated`, `role`, `reviewer`, `where`):
    kappa with a seeded bootstrap 95 % interval, observed, positive and negative agreement,
    the 2x2 counts, the reviewers per role and each disagreement with its adjudication.
    None when no answer was labelled by both."""
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    roles = _by_role(labels)
    first, second, judge = roles["first"], roles["second"], roles["adjudicator"]
    both = [ident for ident in second if ident in first]  # in the second review's order
    if not both:
        return None
    x = np.array([bool(first[i].hallucinated) for i in both])
    y = np.array([bool(second[i].hallucinated) for i in both])
    a = int(np.sum(x & y))
    b = int(np.sum(x & ~y))
    c = int(np.sum(~x & y))
    d = int(np.sum(~x & ~y))
    n = len(both)
    kappa = kappa_of(a, b, c, d)
    interval: list[float] | None = None
    reason: str | None = None
    undefined = 0
    if kappa is None:
        label = "hallucinated" if a else "not hallucinated"
        reason = (
            f"both reviewers labelled every one of the {n} answers {label}: with one class "
            "only, agreement cannot be told from chance (kappa undefined)"
        )
    else:
        kappas, undefined = _bootstrap(x, y, seed, rounds)
        if undefined > MAX_UNDEFINED_SHARE * rounds:
            reason = (
                f"{undefined} of {rounds} bootstrap resamples have one class only (too few "
                f"answers of one class among the {n}): no interval"
            )
        else:
            low, high = np.percentile(kappas, [2.5, 97.5])
            interval = [round(float(low), 6), round(float(high), 6)]
    chance = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
    disagreements = []
    for ident in both:
        if bool(first[ident].hallucinated) == bool(second[ident].hallucinated):
            continue
        settled = judge.get(ident)
        disagreements.append(
            {
                "id": ident,
                "first": bool(first[ident].hallucinated),
                "second": bool(second[ident].hallucinated),
                "adjudicated": None if settled is None else bool(settled.hallucinated),
                "adjudicator": None if settled is None else _name(settled),
            }
        )
    return {
        "double_reviewed": n,
        "kappa": None if kappa is None else round(kappa, 6),
        "kappa_interval": interval,
        "kappa_undefined": reason,
        "observed_agreement": round((a + d) / n, 6),
        "chance_agreement": round(chance, 6),
        "positive_agreement": _share(2 * a, 2 * a + b + c),
        "negative_agreement": _share(2 * d, 2 * d + b + c),
        "table": {"a": a, "b": b, "c": c, "d": d},
        "reviewers": {
            "first": sorted({_name(first[i]) for i in both}),
            "second": sorted({_name(second[i]) for i in both}),
            "adjudicator": sorted({e["adjudicator"] for e in disagreements if e["adjudicator"]}),
        },
        "disagreements": disagreements,
        "unsettled": sum(e["adjudicated"] is None for e in disagreements),
        "bootstrap": {"rounds": rounds, "seed": seed, "undefined": undefined},
    }
