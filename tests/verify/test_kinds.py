"""The kind of a statement: about the sources (abstention) or about the world (fact)."""

from __future__ import annotations

import pytest

from auditor.verify.kinds import claim_kind
from tests.verify.statement_kinds import ABSTENTION, FACT, negated_facts, statements


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kinds_on_the_generated_statements(seed: int) -> None:
    """>= 0.98 accuracy for both kinds on >= 300 templated statements (negated facts over many
    subjects and verbs, abstentions in many phrasings), written apart from the classifier."""
    generated = statements(seed)
    assert len(generated) >= 300
    for kind in (ABSTENTION, FACT):
        texts = [text for text, k in generated if k == kind]
        wrong = [text for text in texts if claim_kind(text) != kind]
        assert len(texts) >= 120
        assert 1 - len(wrong) / len(texts) >= 0.98, (kind, wrong[:10])


def test_negated_facts_are_facts() -> None:
    """The error class the rule exists for: an invented negative fact is no abstention."""
    negated = negated_facts(0)
    assert len(negated) >= 90
    wrong = [text for text in negated if claim_kind(text) != FACT]
    assert len(wrong) <= 0.02 * len(negated), wrong


@pytest.mark.parametrize(
    "fact",
    [
        "Refunds are not available in the EU.",
        "The monitor stores no data in the cloud.",
        "The thermostat does not provide any data to advertisers.",
        "Water damage is not covered by the warranty.",
        "There is no fee for early cancellation.",
        "No personal information is collected from children.",
        "It is not possible to pause a subscription.",
        "The policy does not cover pets.",
        "Calls to the helpline are not recorded.",
        "No documents are needed to open a basic account.",
        "The material does not contain latex.",
    ],
)
def test_statements_about_the_world_are_facts(fact: str) -> None:
    assert claim_kind(fact) == FACT


@pytest.mark.parametrize(
    "said",
    [
        "The documents don't say whether the course awards a certificate.",
        "I can't tell from the passages whether the course awards a certificate.",
        "Nothing in the provided text says whether pets are allowed.",
        "No information about the author is given.",
        "There's no information on shipping times.",
        "I don't have a battery-life figure for the Mini.",
        "Unable to answer based on given passages.",
        "We can\u2019t confirm the release date.",
        "The figure isn't in them.",
        "It does not explain how to reset the device.",
        "The normal range is difficult to determine from the passages.",
    ],
)
def test_statements_about_the_sources_are_abstentions(said: str) -> None:
    assert claim_kind(said) == ABSTENTION
