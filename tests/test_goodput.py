"""Goodput and interval arithmetic on hand-computed cases."""

from __future__ import annotations

from typing import Any

import pytest

from auditor.config import GoodputConfig, SLOConfig
from auditor.goodput import summarize

MANIFEST = {"run_id": "r", "kind": "run", "sessions": [{"generation_s": 10.0}], "load_regime": {}}


def _record(
    ident: str, tokens: int, ttft: float, tpot: float, e2e: float, **extra: Any
) -> dict[str, Any]:
    return {
        "id": ident,
        "answer": "an answer",
        "output_tokens": tokens,
        "finish_reason": "stop",
        "ttft_s": ttft,
        "tpot_s": tpot,
        "e2e_s": e2e,
        "error": None,
    } | extra


def _check(
    ident: str, supported: int, unsupported: int, contradicted: int = 0, **extra: Any
) -> dict[str, Any]:
    judged = supported + unsupported + contradicted
    return {
        "id": ident,
        "outcome": "checked",
        "claim_counts": {
            "supported": supported,
            "unsupported": unsupported,
            "contradicted": contradicted,
            "unverifiable": extra.pop("unverifiable", 0),
        },
        "hallucinated": unsupported + contradicted > 0,
        "faithfulness": supported / judged if judged else None,
        "context_precision": extra.pop("cp", None),
        "answer_relevancy": extra.pop("relevancy", None),
    } | extra


def _value(summary: dict[str, Any], name: str) -> Any:
    return summary["metrics"][name]["value"]


def test_two_requests_by_hand() -> None:
    """tps, h, goodput, good tokens, SLO and quality SLO goodput computed by hand."""
    records = [_record("a", 60, 0.5, 0.05, 3.5), _record("b", 40, 2.0, 0.05, 4.0)]
    checks = [_check("a", 3, 1, cp=1.0), _check("b", 4, 0, cp=0.5)]
    summary = summarize(
        MANIFEST, records, checks, SLOConfig(ttft_ms=1000), GoodputConfig(), rounds=200
    )
    assert _value(summary, "tps") == pytest.approx(100 / 10)
    assert _value(summary, "hallucination_rate") == pytest.approx(1 / 8)
    assert _value(summary, "goodput_tps") == pytest.approx(10 * (1 - 1 / 8))
    assert _value(summary, "good_tokens") == pytest.approx(60 * 3 / 4 + 40)
    assert _value(summary, "faithfulness") == pytest.approx((0.75 + 1.0) / 2)
    assert _value(summary, "context_precision") == pytest.approx(0.75)
    # only "a" meets TTFT <= 1 s, and "a" has an unsupported claim: not fully faithful
    assert _value(summary, "slo_goodput_rps") == pytest.approx(1 / 10)
    assert _value(summary, "quality_slo_goodput_rps") == 0.0
    assert _value(summary, "ttft_p95_ms") == pytest.approx((0.5 + 0.95 * 1.5) * 1000)
    assert summary["metrics"]["tps"]["ci95"] is None  # measured once, not a statistic
    low, high = summary["metrics"]["hallucination_rate"]["ci95"]
    # resamples hold {a,a}, {a,b} or {b,b}: h ranges over 1/4, 1/8 and 0
    assert 0.0 <= low <= 1 / 8 <= high <= 0.25
    assert summary["claims"] == {
        "supported": 7,
        "unsupported": 1,
        "contradicted": 0,
        "unverifiable": 0,
    }


def test_quality_weight_with_relevancy_and_completion_exponents() -> None:
    """w = (1-h)^a * relevancy^b * completion^c; an answer cut at max_tokens is not complete."""
    records = [_record("a", 10, 1, 0.1, 2), _record("b", 10, 1, 0.1, 2, finish_reason="length")]
    checks = [_check("a", 1, 1, relevancy=0.8), _check("b", 2, 0, relevancy=0.6)]
    weights = GoodputConfig(hallucination=2.0, relevancy=1.0, completion=1.0)
    summary = summarize(MANIFEST, records, checks, SLOConfig(), weights, rounds=50)
    assert _value(summary, "completion") == 0.5
    assert _value(summary, "quality_weight") == pytest.approx((1 - 1 / 4) ** 2 * 0.7 * 0.5)
    assert _value(summary, "goodput_tps") == pytest.approx(2.0 * (0.75**2) * 0.7 * 0.5)


def test_empty_run_has_no_figures_and_no_nan() -> None:
    summary = summarize(MANIFEST | {"sessions": []}, [], [], SLOConfig(), GoodputConfig())
    assert summary["requests"] == 0
    assert all(m["value"] is None and m["ci95"] is None for m in summary["metrics"].values())


