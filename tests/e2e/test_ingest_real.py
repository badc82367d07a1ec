"""End to end on the real stack: packaged MiniLM, LlamaIndex, FAISS, real documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import IngestConfig
from auditor.ingest import ingest_corpus
from auditor.questions import load_questions
from auditor.retrieve import Retriever, retrieval_recall
from tests.conftest import KESTREL

pytestmark = pytest.mark.e2e


def ragtruth_cases(dataset: Path) -> list[tuple[str, set[str]]]:
    """One case per question: its three passages are the gold documents."""
    cases: dict[str, set[str]] = {}
    for line in (dataset / "dev.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        gold = {f"{row['source_id']}_p{k}.txt" for k in range(1, len(row["contexts"]) + 1)}
        cases[row["question"]] = gold
    return sorted(cases.items())


def test_ragtruth_gold_passages_are_retrieved(
    ragtruth: Path, tmp_path: Path, real_embedder
) -> None:  # type: ignore[no-untyped-def]
    """Over 201 real passages, each dev question finds its own passages (README figures)."""
    report = ingest_corpus(ragtruth / "corpus", tmp_path / "index", IngestConfig(), real_embedder)
    assert report.manifest.totals["documents"] == 201 and not report.rejected
    cases = ragtruth_cases(ragtruth)
    assert len(cases) == 67
    scores = retrieval_recall(Retriever(tmp_path / "index", real_embedder), cases, ks=(3, 5))
    print("ragtruth retrieval:", {k: round(v, 3) for k, v in scores.items()})
    # A random or broken embedder scores about 3/201 here; a chunker that drops text loses hits.
    assert scores["recall@3"] >= 0.85
    assert scores["recall@5"] >= 0.90
    assert scores["hit@3"] >= 0.95


def test_kestrel_questions_find_their_documents(tmp_path: Path, real_embedder) -> None:  # type: ignore[no-untyped-def]
    """The bundled questions retrieve the documents that answer them."""
    ingest_corpus(KESTREL / "docs", tmp_path / "index", IngestConfig(), real_embedder)
    cases = [
        (q.question, set(q.metadata["documents"]))
        for q in load_questions(KESTREL / "questions.jsonl")
        if q.metadata["documents"]
    ]
    scores = retrieval_recall(Retriever(tmp_path / "index", real_embedder), cases, ks=(3, 5))
    print("kestrel retrieval:", {k: round(v, 3) for k, v in scores.items()})
    assert scores["hit@5"] >= 0.85


def test_cli_ingest_then_search_with_the_packaged_embedder(tmp_path: Path) -> None:
    """The user's path: ingest the bundled corpus, re-ingest (nothing embedded), search --json."""
    runner = CliRunner()
    index = str(tmp_path / "index")
    docs = str(KESTREL / "docs")
    first = runner.invoke(cli, ["ingest", docs, "--index", index, "--json"], catch_exceptions=False)
    assert first.exit_code == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["documents"] == 22 and report["chunks"] > 100
    assert (
        report["embedder"]["name"] == "all-MiniLM-L6-v2" and report["embedder"]["dimension"] == 384
    )
    assert len(report["embedder"]["sha256"]) == 64
    again = runner.invoke(cli, ["ingest", docs, "--index", index, "--json"], catch_exceptions=False)
    assert json.loads(again.stdout)["chunks_embedded"] == 0
    found = runner.invoke(
        cli,
        [
            "search",
            "--index",
            index,
            "restocking fee for an opened thermostat",
            "--json",
            "-k",
            "3",
        ],
        catch_exceptions=False,
    )
    assert found.exit_code == 0, found.stderr
    rows = json.loads(found.stdout)
    assert "returns-and-refunds-policy.md" in [r["document"] for r in rows]
    assert all(0.0 < r["score"] <= 1.0001 for r in rows)
