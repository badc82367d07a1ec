"""Labelled answers to the same question as examples for the judge (people's earlier reviews).

An audit repeats: the same questions come back every week, and people have labelled answers to
them (`auditor review`, or any labels file). Those labels are knowledge about *this* question
that a small judge lacks: which statements people accepted and which they marked. Here they
become a claim memory: each claim is compared (the shipped embedder) with the sentences people
accepted and the sentences holding a span they marked, and the closest of each moves the
claim's p_supported by weights fitted on labelled answers of other questions (`MemoryWeights`;
`bench/examples.py` fits and measures them with folds by question).

An example is matched to an answer by `source_id` when both carry one, else by the question
text (normalised); an example with the answer's own id is never used for it (no answer is
judged with its own label). Without examples nothing changes: a claim with no memory keeps its
p_supported exactly.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from auditor.claim_rows import Claim
from auditor.errors import BadInput
from auditor.labels import read_labels, settle
from auditor.verify.answers import AnswerItem
from auditor.verify.base import Reference
from auditor.verify.claims import sentence_spans
from auditor.verify.record import claim_fields

__all__ = [
    "NO_RECALL",
    "PROMPT_BUDGET_CHARS",
    "ClaimMemory",
    "Example",
    "ExampleBook",
    "MemoryWeights",
    "Recall",
    "Reference",
    "prompt_references",
    "question_key",
    "read_examples",
    "recall",
    "references",
    "remember",
    "remembered_support",
    "reviewed_block",
]

EXAMPLE_FIELDS = "id, question, answer, hallucinated, spans?, source_id?"


def question_key(question: str) -> str:
    """A question as matched: case, spacing and closing punctuation do not count."""
    return re.sub(r"\s+", " ", question).strip().rstrip("?.! ").casefold()


@dataclass(frozen=True)
class Example:
    """A labelled answer: what people said of it, and where in the file it is."""

    id: str
    question: str
    answer: str
    hallucinated: bool
    spans: tuple[tuple[int, int], ...]
    source_id: str | None
    where: str  # file:line
    # the answer's id in its run and that run's review fingerprint (a review page's labels:
    # `id` is PIPELINE/ID there); None run: not known, the id alone says which answer it is
    answer_id: str = ""
    run: str | None = None


def read_examples(path: Path) -> list[Example]:
    """The labelled answers of an examples file, read by the one labels reader and settled
    (`auditor.labels`: copies collapse, reviewers' disagreements need an adjudication); one-line
    BadInput naming file and line."""
    examples = [
        Example(
            id=label.labelled_id,  # PIPELINE/ID for a review page's labels
            question=str(label.question),
            answer=str(label.answer),
            hallucinated=label.hallucinated,
            spans=label.spans,
            source_id=label.source_id,
            where=label.where,
            answer_id=label.id,
            run=label.fingerprint,
        )
        for label in settle(read_labels(path, needs=("question", "answer")))
    ]
    if not examples:
        raise BadInput(f"{path}: no examples (one labelled answer per line: {EXAMPLE_FIELDS})")
    return examples


@dataclass
class ExampleBook:
    """Examples by question, and the file they came from (its hash goes into the run)."""

    path: Path
    examples: list[Example]
    sha256: str = ""
    _by_source: dict[str, list[Example]] = field(default_factory=dict, repr=False)
    _by_question: dict[str, list[Example]] = field(default_factory=dict, repr=False)
    _by_id: dict[str, Example] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for example in self.examples:
            if example.source_id is not None:
                self._by_source.setdefault(example.source_id, []).append(example)
            self._by_question.setdefault(question_key(example.question), []).append(example)
            self._by_id[example.id] = example

    @classmethod
    def load(cls, path: Path) -> ExampleBook:
        examples = read_examples(path)
        return cls(path, examples, hashlib.sha256(path.read_bytes()).hexdigest())

    def for_answer(
        self,
        answer_id: str,
        question: str,
        source_id: str | None,
        run: str | None = None,
        answer: str | None = None,
    ) -> list[Example]:
        """The examples of this answer's question, never the answer itself: an example is
        left out when it has the answer's id in its file, or the answer's id in its run and
        was labelled on that run's review page (`run`, the fingerprint); where either run is
        unknown, when it has the answer's id and its very words (`answer`; unknown too: the id
        alone decides). Other pipelines' answers to the question stay examples.

        BadInput when an example shares the answer's id but labels another question: the two
        files then disagree on what the id names, and either could be the mistake."""
        own = self._by_id.get(answer_id)
        if own is not None and not _same_question(own, question, source_id):
            raise BadInput(
                f"{own.where}: example {own.id!r} answers another question than the answer "
                f"with the same id ({question[:60]!r}); give one of them another id"
            )
        if source_id is not None and source_id in self._by_source:
            found = self._by_source[source_id]
        else:
            found = [
                e
                for e in self._by_question.get(question_key(question), [])
                if e.source_id is None or source_id is None
            ]
        return [e for e in found if not _is_answer(e, answer_id, run, answer)]

    def provenance(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "examples": len(self.examples),
            "hallucinated": sum(e.hallucinated for e in self.examples),
        }


def _is_answer(example: Example, answer_id: str, run: str | None, answer: str | None) -> bool:
    """Whether the example labels this very answer (see `ExampleBook.for_answer`)."""
    if example.id == answer_id:
        return True
    if example.answer_id != answer_id:
        return False
    if example.run is not None and run is not None:
        return example.run == run
    return answer is None or example.answer == answer


def _same_question(example: Example, question: str, source_id: str | None) -> bool:
    if example.source_id is not None and source_id is not None:
        return example.source_id == source_id
    return question_key(example.question) == question_key(question)


def references(examples: Sequence[Example]) -> list[Reference]:
    """What people said of each example's sentences.

    A sentence of a clean answer, or of a hallucinated answer outside its spans, was accepted;
    a sentence that overlaps a span was marked. A hallucinated answer without spans (labelled
    whole) says nothing about any one sentence and gives none.
    """
    found = []
    for example in examples:
        if example.hallucinated and not example.spans:
            continue
        for start, end in sentence_spans(example.answer):
            text = example.answer[start:end]
            if len(text.split()) < 3:
                continue
            hits = [(a, b) for a, b in example.spans if a < end and b > start]
            marked = " … ".join(example.answer[max(a, start) : min(b, end)] for a, b in hits)
            found.append(Reference(example.id, text, bool(hits), marked))
    return found


# the verdict prompt's share for what people said (~300 tokens): fixed before any measurement
PROMPT_BUDGET_CHARS = 1200

_REVIEWED_HEAD = "People reviewed other answers to the same question against their sources."
_REVIEWED_GUIDE = (
    "A claim that repeats a statement they marked is likely not stated by the sources; one "
    "that repeats a sentence they accepted likely is. Still answer for this passage."
)


def prompt_references(
    claims: Sequence[str],
    refs: Sequence[Reference],
    embed: Any,
    budget_chars: int = PROMPT_BUDGET_CHARS,
) -> list[Reference]:
    """The references the verdict prompt of one answer shows: the closest to any of its claims
    first (cosine), one per wording, while their text fits `budget_chars`."""
    if not claims or not refs:
        return []
    sims = embed(list(claims)) @ embed([r.text for r in refs]).T
    closest = sims.max(axis=0)
    # stable on ties: the file's order
    order = sorted(range(len(refs)), key=lambda i: -float(closest[i]))
    chosen: list[Reference] = []
    seen: set[str] = set()
    used = 0
    for index in order:
        ref = refs[index]
        wording = " ".join(ref.text.split()).casefold()
        if wording in seen:
            continue
        cost = len(_reference_line(ref)) + 1
        if used + cost > budget_chars:
            continue
        seen.add(wording)
        chosen.append(ref)
        used += cost
    return chosen


def reviewed_block(refs: Sequence[Reference]) -> str:
    """What people said of other answers to the question, as the verdict prompt shows it
    (marked statements, then accepted sentences); empty without references."""
    if not refs:
        return ""
    lines = [_REVIEWED_HEAD]
    marked = [r for r in refs if r.marked]
    accepted = [r for r in refs if not r.marked]
    if marked:
        lines.append("Statements they marked as not in the sources:")
        lines.extend(_reference_line(r) for r in marked)
    if accepted:
        lines.append("Sentences they accepted as stated by the sources:")
        lines.extend(_reference_line(r) for r in accepted)
    lines.append(_REVIEWED_GUIDE)
    return "\n".join(lines)


def _reference_line(ref: Reference) -> str:
    text = " ".join(ref.text.split())
    if ref.marked and ref.span_text and len(ref.span_text) < len(text):
        return f'- "{" ".join(ref.span_text.split())}" (in: {text})'
    return f"- {text}"


@dataclass(frozen=True)
class Recall:
    """What a claim's memory found: the closest accepted and the closest marked sentence."""

    accepted: float
    marked: float
    accepted_ref: Reference | None
    marked_ref: Reference | None

    def to_json(self) -> dict[str, Any]:
        def side(ref: Reference | None, similarity: float) -> dict[str, Any] | None:
            if ref is None:
                return None
            found = {"example": ref.example_id, "sentence": ref.text, "similarity": similarity}
            return found | ({"marked": ref.span_text} if ref.marked else {})

        return {
            "accepted": side(self.accepted_ref, round(self.accepted, 4)),
            "marked": side(self.marked_ref, round(self.marked, 4)),
        }


