"""Does the answer make this claim? Each listed claim checked against its own answer first.

A claim list is the judge's reading of the answer, and a small judge misreads: it lists what
the question asked ("Does the kettle have a keep-warm mode?" -> "The kettle has a keep-warm
mode."), turns an abstention into a fact ("I can't tell whether the course awards a
certificate" -> "The course does not award a certificate."), or flips a meaning. A claim the
answer does not make is a listing error, not the answer's error: it is dropped (recorded in
checks.jsonl and counted in check.json) and the answer sentence it was taken from is checked
as written instead, so nothing the answer said goes unchecked.

The answer is the premise: one short label per listed claim, read from the first token's
log-probabilities like the claim-chunk labels. The question and answer come first and the claim
last, so every claim of one answer shares the prompt prefix. A claim is kept unless a label
other than "true" is the likeliest: no threshold is fitted here. Only listed fact claims whose
words the answer does not all write are asked (`pipeline._needs_premise_check`): the 1.5B judge
labels a claim copied from the answer, or an abstention, "unknown" about as often as not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from auditor.claim_rows import Claim
from auditor.verify.base import CallKey, JudgeCall
from auditor.verify.entailment import label_probabilities

__all__ = ["premise_call", "premise_prompt", "stated"]

_INSTRUCTIONS = """You check whether an answer makes a claim.
Answer with one word:
- true: the answer says what the claim says (in any words). The question only tells what \
the answer's words such as "it" or "yes" refer to.
- false: the answer says something different or the opposite.
- unknown: the answer does not say it. For example the claim repeats what the question asks, \
or the claim states a fact where the answer says it cannot tell."""


def premise_prompt(question: str, answer: str, claim: str) -> str:
    """The prompt asking whether `answer` (to `question`) makes `claim`; the claim comes last."""
    return (
        f"{_INSTRUCTIONS}\n\nPassage:\nQuestion: {question.strip()}\n"
        f"Answer given: {answer.strip()}\n\nClaim: {claim.strip()}\nAnswer:"
    )


def premise_call(item_id: str, index: int, question: str, answer: str, claim: Claim) -> JudgeCall:
    """One label call: does the answer make listed claim number `index`?"""
    key = CallKey("premise", item_id, (index,))
    # max_tokens 1: the label is read from the first token's log-probabilities
    return JudgeCall(key, premise_prompt(question, answer, claim.text), None, 1, logprobs=20)


def stated(top_logprobs: Mapping[str, float] | None, text: str) -> tuple[bool, dict[str, Any]]:
    """(whether the answer makes the claim, what the judge said) from a premise reply.

    Kept unless "false" or "unknown" is likelier than "true" (without log-probabilities:
    unless the written label is one of them); an unreadable reply keeps the claim.
    """
    probabilities, written = label_probabilities(top_logprobs, text)
    if probabilities is not None:
        keep = probabilities["true"] >= max(probabilities["false"], probabilities["unknown"])
    else:
        keep = written not in {"false", "unknown"}
    said = {
        "probabilities": None
        if probabilities is None
        else {label: round(value, 4) for label, value in probabilities.items()},
        "written": written,
    }
    return keep, said
