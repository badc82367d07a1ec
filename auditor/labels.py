"""People's labels of answers: the one reader of a labels file, for every command that takes one.

A labels file is what the report's review page downloads (or anything written like it): one
JSON object per line with `id`, `hallucinated` (true/false) and, as the page writes them,
`pipeline`, `claims` (per claim of the check: `{"index": K, "judge_right": bool}`), `spans`
(character offsets of what the reviewer holds hallucinated), `question`, `answer`, `contexts`,
`source_id`, `note`, `fingerprint` (the run it was labelled on), `check_fingerprint` (the
check whose claims it marks), `reviewer`, `labelled_at` (ISO 8601 with a zone; not before
the run began, checked where the run is known: `auditor.review.assign_labels`) and `role`
(`first`, the default; `second`, a blind second review; `adjudicator`, who settles an answer
the two disagree on). `report --labels`, `check --examples` and `calibrate --labels` read it
here, the same way: a line one of them would refuse, all of them refuse.

`settle` turns the lines into one label per answer: exact copies collapse, two different
labels by the same role are refused naming both lines, a second review that disagrees with
the first needs an adjudicator's label, an adjudicator's label settles only such a
disagreement (by a third person), and a label contradicting its own claim marks is refused
where the claims are known (`auditor.review.assign_labels`). Reviewers' names are compared as
people are (`same_person`: NFKC-normalised and case-folded, so "Ana" and "ana" are one).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from auditor.errors import BadInput
from auditor.jsonl import iter_objects, unique_id

__all__ = [
    "ROLES",
    "ClaimMark",
    "ReviewLabel",
    "read_labels",
    "same_person",
    "settle",
]

ROLES = ("first", "second", "adjudicator")
MAX_NAME = 200
# a label written more than this ahead of this machine's clock is refused (clock skew allowed)
FUTURE_SLACK = timedelta(minutes=10)


@dataclass(frozen=True)
class ClaimMark:
    """A reviewer's word on one of the judge's claim verdicts."""

    index: int
    judge_right: bool


@dataclass(frozen=True)
class ReviewLabel:
    """A person's label of one answer, as its line says it."""

    id: str
    hallucinated: bool
    pipeline: str | None = None
    claims: tuple[ClaimMark, ...] = ()
    note: str = ""
    fingerprint: str | None = None  # the run it was labelled on (`review.run_fingerprint`)
    where: str = ""  # file:line, for messages
    reviewer: str | None = None  # who labelled it (the review page asks once)
    labelled_at: str | None = None  # when (ISO 8601 with a zone; checked, see _when)
    # False: outside the run's drawn sample, kept with `--labels-outside-sample keep`: counted
    # in the judge's agreement, never in a rate
    in_sample: bool = True
    role: str = "first"
    check_fingerprint: str | None = None  # the check its claim marks refer to
    question: str | None = None
    answer: str | None = None
    contexts: tuple[str, ...] = ()
    source_id: str | None = None
    spans: tuple[tuple[int, int], ...] = ()
    # False: in the sample but past the first drawn answer nobody labelled (only the drawn
    # order's labelled prefix makes a rate: skipping a drawn answer would let a reviewer pick)
    in_prefix: bool = True
    # every line this label stands for (copies, and the reviews an adjudication settled)
    lines: tuple[str, ...] = field(default=(), compare=False)
    # the labels by role that `settle` made this one from (first, second, adjudicator)
    reviews: tuple[ReviewLabel, ...] = field(default=(), compare=False, repr=False)

    @property
    def counted(self) -> bool:
        """Whether the label counts in a reviewed rate."""
        return self.in_sample and self.in_prefix

    @property
    def labelled_id(self) -> str:
        """`PIPELINE/ID` where the line names its pipeline, else `ID` (the review page's labels
        hold every pipeline's answer to a question, each under the question's id)."""
        return f"{self.pipeline}/{self.id}" if self.pipeline else self.id

    @property
    def line(self) -> str:
        """'line N' of `where`, for messages."""
        return "line " + self.where.rsplit(":", 1)[-1]

    def same_verdict(self, other: ReviewLabel) -> bool:
        return self.hallucinated == other.hallucinated and set(self.claims) == set(other.claims)


