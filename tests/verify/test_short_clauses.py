"""Short clauses (fewer than four content words): which the `short_clauses` rule checks."""

from __future__ import annotations

import pytest

from auditor.config import JudgeConfig
from auditor.verify.answers import AnswerItem
from auditor.verify.extraction import is_short_clause, short_clause_is_claim, uncovered_sentences
from auditor.verify.listing import sentence_claims

ANSWER = (
    "Ferries leave the north pier every forty minutes during summer. "
    "48 degrees and sunny at 9am; hope this helps. It was not."
)


@pytest.mark.parametrize(
    ("clause", "facts", "every"),
    [
        ("48 degrees and sunny at 9am.", True, True),  # a figure
        ("Opened in March.", True, True),  # a date
        ("Founded by Ingrid Halvorsen.", True, True),  # a name past the first word
        ("Ferries don't run.", True, True),  # a negation
        ("Hope this helps.", False, True),
        ("Good question.", False, True),
        ("Yes to both.", False, False),  # no content word, no figure
        ("It was not.", False, False),
        ("1.", False, False),  # a list number split off its item
        ("2)", False, False),
    ],
)
def test_the_facts_rule_checks_figures_dates_names_and_negations(
    clause: str, facts: bool, every: bool
) -> None:
    assert is_short_clause(clause)
    assert short_clause_is_claim(clause, "facts") is facts
    assert short_clause_is_claim(clause, "all") is every
    assert short_clause_is_claim(clause, "skipped") is False


def test_a_four_word_clause_is_not_short() -> None:
    assert not is_short_clause("Ferries leave the north pier every forty minutes.")


def test_skipped_is_the_rule_before_and_facts_adds_the_weather() -> None:
    before = uncovered_sentences(ANSWER, [], "weather?")
    facts = uncovered_sentences(ANSWER, [], "weather?", "facts")
    every = uncovered_sentences(ANSWER, [], "weather?", "all")
    assert before == ["Ferries leave the north pier every forty minutes during summer."]
    assert "48 degrees and sunny at 9am." in facts and "Hope this helps." not in facts
    assert "Hope this helps." in every
    assert set(before) < set(facts) < set(every)


def test_a_listed_claim_that_carries_the_short_clause_leaves_it_out() -> None:
    carried = uncovered_sentences(
        "It was 48 degrees at 9am.", ["It was 48 degrees at 9am."], "weather?", "facts"
    )
    assert carried == []


def test_the_setting_reaches_sentence_claims() -> None:
    item = AnswerItem(
        id="a", question="weather?", answer=ANSWER, reference=None, chunks=[("c1", "text")]
    )
    skipped = sentence_claims(item, JudgeConfig(support_threshold=0.3))
    facts = sentence_claims(item, JudgeConfig(support_threshold=0.3, short_clauses="facts"))
    assert len(facts) == len(skipped) + 1
    assert any("48 degrees" in c.text for c in facts)
    assert not any("48 degrees" in c.text for c in skipped)
