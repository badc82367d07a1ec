"""Pure claim logic: outcomes of odd answers, span alignment, verdict aggregation, scores."""

from __future__ import annotations

import re
from collections.abc import Sequence

from auditor.verify.base import Claim, Verdict

__all__ = [
    "align_span",
    "answer_outcome",
    "combine_chunk_labels",
    "faithfulness",
    "is_refusal",
    "missing_details",
    "sentence_spans",
]

_REFUSAL = re.compile(
    r"\b(unable to answer|cannot answer|can ?not be answered|can't answer|not able to answer|"
    r"(do|does) not (contain|provide|include|mention|specify)|no (relevant )?information|"
    r"not (mentioned|provided|specified|stated) in|i don'?t know|insufficient information)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|\n|$)")
_WORD = re.compile(r"\w+")


def is_refusal(answer: str) -> bool:
    """An answer that declines for lack of information (a refusal is not a hallucination).

    Only short answers count: a long answer that says "the passages do not mention X" in
    passing still makes claims that must be checked.
    """
    text = answer.strip()
    return bool(text) and len(text) <= 300 and bool(_REFUSAL.search(text))


def answer_outcome(answer: str, contexts: Sequence[str], max_chars: int) -> str:
    """How an answer is handled: checked, or one of the defined special cases."""
    if not answer.strip():
        return "empty_answer"
    if is_refusal(answer):
        return "refusal"
    if not any(c.strip() for c in contexts):
        return "no_context"
    if len(answer) > max_chars:
        return "truncated"
    return "checked"


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences (and lines) of a text, whitespace trimmed."""
    spans = []
    for match in _SENTENCE.finditer(text):
        start, end = match.span()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append((start, end))
    return spans


def align_span(claim: str, answer: str) -> tuple[int, int] | None:
    """The span of the answer a claim came from: exact match, else the most overlapping sentence.

    Claims are rewritten by the judge (pronouns resolved, sentences split), so they rarely occur
    verbatim; word overlap with each sentence finds where they were said.
    """
    if not claim.strip():
        return None
    exact = answer.find(claim.strip())
    if exact != -1:
        return exact, exact + len(claim.strip())
    words = {w.lower() for w in _WORD.findall(claim)}
    if not words:
        return None
    best, best_score = None, 0.0
    for start, end in sentence_spans(answer):
        sentence = {w.lower() for w in _WORD.findall(answer[start:end])}
        if not sentence:
            continue
        score = len(words & sentence) / len(words)
        if score > best_score:
            best, best_score = (start, end), score
    return best if best_score >= 0.3 else None


def combine_chunk_labels(labels: dict[str, str]) -> tuple[Verdict, list[str], list[str]]:
    """One verdict from per-chunk labels ("true" | "false" | "unknown" | "error").

    Supported if any checked chunk supports the claim (those chunks are its sources);
    contradicted if none supports and one contradicts; unverifiable if every check failed;
    unsupported otherwise.
    """
    supporting = [chunk for chunk, label in labels.items() if label == "true"]
    contradicting = [chunk for chunk, label in labels.items() if label == "false"]
    if supporting:
        return "supported", supporting, contradicting
    if contradicting:
        return "contradicted", [], contradicting
    if labels and all(label == "error" for label in labels.values()):
        return "unverifiable", [], []
    return "unsupported", [], []


def faithfulness(claims: Sequence[Claim]) -> float | None:
    """Supported claims / judged claims (unverifiable ones are not judged); None with none."""
    judged = [c for c in claims if c.verdict != "unverifiable"]
    if not judged:
        return None
    return sum(c.verdict == "supported" for c in judged) / len(judged)


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# what an answer says about its sources or its layout, not about the world: "(Passage 2)",
# "[1]", "passages 1 and 3", a list's "3." -- never a detail a passage must contain
_CITATION = re.compile(
    r"\(?\b(?:passages?|sources?|documents?)\s+\d+(?:\s*(?:,|and|&)\s*\d+)*\)?|\[\d+(?:\s*,\s*\d+)*\]",
    re.IGNORECASE,
)
_ENUMERATOR = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022])\s+", re.MULTILINE)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]{2,}\b")


def missing_details(claim: str, passage: str) -> list[str]:
    """Numbers and names in a claim that the passage never mentions.

    A passage cannot support a claim whose figures or names it does not contain, whatever a
    small judge says; this catches the commonest hallucination, a detail added from nowhere.
    Names are capitalised words not at the start of the claim. References to the sources
    ("(Passage 2)", "[1]") and list numbering are not details.
    """
    claim = _ENUMERATOR.sub("", _CITATION.sub("", claim))
    text = passage.lower()
    numbers = set(re.findall(r"\d+", passage.replace(",", "")))  # 1,299 == 1299
    missing = [
        n
        for n in _NUMBER.findall(claim)
        if not set(re.findall(r"\d+", n.replace(",", ""))) <= numbers
    ]
    missing += [w for w in _NAME.findall(claim.strip()) if w.lower() not in text]
    return missing