def test_all_failed_run() -> None:
    """Every request failed: zero throughput and zero SLO goodput, no quality, error rate 1."""
    records = [_record("a", 0, 0, 0, 0, error="timeout"), _record("b", 0, 0, 0, 0, error="timeout")]
    summary = summarize(MANIFEST, records, [], SLOConfig(ttft_ms=1000), GoodputConfig())
    assert _value(summary, "tps") == 0.0 and _value(summary, "error_rate") == 1.0
    assert _value(summary, "slo_goodput_rps") == 0.0 and _value(summary, "goodput_tps") is None
    assert _value(summary, "hallucination_rate") is None and _value(summary, "ttft_p95_ms") is None


def test_single_answer_interval_is_the_value() -> None:
    records = [_record("a", 20, 0.2, 0.02, 1.0)]
    summary = summarize(MANIFEST, records, [_check("a", 2, 1)], SLOConfig(), GoodputConfig())
    metric = summary["metrics"]["hallucination_rate"]
    assert metric["value"] == pytest.approx(1 / 3) and metric["ci95"] == pytest.approx(
        [1 / 3, 1 / 3]
    )
    # no SLO set: every answered request meets it
    assert _value(summary, "slo_goodput_rps") == pytest.approx(0.1)


def test_unverifiable_claims_are_counted_apart() -> None:
    records = [_record("a", 20, 0.2, 0.02, 1.0)]
    checks = [_check("a", 1, 1, unverifiable=2)]
    summary = summarize(MANIFEST, records, checks, SLOConfig(), GoodputConfig())
    assert _value(summary, "hallucination_rate") == 0.5
    assert _value(summary, "unverifiable_rate") == 0.5


def test_answers_from_logs_have_no_throughput() -> None:
    manifest = {"run_id": "x", "kind": "answers", "load_regime": {"mode": "not measured"}}
    records = [{"id": "a", "answer": "x", "error": None}]
    summary = summarize(manifest, records, [_check("a", 1, 0)], SLOConfig(), GoodputConfig())
    assert summary["throughput_measured"] is False
    assert _value(summary, "tps") is None and _value(summary, "goodput_tps") is None
    assert _value(summary, "slo_goodput_rps") is None
    assert _value(summary, "hallucination_rate") == 0.0


def test_durations_read_in_the_unit_a_person_uses() -> None:
    from auditor.formatting import format_duration_ms

    assert format_duration_ms(840.4) == "840 ms"
    assert format_duration_ms(76_627) == "76.6 s"
    assert format_duration_ms(1_234) == "1.23 s"
    assert format_duration_ms(725_000) == "12 min 5 s"
    assert format_duration_ms(None) == "n/a" and format_duration_ms(float("nan")) == "n/a"


def test_a_calibration_adds_rates_corrected_for_the_judge_by_hand() -> None:
    """20 requests, 7 of 20 claims flagged: judged h 0.35. A judge with sensitivity 0.8 and
    specificity 0.7 flags 0.35 of claims when the true rate is 0.1 (Rogan-Gladen), so the
    corrected weight is 0.9 and goodput 10 tok/s x 0.9; intervals hold the point, and the
    corrected rate's is wider than the judged one's (it carries the calibration too)."""
    from auditor.calibration import JudgeAccuracy

    records = [_record(f"r{k}", 5, 0.5, 0.05, 1.0) for k in range(20)]
    checks = [_check(f"r{k}", 0 if k < 7 else 1, 1 if k < 7 else 0) for k in range(20)]
    judge = JudgeAccuracy(true_positives=80, positives=100, true_negatives=70, negatives=100)
    summary = summarize(
        MANIFEST, records, checks, SLOConfig(), GoodputConfig(), rounds=400, calibration=judge
    )
    assert _value(summary, "hallucination_rate") == pytest.approx(0.35)
    assert _value(summary, "hallucination_rate_corrected") == pytest.approx(0.1)
    assert _value(summary, "quality_weight_corrected") == pytest.approx(0.9)
    assert _value(summary, "goodput_tps_corrected") == pytest.approx(10.0 * 0.9)
    judged_low, judged_high = summary["metrics"]["hallucination_rate"]["ci95"]
    low, high = summary["metrics"]["hallucination_rate_corrected"]["ci95"]
    assert low <= 0.1 <= high and high - low > judged_high - judged_low

    plain = summarize(MANIFEST, records, checks, SLOConfig(), GoodputConfig(), rounds=50)
    assert _value(plain, "hallucination_rate_corrected") is None
    chance = JudgeAccuracy(true_positives=50, positives=100, true_negatives=50, negatives=100)
    weak = summarize(
        MANIFEST, records, checks, SLOConfig(), GoodputConfig(), rounds=50, calibration=chance
    )
    assert _value(weak, "goodput_tps_corrected") is None  # never a figure it cannot support
