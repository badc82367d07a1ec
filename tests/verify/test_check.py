"""`auditor check` logic with the deterministic FakeJudge: verdicts, sources, faults, resume."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import JudgeConfig
from auditor.errors import BadInput
from auditor.store import read_jsonl
from auditor.testing import FakeEmbedder, FakeJudge
from auditor.verify.check import AnswerItem, check_items, import_answers
from auditor.verify.claims import align_span, is_refusal

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
    summary, rows = _check([_item("a", answer)], tmp_path, claims="listed", chunks_per_claim=2)
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
    # one claims call; three claims, each against both chunks: six one-token label calls
    assert judge["stages"]["claims"]["calls"] == 1 and judge["stages"]["entailment"]["calls"] == 6
    # the 45-day claim: its figure is in no chunk, so no chunk can support it (p 0)
    assert [c["p_supported"] for c in claims] == pytest.approx([0.9, 0.0, 0.05])
    assert rows["a"]["support_score"] == 0.0
    assert claims[0]["evidence"] == WARRANTY
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
        ("Unable to answer based on the given passages.", None, "refusal", 1.0),
        ("The warranty lasts 2 years.", [], "no_context", 0.0),
    ],
    ids=["empty", "refusal", "no-context"],
)
def test_odd_answers_have_defined_outcomes(
    tmp_path: Path, answer: str, chunks: list[str] | None, outcome: str, faithful: float | None
) -> None:
    """Empty answers have no claims; a refusal claims only what the sources lack (not a
    hallucination while the chunks do not give it); no context: unsupported."""
    _, rows = _check([_item("a", answer, chunks)], tmp_path)
    row = rows["a"]
    assert row["outcome"] == outcome and row["faithfulness"] == faithful
    if outcome == "refusal":
        assert row["hallucinated"] is False
        assert {(c["kind"], c["verdict"]) for c in row["claims"]} == {("abstention", "supported")}
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
    judge.garbage_for = ("entailment",)
    judge.garbage_times = 1
    _, rows = _check([_item("a", WARRANTY)], tmp_path, judge=judge, retries=2)
    assert rows["a"]["claims"][0]["verdict"] == "supported"  # recovered on the retry
    assert rows["a"]["judge"]["failures"] >= 1

    judge = FakeJudge()
    judge.garbage_for = ("entailment",)
    _, rows = _check([_item("b", WARRANTY)], tmp_path / "b", judge=judge, retries=1)
    claim = rows["b"]["claims"][0]
    assert claim["verdict"] == "unverifiable" and rows["b"]["faithfulness"] is None
    assert rows["b"]["claim_counts"]["unverifiable"] == 1
    assert any("entailment" in f for f in rows["b"]["judge_failures"])
    assert not any(isinstance(v, float) and math.isnan(v) for v in rows["b"].values())


def test_statement_failure_is_recorded(tmp_path: Path) -> None:
    """When no claims can be extracted the answer is judge_failed, not silently faithful."""
    judge = FakeJudge()
    judge.garbage_for = ("claims",)
    _, rows = _check([_item("a", WARRANTY)], tmp_path, judge=judge, retries=1, claims="listed")
    assert rows["a"]["outcome"] == "judge_failed" and rows["a"]["faithfulness"] is None


def test_check_resumes_and_refuses_another_judge(tmp_path: Path) -> None:
    """A second check skips answers already checked; a different judge config is refused."""
    items = [_item("a", WARRANTY), _item("b", RETURNS)]
    _check(items[:1], tmp_path)
    judge = FakeJudge()
    summary, rows = _check(items, tmp_path, judge=judge)
    assert sorted(rows) == ["a", "b"] and summary.skipped == 1 and summary.answers == 2
    assert all(call.key.item != "a" for call in judge.calls)
    with pytest.raises(BadInput, match="another judge configuration"):
        _check(items, tmp_path, support_threshold=0.7)
    # engine speed settings write the same verdicts: a check resumes across them
    items.append(_item("c", WARRANTY))
    generator = JudgeConfig().generator.model_dump(mode="json")
    summary, rows = _check(
        items, tmp_path, generator=generator | {"cpu_threads": "0-7", "kv_cache_gib": 4}
    )
    assert sorted(rows) == ["a", "b", "c"] and summary.skipped == 2


def test_claim_helpers() -> None:
    """Refusals are short declines; spans find the source sentence; chunk labels combine."""
    assert is_refusal("Unable to answer based on given passages.")
    assert not is_refusal(
        "The passages do not mention a fee. " + "The warranty lasts 2 years. " * 20
    )
    # a short negated fact, or a guess beside an abstention, is no refusal
    assert not is_refusal("The plan does not include international calls.")
    assert not is_refusal("I couldn't find the price. It is probably around $50.")
    assert is_refusal("I couldn't find the price in the documents. Sorry!")
    answer = "It costs $179. Returns take 30 days."
    assert align_span("Returns take 30 days.", answer) == (15, 36)
    assert align_span("The return window is 30 days", answer) == (15, 36)


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
                "answer": WARRANTY + " The thermostat casing is painted bright blue.",
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


class _Believer(FakeJudge):
    """Calls every claim true, confidently (what small judges do)."""

    @staticmethod
    def _label(prompt: str) -> str:
        return "true"


def test_a_chunk_cannot_support_a_figure_it_never_mentions(tmp_path: Path) -> None:
    """Even when the judge says true, a claim with a number absent from the chunk is not supported."""
    _, rows = _check(
        [_item("a", "Unopened thermostats can be returned within 45 days of delivery.")],
        tmp_path,
        judge=_Believer(),
    )
    claim = rows["a"]["claims"][0]
    assert claim["verdict"] == "unsupported" and "never mention 45" in claim["reason"]
    assert claim["p_supported"] == 0.0


def test_without_log_probabilities_the_written_label_decides(tmp_path: Path) -> None:
    """A server that returns no log-probabilities: verdicts stand, p_supported is null, no NaN."""
    judge = FakeJudge()
    judge.logprobs = False
    answer = "The T9 thermostat warranty lasts 2 years from the delivery date. Shipping is free on Mondays."
    _, rows = _check([_item("a", answer)], tmp_path, judge=judge, claims="listed")
    claims = rows["a"]["claims"]
    assert [c["verdict"] for c in claims] == ["supported", "unsupported"]
    assert [c["p_supported"] for c in claims] == [None, None]
    assert rows["a"]["support_score"] is None and rows["a"]["hallucinated"] is True


def test_the_threshold_decides_support_and_is_recorded(tmp_path: Path) -> None:
    """A claim is supported when p_supported reaches support_threshold; check.json records it."""
    _, rows = _check([_item("a", WARRANTY)], tmp_path / "low", support_threshold=0.85)
    assert rows["a"]["claims"][0]["verdict"] == "supported"
    _, rows = _check([_item("a", WARRANTY)], tmp_path / "high", support_threshold=0.95)
    assert rows["a"]["claims"][0]["verdict"] == "unsupported"
    manifest = json.loads((tmp_path / "high" / "check.json").read_text())
    assert manifest["judge"]["config"]["support_threshold"] == 0.95


def test_an_abstention_holds_unless_a_chunk_gives_what_it_says_is_missing(tmp_path: Path) -> None:
    """'The documents do not say X' is supported when no chunk gives X, contradicted when one does."""
    honest = "The documents do not say anything about an employee referral bonus."
    wrong = "The documents do not say how long the T9 thermostat warranty lasts."
    _, rows = _check([_item("a", honest), _item("b", wrong)], tmp_path)
    assert [(c["kind"], c["verdict"]) for c in rows["a"]["claims"]] == [("abstention", "supported")]
    assert rows["a"]["hallucinated"] is False
    claim = rows["b"]["claims"][0]
    assert (claim["kind"], claim["verdict"]) == ("abstention", "contradicted")
    assert claim["contradicting_chunks"] == ["doc#0"]


def test_claims_that_repeat_the_question_are_dropped(tmp_path: Path) -> None:
    """A judge that copies the user's question into the claims: those claims are not the answer's."""

    class _Echo(FakeJudge):
        def _answer(self, call: Any) -> dict[str, Any]:
            if "claims" in (call.schema or {}).get("properties", {}):
                return {
                    "claims": [
                        "Something came up and I need to cancel the visit.",
                        "Will I be charged?",
                        WARRANTY,
                    ]
                }
            return super()._answer(call)

    item = _item("a", WARRANTY)
    item.question = "Something came up and I need to cancel the visit. Will I be charged?"
    _, rows = _check([item], tmp_path, judge=_Echo())
    assert [c["text"] for c in rows["a"]["claims"]] == [WARRANTY]


def test_claims_prompt_carries_the_question_and_the_rules() -> None:
    """The judge sees the question as context and is told to make claims self-contained."""
    from auditor.verify.extraction import claims_prompt, claims_schema

    prompt = claims_prompt("Will I be charged for cancelling tomorrow?", "No, you will not.")
    assert prompt.endswith(
        "Question: Will I be charged for cancelling tomorrow?\nAnswer: No, you will not.\nClaims:"
    )
    assert "yes/no answer" in prompt and "Never list what the question says" in prompt
    schema = claims_schema(5)
    assert schema["properties"]["claims"]["maxItems"] == 5
    assert schema["properties"]["claims"]["items"]["maxLength"] == 300


@pytest.mark.parametrize(
    "claim",
    [
        "The documents do not say anything about an employee referral bonus.",
        "The provided passages don't mention the price of the T9.",
        "The price is not mentioned in the provided context.",
        "I couldn't find the restocking fee in the documents.",
        "There is no information about parental leave for contractors.",
        "The context does not specify how long the warranty lasts.",
        "There's nothing about an employee referral bonus in the information I have.",
        "The bonus amount isn't mentioned anywhere.",
    ],
)
def test_abstentions_in_any_wording_are_recognised(claim: str) -> None:
    from auditor.verify.extraction import claim_kind

    assert claim_kind(claim) == "abstention"


@pytest.mark.parametrize(
    "claim",
    [
        "The T9 Pro supports up to 10 remote sensors.",
        "Cancelling does not cost anything if done 24 hours ahead.",
        "The warranty does not cover water damage.",
        "Employees cannot carry over more than 5 days of leave.",
    ],
)
def test_facts_with_negations_are_not_abstentions(claim: str) -> None:
    from auditor.verify.extraction import claim_kind

    assert claim_kind(claim) == "fact"


def test_question_echoes() -> None:
    from auditor.verify.extraction import is_question_echo

    question = "Something came up and I need to cancel my appointment. Will I be charged?"
    assert is_question_echo("Will I be charged?", question, "No.")
    assert is_question_echo(
        "Something came up and I need to cancel my appointment.", question, "No."
    )
    assert not is_question_echo(
        "Cancelling the appointment is free of charge.", question, "No, it is free."
    )
    # the answer may repeat the question's words: then they are its claim
    answer = "Something came up and you need to cancel your appointment: that is free."
    assert not is_question_echo(
        "Something came up and I need to cancel my appointment.",
        question,
        answer.replace("you", "I").replace("your", "my"),
    )


def test_label_probabilities_from_first_token_logprobs() -> None:
    """Label tokens are matched case- and space-insensitively and renormalised over the labels."""
    import math as m

    from auditor.verify.entailment import label_probabilities

    top = {
        "True": m.log(0.6),
        " true": m.log(0.1),
        "False": m.log(0.2),
        "The": m.log(0.05),
        "Unknown": m.log(0.05),
    }
    probabilities, written = label_probabilities(top, "True")
    assert written == "true" and probabilities is not None
    assert probabilities["true"] == pytest.approx(0.7 / 0.95)
    assert probabilities["false"] == pytest.approx(0.2 / 0.95)
    assert label_probabilities(None, "false") == (None, "false")
    assert label_probabilities({"The": -0.1}, "The") == (None, None)


def test_claim_decision() -> None:
    """Best chunk decides support; a contradicting chunk makes it contradicted; a veto is zero."""
    from auditor.verify.entailment import ChunkJudgement, claim_decision

    def judged(
        chunk: str, p_true: float, p_false: float, vetoed: list[str] | None = None
    ) -> ChunkJudgement:
        probabilities = {"true": p_true, "false": p_false, "unknown": 1 - p_true - p_false}
        return ChunkJudgement(chunk, probabilities, None, vetoed or [])

    assert claim_decision([judged("a", 0.2, 0.1), judged("b", 0.7, 0.1)], "fact", 0.5) == (
        "supported",
        0.7,
        ["b"],
        [],
    )
    assert claim_decision([judged("a", 0.2, 0.7), judged("b", 0.3, 0.1)], "fact", 0.5) == (
        "contradicted",
        0.3,
        [],
        ["a"],
    )
    assert claim_decision([judged("a", 0.2, 0.1)], "fact", 0.5) == ("unsupported", 0.2, [], [])
    assert claim_decision([judged("a", 0.9, 0.0, ["45"])], "fact", 0.5) == (
        "unsupported",
        0.0,
        [],
        [],
    )
    assert claim_decision([judged("a", 0.6, 0.3)], "fact", 0.65)[0] == "unsupported"
    # an abstention: contradicted by a chunk more likely than not to give what is missing
    verdict, p, _, against = claim_decision(
        [judged("a", 0.3, 0.7), judged("b", 0.9, 0.1)], "abstention", 0.5
    )
    assert verdict == "contradicted" and against == ["a"] and p == pytest.approx(0.3)
    assert claim_decision([], "fact", 0.5)[0] == "unverifiable"


def test_missing_figures() -> None:
    """Figures absent from the passage are listed; formatting and citations are ignored."""
    from auditor.verify.figures import missing_figures

    passage = "Returns: unopened items can be returned within 30 days. Kestrel charges 15% on 1,299 orders."
    assert missing_figures("Unopened items can be returned within 30 days.", passage) == []
    assert missing_figures("Items can be returned within 45 days.", passage) == ["45"]
    assert missing_figures("Kestrel charges 15% on 1299 orders.", passage) == []
    assert missing_figures("3. Items can be returned within 30 days (Passage 2).", passage) == []
    assert missing_figures("As passages 1 and 3 say, Kestrel charges 15% [4].", passage) == []


def test_a_chunk_giving_the_figure_to_another_subject_contradicts_the_claim() -> None:
    """Whatever the judge's probability, a misbound chunk neither supports nor stays silent."""
    from auditor.verify.entailment import ChunkJudgement, claim_decision

    probabilities = {"true": 0.8, "false": 0.1, "unknown": 0.1}
    misbound = ChunkJudgement("c1", probabilities, "true", [], ["6"])
    verdict, p, supporting, against = claim_decision([misbound], "fact", 0.3)
    assert (verdict, p, supporting, against) == ("contradicted", 0.0, [], ["c1"])
    other = ChunkJudgement("c2", {"true": 0.5, "false": 0.2, "unknown": 0.3}, "true", [])
    verdict, p, supporting, _ = claim_decision([misbound, other], "fact", 0.3)
    assert verdict == "supported" and supporting == ["c2"] and p == 0.5


