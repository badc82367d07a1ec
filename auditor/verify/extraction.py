"""Claims of an answer: self-contained statements taken from the answer only (pure).

Why not RAGAS's statement prompt: on a small judge its statements keep the answer's
"you" and "it" ("You will not be charged."), so a claim loses the subject and the conditions
the question gave it and any passage about charges "supports" it; and it turns sentences of
the question into statements. Here the judge sees the question only as context for the
answer, is told to carry the question's subject and conditions into every claim, to state what
a yes/no answer asserts about the question, and to keep an abstention as a claim about the
sources. The instructions and examples come first, so every call shares that prefix (vLLM's
prefix cache computes it once).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Any, Literal

from pydantic import BaseModel

from auditor.claim_rows import Claim
from auditor.verify.answers import AnswerItem
from auditor.verify.claims import sentence_spans
from auditor.verify.kinds import claim_kind

__all__ = [
    "ExtractedClaims",
    "abstains",
    "claim_kind",
    "claims_prompt",
    "claims_schema",
    "is_question_echo",
    "is_short_clause",
    "refusal_claim",
    "refusal_claims",
    "short_clause_is_claim",
    "source_sentence",
    "uncovered_sentences",
    "written_in",
]

_INSTRUCTIONS = """You list the factual claims that an ANSWER makes.
Rules:
- One claim per item, each a complete sentence that can be understood alone: replace "you", \
"it", "this", "they" and "there" with who or what they refer to, and keep the product, \
person, place, time, amount and every condition from the question or the answer that the \
claim depends on.
- A yes/no answer: write the statement it makes about what the question asks.
- Take claims only from the ANSWER. Never list what the question says or asks.
- Skip greetings, filler and advice that states no fact.
- If the answer says the documents or passages do not give some information, keep that as \
a claim starting "The documents do not say".
- Keep every number, date and name exactly as the answer gives it.

Example 1
Question: I booked a plumber visit for Friday. Can I move it without paying?
Answer: Yes. You can reschedule for free up to 48 hours before the visit; after that a $30 \
fee applies.
Claims: {"claims":["A booked plumber visit can be rescheduled free of charge up to 48 hours \
before the visit.","Rescheduling a plumber visit less than 48 hours before it costs a $30 \
fee."]}

Example 2
Question: Does the Vela blender come with a warranty?
Answer: No, it does not.
Claims: {"claims":["The Vela blender does not come with a warranty."]}

Example 3
Question: When was the Brightwater bridge opened and how long is it?
Answer: Based on the passages, the bridge opened in 1932 and is 1.2 km long. They do not \
say who designed it.
Claims: {"claims":["The Brightwater bridge opened in 1932.","The Brightwater bridge is 1.2 \
km long.","The documents do not say who designed the Brightwater bridge."]}

Example 4
Question: What is the parental leave policy for contractors?
Answer: I couldn't find anything about parental leave for contractors in the provided \
documents.
Claims: {"claims":["The documents do not say what the parental leave policy for contractors \
is."]}

Now the real one."""


class ExtractedClaims(BaseModel):
    """The judge's reply to a claims prompt."""

    claims: list[str]


def claims_prompt(question: str, answer: str) -> str:
    """The prompt that lists the claims of `answer` (the question gives them their context)."""
    return f"{_INSTRUCTIONS}\nQuestion: {question.strip()}\nAnswer: {answer.strip()}\nClaims:"


def claims_schema(max_claims: int, max_length: int = 300) -> dict[str, Any]:
    """At least one and at most `max_claims` bounded strings (small judges loop otherwise)."""
    return {
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_claims,
                "items": {"type": "string", "maxLength": max_length},
            }
        },
        "required": ["claims"],
    }


# "Passage 2 states that X", "According to the passages, X": where a claim came from is not
# what it says; the judge checks X against one chunk and cannot tell which passage is "2"
_ATTRIBUTION = re.compile(
    r"^\s*(?:(?:according\s+to|as\s+(?:stated|mentioned|noted|described)\s+in|based\s+on)\s+"
    r"(?:the\s+)?(?:given\s+|provided\s+)?(?:passages?|documents?|sources?|context|texts?|articles?)"
    r"(?:\s*\d+)?\s*,\s*"
    r"|(?:the\s+)?(?:passages?|documents?|sources?|context|texts?|articles?|excerpts?)"
    r"(?:\s*\d+)?(?:\s+(?:I|we)\s+have|\s+available\s+to\s+me)?\s+(?:also\s+)?"
    r"(?:(?:states?|says?|mentions?|notes?|suggests?|explains?|indicates?|reports?|confirms?"
    r"|adds?)(?:\s*[,:]\s*[\"\u201c]?|\s+)(?:that\s+)?|(?:highlights?|shows?|describes?)\s+that\s+))",
    re.IGNORECASE,
)
_LETTER_WORD = re.compile(r"[^\W\d_]{2,}")


