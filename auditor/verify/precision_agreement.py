"""How far two ways of rating context precision agree on the same chunks and answers
(`bench/context_precision.py`: stock RAGAS's reasoned verdicts against the verdict read from
the first token's probabilities).

- per chunk: the share of chunks both rate alike and Cohen's kappa
  (`auditor.agreement.kappa_of`), with the count of each disagreement;
- per answer: the mean difference of the two context precision scores, with a 95 %
  percentile-bootstrap interval that resamples questions (the answers to one question share
  their chunks, so they are not independent), and the mean absolute difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from auditor.agreement import kappa_of

__all__ = ["score_differences", "verdict_agreement"]


def verdict_agreement(pairs: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    """(first way's verdict, second way's verdict) per chunk, True for useful -> the chunks,
    the share rated alike, Cohen's kappa (None when undefined: both rate every chunk alike
    with one verdict, or no chunk) and the 2x2 counts."""
    both = sum(a and b for a, b in pairs)
    first_only = sum(a and not b for a, b in pairs)
    second_only = sum(b and not a for a, b in pairs)
    neither = len(pairs) - both - first_only - second_only
    kappa = kappa_of(both, first_only, second_only, neither)
    return {
        "chunks": len(pairs),
        "agreement": round((both + neither) / len(pairs), 4) if pairs else None,
        "kappa": None if kappa is None else round(kappa, 4),
        "both_useful": both,
        "neither_useful": neither,
        "useful_by_first_only": first_only,
        "useful_by_second_only": second_only,
    }


def score_differences(
    by_question: Mapping[str, Sequence[float]], rounds: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Per-answer score differences (second way minus first), grouped by question -> their
    mean, its 95 % interval (percentile bootstrap resampling questions with replacement, each
    with all its answers; seeded) and the mean absolute difference; None figures without
    answers."""
    groups = [np.asarray(values, dtype=float) for values in by_question.values() if values]
    answers = int(sum(len(g) for g in groups))
    if not groups:
        return {
            "answers": 0,
            "questions": 0,
            "mean_difference": None,
            "mean_difference_ci95": None,
            "mean_absolute_difference": None,
        }
    every = np.concatenate(groups)
    sums = np.array([g.sum() for g in groups])
    sizes = np.array([len(g) for g in groups])
    picks = np.random.default_rng(seed).integers(0, len(groups), size=(rounds, len(groups)))
    means = sums[picks].sum(axis=1) / sizes[picks].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "answers": answers,
        "questions": len(groups),
        "mean_difference": round(float(every.mean()), 4),
        "mean_difference_ci95": [round(float(low), 4), round(float(high), 4)],
        "mean_absolute_difference": round(float(np.abs(every).mean()), 4),
    }