NO_RECALL = Recall(0.0, 0.0, None, None)


def recall(
    claims: Sequence[str], refs: Sequence[Reference], embed: Any, embed_refs: Any = None
) -> list[Recall]:
    """For each claim, the most similar accepted and marked reference (cosine, normalised
    embeddings); a side with no reference has similarity 0. `embed_refs` embeds the references
    where given (a memo: the same question's references recur answer after answer)."""
    if not claims or not refs:
        return [NO_RECALL for _ in claims]
    sims = embed(list(claims)) @ (embed_refs or embed)([r.text for r in refs]).T
    found = []
    for row in sims:
        best: dict[bool, tuple[float, Reference | None]] = {True: (0.0, None), False: (0.0, None)}
        for ref, sim in zip(refs, row, strict=True):
            if float(sim) > best[ref.marked][0]:
                best[ref.marked] = (float(sim), ref)
        found.append(Recall(best[False][0], best[True][0], best[False][1], best[True][1]))
    return found


@dataclass(frozen=True)
class MemoryWeights:
    """How far a restated reference moves a claim: log-odds per unit of similarity above
    `similarity` (accepted: up, marked: down), and the support threshold an answer with
    examples is decided at. Fitted on labelled answers of other questions."""

    similarity: float = 0.8
    accepted: float = 0.0
    marked: float = 0.0
    support_threshold: float | None = None  # None: the judge's

    def to_json(self) -> dict[str, float | None]:
        return {
            "similarity": self.similarity,
            "accepted": self.accepted,
            "marked": self.marked,
            "support_threshold": self.support_threshold,
        }