def test_threshold_selection_and_agreement_figures() -> None:
    """The threshold with the highest balanced accuracy; ties go to the middle of the best run."""
    from auditor.verify.thresholds import agreement, auroc, best_threshold, roc_points

    scores = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9]
    gold = [True, True, False, True, False, False]
    t = best_threshold(scores, gold)
    assert 0.2 < t < 0.3 or 0.6 < t < 0.7
    perfect = best_threshold([0.1, 0.2, 0.8, 0.9], [True, True, False, False])
    assert 0.2 < perfect < 0.8 and perfect == pytest.approx(0.5)
    assert auroc([0.1, 0.2, 0.8, 0.9], [True, True, False, False]) == 1.0
    assert auroc(scores, gold) == pytest.approx(8 / 9)
    assert auroc([0.5], [True]) is None
    points = roc_points([0.1, 0.9], [True, False])
    assert points[0] == (0.0, 0.0) and points[-1] == (1.0, 1.0)
    figures = agreement([(True, True), (True, False), (False, False), (False, False)], rounds=100)
    assert figures.balanced_accuracy == pytest.approx(0.75) and figures.precision == 1.0
    assert figures.recall == 0.5 and figures.specificity == 1.0
    low, high = figures.interval
    assert 0.0 <= low <= 0.75 <= high <= 1.0


