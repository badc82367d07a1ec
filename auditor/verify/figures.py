"""Figure guard: a check on a claim's numbers that a small judge misses and plain text decides.

`missing_figures`: a figure of the claim that the chunk never writes vetoes support by it.
Rule, error class: a wrong number approved by the judge (the commonest subtle error). Evidence,
switched off on stored judgements (`bench/rules.py`): RAGTruth QA dev (96 answers, 5-fold CV)
balanced accuracy gain +0.034 (-0.017..+0.091), AUROC gain +0.036 (+0.009..+0.075); the fresh
Kestrel contrast set: wrong answers flagged +0.050 (0.000..+0.125), correct ones +0.025
(0.000..+0.075).

A second guard, figure binding (a chunk giving the claim's figure to another subject
contradicts it), was written from one demo answer ("6 sensors on a T9 Pro") and removed in
verdict logic 2026-12-05.2: it changed no verdict on the 96 RAGTruth answers nor on the 80
answers of the fresh contrast set (`bench/rules.py`, README Evidence).
"""

from __future__ import annotations

import re

__all__ = ["missing_figures"]

_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")
# what an answer says about its sources or its layout: "(Passage 2)", "[1]", a list's "3."
_CITATION = re.compile(
    r"\(?\b(?:passages?|sources?|documents?)\s+\d+(?:\s*(?:,|and|&)\s*\d+)*\)?|\[\d+(?:\s*,\s*\d+)*\]",
    re.IGNORECASE,
)
_ENUMERATOR = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022])\s+", re.MULTILINE)


def missing_figures(claim: str, passage: str) -> list[str]:
    """Figures of the claim that the passage never writes (1,299 == 1299; citations ignored)."""
    claim = _ENUMERATOR.sub("", _CITATION.sub("", claim))
    numbers = set(re.findall(r"\d+", passage.replace(",", "")))
    return [
        figure
        for figure in _FIGURE.findall(claim)
        if not set(re.findall(r"\d+", figure.replace(",", ""))) <= numbers
    ]
