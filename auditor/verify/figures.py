"""Figure guards: checks on a claim's numbers that a small judge misses and plain text decides.

- `missing_figures`: a figure of the claim that the chunk never writes vetoes support by it.
- `misbound_figures`: a figure the chunk does write, but for another subject. "Up to 6 sensors
  on the T9 and up to 10 on the T9 Pro" gives 6 to the T9; the claim "a T9 Pro takes 6" binds it
  to a name (Pro) that the chunk puts with another figure. The chunk is split at each figure
  into stretches cut at the connective between two figures (", ", "; ", "and", "but", "or",
  "while", ...); the figure is misbound when, in every sentence that writes it, another
  figure's stretch carries strictly more of the claim's names (capitalised words, model codes)
  than its own. A sentence where the cut is unclear (no connective between two figures) never
  fires: the guard only speaks when the chunk's own wording says which figure goes with what.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["misbound_figures", "missing_figures"]

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


# a free-standing figure: not the 9 of "T9" nor the 2 of "2x"
_FREE_FIGURE = re.compile(r"(?<![A-Za-z0-9])\d+(?:[.,]\d+)*(?![A-Za-z0-9])")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")
_CONNECTIVE = re.compile(
    r",\s|;\s|\s(?:and|but|while|whereas|or|vs\.?|versus|compared (?:with|to))\s", re.IGNORECASE
)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9+\-]*|\d+[A-Za-z][A-Za-z0-9\-]*")
_NOT_NAMES = frozenset(
    [
        "The",
        "A",
        "An",
        "It",
        "In",
        "On",
        "At",
        "For",
        "Of",
        "To",
        "And",
        "But",
        "Or",
        "If",
        "This",
        "That",
        "These",
        "Those",
        "There",
        "Yes",
        "No",
        "You",
        "Your",
        "We",
        "Our",
        "They",
        "He",
        "She",
        "His",
        "Her",
        "Its",
        "As",
        "By",
        "With",
        "From",
        "According",
        "Both",
        "Each",
        "All",
        "Also",
    ]
)


def _figure(text: str) -> str:
    return text.replace(",", "")


def _names(claim: str) -> set[str]:
    """The claim's names: capitalised words and model codes, not its capitalised first word."""
    names = set()
    for match in _NAME.finditer(claim):
        word = match.group()
        has_digit = any(c.isdigit() for c in word)
        if word in _NOT_NAMES or (match.start() == 0 and not has_digit):
            continue
        if word[0].isupper() or has_digit:
            names.add(word)
    return names


def _stretches(sentence: str) -> list[tuple[str, int, int]] | None:
    """(figure, start, end) for each figure of a sentence with two or more; None when two
    figures have no connective between them (which goes with what is unclear)."""
    found = [(_figure(m.group()), m.start(), m.end()) for m in _FREE_FIGURE.finditer(sentence)]
    if len(found) < 2:
        return None
    bounds = [0]
    for (_, _, end), (_, start, _) in itertools.pairwise(found):
        cuts = [
            m.start()
            for m in _CONNECTIVE.finditer(sentence, end, start)
            # "January 3, 1977": the comma of a date joins its figures
            if not (m.group() == ", " and sentence[m.end() : m.end() + 4].isdigit())
        ]
        if not cuts:
            return None
        bounds.append(cuts[-1])
    bounds.append(len(sentence))
    return [(figure, bounds[n], bounds[n + 1]) for n, (figure, _, _) in enumerate(found)]


def misbound_figures(claim: str, passage: str) -> list[str]:
    """Figures of the claim that every sentence of the passage writing them gives to another
    subject: another figure's stretch names strictly more of the claim's names."""
    figures = {_figure(f) for f in _FREE_FIGURE.findall(claim)}
    names = _names(claim)
    if not figures or not names:
        return []
    misbound = []
    for figure in sorted(figures):
        verdicts = []
        for sentence in _SENTENCE_BREAK.split(passage):
            if not any(_figure(m.group()) == figure for m in _FREE_FIGURE.finditer(sentence)):
                continue
            stretches = _stretches(sentence)
            own = [(a, b) for f, a, b in stretches or [] if f == figure]
            if not own or stretches is None:
                verdicts.append(False)
                continue

            def named(spans: list[tuple[int, int]], text: str = sentence) -> set[str]:
                return {
                    name
                    for name in names
                    for a, b in spans
                    if re.search(rf"\b{re.escape(name)}\b", text[a:b])
                }

            mine = named(own)
            others = [named([(a, b)]) for f, a, b in stretches if f not in figures]
            verdicts.append(any(theirs > mine for theirs in others))
        if verdicts and all(verdicts):
            misbound.append(figure)
    return misbound