def test_flagged_at_matches_the_checks_own_verdicts(tmp_path: Path) -> None:
    """Re-scoring stored claims at the judge's threshold reproduces the check's answer flag."""
    from auditor.claim_rows import Claim, flagged_at, ranking_score

    answers = [
        _item("a", WARRANTY),
        _item("b", "Unopened thermostats can be returned within 45 days of delivery."),
        _item("c", "The documents do not say anything about a referral bonus."),
    ]
    _, rows = _check(answers, tmp_path)
    for row in rows.values():
        claims = [
            Claim(
                text=c["text"],
                span=None,
                verdict=c["verdict"],
                kind=c["kind"],
                p_supported=c["p_supported"],
            )
            for c in row["claims"]
        ]
        assert flagged_at(claims, 0.5) == row["hallucinated"]
        assert 0.0 <= ranking_score(claims) <= 1.0


def test_abstentions_the_answer_never_made_are_dropped(tmp_path: Path) -> None:
    """A judge imitating its examples ("The documents do not say who designed it") adds
    abstentions to answers that state facts only: they are not the answer's claims."""

    class _Imitator(FakeJudge):
        def _answer(self, call: Any) -> dict[str, Any]:
            if "claims" in (call.schema or {}).get("properties", {}):
                return {"claims": [WARRANTY, "The documents do not say who designed the T9."]}
            return super()._answer(call)

    _, rows = _check([_item("a", WARRANTY)], tmp_path, judge=_Imitator())
    assert [c["text"] for c in rows["a"]["claims"]] == [WARRANTY]