def read_labels(
    path: Path, needs: tuple[str, ...] = (), *, now: datetime | None = None
) -> list[ReviewLabel]:
    """Every line of a labels file as a label; BadInput naming file and line on the first bad
    one. `needs`: fields this use requires ("question", "answer"). Spans are checked against
    the line's answer whenever it has one, for every use. `now`: the time no `labelled_at` may
    be ahead of (default: this machine's clock; `verify` gives the statement's)."""
    labels = []
    for where, data in iter_objects(path, "id and hallucinated"):
        labels.append(_label(where, data, needs, now=now))
    if not labels:
        raise BadInput(f"{path}: no labels; one JSON object per line with id and hallucinated")
    return labels


def settle(
    labels: Iterable[ReviewLabel], key: Callable[[ReviewLabel], Hashable] | None = None
) -> list[ReviewLabel]:
    """One label per answer (`key`: by default its labelled id), in first-seen order: copies
    collapse; two different labels of one role refused naming both lines; a second review
    needs a first, by another person, and where the two disagree an adjudicator's label; an
    adjudicator's label counts only there (refused naming its line on an answer without both
    reviews or where they agree, and when the adjudicator made one of the two reviews), and
    is then the answer's."""
    key = key or (lambda label: label.labelled_id)
    groups: dict[Hashable, dict[str, ReviewLabel]] = {}
    # each label's copies' lines, made a tuple once at the end (a tuple grown by one per copy
    # made settling n copies quadratic: a 20 MB labels file took minutes)
    copies: dict[int, list[str]] = {}
    for label in labels:
        roles = groups.setdefault(key(label), {})
        earlier = roles.get(label.role)
        if earlier is None:
            roles[label.role] = label
            copies[id(label)] = [label.where]
        elif earlier.same_verdict(label):
            copies[id(earlier)].append(label.where)
        else:
            who = f" by {label.role} review" if label.role != "first" else ""
            raise BadInput(
                f"{label.where}: answer {label.labelled_id!r} labelled again{who}, differently "
                f"(first on {earlier.line}); keep one label per answer"
                + (" and reviewer role" if label.role != "first" else "")
            )
    settled = []
    for roles in groups.values():
        roles = {
            role: _with_lines(label, tuple(copies[id(label)])) for role, label in roles.items()
        }
        first, second, final = roles.get("first"), roles.get("second"), roles.get("adjudicator")
        if second is not None and first is None:
            raise BadInput(
                f"{second.where}: a second review of answer {second.labelled_id!r} without a "
                "first one in these labels; give both reviewers' labels (one file after the other)"
            )
        if first is not None and second is not None:
            if same_person(first.reviewer, second.reviewer):
                raise BadInput(
                    f"{second.where}: the second review of {second.labelled_id!r} is by "
                    f"{second.reviewer!r}, who made the first ({first.line}"
                    + ("" if first.reviewer == second.reviewer else f", as {first.reviewer!r}")
                    + "); a second review is by another person"
                )
            if first.hallucinated != second.hallucinated and final is None:
                raise BadInput(
                    f"{second.where}: the first ({first.reviewer or 'unnamed'}, {first.line}) and "
                    f"second ({second.reviewer or 'unnamed'}) reviews of "
                    f"{second.labelled_id!r} disagree; settle it on the review page as "
                    "adjudicator and add those labels"
                )
        if final is not None:
            _refuse_adjudication(final, first, second)
        chosen = final or first
        assert chosen is not None
        reviews = tuple(r for r in (first, second, final) if r is not None)
        lines = tuple(w for r in reviews for w in r.lines)
        settled.append(replace(chosen, lines=lines, reviews=reviews))
    return settled


