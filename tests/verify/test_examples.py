"""Labelled answers as examples: reading them, matching them to answers, what people said of
their sentences, and how a claim's memory moves its p_supported (never without examples)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from auditor.config import JudgeConfig
from auditor.errors import BadInput
from auditor.testing import FakeEmbedder
from auditor.verify.examples import (
    NO_RECALL,
    ExampleBook,
    MemoryWeights,
    Recall,
    Reference,
    question_key,
    read_examples,
    recall,
    references,
    remembered_support,
)

CLEAN = "The warranty lasts two years. It covers the battery and the screen."
WRONG = "The warranty lasts five years. It covers the battery and the screen."


def _write(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "examples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _row(ident: str, answer: str = CLEAN, **extra: Any) -> dict[str, Any]:
    return (
        {"id": ident, "question": "How long is the warranty?", "answer": answer}
        | {"hallucinated": False}
        | extra
    )


def test_an_example_without_a_label_names_its_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, [_row("a"), {"id": "b", "question": "q?", "answer": "x y z"}])
    with pytest.raises(BadInput, match=rf"{path}:2: \"hallucinated\" must be true or false"):
        read_examples(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row("b", spans=[{"start": 5, "end": 500}]), r":2: each of \"spans\" must be"),
        (_row("b", hallucinated="yes"), r":2: \"hallucinated\" must be true or false"),
        (_row("b", answer=" "), r":2: \"answer\" must be a non-empty string"),
        (
            _row("a", hallucinated=True),
            r":2: answer 'a' labelled again, differently \(first on line 1\)",
        ),
    ],
)
def test_bad_examples_are_refused_in_one_line(
    tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    path = _write(tmp_path, [_row("a"), row])
    with pytest.raises(BadInput, match=message) as caught:
        read_examples(path)
    assert "\n" not in str(caught.value)


def test_an_empty_examples_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no labels"):
        read_examples(_write(tmp_path, []))


def test_examples_match_by_source_id_else_by_the_question_never_the_answer_itself(
    tmp_path: Path,
) -> None:
    rows = [
        _row("s1", source_id="q1"),
        _row("s2", source_id="q2", question="What does it cost?"),
        _row("t1", question="  how long is the WARRANTY "),
        _row("own", source_id="q1"),
    ]
    book = ExampleBook.load(_write(tmp_path, rows))
    assert [e.id for e in book.for_answer("own", "anything", "q1")] == ["s1"]
    # no source_id on the answer: the question text decides, normalised
    found = book.for_answer("x", "How long is the warranty?", None)
    assert {e.id for e in found} == {"s1", "t1", "own"}
    assert book.for_answer("x", "Another question?", None) == []
    assert book.provenance()["examples"] == 4 and len(book.provenance()["sha256"]) == 64


def test_an_example_sharing_an_answers_id_for_another_question_is_refused(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, [_row("a1", source_id="q1")])
    book = ExampleBook.load(path)
    with pytest.raises(BadInput, match=rf"{path}:1: example 'a1' answers another question"):
        book.for_answer("a1", "How long is the warranty?", "q9")


def test_question_keys_ignore_case_spacing_and_the_closing_mark() -> None:
    assert question_key(" How  long is it? ") == question_key("how long is it")


def test_accepted_and_marked_sentences(tmp_path: Path) -> None:
    start = WRONG.index("five")
    rows = [
        _row("clean"),
        _row("wrong", answer=WRONG, hallucinated=True, spans=[[start, start + 10]]),
        _row("whole", answer=WRONG, hallucinated=True),  # labelled whole: says nothing
    ]
    refs = references(read_examples(_write(tmp_path, rows)))
    assert [(r.example_id, r.marked) for r in refs] == [
        ("clean", False),
        ("clean", False),
        ("wrong", True),
        ("wrong", False),
    ]
    assert refs[2].span_text == "five years" and refs[2].text == "The warranty lasts five years."


def test_a_claim_recalls_the_closest_accepted_and_marked_sentence() -> None:
    refs = [
        Reference("e1", "The warranty lasts two years.", False),
        Reference("e2", "The warranty lasts five years.", True, "five years"),
        Reference("e3", "Shipping is free in the EU.", False),
    ]
    (found,) = recall(["The warranty lasts two years."], refs, FakeEmbedder().embed)
    assert found.accepted_ref is refs[0] and found.accepted == pytest.approx(1.0, abs=1e-5)
    assert found.marked_ref is refs[1] and 0.0 < found.marked < found.accepted
    assert recall(["anything"], [], FakeEmbedder().embed) == [NO_RECALL]
    assert found.to_json()["marked"]["marked"] == "five years"


def test_memory_moves_support_only_past_its_similarity_floor() -> None:
    weights = MemoryWeights(similarity=0.8, accepted=20.0, marked=20.0)
    assert remembered_support(0.2, NO_RECALL, weights) == 0.2  # no examples: exactly as judged
    assert remembered_support(0.2, Recall(0.79, 0.5, None, None), weights) == 0.2
    lifted = remembered_support(0.2, Recall(0.95, 0.0, None, None), weights)
    dropped = remembered_support(0.9, Recall(0.0, 0.95, None, None), weights)
    assert lifted > 0.5 and dropped < 0.5
    assert remembered_support(0.2, Recall(0.95, 0.95, None, None), weights) == pytest.approx(0.2)
    assert remembered_support(0.3, Recall(1.0, 1.0, None, None), MemoryWeights()) == 0.3


# --- `check --examples` end to end with the fake judge: the memory moves what people said


def _answers_and_examples(tmp_path: Path, example: dict[str, Any]) -> tuple[Path, Path]:
    from tests.verify.test_check import WARRANTY

    answers, examples = tmp_path / "answers.jsonl", tmp_path / "examples.jsonl"
    answers.write_text(
        json.dumps(
            {
                "id": "x",
                "question": "What colour is the thermostat?",
                "source_id": "q1",
                "contexts": [WARRANTY],
                "answer": WARRANTY + " The thermostat casing is painted blue.",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    examples.write_text(json.dumps(example) + "\n", encoding="utf-8")
    return answers, examples


def _check_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str, judge: Any = None
) -> Any:
    from click.testing import CliRunner

    from auditor.cli import cli
    from auditor.testing import FakeJudge

    monkeypatch.setattr("auditor.verify.judges.make_judge", judge or (lambda config: FakeJudge()))
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    return CliRunner().invoke(cli, ["check", *args, "-q"])


def _check_with_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: Path, out: Path, examples: Path
) -> Any:
    return _check_cli(
        tmp_path,
        monkeypatch,
        "--answers",
        str(answers),
        "--out",
        str(out),
        "--examples",
        str(examples),
    )


ACCEPTED = {
    "id": "earlier-1",
    "question": "What colour is the thermostat?",
    "source_id": "q1",
    "answer": "The thermostat casing is painted blue. It ships in a box.",
    "hallucinated": False,
}


def test_a_claim_people_accepted_before_is_supported_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from auditor.store import read_jsonl

    answers, examples = _answers_and_examples(tmp_path, ACCEPTED)
    plain = _check_cli(
        tmp_path, monkeypatch, "--answers", str(answers), "--out", str(tmp_path / "a")
    )
    assert plain.exit_code == 0, plain.output
    (before,) = read_jsonl(tmp_path / "a" / "checks.jsonl")
    assert before["hallucinated"] is True and "examples" not in before

    out = tmp_path / "b"
    result = _check_cli(
        tmp_path,
        monkeypatch,
        *("--answers", str(answers), "--out", str(out), "--examples", str(examples)),
        *("--set", 'examples_in="memory"'),
    )
    assert result.exit_code == 0, result.output
    (row,) = read_jsonl(out / "checks.jsonl")
    assert row["examples"] == ["earlier-1"] and row["hallucinated"] is False
    blue = next(c for c in row["claims"] if "blue" in c["text"])
    unchanged = next(c for c in before["claims"] if "blue" in c["text"])
    assert blue["verdict"] == "supported" and unchanged["verdict"] != "supported"
    assert (
        blue["memory"]["decided"] is True and blue["memory"]["p_judge"] == unchanged["p_supported"]
    )
    assert blue["memory"]["accepted"]["example"] == "earlier-1"
    assert "people accepted a sentence like it" in blue["reason"]
    manifest = json.loads((out / "check.json").read_text())
    assert manifest["judge"]["examples"]["answers_matched"] == 1
    shipped = JudgeConfig().memory
    assert manifest["judge"]["examples"]["weights"] == shipped.model_dump()
    assert len(manifest["judge"]["examples"]["sha256"]) == 64

    # the report says which answers the examples informed, and shows the deciding sentence
    from click.testing import CliRunner

    from auditor.cli import cli

    reported = CliRunner().invoke(cli, ["report", str(out), "--out", str(tmp_path / "r.html")])
    assert reported.exit_code == 0, reported.output
    html = (tmp_path / "r.html").read_text()
    assert "The judge had 1 labelled answer to this question as examples (earlier-1)" in html
    assert "they decided 1 claim verdict." in html and "Decided by people's labels" in html
    assert (
        '<blockquote class="example accepted">The thermostat casing is painted blue.</blockquote>'
        in html
    )

    # more answers into the same dir with other examples (or none) are refused
    grown = json.loads(answers.read_text()) | {"id": "y"}
    answers.write_text(answers.read_text() + json.dumps(grown) + "\n")
    examples.write_text(json.dumps(ACCEPTED | {"id": "earlier-2"}) + "\n")
    again = _check_cli(
        tmp_path,
        monkeypatch,
        *("--answers", str(answers), "--out", str(out), "--examples", str(examples)),
        *("--set", 'examples_in="memory"'),
    )
    assert (
        again.exit_code == 2
        and "re-check into a new run dir that shares its records" in again.output
    )


def test_examples_that_match_no_answer_are_said_and_the_check_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = ACCEPTED | {"source_id": "q7", "question": "Another question?"}
    answers, examples = _answers_and_examples(tmp_path, other)
    out = tmp_path / "out"
    result = _check_with_examples(tmp_path, monkeypatch, answers, out, examples)
    assert result.exit_code == 0, result.output
    assert "no example answers any of these questions" in result.stderr
    manifest = json.loads((out / "check.json").read_text())
    assert "examples" not in manifest["judge"] and manifest["judge"]["config"]["examples"] is None


@pytest.mark.parametrize(
    ("example", "message"),
    [
        (ACCEPTED | {"hallucinated": None}, ':1: "hallucinated" must be true or false'),
        (ACCEPTED | {"id": "x", "source_id": "q2"}, ":1: example 'x' answers another question"),
    ],
)
def test_bad_examples_stop_the_check_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: dict[str, Any], message: str
) -> None:
    answers, examples = _answers_and_examples(tmp_path, example)
    out = tmp_path / "out"
    result = _check_cli(
        tmp_path,
        monkeypatch,
        *("--answers", str(answers), "--out", str(out), "--examples", str(examples)),
        judge=lambda config: pytest.fail("a judge started before the examples were read"),
    )
    assert result.exit_code == 2 and f"{examples}{message}" in result.stderr, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_an_answer_with_examples_is_decided_at_the_memorys_threshold() -> None:
    from auditor.claim_rows import Claim
    from auditor.verify.examples import remember

    weights = MemoryWeights(similarity=0.7, accepted=10.0, marked=5.0, support_threshold=0.48)
    plain = Claim("The warranty lasts two years.", None, "supported", p_supported=0.35)
    remember(plain, NO_RECALL, weights, 0.48)
    assert plain.verdict == "unsupported" and plain.p_supported == 0.35 and plain.memory is None
    ref = Reference("e1", "The warranty lasts two years.", False)
    lifted = Claim("The warranty lasts two years.", None, "unsupported", p_supported=0.2)
    remember(lifted, Recall(1.0, 0.0, ref, None), weights, 0.48)
    assert lifted.verdict == "supported" and lifted.memory is not None
    assert lifted.memory["decided"] is True and lifted.memory["p_judge"] == 0.2
    assert lifted.reason == "people accepted a sentence like it (example e1)"
    abstention = Claim("The sources do not say.", None, "supported", kind="abstention")
    remember(abstention, Recall(1.0, 1.0, ref, ref), weights, 0.48)
    assert abstention.verdict == "supported" and abstention.memory is None


# --- examples in the verdict prompt (`examples_in = "prompt"`)


def test_the_prompt_shows_the_statements_closest_to_the_claims_within_its_budget() -> None:
    from auditor.verify.examples import prompt_references

    refs = [
        Reference("e1", "Shipping is free in the EU.", False),
        Reference("e2", "The warranty lasts five years.", True, "five years"),
        Reference("e3", "The warranty lasts two years.", False),
        Reference("e4", "the warranty  lasts two years.", False),  # the same wording again
    ]
    embed = FakeEmbedder().embed
    shown = prompt_references(["The warranty lasts two years."], refs, embed, 1000)
    assert [r.example_id for r in shown] == ["e3", "e2", "e1"]
    # the budget counts each shown line: the farthest statement is left out first, and a
    # line that does not fit leaves room for a shorter one after it
    claim = ["The warranty lasts two years."]
    assert [r.example_id for r in prompt_references(claim, refs, embed, 90)] == ["e3", "e2"]
    assert [r.example_id for r in prompt_references(claim, refs, embed, 80)] == ["e3", "e1"]
    assert prompt_references([], refs, embed) == [] and prompt_references(["x"], [], embed) == []


def test_the_reviewed_block_puts_marked_words_first_and_nothing_without_examples() -> None:
    from auditor.verify.examples import reviewed_block

    block = reviewed_block(
        [
            Reference("e3", "The warranty lasts two years.", False),
            Reference("e2", "The warranty lasts five years.", True, "five years"),
        ]
    )
    lines = block.splitlines()
    marked, accepted = (
        lines.index('- "five years" (in: The warranty lasts five years.)'),
        lines.index("- The warranty lasts two years."),
    )
    assert lines[0].startswith("People reviewed other answers") and marked < accepted
    assert reviewed_block([]) == ""


def test_the_verdict_prompt_carries_the_block_before_the_passage_for_facts_only() -> None:
    from auditor.verify.entailment import entailment_prompt

    plain = entailment_prompt("The warranty lasts two years.", "It lasts two years.")
    assert (
        entailment_prompt("The warranty lasts two years.", "It lasts two years.", "fact", "")
        == plain
    )
    shown = entailment_prompt(
        "The warranty lasts two years.", "It lasts two years.", "fact", "People reviewed X."
    )
    assert shown.index("People reviewed X.") < shown.index("Passage:")
    assert shown.replace("\n\nPeople reviewed X.", "") == plain  # nothing else changes
    abstention = entailment_prompt(
        "P.", "The sources do not say.", "abstention", "People reviewed X."
    )
    assert "People reviewed" not in abstention


def test_examples_in_the_prompt_reach_every_fact_call_and_the_row_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from auditor.store import read_jsonl
    from auditor.testing import FakeJudge

    marked = ACCEPTED | {
        "id": "earlier-2",
        "answer": "The thermostat is red. It ships in a box.",
        "hallucinated": True,
        "spans": [{"start": 18, "end": 21}],
    }
    answers, examples = _answers_and_examples(tmp_path, ACCEPTED)
    examples.write_text(examples.read_text() + json.dumps(marked) + "\n", encoding="utf-8")
    judges: list[FakeJudge] = []

    def judge(config: Any) -> FakeJudge:
        judges.append(FakeJudge())
        return judges[-1]

    out = tmp_path / "prompt"
    args = ("--answers", str(answers), "--examples", str(examples), "--set", 'examples_in="prompt"')
    result = _check_cli(tmp_path, monkeypatch, *args, "--out", str(out), judge=judge)
    assert result.exit_code == 0, result.output
    entailment = [c for c in judges[-1].calls if c.key.stage == "entailment"]
    assert entailment and all("People reviewed other answers" in c.prompt for c in entailment)
    assert all('- "red" (in: The thermostat is red.)' in c.prompt for c in entailment)
    (row,) = read_jsonl(out / "checks.jsonl")
    assert row["examples"] == ["earlier-1", "earlier-2"]
    assert {"example": "earlier-2", "sentence": "The thermostat is red.", "marked": "red"} in row[
        "reviewed"
    ]
    # in the prompt only, the memory moves no claim; the answer is decided at the judge's own
    # threshold (no planned measurement chose another for prompts with examples)
    assert all(c.get("memory") is None for c in row["claims"])
    weights = json.loads((out / "check.json").read_text())["judge"]["examples"]["weights"]
    assert JudgeConfig().examples_prompt_threshold is None
    assert weights["support_threshold"] is None
    assert weights["accepted"] == weights["marked"] == 0.0
    assert {
        "example": "earlier-1",
        "sentence": "The thermostat casing is painted blue.",
        "marked": None,
    } in row["reviewed"]

    # the report lists what the judge was shown, escaped, per answer
    from click.testing import CliRunner

    from auditor.cli import cli

    reported = CliRunner().invoke(cli, ["report", str(out), "--out", str(tmp_path / "r.html")])
    assert reported.exit_code == 0, reported.output
    html = (tmp_path / "r.html").read_text()
    assert "every verdict prompt showed 3 of their statements" in html
    assert "Marked in earlier-2: “red”" in html
    assert '<blockquote class="example marked">The thermostat is red.</blockquote>' in html

    # without examples, not one prompt changes
    plain = _check_cli(
        tmp_path,
        monkeypatch,
        "--answers",
        str(answers),
        "--out",
        str(tmp_path / "plain"),
        judge=judge,
    )
    assert plain.exit_code == 0, plain.output
    assert all("People reviewed" not in c.prompt for c in judges[-1].calls)
    (without,) = read_jsonl(tmp_path / "plain" / "checks.jsonl")
    assert "reviewed" not in without