def test_figures_from_the_question_are_premises_not_vetoed(tmp_path: Path) -> None:
    """ "At 99.2 % you get a credit": the 99.2 came from the user, the chunk need not state it."""
    chunk = "Plus subscribers get a service credit of 10% when monthly uptime is below 99.5%."
    answer = "At 99.2% uptime Plus subscribers get a service credit of 10% when monthly uptime is below 99.5%."
    item = _item("a", answer, [chunk])
    item.question = "Our uptime was 99.2% last month. Do we get a credit on Plus?"
    _, rows = _check([item], tmp_path, judge=_Believer())
    assert rows["a"]["claims"][0]["verdict"] == "supported"
    item = _item("b", answer.replace("99.2", "98.7"), [chunk])
    item.question = "Our uptime was 99.2% last month. Do we get a credit on Plus?"
    _, rows = _check([item], tmp_path / "b", judge=_Believer())
    assert "never mention 98.7" in rows["b"]["claims"][0]["reason"]


def test_a_claims_figures_choose_its_source_chunk_before_similarity() -> None:
    """The chunk that writes the claim's figures is checked, even when another chunk reads
    closer; without figures, the chunk with the closest sentence (not the closest opening) wins."""
    from auditor.verify.evidence import rank_chunks

    embed = FakeEmbedder().embed
    chunks = [
        "The T9 Pro thermostat supports remote sensors in every room of the house.",
        "Sensor limits. Averaging works with up to 10 sensors on a T9 Pro.",
        "Shipping is free. Opening hours are nine to five. The T9 Pro thermostat has a clock.",
    ]
    (ranked,) = rank_chunks(
        embed, ["The T9 Pro thermostat supports 10 remote sensors."], chunks, "How many?", 1
    )
    assert ranked == [1]
    # the question's figures are premises: every chunk "has" them, similarity decides
    (ranked,) = rank_chunks(
        embed, ["The T9 Pro thermostat supports remote sensors in 2 rooms."], chunks, "2 rooms?", 1
    )
    assert ranked == [0]
    # sentence level: chunk 2's last sentence matches although its opening does not
    (ranked,) = rank_chunks(embed, ["The T9 Pro thermostat has a clock."], chunks, "Clock?", 1)
    assert ranked == [2]


