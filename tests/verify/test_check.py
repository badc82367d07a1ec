"""`auditor check` logic with the deterministic FakeJudge: verdicts, sources, faults, resume."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import JudgeConfig
from auditor.errors import BadInput
from auditor.store import read_jsonl
from auditor.testing import FakeEmbedder, FakeJudge
from auditor.verify.check import AnswerItem, check_items, import_answers
from auditor.verify.claims import align_span, combine_chunk_labels, is_refusal

WARRANTY = "The T9 thermostat warranty lasts 2 years from the delivery date."
RETURNS = "Unopened thermostats can be returned within 30 days of delivery."


def _item(
    ident: str, answer: str, chunks: list[str] | None = None, reference: str | None = None
) -> AnswerItem:
    chunks = [WARRANTY, RETURNS] if chunks is None else chunks
    return AnswerItem(
        id=ident,
        question="What are the warranty and return terms?",
        answer=answer,
        reference=reference,
        chunks=[(f"doc#{i}", text) for i, text in enumerate(chunks)],
    )


def _check(
    items: list[AnswerItem], tmp_path: Path, judge: FakeJudge | None = None, **config: object
):  # type: ignore[no-untyped-def]
    judge = judge or FakeJudge()
    summary = check_items(
        items, tmp_path, JudgeConfig.model_validate(config), judge, FakeEmbedder().embed
    )
    return summary, {row["id"]: row for row in read_jsonl(tmp_path / "checks.jsonl")}


def test_each_claim_gets_a_verdict_span_reason_and_its_source(tmp_path: Path) -> None:
    """Supported claims name the chunk that supports them; a wrong number is contradicted."""
    answer = "The T9 thermostat warranty lasts 2 years from the delivery date. Unopened thermostats can be returned within 45 days of delivery. Shipping is free on Mondays."
    summary, rows = _check([_item("a", answer)], tmp_path)
    claims = rows["a"]["claims"]
    assert [c["verdict"] for c in claims] == ["supported", "contradicted", "unsupported"]
    assert claims[0]["supporting_chunks"] == ["doc#0"] and claims[1]["contradicting_chunks"] == [
        "doc#1"
    ]
    assert answer[slice(*claims[1]["span"])] == claims[1]["text"]
    assert claims[0]["reason"] and claims[2]["supporting_chunks"] == []
    assert rows["a"]["faithfulness"] == pytest.approx(1 / 3) and rows["a"]["hallucinated"] is True
    assert rows["a"]["outcome"] == "checked"
    assert rows["a"]["claim_counts"] == {
        "supported": 1,
        "unsupported": 1,
        "contradicted": 1,
        "unverifiable": 0,
    }
    assert summary.hallucination_rate == pytest.approx(2 / 3)
    judge = rows["a"]["judge"]
    assert judge["calls"] > 0 and judge["prompt_tokens"] > 0 and judge["failures"] == 0
    # three claims, each against both chunks: one verification call holds them all
    assert judge["stages"]["statements"]["calls"] == 1 and judge["stages"]["verify"]["calls"] == 1
    assert sum(stage["calls"] for stage in judge["stages"].values()) == judge["calls"]


def test_a_claim_is_only_attributed_to_chunks_that_support_it(tmp_path: Path) -> None:
    """With every chunk checked, sources are exactly the chunks that hold the claim."""
    chunks = [RETURNS, WARRANTY, "Unrelated text about office plants and watering."]
    _, rows = _check([_item("a", WARRANTY, chunks)], tmp_path, chunks_per_claim=3)
    claim = rows["a"]["claims"][0]
    assert claim["supporting_chunks"] == ["doc#1"] and sorted(claim["checked_chunks"]) == [
        "doc#0",
        "doc#1",
        "doc#2",
    ]


def test_context_precision_relevancy_and_recall(tmp_path: Path) -> None:
    """RAGAS context precision over rank order, relevancy from the embedder, recall with a reference."""
    _, rows = _check(
        [
            _item(
                "a",
                WARRANTY,
                [RETURNS, WARRANTY],
                reference="The warranty lasts 2 years from the delivery date.",
            )
        ],
        tmp_path,
    )
    row = rows["a"]
    # the useful chunk ranked second: average precision = precision@2 = 0.5
    assert [v["useful"] for v in row["context_verdicts"]] == [False, True]
    assert row["context_precision"] == pytest.approx(0.5, abs=1e-6)
    assert row["context_precision_with_reference"] is not None
    assert 0.0 < row["answer_relevancy"] <= 1.0 and row["context_recall"] == 1.0
    # one answer statement, matching the one reference statement: F1 = 1, plus similarity
    assert 0.75 < row["answer_correctness"] <= 1.0
    assert row["judge"]["stages"]["answer_correctness"]["calls"] == 2


@pytest.mark.parametrize(
    ("answer", "chunks", "outcome", "faithful"),
    [
        ("", None, "empty_answer", None),
        ("Unable to answer based on the given passages.", None, "refusal", None),
        ("The warranty lasts 2 years.", [], "no_context", 0.0),
    ],
    ids=["empty", "refusal", "no-context"],
)
def test_odd_answers_have_defined_outcomes(
    tmp_path: Path, answer: str, chunks: list[str] | None, outcome: str, faithful: float | None
) -> None:
    """Empty answers and refusals have no claims (a refusal is not a hallucination); no context: unsupported."""
    _, rows = _check([_item("a", answer, chunks)], tmp_path)
    row = rows["a"]
    assert row["outcome"] == outcome and row["faithfulness"] == faithful
    if outcome == "refusal":
        assert row["hallucinated"] is False and row["claims"] == []
    if outcome == "no_context":
        assert {c["verdict"] for c in row["claims"]} == {"unsupported"}


def test_long_answer_is_checked_on_its_first_part(tmp_path: Path) -> None:
    """An enormous answer is marked truncated and its claims are capped."""
    answer = " ".join([WARRANTY] * 200)
    _, rows = _check([_item("a", answer)], tmp_path, max_answer_chars=500, max_claims=3)
    assert rows["a"]["outcome"] == "truncated" and len(rows["a"]["claims"]) <= 3


def test_garbage_judge_output_is_retried_then_unverifiable_never_nan(tmp_path: Path) -> None:
    """Invalid JSON is re-asked; once retries run out the claim is unverifiable and counted."""
    judge = FakeJudge()
    judge.garbage_for = ("verify|",)
    judge.garbage_times = 1
    _, rows = _check([_item("a", WARRANTY)], tmp_path, judge=judge, retries=2)
    assert rows["a"]["claims"][0]["verdict"] == "supported"  # recovered on the retry
    assert rows["a"]["judge"]["failures"] >= 1

    judge = FakeJudge()
    judge.garbage_for = ("verify|",)
    _, rows = _check([_item("b", WARRANTY)], tmp_path / "b", judge=judge, retries=1)
    claim = rows["b"]["claims"][0]
    assert claim["verdict"] == "unverifiable" and rows["b"]["faithfulness"] is None
    assert rows["b"]["claim_counts"]["unverifiable"] == 1
    assert any("verify" in f for f in rows["b"]["judge_failures"])
    assert not any(isinstance(v, float) and math.isnan(v) for v in rows["b"].values())


def test_statement_failure_is_recorded(tmp_path: Path) -> None:
    """When no claims can be extracted the answer is judge_failed, not silently faithful."""
    judge = FakeJudge()
    judge.garbage_for = ("statements|",)
    _, rows = _check([_item("a", WARRANTY)], tmp_path, judge=judge, retries=1)
    assert rows["a"]["outcome"] == "judge_failed" and rows["a"]["faithfulness"] is None


def test_check_resumes_and_refuses_another_judge(tmp_path: Path) -> None:
    """A second check skips answers already checked; a different judge config is refused."""
    items = [_item("a", WARRANTY), _item("b", RETURNS)]
    _check(items[:1], tmp_path)
    judge = FakeJudge()
    summary, rows = _check(items, tmp_path, judge=judge)
    assert sorted(rows) == ["a", "b"] and summary.skipped == 1 and summary.answers == 2
    assert all(not call.key.endswith("|a") for call in judge.calls)
    with pytest.raises(BadInput, match="another judge configuration"):
        _check(items, tmp_path, claims_per_call=2)


def test_claim_helpers() -> None:
    """Refusals are short declines; spans find the source sentence; chunk labels combine."""
    assert is_refusal("Unable to answer based on given passages.")
    assert not is_refusal(
        "The passages do not mention a fee. " + "The warranty lasts 2 years. " * 20
    )
    answer = "It costs $179. Returns take 30 days."
    assert align_span("Returns take 30 days.", answer) == (15, 36)
    assert align_span("The return window is 30 days", answer) == (15, 36)
    assert combine_chunk_labels({"a": "unknown", "b": "true"}) == ("supported", ["b"], [])
    assert combine_chunk_labels({"a": "false", "b": "unknown"}) == ("contradicted", [], ["a"])
    assert combine_chunk_labels({"a": "error", "b": "error"}) == ("unverifiable", [], [])
    assert combine_chunk_labels({"a": "error", "b": "unknown"}) == ("unsupported", [], [])


def test_import_answers_validates_lines(tmp_path: Path) -> None:
    """Answers from another system: each bad line is named; good files become a run dir."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "q", "contexts": "not a list", "answer": "a"}\n')
    with pytest.raises(BadInput, match=r"bad.jsonl:1: \"contexts\" must be a list of strings"):
        import_answers(bad, tmp_path / "out")
    good = tmp_path / "good.jsonl"
    good.write_text(
        json.dumps({"id": 7, "question": "q", "contexts": [WARRANTY], "answer": "a"}) + "\n"
    )
    items = import_answers(good, tmp_path / "out")
    assert items[0].id == "7" and items[0].chunks == [("context-1", WARRANTY)]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["kind"] == "answers" and manifest["load_regime"] == {"mode": "not measured"}
    good.write_text(json.dumps({"id": 8, "question": "q", "contexts": [], "answer": "b"}) + "\n")
    with pytest.raises(BadInput, match="answers from another file"):
        import_answers(good, tmp_path / "out")


