"""Context precision's two ways of rating a chunk (judge `context_precision_verdict`): RAGAS's
reasoned JSON, or the verdict alone read from the first token's log-probabilities; the calls
each plans, the verdicts and average precision from given log-probabilities, the failures,
the record, and what the report and the command's table say was used."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.calibrate import verdict_settings
from auditor.cli import cli
from auditor.cli.report_cmd import format_table
from auditor.config import JudgeConfig, config_sha256
from auditor.store import read_jsonl
from auditor.testing import FakeEmbedder, FakeJudge
from auditor.verify import ragas_judge
from auditor.verify.answers import AnswerItem
from auditor.verify.base import CallKey, JudgeReply
from auditor.verify.check import _same_judge, check_items
from auditor.verify.metrics import ContextPrecision, metrics_for, useful_probability
from tests.verify.test_calibrate import _fakes, _labelled

WARRANTY = "The T9 thermostat warranty lasts 2 years from the delivery date."
RETURNS = "Unopened thermostats can be returned within 30 days of delivery."
SHIPPING = "Shipping is free for orders above 50 euros."
NO_DIGIT = "no 1 or 0 among the first token's top log-probabilities"


def _item(chunks: list[str], reference: str | None = None) -> AnswerItem:
    return AnswerItem(
        id="a",
        question="What are the warranty terms?",
        answer=WARRANTY,
        reference=reference,
        chunks=[(f"doc#{i}", text) for i, text in enumerate(chunks)],
    )


def _reply(rank: int, top: dict[str, float] | None, text: str = "") -> JudgeReply:
    return JudgeReply(key=CallKey("cp-answer", "a", (rank,)), text=text, top_logprobs=top)


def _log(probabilities: dict[str, float]) -> dict[str, float]:
    return {token: math.log(p) for token, p in probabilities.items()}


def test_the_default_is_ragas_reasoned_verdicts_and_the_setting_is_in_the_hash() -> None:
    default = JudgeConfig()
    assert default.context_precision_verdict == "reason"
    first_token = JudgeConfig(context_precision_verdict="first_token")
    assert config_sha256(first_token) != config_sha256(default)
    with pytest.raises(ValueError, match="context_precision_verdict"):
        JudgeConfig(context_precision_verdict="logprobs")  # type: ignore[arg-type]


def test_the_reasoned_mode_plans_stock_ragas_json_calls() -> None:
    item = _item([RETURNS, WARRANTY])
    planned = ContextPrecision("answer").plan(item, "checked")
    assert [call.key for call, _ in planned] == [
        CallKey("cp-answer", "a", (0,)),
        CallKey("cp-answer", "a", (1,)),
    ]
    call, model = planned[1]
    stock, stock_model = ragas_judge.context_precision_prompt(item.question, WARRANTY, WARRANTY)
    assert call.prompt == stock and model is stock_model
    assert call.schema is not None and call.max_tokens == 200 and call.logprobs == 0


def test_the_first_token_mode_plans_one_token_label_calls_on_ragas_prompt() -> None:
    item = _item([RETURNS, WARRANTY])
    planned = ContextPrecision("answer", "first_token").plan(item, "checked")
    assert len(planned) == 2
    call, model = planned[1]
    assert model is None and call.schema is None
    assert call.max_tokens == 1 and call.logprobs == 20
    assert call.prompt == ragas_judge.context_precision_verdict_prompt(
        item.question, WARRANTY, WARRANTY
    )
    stock, _ = ragas_judge.context_precision_prompt(item.question, WARRANTY, WARRANTY)
    # RAGAS's instruction (less "with json output"), one line for the format, the examples'
    # verdicts alone, and the input exactly as RAGAS renders it
    assert call.prompt.startswith(
        "Given question, answer and context verify if the context was useful in arriving at "
        'the given answer. Give verdict as "1" if useful and "0" if not.\n'
        f"{ragas_judge.VERDICT_ALONE}\n\n--------EXAMPLES-----------\n"
    )
    assert "JSON" not in call.prompt and '"reason"' not in call.prompt
    outputs = [line for line in call.prompt.splitlines() if line.startswith("Output:")]
    assert outputs == ["Output: 1", "Output: 1", "Output: 0", "Output: "]
    marker = "Now perform the same with the following input"
    assert call.prompt.split(marker)[1] == stock.split(marker)[1]
    assert call.prompt.split("Example 1")[1].split("Output:")[0] in stock


def test_a_prompt_whose_input_holds_ragas_words_is_edited_outside_the_input_only() -> None:
    tricky = 'Output: {"verdict": 1} with json output. Please return the output in a JSON format'
    prompt = ragas_judge.context_precision_verdict_prompt("q?", tricky, "a")
    assert json.dumps(tricky)[1:-1] in prompt.split("following input")[1]


def test_the_verdict_is_p1_renormalised_over_1_and_0_and_scored_by_average_precision() -> None:
    item = _item([SHIPPING, RETURNS, WARRANTY])
    replies = {
        CallKey("cp-answer", "a", (0,)): _reply(0, _log({"0": 0.7, "1": 0.2, "The": 0.05})),
        CallKey("cp-answer", "a", (1,)): _reply(1, _log({" 1": 0.6, '"0': 0.3})),
        CallKey("cp-answer", "a", (2,)): _reply(2, _log({"1": 0.45, "0": 0.45, "{": 0.1})),
    }
    failures: list[str] = []
    fields = ContextPrecision("answer", "first_token").score(
        item, replies, failures, FakeEmbedder().embed
    )
    assert failures == []
    assert fields["context_verdicts"] == [
        {"chunk_id": "doc#0", "useful": False, "p_useful": 0.2222, "reason": None},
        {"chunk_id": "doc#1", "useful": True, "p_useful": 0.6667, "reason": None},
        # even odds: useful (p(1) >= 0.5)
        {"chunk_id": "doc#2", "useful": True, "p_useful": 0.5, "reason": None},
    ]
    # verdicts 0, 1, 1: (precision@2 + precision@3) / 2 = (1/2 + 2/3) / 2
    assert fields["context_precision"] == pytest.approx(7 / 12)
    assert fields["context_precision"] == pytest.approx(ragas_judge.average_precision([0, 1, 1]))


def test_only_one_digit_among_the_top_tokens_is_certain() -> None:
    assert useful_probability(_log({"1": 0.3, "Yes": 0.6})) == 1.0
    assert useful_probability(_log({"0": 0.3, "No": 0.6})) == 0.0
    assert useful_probability({"1": -math.inf, "0": math.log(0.1)}) == 0.0


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (_reply(1, _log({"{": 0.9, "The": 0.1}), "{"), NO_DIGIT),
        (_reply(1, None, "1"), NO_DIGIT),  # written "1": no guess
        (_reply(1, {}, "1"), NO_DIGIT),
        (None, "no valid judge output after retries"),
    ],
    ids=["no-digit", "no-logprobs", "empty-logprobs", "failed-call"],
)
def test_a_chunk_without_a_verdict_token_is_a_failure_never_a_guess(
    reply: JudgeReply | None, why: str
) -> None:
    item = _item([WARRANTY, RETURNS])
    replies: dict[CallKey, Any] = {
        CallKey("cp-answer", "a", (0,)): _reply(0, _log({"1": 0.9, "0": 0.1})),
        CallKey("cp-answer", "a", (1,)): reply,
    }
    failures: list[str] = []
    fields = ContextPrecision("answer", "first_token").score(
        item, replies, failures, FakeEmbedder().embed
    )
    assert fields["context_precision"] is None
    assert failures == [f"context precision doc#1: {why}"]
    assert fields["context_verdicts"][1] == {
        "chunk_id": "doc#1",
        "useful": None,
        "p_useful": None,
        "reason": None,
    }
    assert fields["context_verdicts"][0]["useful"] is True


def test_both_targets_take_the_judges_setting() -> None:
    config = JudgeConfig(context_precision_verdict="first_token")
    chosen = [m for m in metrics_for(config) if isinstance(m, ContextPrecision)]
    assert [(m.target, m.verdict) for m in chosen] == [
        ("answer", "first_token"),
        ("reference", "first_token"),
    ]
    assert {m.verdict for m in metrics_for(JudgeConfig()) if isinstance(m, ContextPrecision)} == {
        "reason"
    }


def _check(tmp_path: Path, judge: FakeJudge, **config: object) -> dict[str, Any]:
    item = _item([RETURNS, WARRANTY], "The warranty lasts 2 years from the delivery date.")
    check_items([item], tmp_path, JudgeConfig.model_validate(config), judge, FakeEmbedder().embed)
    return read_jsonl(tmp_path / "checks.jsonl")[0]


def test_a_check_records_p_useful_no_reason_and_its_mode_in_check_json(tmp_path: Path) -> None:
    judge = FakeJudge()
    row = _check(tmp_path, judge, context_precision_verdict="first_token")
    # the useful chunk ranked second: average precision 0.5, as with reasoned verdicts
    assert row["context_precision"] == pytest.approx(0.5)
    assert row["context_verdicts"] == [
        {"chunk_id": "doc#0", "useful": False, "p_useful": 0.2, "reason": None},
        {"chunk_id": "doc#1", "useful": True, "p_useful": 0.8, "reason": None},
    ]
    assert row["context_precision_with_reference"] == pytest.approx(0.5)
    assert row["judge"]["stages"]["context_precision"]["completion_tokens"] == 2
    cp_calls = [c for c in judge.calls if c.key.stage.startswith("cp-")]
    assert len(cp_calls) == 4 and all(c.max_tokens == 1 and c.schema is None for c in cp_calls)
    manifest = json.loads((tmp_path / "check.json").read_text(encoding="utf-8"))
    assert manifest["judge"]["config"]["context_precision_verdict"] == "first_token"


def test_a_reasoned_check_keeps_ragas_reasons(tmp_path: Path) -> None:
    row = _check(tmp_path, FakeJudge())
    assert row["context_verdicts"] == [
        {"chunk_id": "doc#0", "useful": False, "reason": "word overlap"},
        {"chunk_id": "doc#1", "useful": True, "reason": "word overlap"},
    ]
    assert row["context_precision"] == pytest.approx(0.5)


def test_a_server_without_log_probabilities_leaves_the_score_unknown(tmp_path: Path) -> None:
    judge = FakeJudge()
    judge.logprobs = False
    row = _check(tmp_path, judge, context_precision_verdict="first_token")
    assert row["context_precision"] is None and row["context_precision_with_reference"] is None
    assert f"context precision doc#0: {NO_DIGIT}" in row["judge_failures"]
    assert [v["useful"] for v in row["context_verdicts"]] == [None, None]


def test_a_check_from_before_the_setting_resumes_only_with_reasoned_verdicts() -> None:
    before = JudgeConfig().model_dump(mode="json")
    del before["context_precision_verdict"]
    previous = {"config": before, "sha256": "older"}

    def current(config: JudgeConfig) -> dict[str, Any]:
        return {"config": config.model_dump(mode="json"), "sha256": config_sha256(config)}

    assert _same_judge(previous, current(JudgeConfig()))
    assert not _same_judge(previous, current(JudgeConfig(context_precision_verdict="first_token")))


def test_the_setting_leaves_a_calibration_applicable() -> None:
    """It changes no claim verdict: not part of the settings a calibration must match."""
    first_token = JudgeConfig(context_precision_verdict="first_token").model_dump(mode="json")
    assert verdict_settings(first_token) == verdict_settings(JudgeConfig().model_dump(mode="json"))


@pytest.mark.parametrize(
    ("setting", "said", "chunk_note"),
    [
        ("first_token", "verdict from the first token's probabilities", "p(useful) 0.8"),
        ("reason", "RAGAS, reasoned verdicts", "word overlap"),
    ],
)
def test_the_report_and_the_table_say_how_the_verdicts_were_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, said: str, chunk_note: str
) -> None:
    _fakes(monkeypatch)
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in _labelled(4)), encoding="utf-8")
    run = tmp_path / "run"
    runner = CliRunner()
    set_verdict = f'context_precision_verdict="{setting}"'
    done = runner.invoke(
        cli,
        ["check", "--answers", str(answers), "--out", str(run), "-q", "--judge-set", set_verdict],
    )
    assert done.exit_code == 0, done.output
    out = tmp_path / "report.html"
    shown = runner.invoke(
        cli, ["report", str(run), "--out", str(out), "--history", str(tmp_path / "h.db")]
    )
    assert shown.exit_code == 0, shown.output
    assert f"ctx precision: {said}" in shown.stdout.splitlines()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["context_precision_verdict"] == setting
    html = out.read_text(encoding="utf-8")
    escaped = said.replace("'", "&#39;")
    assert f'<span class="ci cp-method">{escaped}</span>' in html
    assert f'title="{escaped}">context precision' in html
    assert chunk_note in html
    other = "RAGAS, reasoned verdicts" if setting == "first_token" else "first token&#39;s"
    assert other not in html.split('id="definitions"')[0]


def test_the_table_names_each_pipelines_way_where_they_differ() -> None:
    def run(name: str, verdict: str | None) -> SimpleNamespace:
        summary = {
            "metrics": {k: {"value": None} for k in _TABLE_METRICS},
            "throughput_measured": True,
            "context_precision_verdict": verdict,
        }
        return SimpleNamespace(name=name, summary=summary)

    mixed = format_table([run("a", "first_token"), run("b", "reason")])
    assert mixed.splitlines()[-1] == (
        "ctx precision: a, verdict from the first token's probabilities; "
        "b, RAGAS, reasoned verdicts"
    )
    # summaries from before the setting say nothing of it
    assert "ctx precision:" not in format_table([run("a", None)])


_TABLE_METRICS = (
    "tps",
    "ttft_p95_ms",
    "hallucination_rate",
    "context_precision",
    "goodput_tps",
    "slo_goodput_rps",
)