def without_attribution(claim: str) -> str:
    """The claim without a leading "Passage 2 states that" / "According to the passages,".

    Rule, error class: an attribution checked as a fact about a passage number the judge
    cannot see. Evidence: not isolated; part of every logic measured since 2026-12-03."""
    match = _ATTRIBUTION.match(claim)
    if match is None:
        return claim
    rest = claim[match.end() :].strip()
    if len(_LETTER_WORD.findall(rest)) < 3:
        return claim
    return rest[0].upper() + rest[1:]


_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "do",
        "does",
        "did",
        "not",
        "no",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "with",
        "from",
        "by",
        "at",
        "as",
        "what",
        "which",
        "who",
        "how",
        "when",
        "where",
        "why",
        "can",
        "could",
        "i",
        "you",
        "we",
        "they",
        "based",
        "given",
        "provided",
        "passage",
        "passages",
        "document",
        "documents",
        "context",
        "source",
        "sources",
        "answer",
        "unable",
        "information",
        "question",
    ]
)


def refusal_claim(claim: str, question: str) -> str:
    """A refusal's claim as something checkable: "Unable to answer based on the passages" says
    the sources do not answer the question, so it becomes exactly that; a refusal that names
    what is missing (two or more words of its own) stays as it is.

    Rule, error class: a clean refusal judged as an unsupported statement (stock RAGAS flags
    every one). Evidence: RAGTruth QA dev holds one such answer; not isolated."""
    asked = {w for w in _words(question) if w not in _STOPWORDS}
    said = {w for w in _words(claim) if w not in _STOPWORDS and w not in _FILLER}
    if len(said) >= 2 or (asked and asked <= said):
        return claim
    return f"The documents do not answer the question: {question.strip()}"


def refusal_claims(item: AnswerItem) -> list[Claim]:
    """The claims of a refusal (`is_refusal`): each of its statements as written, an
    abstention; a bare "unable to answer" as "the documents do not answer the question: Q"."""
    claims = []
    for start, end in sentence_spans(item.answer):
        sentence = item.answer[start:end]
        if len(_words(sentence)) < 3:
            continue
        text = refusal_claim(sentence, item.question)
        claims.append(Claim(text=text, span=(start, end), kind="abstention", origin="sentence"))
    return list({c.text: c for c in claims}.values())


def is_garbage(claim: str) -> bool:
    """Not a statement: fewer than three words, or a judge's chat or JSON debris
    (seen: ']}Human: Can you provide ...', ']}' followed by markup).
    Rule, error class: output debris checked as a claim. A parsing guard, not a verdict rule."""
    text = claim.strip()
    return (
        len(_LETTER_WORD.findall(text)) < 3
        or text[:1] in "[]{}"
        or bool(re.search(r"\b(?:Human|Assistant|User)\s*:", text))
    )


def abstains(answer: str) -> bool:
    """Whether some sentence of the answer says its sources (or the answerer) lack something."""
    return any(claim_kind(answer[a:b]) == "abstention" for a, b in sentence_spans(answer))


def is_question_echo(claim: str, question: str, answer: str) -> bool:
    """A "claim" that is a question, or repeats a sentence of the question the answer never says.

    Small judges copy the user's own words ("Something came up and I need to cancel") into
    the claims; those are not the answer's to defend. Rule, error class: claims taken from the
    question (the premise check, `premise.py`, catches the reworded ones). Evidence: not
    isolated.
    """
    text = claim.strip()
    if text.endswith("?"):
        return True
    words = _words(text)
    if not words:
        return True
    for sentence in re.split(r"(?<=[.!?])\s+|\n", question):
        asked = _words(sentence)
        if not asked:
            continue
        similar = SequenceMatcher(None, words, asked, autojunk=False).ratio() >= 0.85
        if similar and SequenceMatcher(
            None, words, _words(answer), autojunk=False
        ).find_longest_match().size < 0.6 * len(words):
            return True
    return False


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


# "1. ", "* ", "- " before a list item; "(Passage 2)" after a statement: where it came from
_LIST_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022])\s+")
_CITATION = re.compile(
    r"\s*\((?:see\s+)?(?:passages?|documents?|sources?)\s*\d*(?:\s*(?:,|and|&)\s*\d+)*\)",
    re.IGNORECASE,
)
# a sentence counts as covered by the claims unless half its content words (and two or more)
# are missing from every claim
UNCOVERED_SHARE = 0.5


# a short clause states a checkable fact when it has a figure, a date, a name or a negation
_MONTHS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "today",
        "yesterday",
        "tomorrow",
    ]
)
_NEGATIONS = frozenset(
    ["not", "no", "never", "none", "neither", "nor", "without", "cannot", "nothing", "nobody"]
)
ShortClauses = Literal["skipped", "facts", "all"]


def is_short_clause(clause: str) -> bool:
    """Fewer than four content words: a fragment to the sentence rule."""
    return len(_word_stems([clause])) < 4