def test_cli_check_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`auditor check --answers F --out D` prints verdict totals; a missing run dir is exit 2."""
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    answers = tmp_path / "a.jsonl"
    answers.write_text(
        json.dumps(
            {
                "id": "x",
                "question": "q",
                "contexts": [WARRANTY],
                "answer": WARRANTY + " It is blue.",
            }
        )
        + "\n"
    )
    result = CliRunner().invoke(
        cli, ["check", "--answers", str(answers), "--out", str(tmp_path / "o"), "-q"]
    )
    assert result.exit_code == 0, result.stderr
    assert "claims 2: 1 supported, 1 unsupported, 0 contradicted, 0 unverifiable" in result.stdout
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "nope"), "-q"])
    assert result.exit_code == 2 and "records.jsonl: missing" in result.stderr


class _Credulous(FakeJudge):
    """Calls every claim true and invents its evidence (what small judges do)."""

    @staticmethod
    def _verdict(claim: str, passages: list[str]) -> dict[str, str]:
        return {
            "claim": claim,
            "evidence": "The passage clearly confirms this statement in full.",
            "label": "true",
        }


def test_support_needs_evidence_quoted_from_the_passage(tmp_path: Path) -> None:
    """A 'true' whose quoted evidence is not in the passage is not accepted as support."""
    _, rows = _check([_item("a", "Shipping is free on Mondays.")], tmp_path, judge=_Credulous())
    claim = rows["a"]["claims"][0]
    assert claim["verdict"] == "unsupported" and claim["supporting_chunks"] == []
    assert claim["reason"].startswith("quoted evidence is not in the passages")


def test_evidence_matching() -> None:
    """Quotes match word runs of the passage, tolerant of punctuation and case."""
    from auditor.verify.prompts import evidence_in_passage

    passage = "Returns: unopened items can be returned within 30 days of delivery. Fees apply."
    assert evidence_in_passage("Unopened items can be returned within 30 days of delivery", passage)
    assert not evidence_in_passage("Items can be returned within 90 days", passage)
    assert not evidence_in_passage("none", passage)
    # a label the judge puts before its quote, and one dropped word, still match
    assert evidence_in_passage("Passage 2: unopened items can be returned within 30 days", passage)
    assert evidence_in_passage("Unopened items may be returned within 30 days of delivery", passage)
    # scattered common words are no quote; nor is a quote with another figure
    assert not evidence_in_passage("items can be within days of apply", passage)
    assert not evidence_in_passage(
        "Unopened items can be returned within 31 days of delivery", passage
    )


def test_evidence_sources_names_the_passages_quoted() -> None:
    """Two quoted sentences from two passages name both; one invented sentence voids the quote."""
    from auditor.verify.prompts import evidence_sources

    passages = [WARRANTY, RETURNS, "Office plants need water weekly."]
    assert evidence_sources(RETURNS, passages) == [1]
    assert evidence_sources(f"{RETURNS} {WARRANTY}", passages) == [0, 1]
    assert evidence_sources(f"{RETURNS} Refunds are paid in cash.", passages) is None
    assert evidence_sources("none", passages) is None


class _Joiner(FakeJudge):
    """Supports every claim by quoting one sentence of each passage it was shown."""

    @staticmethod
    def _verdict(claim: str, passages: list[str]) -> dict[str, str]:
        return {"claim": claim, "evidence": " ".join(passages), "label": "true"}


def test_a_claim_supported_jointly_names_both_chunks(tmp_path: Path) -> None:
    """A claim whose support spans two passages is attributed to both chunks quoted."""
    answer = "The warranty lasts 2 years and unopened thermostats can be returned within 30 days."
    _, rows = _check([_item("a", answer)], tmp_path, judge=_Joiner())
    claim = rows["a"]["claims"][0]
    assert claim["verdict"] == "supported" and sorted(claim["supporting_chunks"]) == [
        "doc#0",
        "doc#1",
    ]


def test_missing_details() -> None:
    """Figures and names absent from the passage are listed; formatting of numbers is ignored."""
    from auditor.verify.claims import missing_details

    passage = "Returns: unopened items can be returned within 30 days. Kestrel charges 15% on 1,299 orders."
    assert missing_details("Unopened items can be returned within 30 days.", passage) == []
    assert missing_details("Items can be returned within 45 days at Walmart.", passage) == [
        "45",
        "Walmart",
    ]
    assert missing_details("Kestrel charges 15% on 1299 orders.", passage) == []
    # references to the sources and list numbering are not details of the claim
    assert missing_details("3. Items can be returned within 30 days (Passage 2).", passage) == []
    assert missing_details("As passages 1 and 3 say, Kestrel charges 15% [4].", passage) == []
    assert missing_details("Passage 2 says 45 days.", passage) == ["45"]


class _Believer(FakeJudge):
    """Quotes a real sentence but calls everything true."""

    @staticmethod
    def _verdict(claim: str, passages: list[str]) -> dict[str, str]:
        return {"claim": claim, "evidence": passages[-1], "label": "true"}


def test_a_passage_cannot_support_a_figure_it_never_mentions(tmp_path: Path) -> None:
    """Even when the judge says true, a claim with a number absent from the chunk is not supported."""
    _, rows = _check(
        [_item("a", "Unopened thermostats can be returned within 45 days of delivery.")],
        tmp_path,
        judge=_Believer(),
    )
    claim = rows["a"]["claims"][0]
    assert claim["verdict"] == "unsupported" and "never mention 45" in claim["reason"]
