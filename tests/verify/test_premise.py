"""The premise check: a listed claim the answer does not make is a listing error."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from auditor.config import JudgeConfig
from auditor.store import read_jsonl
from auditor.testing import FakeEmbedder, FakeJudge
from auditor.verify.answers import AnswerItem
from auditor.verify.check import CHECK_MANIFEST, check_items
from auditor.verify.premise import premise_prompt, stated

KETTLE = (
    "The Brio kettle boils 1.7 litres in four minutes. It switches itself off when the water boils."
)


class ListingJudge(FakeJudge):
    """Lists the answer's sentences plus `extra` claims (what a small judge takes from the
    question, or an abstention turned into a fact)."""

    def __init__(self, extra: list[str]) -> None:
        super().__init__()
        self.extra = extra

    def _answer(self, call: Any) -> dict[str, Any]:
        answer = super()._answer(call)
        if "claims" in answer:
            answer["claims"] = answer["claims"] + self.extra
        return answer


def _item(answer: str, question: str = "Does the Brio kettle have a keep-warm mode?") -> AnswerItem:
    return AnswerItem(
        id="a", question=question, answer=answer, reference=None, chunks=[("doc#0", KETTLE)]
    )


def _check(tmp_path: Path, judge: FakeJudge, answer: str, **config: object) -> dict[str, Any]:
    # the premise check is the listed claims' (the default checks sentences as written)
    settings = JudgeConfig.model_validate(
        {"metrics": ["faithfulness"], "claims": "listed", **config}
    )
    check_items([_item(answer)], tmp_path, settings, judge, FakeEmbedder().embed)
    return next(iter(read_jsonl(tmp_path / "checks.jsonl")))


def test_a_claim_taken_from_the_question_is_dropped_and_counted(tmp_path: Path) -> None:
    """The answer never says the kettle has a keep-warm mode: the listed claim is a listing
    error, recorded with the judge's word and counted in check.json; the answer's own
    sentence is checked, and the correct answer is not flagged."""
    judge = ListingJudge(["The Brio kettle has a keep-warm mode."])
    row = _check(tmp_path, judge, "The Brio kettle boils 1.7 litres in four minutes.")
    texts = [c["text"] for c in row["claims"]]
    assert "The Brio kettle has a keep-warm mode." not in texts
    assert texts == ["The Brio kettle boils 1.7 litres in four minutes."]
    assert row["hallucinated"] is False
    assert row["listed_claims"] == 2
    [error] = row["listing_errors"]
    assert error["text"] == "The Brio kettle has a keep-warm mode."
    assert error["written"] == "unknown" and error["probabilities"]["true"] < 0.5
    manifest = json.loads((tmp_path / CHECK_MANIFEST).read_text())
    assert manifest["listing"] == {"listed_claims": 2, "listing_errors": 1}
    # one call: the claim the answer writes word for word needs none
    premise_calls = [c for c in judge.calls if c.key.stage == "premise"]
    assert len(premise_calls) == 1 and "keep-warm" in premise_calls[0].prompt


def test_without_the_premise_check_the_invented_claim_flags_a_correct_answer(
    tmp_path: Path,
) -> None:
    """The same answer with the check off: the claim from the question is checked against the
    chunk, which does not state it, and the correct answer is flagged (what the check
    prevents)."""
    judge = ListingJudge(["The Brio kettle has a keep-warm mode."])
    row = _check(
        tmp_path,
        judge,
        "The Brio kettle boils 1.7 litres in four minutes.",
        premise_check=False,
    )
    assert "The Brio kettle has a keep-warm mode." in [c["text"] for c in row["claims"]]
    assert row["hallucinated"] is True
    assert "listing_errors" not in row
    assert not [c for c in judge.calls if c.key.stage == "premise"]


def test_a_dropped_claim_is_replaced_by_its_sentence_as_written(tmp_path: Path) -> None:
    """An abstention listed as a fact ("the kettle has no timer") is dropped and the sentence
    it came from is checked as written, as the abstention it is; the answer is not flagged."""
    abstention = "I can't tell from the passages whether the Brio kettle has a timer."
    answer = f"The Brio kettle boils 1.7 litres in four minutes. {abstention}"

    class Rewriting(FakeJudge):
        def _answer(self, call: Any) -> dict[str, Any]:
            answer = super()._answer(call)
            if "claims" in answer:
                answer["claims"] = [answer["claims"][0], "The Brio kettle does not have a timer."]
            return answer

        def _label(self, prompt: str) -> str:  # type: ignore[override]
            if (
                prompt.startswith("You check whether an answer makes a claim")
                and "timer" in (prompt.rsplit("Claim: ", 1)[1])
            ):
                return "unknown"
            return FakeJudge._label(prompt)

    row = _check(tmp_path, Rewriting(), answer)
    kinds = [(c["text"], c["kind"], c["origin"], c["verdict"]) for c in row["claims"]]
    assert kinds == [
        ("The Brio kettle boils 1.7 litres in four minutes.", "fact", "judge", "supported"),
        (abstention, "abstention", "sentence", "supported"),
    ]
    assert row["hallucinated"] is False
    [error] = row["listing_errors"]
    assert error["text"] == "The Brio kettle does not have a timer."
    assert error["checked_instead"] == abstention


def test_a_refusal_claims_its_own_sentences(tmp_path: Path) -> None:
    """A short answer that only abstains is a refusal: its sentences are its claims, as
    written (no claim list to misread), each an abstention."""
    answer = "I can't tell from the passages whether the Brio kettle has a timer."
    judge = ListingJudge(["The Brio kettle does not have a timer."])
    row = _check(tmp_path, judge, answer)
    assert row["outcome"] == "refusal"
    assert [(c["text"], c["kind"]) for c in row["claims"]] == [(answer, "abstention")]
    assert not [c for c in judge.calls if c.key.stage in {"claims", "premise"}]


def test_only_facts_the_answer_does_not_write_are_asked() -> None:
    """Words the answer writes (negations included) make a claim its own; a word it lacks
    (the question's, an added "not") sends the claim to the judge."""
    from auditor.verify.extraction import written_in

    answer = "It is important to note that diet does not significantly affect oily skin."
    assert written_in("Diet does not significantly affect oily skin.", answer)
    assert not written_in("Diet significantly affects oily skin, not genes.", "Diet affects skin.")
    assert not written_in(
        "The trial is not available for 30 days.", "The trial is available for 30 days."
    )
    assert not written_in("The kettle has a keep-warm mode.", "The kettle boils 1.7 litres.")
    assert not written_in(
        "The course does not award a certificate.",
        "I can't tell from the passages whether the course awards a certificate.",
    )


def test_an_uncovered_abstention_sentence_is_checked_as_an_abstention(tmp_path: Path) -> None:
    """A sentence saying the sources lack something, which no listed claim carries, is checked
    as written, as an abstention (before: skipped, so a wrong abstention went unchecked)."""
    answer = (
        "The Brio kettle boils 1.7 litres in four minutes. The passages do not say whether "
        "the Brio kettle switches itself off when the water boils."
    )
    judge = FakeJudge()
    judge.claims_listed = 1
    row = _check(tmp_path, judge, answer)
    kinds = [(c["kind"], c["origin"], c["verdict"]) for c in row["claims"]]
    # the chunk says it switches itself off: the abstention is contradicted
    assert kinds == [("fact", "judge", "supported"), ("abstention", "sentence", "contradicted")]
    assert row["hallucinated"] is True


def test_stated_reads_the_likeliest_label() -> None:
    def logprobs(true: float, false: float, unknown: float) -> dict[str, float]:
        return {"true": math.log(true), "false": math.log(false), "unknown": math.log(unknown)}

    assert stated(logprobs(0.4, 0.3, 0.3), "true")[0] is True
    assert stated(logprobs(0.3, 0.3, 0.4), "unknown")[0] is False
    assert stated(logprobs(0.3, 0.45, 0.25), "false")[0] is False
    # without log-probabilities the written label decides; an unreadable reply keeps the claim
    assert stated(None, "unknown")[0] is False
    assert stated(None, "true")[0] is True
    assert stated(None, "")[0] is True


def test_the_prompt_puts_the_claim_last() -> None:
    prompt = premise_prompt("Q?", "An answer.", "A claim.")
    assert prompt.endswith("Claim: A claim.\nAnswer:")
    assert "Question: Q?\nAnswer given: An answer." in prompt


def test_sentence_mode_checks_the_answer_as_written_without_listing(tmp_path: Path) -> None:
    """claims = "sentences": no listing call and no premise call; the claims are the answer's
    statements as written (the list marker gone, the header skipped), each checked against
    the chunk; the judge's invented claim never appears, and a wrong sentence is flagged."""
    judge = ListingJudge(["The Brio kettle has a keep-warm mode."])
    answer = (
        "Here is what the passage says:\n"
        "- The Brio kettle boils 1.7 litres in four minutes.\n"
        "- The Brio kettle has a ten-year warranty on its heating element."
    )
    row = _check(tmp_path, judge, answer, claims="sentences")
    stages = {c.key.stage for c in judge.calls}
    assert "claims" not in stages and "premise" not in stages
    assert [c["text"] for c in row["claims"]] == [
        "The Brio kettle boils 1.7 litres in four minutes.",
        "The Brio kettle has a ten-year warranty on its heating element.",
    ]
    assert [c["verdict"] for c in row["claims"]] == ["supported", "unsupported"]
    assert row["hallucinated"] is True
    assert "listed_claims" not in row
    assert "listing" not in json.loads((tmp_path / CHECK_MANIFEST).read_text())