def same_person(one: str | None, other: str | None) -> bool:
    """Whether two reviewers' names are one person's, as people read names: NFKC-normalised
    (a full-width or ligature letter is the letter) and case-folded ("Ana" is "ana"); an
    unnamed reviewer is nobody in particular."""
    if not one or not other:
        return False
    return _person(one) == _person(other)


def _person(name: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def _refuse_adjudication(
    final: ReviewLabel, first: ReviewLabel | None, second: ReviewLabel | None
) -> None:
    """An adjudicator settles a disagreement of the first and second reviews, nothing else,
    and not one of their own."""
    name = final.labelled_id
    if first is None or second is None:
        missing = "first" if first is None else "second"
        raise BadInput(
            f"{final.where}: an adjudicator's label of {name!r} without a {missing} review of "
            "it in these labels; an adjudicator settles only where the first and the second "
            "review disagree: give all three reviews' labels, or drop the line"
        )
    if first.hallucinated == second.hallucinated:
        raise BadInput(
            f"{final.where}: an adjudicator's label of {name!r}, on which the first "
            f"({first.line}) and second ({second.line}) reviews agree; an adjudicator settles "
            "only a disagreement: drop the line"
        )
    for review, role in ((first, "first"), (second, "second")):
        if same_person(final.reviewer, review.reviewer):
            raise BadInput(
                f"{final.where}: {name!r} is adjudicated by {final.reviewer!r}, who made the "
                f"{role} review ({review.line}); nobody adjudicates their own disagreement: "
                "another person settles it"
            )


def _with_lines(label: ReviewLabel, lines: tuple[str, ...]) -> ReviewLabel:
    return replace(label, lines=lines)


def _label(
    where: str, data: dict[str, Any], needs: tuple[str, ...], *, now: datetime | None = None
) -> ReviewLabel:
    ident = unique_id(where, data.get("id"), {})
    hallucinated = data.get("hallucinated")
    if not isinstance(hallucinated, bool):
        raise BadInput(f'{where}: "hallucinated" must be true or false (what people said of it)')
    pipeline = _optional_text(where, data, "pipeline", "a pipeline name")
    role = data.get("role", "first")
    if role not in ROLES:
        raise BadInput(f'{where}: "role" must be one of {", ".join(ROLES)} (not {role!r})')
    texts: dict[str, str | None] = {}
    for name in ("question", "answer"):
        value = data.get(name)
        if value is None and name not in needs:
            texts[name] = None
            continue
        if not isinstance(value, str) or not value.strip():
            raise BadInput(f'{where}: "{name}" must be a non-empty string')
        texts[name] = value
    contexts = data.get("contexts") or []
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise BadInput(f'{where}: "contexts" must be a list of strings (the chunks it saw)')
    source = data.get("source_id")
    note = data.get("note") or ""
    if not isinstance(note, str):
        raise BadInput(f'{where}: "note" must be a string when present')
    return ReviewLabel(
        id=ident,
        hallucinated=hallucinated,
        pipeline=pipeline,
        claims=_claim_marks(where, data.get("claims")),
        note=note,
        fingerprint=_optional_text(where, data, "fingerprint", "the run's fingerprint"),
        where=where,
        reviewer=_name(where, data.get("reviewer")),
        labelled_at=_when(where, data.get("labelled_at"), now=now),
        role=str(role),
        check_fingerprint=_optional_text(
            where, data, "check_fingerprint", "the check's fingerprint"
        ),
        question=texts["question"],
        answer=texts["answer"],
        contexts=tuple(contexts),
        source_id=None if source in (None, "") else str(source),
        spans=_spans(where, data.get("spans"), texts["answer"]),
    )


def _optional_text(where: str, data: dict[str, Any], name: str, what: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f'{where}: "{name}" must be {what} (a non-empty string) when present')
    return value


def _claim_marks(where: str, value: Any) -> tuple[ClaimMark, ...]:
    """The claim marks, each claim once: the same mark twice collapses, a claim marked both
    right and wrong is refused."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BadInput(f'{where}: "claims" must be a list of {{"index": K, "judge_right": bool}}')
    marks: dict[int, ClaimMark] = {}
    for mark in value:
        index = mark.get("index") if isinstance(mark, dict) else None
        right = mark.get("judge_right") if isinstance(mark, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise BadInput(f'{where}: each of "claims" needs "index", a claim number from 0')
        if not isinstance(right, bool):
            raise BadInput(f'{where}: each of "claims" needs "judge_right": true or false')
        if index in marks and marks[index].judge_right != right:
            raise BadInput(
                f"{where}: claim {index} is marked both judge right and judge wrong; keep one"
            )
        marks[index] = ClaimMark(index, right)
    return tuple(marks[k] for k in sorted(marks))


def _spans(where: str, value: Any, answer: str | None) -> tuple[tuple[int, int], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BadInput(f'{where}: "spans" must be a list of {{"start": S, "end": E}}')
    found = []
    for span in value:
        pair = [span.get("start"), span.get("end")] if isinstance(span, dict) else span
        limit = len(answer) if answer is not None else None
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
            and 0 <= pair[0] < pair[1]
            and (limit is None or pair[1] <= limit)
        ):
            length = f"the answer's length ({limit})" if limit is not None else "the answer's"
            raise BadInput(
                f'{where}: each of "spans" must be {{"start": S, "end": E}} or [S, E] with '
                f"0 <= S < E <= {length}: character offsets in its answer"
            )
        found.append((pair[0], pair[1]))
    return tuple(found)


def _name(where: str, value: Any) -> str | None:
    """A reviewer's name: printable text. Control and format characters (a right-to-left
    override would make the shown name read as another's) are refused."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f'{where}: "reviewer" must be a non-empty string when present')
    hidden = [c for c in value if _invisible(c)]
    if hidden:
        raise BadInput(
            f'{where}: "reviewer" holds an invisible or control character '
            f"(U+{ord(hidden[0]):04X}); write the name in plain text"
        )
    if len(value) > MAX_NAME:
        raise BadInput(f'{where}: "reviewer" is {len(value)} characters; {MAX_NAME} at most')
    return value.strip()


# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt): shown as nothing,
# so "Ana" + one of them reads as Ana while comparing as another name. Some are letters or
# marks by category (HANGUL FILLER is Lo, VARIATION SELECTOR-16 and COMBINING GRAPHEME JOINER
# are Mn), so the categories alone do not find them.
_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip


def _invisible(char: str) -> bool:
    """A character a name would show as nothing or as a break: a control, format, private,
    unassigned or line/paragraph-separator character, or a default-ignorable one."""
    if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn"):
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _IGNORABLE)


def _when(where: str, value: Any, *, now: datetime | None = None) -> str | None:
    """`labelled_at` as written, once it is a real ISO 8601 time with a zone, not ahead of `now`
    (default: this machine's clock); kept as UTC ISO text so that times compare as times."""
    if value is None:
        return None
    fix = 'write it as ISO 8601 with a zone, e.g. "2026-12-07T09:30:00Z"'
    if not isinstance(value, str):
        raise BadInput(f'{where}: "labelled_at" must be a time; {fix}')
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise BadInput(f'{where}: "labelled_at" {value!r} is not a time; {fix}') from exc
    if moment.tzinfo is None:
        raise BadInput(f'{where}: "labelled_at" {value!r} has no time zone; {fix}')
    moment = moment.astimezone(UTC)
    if moment > (datetime.now(UTC) if now is None else now) + FUTURE_SLACK:
        raise BadInput(
            f'{where}: "labelled_at" {value!r} is in the future on this machine; fix the '
            "reviewer's clock or the line"
            if now is None
            else f'{where}: "labelled_at" {value!r} is after {now.isoformat()}, the time the '
            "labels are read as of"
        )
    return moment.isoformat().replace("+00:00", "Z")