def remembered_support(p: float, found: Recall, weights: MemoryWeights) -> float:
    """p_supported moved by what people said of the closest sentences; p itself where the
    memory found nothing above the similarity floor (so no examples change nothing)."""
    lift = weights.accepted * max(0.0, found.accepted - weights.similarity)
    drop = weights.marked * max(0.0, found.marked - weights.similarity)
    if lift == 0.0 and drop == 0.0:
        return p
    clipped = min(max(p, 1e-6), 1 - 1e-6)
    return 1.0 / (1.0 + math.exp(-(math.log(clipped / (1 - clipped)) + lift - drop)))


def remember(claim: Claim, found: Recall, weights: MemoryWeights, threshold: float) -> None:
    """Move a judged fact's p_supported by its memory and decide it at `threshold` (the
    threshold of answers with examples); the claim keeps what the memory found, the judge's
    own p_supported, and whether the examples decided its verdict."""
    p = claim.p_supported
    if p is None or claim.kind != "fact" or claim.verdict == "unverifiable":
        return
    moved = remembered_support(p, found, weights)
    supported = moved >= threshold
    if moved != p:
        claim.p_supported = round(moved, 4)
        claim.memory = found.to_json() | {"p_judge": p, "decided": False}
    if supported == (claim.verdict == "supported"):
        return
    decided = moved != p and (p >= threshold) != supported  # the examples, not the threshold
    if supported:
        claim.verdict = "supported"
        ref = found.accepted_ref
        claim.reason = (
            f"people accepted a sentence like it (example {ref.example_id})"
            if decided and ref is not None
            else "the evidence states the claim"
        )
    else:
        claim.verdict = "unsupported"
        ref = found.marked_ref
        claim.reason = (
            f"people marked a sentence like it (example {ref.example_id})"
            if decided and ref is not None
            else "the checked chunks do not state it clearly enough (an answer with examples)"
        )
    if claim.memory is not None:
        claim.memory["decided"] = decided


@dataclass
class ClaimMemory:
    """Examples applied to checked answers (`check_into`): each record's judged facts moved
    by what people said of the closest sentences of its question's examples."""

    book: ExampleBook
    weights: MemoryWeights
    threshold: float  # the judge's; weights.support_threshold decides answers with examples
    embed: Any
    _vectors: dict[str, Any] = field(default_factory=dict, repr=False)

    def matched(self, items: Sequence[AnswerItem]) -> int:
        """How many of these answers have an example."""
        return sum(
            bool(self.book.for_answer(i.id, i.question, i.source_id, i.run, i.answer))
            for i in items
        )

    def apply(self, row: dict[str, Any], item: AnswerItem) -> None:
        """Record the examples used for the answer and move its claims (row updated)."""
        examples = self.book.for_answer(
            item.id, item.question, item.source_id, item.run, item.answer
        )
        row["examples"] = [e.id for e in examples]
        if not examples or not row.get("claims"):
            return
        claims = [Claim.from_json(c) for c in row["claims"]]
        facts = [c for c in claims if c.kind == "fact" and c.p_supported is not None]
        found = recall([c.text for c in facts], references(examples), self.embed, self._refs)
        threshold = self.weights.support_threshold
        for claim, recalled in zip(facts, found, strict=True):
            remember(
                claim, recalled, self.weights, self.threshold if threshold is None else threshold
            )
        row.update(claim_fields(claims, row["outcome"]))

    def _refs(self, texts: list[str]) -> Any:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self._vectors.update(zip(missing, self.embed(missing), strict=True))
        return np.stack([self._vectors[t] for t in texts])
