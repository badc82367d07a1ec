"""Can an audit tell two pipelines apart? Paired differences over shared questions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditor.compare import PairedDifference, compare_pair, headline
from auditor.results import RunArtifacts


def _run(name: str, hallucinated: list[bool], tokens: int = 10) -> RunArtifacts:
    """A run whose every answer has one claim, hallucinated or not; 10 s of generation."""
    records = [
        {"id": f"q{k}", "answer": "a", "output_tokens": tokens, "finish_reason": "stop",
         "ttft_s": 0.1, "tpot_s": 0.01, "e2e_s": 1.0, "error": None}
        for k in range(len(hallucinated))
    ]  # fmt: skip
    checks = [
        {"id": f"q{k}", "outcome": "checked", "hallucinated": bad,
         "claim_counts": {"supported": 0 if bad else 1, "unsupported": int(bad),
                          "contradicted": 0, "unverifiable": 0}}
        for k, bad in enumerate(hallucinated)
    ]  # fmt: skip
    tps = tokens * len(hallucinated) / 10.0
    manifest: dict[str, Any] = {"pipeline": {"name": name}, "sessions": [{"generation_s": 10.0}]}
    summary = {"generation_s": 10.0, "metrics": {"tps": {"value": tps}}}
    return RunArtifacts(Path(name), manifest, records, checks, None, summary)


def test_a_clear_difference_is_told_apart_and_a_small_one_is_not() -> None:
    good = _run("good", [k % 10 == 0 for k in range(40)])  # h 0.1, goodput 36
    bad = _run("bad", [k % 2 == 0 for k in range(40)])  # h 0.5, goodput 20
    pair = compare_pair(good, bad, "goodput_tps", rounds=400)
    assert pair.value_a == pytest.approx(36.0) and pair.value_b == pytest.approx(20.0)
    assert pair.questions == 40 and pair.distinguishable
    low, high = pair.interval or (0, 0)
    assert 0 < low < 16 < high
    sentence = headline(pair)
    assert sentence is not None
    assert sentence.startswith("good has the higher goodput: 36.0 vs 20.0 tok/s for bad (+16.0")
    assert sentence.endswith("this audit tells them apart.")

    close = _run("close", [k % 8 == 0 for k in range(40)])  # h 0.125
    pair = compare_pair(good, close, "hallucination_rate", rounds=400)
    assert not pair.distinguishable and pair.difference == pytest.approx(0.1 - 0.125)
    assert pair.questions_needed is not None and pair.questions_needed > 40


def test_questions_needed_scale_with_the_square_of_the_interval() -> None:
    pair = PairedDifference("goodput_tps", "a", "b", 11.0, 10.0, (-0.96, 2.96), 100)
    # SE = 3.92 / 3.92 = 1; n = 100 x (2.8016 x 1 / 1)^2
    assert pair.questions_needed == 785 and not pair.distinguishable
    assert PairedDifference("x", "a", "b", 1.0, 1.0, (-1, 1), 10).questions_needed is None


def test_only_shared_questions_are_compared() -> None:
    a = _run("a", [False] * 10)
    b = _run("b", [True] * 4)
    pair = compare_pair(a, b, "hallucination_rate", rounds=50)
    assert pair.questions == 4 and pair.value_a == 0.0 and pair.value_b == 1.0
