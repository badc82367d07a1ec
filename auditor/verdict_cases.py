"""Verdict cases any working judge decides: the test suite's verdict smoke and the first part
of bench/judge_quality.py.

Each case is an answer, the sources it had and what a judge that reads them must conclude: a
claim copied from its source is supported by it; a changed figure is not; an invented negative
fact ("there is no fee") is a fact about the world, unsupported by a source silent about it;
an honest abstention about the same source holds. A few answers catch a broken verdict path
(a label read backwards, negation handling inverted, abstentions lost, the wrong chunk
credited); they say nothing of how often a judge agrees with people, which
bench/judge_quality.py and bench/agreement.py measure on labelled answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.verify.answers import AnswerItem

__all__ = [
    "VerdictCase",
    "case_failures",
    "negation_cases",
    "ragtruth_cases",
    "smoke_cases",
    "write_answers",
]

RETURNS = (
    "Returns: unopened items can be returned within 30 days of delivery. A restocking fee of "
    "15% applies only to opened items priced above $200. Defective items are never charged a fee."
)
# a chunk silent about what the negative answers below deny (written for these cases)
FERRY = (
    "The Harbour Line ferry sails from Pier 4 every 40 minutes between 6:00 and 22:00. The "
    "crossing takes 25 minutes. Tickets are sold at the pier kiosk and in the Harbour Line app."
)
FERRY_QUESTION = "What should I know about the Harbour Line ferry?"


@dataclass(frozen=True)
class VerdictCase:
    """An answer and what its check must conclude."""

    item: AnswerItem
    hallucinated: bool
    kinds: frozenset[str] | None = None  # the claim kinds its claims must all be, where it matters
    supported_by: str | None = None  # every claim supported by this chunk, where it matters


def _case(
    ident: str,
    question: str,
    answer: str,
    chunk: tuple[str, str],
    hallucinated: bool,
    **expected: Any,
) -> VerdictCase:
    item = AnswerItem(ident, question, answer, None, [chunk])
    return VerdictCase(item, hallucinated, **expected)


def smoke_cases() -> list[VerdictCase]:
    """A right and a wrong claim, an invented negative fact and an abstention: four short
    answers whose verdicts do not depend on how good the judge is, only on the path working."""
    ask = "How long do I have to return an item?"
    return [
        _case(
            "right",
            ask,
            "Unopened items can be returned within 30 days of delivery.",
            ("policy#0", RETURNS),
            False,
            supported_by="policy#0",
        ),
        _case(
            "wrong",
            ask,
            "Unopened items can be returned within 90 days of delivery.",
            ("policy#0", RETURNS),
            True,
        ),
        _case(
            "no-fee",
            FERRY_QUESTION,
            "There is no fee for taking a bicycle on the Harbour Line ferry.",
            ("ferry#0", FERRY),
            True,
            kinds=frozenset({"fact"}),
        ),
        _case(
            "abstains",
            FERRY_QUESTION,
            "The passages do not say whether bicycles are allowed on the ferry.",
            ("ferry#0", FERRY),
            False,
            kinds=frozenset({"abstention"}),
        ),
    ]


def negation_cases() -> list[VerdictCase]:
    """More invented negative facts, and a correct answer whose claim list may add the
    question's own premise (that premise must not flag it)."""
    chunk = ("ferry#0", FERRY)
    fact = frozenset({"fact"})
    return [
        _case(
            "not-eu",
            FERRY_QUESTION,
            "Harbour Line tickets are not available to buy with EU debit cards.",
            chunk,
            True,
            kinds=fact,
        ),
        _case(
            "no-data",
            FERRY_QUESTION,
            "The Harbour Line app stores no payment data on the phone.",
            chunk,
            True,
            kinds=fact,
        ),
        _case(
            "correct",
            "Does the Harbour Line ferry have a cafe on board?",
            "The ferry leaves Pier 4 every 40 minutes, and the crossing takes 25 minutes.",
            chunk,
            False,
        ),
    ]


def ragtruth_cases(dev: Path, ids: Iterable[str]) -> list[VerdictCase]:
    """Labelled RAGTruth answers (../shared/datasets/ragtruth-qa/dev.jsonl) by id, each with
    its passages and the human label."""
    wanted = list(ids)
    rows = {}
    for line in dev.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["id"] in wanted:
            rows[row["id"]] = row
    missing = [i for i in wanted if i not in rows]
    if missing:
        raise ValueError(f"{dev}: no answer with id {missing[0]!r}")
    cases = []
    for ident in wanted:
        row = rows[ident]
        chunks = [(f"{ident}#{k}", text) for k, text in enumerate(row["contexts"])]
        item = AnswerItem(ident, row["question"], row["answer"], None, chunks)
        cases.append(VerdictCase(item, bool(row["hallucinated"])))
    return cases


def case_failures(cases: Iterable[VerdictCase], rows: Mapping[str, Any]) -> list[str]:
    """What the check rows ({id: checks.jsonl row}) got wrong, one line per failure; none when
    every case's verdict, claim kinds and supporting chunk are as expected."""
    failures = []
    for case in cases:
        ident = case.item.id
        row = rows.get(ident)
        if row is None:
            failures.append(f"{ident}: not checked")
            continue
        claims = row.get("claims") or []
        if not claims:
            failures.append(f"{ident}: no claim was checked")
            continue
        if row.get("hallucinated") is not case.hallucinated:
            failures.append(
                f"{ident}: hallucinated={row.get('hallucinated')}, expected {case.hallucinated}: "
                + "; ".join(f"{c['text']!r} {c['verdict']}" for c in claims)
            )
        if case.kinds is not None and {c.get("kind") for c in claims} != case.kinds:
            failures.append(
                f"{ident}: claim kinds {sorted(str(c.get('kind')) for c in claims)}, "
                f"expected {sorted(case.kinds)}"
            )
        if case.supported_by is not None:
            wrong = [
                c["text"]
                for c in claims
                if c["verdict"] != "supported" or c["supporting_chunks"] != [case.supported_by]
            ]
            if wrong:
                failures.append(f"{ident}: not supported by {case.supported_by}: {wrong}")
    return failures


def write_answers(cases: list[VerdictCase], path: Path) -> list[str]:
    """The cases as an answers file (`check --answers`: id, question, contexts, answer);
    returns their ids."""
    rows = [
        {
            "id": case.item.id,
            "question": case.item.question,
            "contexts": [text for _, text in case.item.chunks],
            "answer": case.item.answer,
        }
        for case in cases
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return [case.item.id for case in cases]