def test_every_claim_keeps_the_judges_word_per_chunk(tmp_path: Path) -> None:
    """Each checked chunk's label probabilities are kept, so a reviewer (and the bench) can see
    why a claim got its p_supported."""
    _check(
        [_item("one", "The T9 thermostat warranty lasts 2 years from the delivery date.")], tmp_path
    )
    (row,) = read_jsonl(tmp_path / "checks.jsonl")
    for claim in row["claims"]:
        assert [j["chunk"] for j in claim["judgements"]] == claim["checked_chunks"]
        for judgement in claim["judgements"]:
            assert set(judgement) == {"chunk", "probabilities", "written", "vetoed", "misbound"}


def test_a_check_the_judge_failed_throughout_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every judge call failing is not a clean check: summary printed, one-line error, exit 1."""
    broken = FakeJudge()
    broken.garbage_for = ("claims", "entailment")
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: broken)
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    answers = tmp_path / "a.jsonl"
    answers.write_text(
        json.dumps({"id": "x", "question": "q", "contexts": [WARRANTY], "answer": WARRANTY}) + "\n"
    )
    args = ["check", "--answers", str(answers), "--out", str(tmp_path / "o"), "-q"]
    result = CliRunner().invoke(cli, [*args, "--set", "retries=0"])
    assert result.exit_code == 1
    assert "0 supported" in result.stdout
    assert result.stderr.count("\n") == 1 and "the judge failed on every claim" in result.stderr


def test_quote_check_turns_a_claim_its_own_evidence_refutes_into_contradicted() -> None:
    """The focused second question: a quote that says otherwise takes p_supported below the
    threshold, the claim is contradicted and the quote is its evidence; a quote that merely
    lacks context ("unknown") barely moves it."""
    from auditor.claim_rows import Claim
    from auditor.verify.quotes import apply_quote

    def reply(true: float, false: float, unknown: float) -> tuple[dict[str, float], str]:
        return {"true": true, "false": false, "unknown": unknown}, "true"

    def supported() -> Claim:
        claim = Claim("The T9 Pro averages up to 6 sensors.", None, "supported", p_supported=0.8)
        claim.supporting_chunks = ["doc#1"]
        return claim

    quote = "It averages up to 6 sensors on the T9 and up to 10 on the T9 Pro."
    refuted = supported()
    apply_quote(refuted, quote, "doc#1", *reply(0.1, 0.8, 0.1), threshold=0.5)
    assert refuted.verdict == "contradicted" and refuted.contradicting_chunks == ["doc#1"]
    assert refuted.evidence == quote and refuted.p_supported == pytest.approx(0.16)
    assert refuted.supporting_chunks == [] and refuted.quote and refuted.quote["text"] == quote
    unsure = supported()
    apply_quote(unsure, quote, "doc#1", *reply(0.3, 0.05, 0.65), threshold=0.5)
    assert unsure.verdict == "supported" and unsure.p_supported == pytest.approx(0.76)


def test_quote_check_asks_one_focused_question_per_fact_claim(tmp_path: Path) -> None:
    """With quote_check on, each fact claim gets one "quote" call on its best chunk's closest
    sentences; its answer is kept beside the claim."""
    judge = FakeJudge()
    _, rows = _check(
        [_item("a", WARRANTY + " " + RETURNS)], tmp_path, judge=judge, quote_check=True
    )
    quotes = [call for call in judge.calls if call.key.stage == "quote"]
    claims = rows["a"]["claims"]
    assert len(quotes) == len(claims) == 2
    for claim in claims:
        assert claim["quote"]["text"] in (WARRANTY, RETURNS)
        assert claim["verdict"] == "supported" and claim["p_supported"] == pytest.approx(0.855)


def test_claims_about_sources_are_read_for_what_they_say() -> None:
    """General wordings seen in real answers: an abstention in any wording is an abstention;
    "Passage 2 states that X" is checked as X; judge debris is no claim; a bare refusal
    becomes "the documents do not answer the question"."""
    from auditor.verify.extraction import (
        claim_kind,
        is_garbage,
        refusal_claim,
        without_attribution,
    )

    for said in [
        "However, it does not explain how to draw it in Geogebra.",
        "It does not provide instructions on resetting the thermostat.",
        "Based on the given passages, it is not possible to answer when it opened.",
        "The normal BNP range is difficult to determine from the passages.",
        "I can't find the on-call stipend in the documents I have.",
        "There's no release date for firmware 4.3 in the release notes I have.",
        "I don't have a battery-life figure for the S1 sensor.",
        "They cover bonuses but not retirement benefits, so I can't give you a figure.",
        "The Premium uptime figure isn't in them, so I can't quote it.",
    ]:
        assert claim_kind(said) == "abstention", said
    for fact in ["The T9 Pro does not include a C-wire adapter.", "It does not rain in July."]:
        assert claim_kind(fact) == "fact", fact
    assert (
        without_attribution("Passage 3 states that cycling is low impact.")
        == "Cycling is low impact."
    )
    assert without_attribution("According to the passages, the bridge opened in 1932.") == (
        "The bridge opened in 1932."
    )
    assert without_attribution("The excerpts I have confirm advance replacement is free.") == (
        "Advance replacement is free."
    )
    kept = "The passage highlights the role of merchandisers."
    assert without_attribution(kept) == kept
    assert is_garbage("]}Human: Can you provide a brief answer") and is_garbage("Up to 6.")
    assert not is_garbage("The T9 Pro supports 10 sensors.")
    question = "How do I draw a truncated cone in Geogebra?"
    assert refusal_claim("Unable to answer based on given passages.", question) == (
        f"The documents do not answer the question: {question}"
    )
    named = "The passages do not say how to draw a truncated cone in Geogebra."
    assert refusal_claim(named, question) == named


def test_sentences_no_claim_carries_are_checked_as_written() -> None:
    """A claim list that drops most of an answer (a small judge listing only its closing
    refusal) leaves the dropped statements unchecked: each sentence whose content words no
    claim carries becomes a claim as written; list headers, abstentions, echoes of the
    question and fragments do not, and a sentence the claims carry in other words adds
    nothing."""
    from auditor.verify.claims import sentence_spans
    from auditor.verify.extraction import uncovered_sentences

    question = "How do I plan a trip to Germany?"
    answer = (
        "Based on the provided passages, here are some steps to plan a trip to Germany:\n\n"
        "1. Plan ahead: check visa requirements and when to go (Passage 2).\n"
        "2. Book flights: use budget travel tips to find affordable hostels in Berlin.\n"
        "3. Stay safe.\n\n"
        "Unable to answer based on given passages."
    )
    listed = ["The documents do not answer the question: How do I plan a trip to Germany?"]
    assert uncovered_sentences(answer, listed, question) == [
        "Plan ahead: check visa requirements and when to go.",
        "Book flights: use budget travel tips to find affordable hostels in Berlin.",
    ]
    carried = [
        *listed,
        "Planning a trip to Germany ahead means checking visa requirements and when to go.",
        "Budget travel tips help find affordable hostels in Berlin when booking flights.",
    ]
    assert uncovered_sentences(answer, carried, question) == []
    # clauses apart: the one the claims carry adds nothing
    assert uncovered_sentences(
        "The incident was SEV-1 and 41% of the fleet disconnected; it was published on 25 March.",
        ["The incident was published on 25 March 2025.", "The incident was SEV-1."],
        "What happened?",
    ) == ["The incident was SEV-1 and 41% of the fleet disconnected."]
    assert uncovered_sentences("; ;\n1. ;", [], "Why?") == []
    # a stop inside a figure ends no sentence
    text = "Firmware 4.3 ships in May. It costs $1,299.00, e.g. in Berlin."
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "Firmware 4.3 ships in May.",
        "It costs $1,299.00, e.g.",
        "in Berlin.",
    ]
    # a dot-leader table row is one line; a closing ellipsis still ends its sentence
    text = "  Years 3 to 5 of service ....... 20 days per year\nWait... Then go."
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "Years 3 to 5 of service ....... 20 days per year",
        "Wait...",
        "Then go.",
    ]
    # a citation-led sentence is checked as what it says
    assert uncovered_sentences(
        'Passage 1 states, "Schedule F reports farm income from cooperatives.',
        listed,
        "Where does 1099-PATR go?",
    ) == ["Schedule F reports farm income from cooperatives."]


def test_claims_of_adds_what_the_list_left_out() -> None:
    from auditor.verify.listing import claims_of

    item = _item(
        "a", "The warranty lasts 2 years. Returns are accepted within 30 days of delivery."
    )
    claims = claims_of(item, ["The warranty lasts 2 years."], JudgeConfig())
    assert [(c.text, c.origin) for c in claims] == [
        ("The warranty lasts 2 years.", "judge"),
        ("Returns are accepted within 30 days of delivery.", "sentence"),
    ]
    assert claims[1].span == (28, 76)


def test_each_judge_stage_reports_its_progress_to_the_last_call(tmp_path: Path) -> None:
    """Progress per stage: the claims stage, then the claim-chunk labels (and a re-ask row when
    output was unusable), each counted from 0 to the calls it sent."""
    judge = FakeJudge()
    judge.garbage_for = ("entailment",)
    judge.garbage_times = 1
    seen: list[tuple[str, int, int]] = []
    answers = [_item("a", WARRANTY), _item("b", f"{WARRANTY} {RETURNS}")]
    check_items(
        answers,
        tmp_path,
        JudgeConfig.model_validate({"metrics": ["faithfulness"], "retries": 1, "claims": "listed"}),
        judge,
        FakeEmbedder().embed,
        on_calls=lambda label, done, total: seen.append((label, done, total)),
    )
    labels = list(dict.fromkeys(label for label, _, _ in seen))
    # the fake judge lists the answer's own sentences: no claim needs the premise check, so
    # that stage asks nothing and shows no row
    assert labels[:2] == ["stage 1/3: claims", "stage 3/3: claim-chunk labels"]
    assert labels[2].startswith("stage 3/3: claim-chunk labels (re-asking ")
    for label in labels:
        counts = [(done, total) for name, done, total in seen if name == label]
        total = counts[0][1]
        assert [done for done, _ in counts] == list(range(total + 1)), label
    assert next(t for name, _, t in seen if name == labels[0]) == 2  # a claims call per answer