def short_clause_is_claim(clause: str, rule: ShortClauses) -> bool:
    """Whether a clause of fewer than four content words is checked (`rule`): `skipped`, never
    (the rule before 2026-12-08); `facts`, when it has a figure, a date, a name or a negation
    ("48 degrees and sunny at 9am"); `all`, whenever it has a content word or a figure. Either
    way it needs a word of letters: a bare "1." is a list number split off.
    Error class: short statements of fact never checked (17 of 1,098 dev clauses)."""
    if rule == "skipped":
        return False
    words = _words(clause)
    # a word of letters at least: a bare "1." is a list number split off, not a statement
    if not re.search(r"[^\W\d_]{2,}", clause) or not (
        _content_words(clause) or any(c.isdigit() for c in clause)
    ):
        return False
    if rule == "all":
        return True
    if any(c.isdigit() for c in clause) or any(w in _MONTHS for w in words):
        return True
    if any(w in _NEGATIONS or w.endswith("n't") for w in re.findall(r"[\w']+", clause.lower())):
        return True
    # a name: a capitalised word that does not open the clause
    return any(w[:1].isupper() for w in re.findall(r"\w+", clause)[1:])


def uncovered_sentences(
    answer: str, claims: list[str], question: str, short_clauses: ShortClauses = "skipped"
) -> list[str]:
    """Statements of the answer that no listed claim carries, as claims of their own.

    A small judge's claim list can drop most of an answer (seen: a seven-step answer ending in
    "Unable to answer based on given passages." listed as that refusal alone), and what is
    never listed is never checked. Each sentence whose content words are mostly missing from
    the claims is checked as written (list marker, citation and attribution removed; clauses
    split at ";"); an abstention as an abstention (it holds unless a chunk gives what it says
    is missing); list headers ending in ":", questions, question echoes and fragments of fewer
    than four content words are not statements to check.
    Rule, error class: statements the claim list dropped go unchecked. Evidence: RAGTruth QA
    dev 5-fold CV balanced accuracy 0.700 -> 0.753 (paired gain -0.002..+0.119), AUROC
    0.739 -> 0.797 (+0.009..+0.114), logic 2026-12-04.1 (README Evidence).
    """
    said = _word_stems(claims)
    found = []
    for start, end in sentence_spans(answer):
        sentence = _CITATION.sub("", _LIST_MARKER.sub("", answer[start:end])).strip()
        if sentence.endswith((":", "?")):
            continue
        # clauses apart: the claims may carry one and not the other
        for clause in re.split(r";\s*", without_attribution(sentence)):
            clause = clause.strip()
            if not clause:
                continue
            clause = clause[0].upper() + clause[1:]
            words = _word_stems([clause])
            short = len(words) < 4
            if short and not short_clause_is_claim(clause, short_clauses):
                continue
            if is_question_echo(clause, question, answer):
                continue
            missing = words - said
            # a short clause checked by the rule counts as uncovered when a listed claim lacks
            # one of its words or figures
            uncovered = len(missing) >= 2 and len(missing) >= UNCOVERED_SHARE * len(words)
            if uncovered or (short and (missing or not claims)):
                found.append(clause if clause[-1] in ".!" else clause + ".")
    return found


def source_sentence(span: tuple[int, int] | None, answer: str, question: str) -> str | None:
    """The answer sentence a claim was taken from, cleaned as `uncovered_sentences` cleans
    sentences (None without a span, or for a header, question or fragment)."""
    if span is None:
        return None
    for start, end in sentence_spans(answer):
        if start <= span[0] < end or (span[0] <= start < span[1]):
            sentence = _CITATION.sub("", _LIST_MARKER.sub("", answer[start:end])).strip()
            sentence = without_attribution(sentence)
            if sentence.endswith((":", "?")) or len(_word_stems([sentence])) < 3:
                return None
            if is_question_echo(sentence, question, answer):
                return None
            sentence = sentence[0].upper() + sentence[1:]
            return sentence if sentence[-1] in ".!" else sentence + "."
    return None


# words a claim may add to what the answer wrote without saying anything new
_GLUE = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "that",
        "this",
        "it",
        "its",
        "with",
        "by",
        "as",
        "at",
        "from",
    ]
)


def written_in(claim: str, answer: str) -> bool:
    """Whether every word of the claim (negations included; articles and the like aside)
    is written in the answer: such a claim is the answer's own wording, made by it.

    Rule, error class: the premise check dropping a claim the answer wrote word for word (the
    1.5B judge called "Diet does not significantly affect oily skin." unknown against an answer
    saying exactly that); a claim taken from the question, a flipped meaning ("not" added) or
    an abstention turned into a fact has a word the answer lacks, and goes to the judge."""
    written = {_stem(w) for w in _words(answer)}
    return all(_stem(w) in written for w in _words(claim) if w not in _GLUE)


# words that make no statement of their own ("Yes to both.")
_FILLER = frozenset(["yes", "both", "also", "just", "only", "here", "some", "there", "your"])


def _word_stems(texts: list[str]) -> set[str]:
    return {_stem(w) for text in texts for w in _content_words(text)}


def _content_words(text: str) -> list[str]:
    return [
        w
        for w in _words(text)
        if len(w) > 2 and w not in _STOPWORDS and w not in _FILLER and not w.isdigit()
    ]


def _stem(word: str) -> str:
    """Crude suffix stripping, enough to match "sensors" with "sensor" and "charged" with
    "charge" across a claim's rewording."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word
