"""What claims are checked against: returned contexts, the trusted knowledge base, or both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.config import IngestConfig, JudgeConfig
from auditor.errors import BadInput
from auditor.ingest import ingest_corpus
from auditor.store import RecordWriter, read_jsonl, write_run_manifest
from auditor.testing import FakeEmbedder, FakeJudge
from auditor.verify.answers import choose_sources, items_from_run
from auditor.verify.check import check_run
from tests.conftest import WriteCorpus

KB = {
    "warranty.md": "The T9 thermostat warranty lasts 2 years from the delivery date.",
    "returns.md": "Unopened thermostats can be returned within 30 days of delivery.",
    "plants.md": "Office plants are watered on Fridays by the facilities team.",
}
ANSWER = (
    "The T9 thermostat warranty lasts 2 years from the delivery date. "
    "Unopened thermostats can be returned within 30 days of delivery."
)
# what a service returned: only the returns passage (its retriever missed the warranty)
RETURNED = [{"chunk_id": "svc-7", "document": "faq", "page": None, "score": 0.8,
             "text": "Unopened thermostats can be returned within 30 days of delivery."}]  # fmt: skip


@pytest.fixture
def kb(write_corpus: WriteCorpus, tmp_path: Path, use_fake_embedder: FakeEmbedder) -> Path:
    index = tmp_path / "kb"
    ingest_corpus(write_corpus(KB), index, IngestConfig(), use_fake_embedder)
    return index


def _service_run(run_dir: Path, returned: list[dict[str, object]] | None) -> Path:
    """A run dir as `auditor run` writes it for an http target."""
    run_dir.mkdir(parents=True)
    with RecordWriter(run_dir) as writer:
        writer.write(
            {
                "id": "q1",
                "question": "What are the warranty and return terms?",
                "reference": None,
                "retrieval": "target",
                "contexts_returned": returned is not None,
                "retrieved": returned or [],
                "answer": ANSWER,
                "error": None,
            }
        )
    write_run_manifest(
        run_dir,
        {
            "schema_version": 1, "run_id": run_dir.name, "status": "complete",
            "pipeline": {"name": run_dir.name}, "questions": {}, "sessions": [],
        },
    )  # fmt: skip
    return run_dir


def _check(run_dir: Path, kb: Path | None, sources: str = "auto") -> dict[str, object]:
    items = items_from_run(run_dir)
    choose_sources(items, run_dir, sources, kb)
    check_run(
        [(run_dir, items)],
        JudgeConfig.model_validate({"metrics": ["faithfulness", "context_precision"]}),
        judge_factory=lambda config: FakeJudge(),
        embed=FakeEmbedder().embed,
        kb_index=kb,
    )
    (row,) = read_jsonl(run_dir / "checks.jsonl")
    return row


def test_a_service_without_contexts_is_checked_against_the_knowledge_base(
    kb: Path, tmp_path: Path
) -> None:
    row = _check(_service_run(tmp_path / "run", None), kb)
    assert row["sources"] == "kb" and row["outcome"] == "checked"
    claims = row["claims"]
    assert [c["verdict"] for c in claims] == ["supported", "supported"]
    assert claims[0]["supporting_chunks"] == ["warranty.md#0"]
    assert set(claims[0]["chunk_sources"].values()) == {"kb"}
    assert {c["chunk_id"] for c in row["kb_chunks"]} >= {"warranty.md#0", "returns.md#0"}
    assert all(c["document"] and c["text"] for c in row["kb_chunks"])
    # nothing returned, so nothing to rank: context precision is not measurable
    assert row["context_precision"] is None
    manifest = json.loads((tmp_path / "run" / "check.json").read_text())
    assert manifest["sources"] == ["kb"] and len(manifest["kb"]["manifest_sha256"]) == 64


def test_both_supports_a_claim_from_either_and_says_which(kb: Path, tmp_path: Path) -> None:
    row = _check(_service_run(tmp_path / "run", RETURNED), kb)
    assert row["sources"] == "both"
    warranty, returns = row["claims"]
    # the service never returned the warranty passage: the knowledge base supports it
    assert warranty["verdict"] == "supported"
    assert warranty["supporting_chunks"] == ["warranty.md#0"]
    assert warranty["chunk_sources"]["warranty.md#0"] == "kb"
    # the returns claim is supported by what the service returned, and by the KB too
    assert "svc-7" in returns["supporting_chunks"]
    assert returns["chunk_sources"]["svc-7"] == "returned"
    assert row["context_precision"] is not None


def test_returned_only_flags_what_the_service_did_not_return(kb: Path, tmp_path: Path) -> None:
    row = _check(_service_run(tmp_path / "run", RETURNED), kb, sources="returned")
    assert [c["verdict"] for c in row["claims"]] == ["unsupported", "supported"]
    assert "kb_chunks" not in row
    assert all(set(c["chunk_sources"].values()) == {"returned"} for c in row["claims"])


def test_choices_that_cannot_work_are_refused_in_one_line(kb: Path, tmp_path: Path) -> None:
    silent = _service_run(tmp_path / "silent", None)
    items = items_from_run(silent)
    with pytest.raises(BadInput, match="returns no contexts; give --index KB_DIR"):
        choose_sources(items, silent, "auto", None)
    with pytest.raises(BadInput, match="returned no contexts; check against the knowledge base"):
        choose_sources(items, silent, "returned", kb)
    with pytest.raises(BadInput, match="--sources both needs --index KB_DIR"):
        choose_sources(items, silent, "both", None)
    # "both" on an answer without returned contexts falls back to the knowledge base alone
    choose_sources(items, silent, "both", kb)
    assert items[0].sources == "kb"


def test_resuming_with_other_sources_is_refused(kb: Path, tmp_path: Path) -> None:
    run_dir = _service_run(tmp_path / "run", RETURNED)
    _check(run_dir, kb, sources="returned")
    with pytest.raises(BadInput, match="made against sources returned"):
        _check(run_dir, kb, sources="both")


def test_the_report_names_where_each_supporting_chunk_came_from(kb: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from auditor.cli import cli

    run_dir = _service_run(tmp_path / "run", RETURNED)
    _check(run_dir, kb)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "Supported by warranty.md#0 (warranty.md), knowledge base" in html
    assert "Supported by svc-7 (faq), returned by the service" in html
