"""Pure claim logic: outcomes of odd answers, sentences and span alignment (the rules a claim row
is judged by live in `auditor.claim_rows`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from auditor.verify.kinds import is_abstention

__all__ = [
    "align_span",
    "answer_outcome",
    "is_refusal",
    "sentence_spans",
]

# a stop followed at once by a character that is not a space or a closing mark ("4.3",
# "$1,299.00", "e.g.") ends no sentence, nor do dot leaders with more on their line
# ("Years 3 to 5 ....... 20 days": a table row is one statement; "Wait..." still ends)
_SENTENCE = re.compile(
    r"(?:[^.!?\n]|(?<=\s)\.{2,}(?=[ \t]*[^\s.])|[.!?](?=[^\s.!?\"')\]]))+(?:[.!?]+|\n|$)"
)
_WORD = re.compile(r"\w+")


def is_refusal(answer: str) -> bool:
    """An answer that declines for lack of information (a refusal is not a hallucination):
    short, and every sentence of it is about the sources or the answerer's knowledge.

    A long answer that says "the passages do not mention X" in passing still makes claims
    that must be checked, and so does a short one with a fact beside its abstention ("I
    couldn't find the price. It is probably $50.") or a short negated fact ("The plan does
    not include calls.": a fact about the world, not a refusal).
    """
    text = answer.strip()
    if not text or len(text) > 300:
        return False
    sentences = [text[a:b] for a, b in sentence_spans(text)]
    statements = [s for s in sentences if len(_WORD.findall(s)) >= 3]
    return bool(statements) and all(is_abstention(s) for s in statements)


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
