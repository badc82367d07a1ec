"""The figure check: does the evidence give the claim's figure, or another one in its place?

The commonest subtle error in an answer is a wrong figure that the passage also writes, for
something else: "6 sensors on a T9 Pro" from "up to 6 sensors on the T9 and up to 10 on the T9
Pro". The veto (`entailment.missing_figures`) only catches figures that a chunk never writes,
and asked whether such a chunk states the claim, a small judge often says yes. Asked instead to
fill the claim's figure in from the passage (a cloze; question-answering checks of summaries,
QAGS and QuestEval, work the same way), it reads the passage for the claim's own subject and
copies the figure given there. A different figure that the passage writes contradicts the claim:
p_supported is multiplied by the judge's doubt about its fill (1 - probability of its first
token), so a confident fill decides and a hesitant one barely moves it.

Only supported fact claims are asked (the check can only take support away), one call per
figure (at most `FIGURES_PER_CLAIM`), on the chunk that supports the claim best; the prompt
begins as that chunk's label prompt did, so the chunk comes from vLLM's prefix cache. Figures
the question gives are premises, not the answer's facts, and are not asked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey, Claim, JudgeCall
from auditor.verify.claims import sentence_spans
from auditor.verify.entailment import _CITATION, _ENUMERATOR, _FIGURE, figure_prompt

__all__ = ["FigureAsk", "apply_figures", "figure_calls", "figures_to_check", "read_fill"]

FIGURES_PER_CLAIM = 2
BLANK = "___"


def _number(figure: str) -> str:
    """A figure as compared: thousands separators dropped ("1,299" == "1299")."""
    return figure.replace(",", "")


def _numbers(text: str) -> list[str]:
    return [_number(f) for f in _FIGURE.findall(text)]


# a quantity, not part of a name: no letter (or letter and hyphen) glued to it ("T9", "KT-900")
_QUANTITY = r"(?<![\w.,])(?<![A-Za-z]-){figure}(?![\w]|[.,]\d)"


def figures_to_check(claim: str, question: str) -> list[str]:
    """The claim's own quantities: not citations, list numbers, parts of names ("T9 Pro") or
    figures the question gave (premises)."""
    given = set(_numbers(question))
    text = _ENUMERATOR.sub("", _CITATION.sub("", claim))
    own = [
        f
        for f in dict.fromkeys(_FIGURE.findall(text))
        if _number(f) not in given and re.search(_QUANTITY.format(figure=re.escape(f)), text)
    ]
    return own[:FIGURES_PER_CLAIM]


def cloze(claim: str, figure: str) -> str | None:
    """The claim with its first `figure` (as a quantity) blanked out."""
    pattern = re.compile(_QUANTITY.format(figure=re.escape(figure)))
    blanked, count = pattern.subn(BLANK, claim, count=1)
    return blanked if count else None


@dataclass
class FigureAsk:
    """One figure of one claim asked of one chunk."""

    claim_index: int
    figure: str
    chunk_id: str
    chunk: str


def _best_chunk(claim: Claim, item: AnswerItem) -> str | None:
    """The id of the chunk that supports the claim best (by the judge's p_true)."""
    usable = [
        j for j in claim.judgements if not j["vetoed"] and j["chunk"] in claim.supporting_chunks
    ]
    with_p = [j for j in usable if j["probabilities"] is not None]
    if with_p:
        return str(max(with_p, key=lambda j: j["probabilities"]["true"])["chunk"])
    return claim.supporting_chunks[0] if claim.supporting_chunks else None


def figure_calls(claim: Claim, index: int, item: AnswerItem) -> list[tuple[JudgeCall, FigureAsk]]:
    """The cloze calls for a supported fact claim's figures (none for other claims)."""
    if claim.kind != "fact" or claim.verdict != "supported":
        return []
    chunk_id = _best_chunk(claim, item)
    if chunk_id is None:
        return []
    chunk = dict(item.chunks)[chunk_id]
    calls = []
    for number, figure in enumerate(figures_to_check(claim.text, item.question)):
        blanked = cloze(claim.text, figure)
        if blanked is None:
            continue
        key = CallKey("figure", item.id, (index, number))
        # 12 tokens: a figure with its unit ("10 sensors", "$1,299.00"); the first token decides
        call = JudgeCall(key, figure_prompt(chunk, blanked), None, 12, logprobs=20)
        calls.append((call, FigureAsk(index, figure, chunk_id, chunk)))
    return calls


def read_fill(
    text: str, top_logprobs: Mapping[str, float] | None
) -> tuple[list[str], float | None]:
    """(figures the judge wrote, the probability of its first token; None without
    log-probabilities)."""
    confidence = None
    if top_logprobs:
        best = max(top_logprobs.values())
        confidence = math.exp(best) if math.isfinite(best) else None
    return _numbers(text.split("\n", 1)[0]), confidence


def apply_figures(
    claim: Claim,
    answers: list[tuple[FigureAsk, str, Mapping[str, float] | None]],
    threshold: float,
) -> None:
    """Fold the fills (ask, text, first-token log-probabilities) into the claim: a fill that
    gives another figure of the passage contradicts it (p_supported x (1 - confidence))."""
    records = []
    conflicts: list[tuple[FigureAsk, str]] = []
    p = claim.p_supported
    for ask, text, top_logprobs in answers:
        fill, confidence = read_fill(text, top_logprobs)
        in_passage = set(_numbers(ask.chunk))
        if not fill or _number(ask.figure) in fill:
            outcome = "agrees" if fill else "no figure"
        elif any(f in in_passage for f in fill):
            outcome = "conflicts"
            conflicts.append((ask, next(f for f in fill if f in in_passage)))
            if p is not None and confidence is not None:
                p *= 1.0 - confidence
        else:
            outcome = "not in the passage"
        records.append(
            {
                "figure": ask.figure,
                "chunk": ask.chunk_id,
                "fill": text.strip()[:80],
                "confidence": None if confidence is None else round(confidence, 4),
                "outcome": outcome,
            }
        )
    claim.figures = records
    if not conflicts:
        return
    if p is not None:
        claim.p_supported = round(p, 4)
    # without log-probabilities the written fill decides, as the written label does
    if claim.verdict == "supported" and (p is None or p < threshold):
        ask, given = conflicts[0]
        claim.verdict = "contradicted"
        claim.supporting_chunks = []
        claim.contradicting_chunks = [ask.chunk_id]
        claim.evidence = _sentence_with(ask.chunk, given) or claim.evidence
        claim.reason = f"the evidence gives {given} where the claim says {ask.figure}"


def _sentence_with(passage: str, figure: str) -> str:
    """The first sentence of the passage that writes `figure`."""
    for start, end in sentence_spans(passage) or [(0, len(passage))]:
        if figure in _numbers(passage[start:end]):
            return passage[start:end].strip()[:400]
    return ""
