"""The review page's data, built in Python for review.js: the evidence sentence found in its
chunk (as written, else re-spaced) and cut out for a <mark>, a flagged claim's deciding chunks
open, flagged claims first with their own index, what each label carries (question, answer,
contexts, source_id, each claim's span and the judge's flag at the check's threshold), and
the judge's flags on every checked answer for the provisional rate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from auditor.report import _evidence_at, _marked_pieces, _review_views
from auditor.results import RunArtifacts
from auditor.review import check_fingerprint, choose_sample, run_fingerprint

CHUNK = (
    "Returns are free.  Unopened thermostats can be\nreturned within 30 days. Opened ones cannot."
)


@pytest.mark.parametrize(
    ("evidence", "found"),
    [
        ("Returns are free.", (0, 17)),
        ("Unopened thermostats can be returned within 30 days.", (19, 71)),
        ("  Opened ones cannot. ", (72, 91)),
        ("Unopened thermostats can be returned within 90 days.", None),
        ("   ", None),
    ],
    ids=["exact", "re-spaced", "trimmed", "absent", "blank"],
)
def test_the_evidence_is_found_as_written_else_with_any_spacing(
    evidence: str, found: tuple[int, int] | None
) -> None:
    """An exact substring first, else any run of whitespace for any other; else no mark."""
    assert _evidence_at(CHUNK, evidence) == found


def test_marks_cut_a_chunk_into_before_marked_after_and_overlaps_merge() -> None:
    """Pieces rebuild the text; two overlapping evidence spans make one mark."""
    pieces = _marked_pieces("abcdefghij", [(5, 8), (2, 4), (3, 6)])
    assert pieces == [
        {"text": "ab", "marked": False},
        {"text": "cdefgh", "marked": True},
        {"text": "ij", "marked": False},
    ]
    assert _marked_pieces("abc", []) == [{"text": "abc", "marked": False}]
    assert _marked_pieces("abc", [(0, 3)]) == [{"text": "abc", "marked": True}]
    assert _marked_pieces("", []) == [{"text": "", "marked": False}]


def _claim(text: str, span: Any, verdict: str, p: float | None, **more: Any) -> dict[str, Any]:
    return {"text": text, "span": span, "verdict": verdict, "p_supported": p} | more


def _run(tmp_path: Path, threshold: float | None) -> RunArtifacts:
    answer = "The warranty lasts 2 years. Returns within 90 days. Shipping is free."
    records: list[dict[str, Any]] = [
        {
            "id": "q1",
            "question": "What are the terms?",
            "answer": answer,
            "retrieved": [
                {"chunk_id": "c1", "text": "The warranty lasts 2 years from delivery."},
                {"chunk_id": "c2", "text": CHUNK},
                {"chunk_id": "c3", "text": "Shipping costs 5 dollars."},
            ],
        },
        {
            "id": "q2",
            "question": "Other?",
            "answer": "Fine.",
            "source_id": "shared",
            "retrieved": [],
        },
        {"id": "q3", "question": "Third?", "answer": "Yes.", "retrieved": []},
    ]
    claims = [
        # supported, p 0.6: flagged only at a threshold above 0.6
        _claim("The warranty lasts 2 years.", [0, 27], "supported", 0.6,
               evidence="The warranty lasts 2 years from delivery.", supporting_chunks=["c1"]),
        _claim("Returns within 90 days.", [28, 51], "contradicted", 0.0,
               evidence="Unopened thermostats can be returned within 30 days.",
               contradicting_chunks=["c2", "kb-9"]),
        _claim("Shipping is free.", [52, 200], "unsupported", None, evidence="not in any chunk"),
    ]  # fmt: skip
    checks = [
        {"id": "q1", "claims": claims},
        {"id": "q2", "claims": [_claim("Fine.", [0, 5], "supported", 0.9)]},
        {"id": "q3", "claims": [_claim("Yes.", None, "unsupported", 0.1)]},
    ]
    manifest = {"pipeline": {"name": "p"}}
    judge = None if threshold is None else {"judge": {"config": {"support_threshold": threshold}}}
    # seed 2 draws q1, then q2 (review.json is the draw of its seed, or not shown)
    review = choose_sample(
        ["q1", "q2", "q3"], 2, 2, run_fingerprint(manifest), check_fingerprint(judge)
    )
    assert review.sample == ["q1", "q2"]
    (tmp_path / "review.json").write_text(json.dumps(review.to_json()), encoding="utf-8")
    return RunArtifacts(tmp_path, manifest, records, checks, judge)


def test_a_drawn_answer_carries_its_label_data_flagged_claims_first_and_marked_sources(
    tmp_path: Path,
) -> None:
    """At the check's threshold 0.7 the supported claim (p 0.6) is flagged too: the flags the
    command's reviewed rate uses, not the verdict's colour."""
    view = _review_views([_run(tmp_path, 0.7)])["reviews"][0]
    # q1 and q3 flagged, of every check row; each row's score (1 - its least p_supported) is
    # what the page's provisional rate leans on, as the command's does
    assert view["judge"] == {"population": 3, "flagged": 2, "scores": [1.0, 0.1, 0.9]}
    first, second = view["drawn"]
    assert [(c["index"], c["flagged"]) for c in first["claims"]] == [
        (0, True), (1, True), (2, True)
    ]  # fmt: skip
    data = first["data"]
    assert data["question"] == "What are the terms?" and data["source_id"] == "q1"
    assert data["answer"].startswith("The warranty") and data["flagged"] is True
    assert data["score"] == 1.0
    assert data["contexts"] == [c["text"] for c in _run(tmp_path, 0.7).records[0]["retrieved"]]
    # a span past the answer's end is no span a labels file takes
    assert [c["span"] for c in data["claims"]] == [[0, 27], [28, 51], None]
    sources = {s["chunk"]["chunk_id"]: s for s in first["sources"]}
    assert sources["c2"]["open"] and sources["c1"]["open"] and not sources["c3"]["open"]
    marked = [p["text"] for p in sources["c2"]["pieces"] if p["marked"]]
    assert marked == ["Unopened thermostats can be\nreturned within 30 days."]
    assert "".join(p["text"] for p in sources["c2"]["pieces"]) == CHUNK
    assert not any(p["marked"] for p in sources["c3"]["pieces"])
    assert second["data"]["source_id"] == "shared" and second["data"]["flagged"] is False


def test_at_the_default_threshold_passed_claims_come_after_flagged_ones_and_fold(
    tmp_path: Path,
) -> None:
    """Without a check manifest the threshold is 0.5: the p 0.6 claim passes, goes after the
    flagged ones (keeping its index), and its chunk folds though its evidence is marked."""
    first = _review_views([_run(tmp_path, None)])["reviews"][0]["drawn"][0]
    assert [(c["index"], c["flagged"]) for c in first["claims"]] == [
        (1, True), (2, True), (0, False)
    ]  # fmt: skip
    sources = {s["chunk"]["chunk_id"]: s for s in first["sources"]}
    assert not sources["c1"]["open"] and sources["c1"]["marked"] and sources["c2"]["open"]
