"""Ingest over real LlamaIndex + FAISS with the fake embedder: incremental, atomic, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.config import FlatIndexConfig, HNSWIndexConfig, IngestConfig, IVFIndexConfig
from auditor.errors import BadInput
from auditor.ingest import IngestProgress, ingest_corpus, read_manifest
from auditor.retrieve import Retriever
from auditor.testing import FakeEmbedder
from tests.conftest import WriteCorpus, make_pdf

DOCS = {
    "returns.md": "# Returns\n\nUnopened thermostats can be returned within 30 days of delivery.",
    "warranty.txt": "The T9 thermostat warranty lasts two years from the delivery date.",
    "pricing.html": "<html><body><p>The Aura monitor costs 129 dollars in 2025.</p></body></html>",
    "manual.pdf": make_pdf(["Battery life of the remote sensor is eighteen months."]),
}


def _documents(index: Path, query: str, fake: FakeEmbedder, k: int = 1) -> list[str]:
    return [h.chunk.document for h in Retriever(index, fake).search(query, k=k)]


def _texts(index: Path, fake: FakeEmbedder) -> str:
    manifest = read_manifest(index)
    hits = Retriever(index, fake).search("anything", k=manifest.totals["chunks"])
    return "\n".join(h.chunk.text for h in hits)


def test_ingest_indexes_every_format_and_writes_manifest(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """All four formats are indexed; the manifest records embedder, chunking and each document."""
    corpus, index = write_corpus(DOCS), tmp_path / "index"
    report = ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    manifest = read_manifest(index)
    assert sorted(report.added) == sorted(DOCS)
    assert manifest.totals == {"documents": 4, "chunks": 4}
    assert manifest.embedder.name == "fake-words" and manifest.embedder.dimension == 64
    assert manifest.chunking["chunk_size"] == 200 and manifest.chunking["chunk_overlap"] == 32
    assert manifest.index["kind"] == "flat" and manifest.index["metric"] == "inner_product"
    entry = next(d for d in manifest.documents if d.path == "manual.pdf")
    assert (entry.format, entry.pages, entry.chunks, entry.size) == (
        "pdf",
        1,
        1,
        len(DOCS["manual.pdf"]),
    )
    assert "faiss-cpu" in manifest.packages and "llama-index-core" in manifest.packages
    assert _documents(index, "remote sensor battery life months", fake_embedder) == ["manual.pdf"]
    assert _documents(index, "Aura monitor cost", fake_embedder) == ["pricing.html"]


def test_reingest_skips_unchanged_documents(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """A second ingest of the same folder embeds nothing and keeps the same chunks."""
    corpus, index = write_corpus(DOCS), tmp_path / "index"
    ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    embedded_before = len(fake_embedder.embedded_texts)
    report = ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    assert len(fake_embedder.embedded_texts) == embedded_before
    assert sorted(report.unchanged) == sorted(DOCS)
    assert (report.chunks_embedded, report.chunks_reused) == (0, 4)


def test_reingest_with_nothing_changed_keeps_the_manifest(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """An ingest that changes nothing rewrites nothing: runs record the manifest's hash, so a
    re-run `make demo` (ingest, then a resumed audit) must find the same index; a changed
    document or index setting still writes a new generation."""
    corpus, index = write_corpus(DOCS), tmp_path / "index"
    ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    before = (index / "manifest.json").read_bytes()
    ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    assert (index / "manifest.json").read_bytes() == before
    assert [p.name for p in index.glob("gen-*")] == ["gen-000001"]

    hnsw = IngestConfig.model_validate({"index": {"kind": "hnsw"}})
    ingest_corpus(corpus, index, hnsw, fake_embedder)
    assert read_manifest(index).index["kind"] == "hnsw"
    assert [p.name for p in index.glob("gen-*")] == ["gen-000002"]
    (corpus / "returns.md").write_text("# Returns\n\nReturns: 45 days.", encoding="utf-8")
    report = ingest_corpus(corpus, index, hnsw, fake_embedder)
    assert report.changed == ["returns.md"]
    assert [p.name for p in index.glob("gen-*")] == ["gen-000003"]


def test_changed_and_deleted_documents_leave_no_stale_chunk(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """After an edit and a deletion, only the new text is retrievable; the rest is untouched."""
    corpus, index = write_corpus(DOCS), tmp_path / "index"
    ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    (corpus / "returns.md").write_text(
        "# Returns\n\nReturns are accepted for 45 days.", encoding="utf-8"
    )
    (corpus / "pricing.html").unlink()
    fake_embedder.embedded_texts.clear()
    report = ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    assert report.changed == ["returns.md"] and report.deleted == ["pricing.html"]
    assert fake_embedder.embedded_texts == ["# Returns\n\nReturns are accepted for 45 days."]
    everything = _texts(index, fake_embedder)
    assert "45 days" in everything
    assert "30 days" not in everything and "Aura" not in everything
    assert read_manifest(index).totals == {"documents": 3, "chunks": 3}
    assert len(list((index / "cache").glob("*.npy"))) == 3  # stale cache entries pruned


def test_bad_document_is_skipped_and_recorded(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """A bad file among good ones is reported, recorded in the manifest and skipped."""
    corpus = write_corpus(DOCS | {"broken.txt": b"\xff\xfe bad"})
    seen: list[str] = []

    class Record(IngestProgress):
        def rejected(self, error: Exception) -> None:
            seen.append(str(error))

    report = ingest_corpus(
        corpus, tmp_path / "index", IngestConfig(), fake_embedder, progress=Record()
    )
    assert [e.path for e in report.rejected] == ["broken.txt"]
    assert seen and seen[0].startswith("broken.txt:1: not UTF-8")
    manifest = read_manifest(tmp_path / "index")
    assert [r.path for r in manifest.rejected] == ["broken.txt"]
    assert manifest.totals["documents"] == 4


def test_strict_fails_on_bad_document_and_writes_nothing(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """--strict stops at the first bad document before anything is written."""
    corpus = write_corpus(DOCS | {"empty.md": ""})
    with pytest.raises(BadInput, match=r"empty\.md: empty file"):
        ingest_corpus(corpus, tmp_path / "index", IngestConfig(), fake_embedder, strict=True)
    assert not (tmp_path / "index").exists()


class _Interrupt(IngestProgress):
    """Raises KeyboardInterrupt once `after` chunks have been embedded (a Ctrl-C)."""

    def __init__(self, after: int) -> None:
        self.after, self.done = after, 0

    def embedded(self, count: int) -> None:
        self.done += count
        if self.done >= self.after:
            raise KeyboardInterrupt


def test_interrupted_ingest_keeps_previous_index_and_resumes(
    write_corpus: WriteCorpus,
    tmp_path: Path,
    fake_embedder: FakeEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C mid-ingest leaves the old index live; the rerun embeds only what was not checkpointed."""
    monkeypatch.setattr("auditor.ingest.build._CHECKPOINT_CHUNKS", 2)
    corpus, index = write_corpus(DOCS), tmp_path / "index"
    ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    manifest_before = (index / "manifest.json").read_text()
    for i in range(6):
        (corpus / f"new{i}.txt").write_text(
            f"New policy number {i} about topic{i}.", encoding="utf-8"
        )
    fake_embedder.embedded_texts.clear()

    with pytest.raises(KeyboardInterrupt):
        ingest_corpus(corpus, index, IngestConfig(), fake_embedder, progress=_Interrupt(after=3))
    assert (index / "manifest.json").read_text() == manifest_before
    assert "topic0" not in _texts(index, fake_embedder)
    assert not list(index.glob("*.tmp"))
    embedded_first = len(fake_embedder.embedded_texts)
    assert embedded_first == 4  # two checkpoint groups of two documents

    fake_embedder.embedded_texts.clear()
    report = ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    # the group being embedded when Ctrl-C came was not checkpointed; the first one was
    assert len(fake_embedder.embedded_texts) == 6 - 2
    assert sorted(report.added) == [f"new{i}.txt" for i in range(6)]
    assert "topic5" in _texts(index, fake_embedder)


def test_index_built_by_another_embedder_is_refused(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """Re-ingesting or searching with a different embedder names the manifest and the way out."""
    corpus, index = write_corpus(DOCS), tmp_path / "index"
    ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    other = FakeEmbedder(dimension=32, name="other")
    with pytest.raises(
        BadInput, match=r"manifest.json: index built by embedder fake-words \(64-d.*--rebuild"
    ):
        ingest_corpus(corpus, index, IngestConfig(), other)
    with pytest.raises(BadInput, match=r"manifest\.json: index built by embedder fake-words"):
        Retriever(index, other)
    report = ingest_corpus(corpus, index, IngestConfig(), other, rebuild=True)
    assert report.chunks_embedded == 4 and read_manifest(index).embedder.dimension == 32


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda index: (index / "manifest.json").write_text("{not json"), "corrupt index manifest"),
        (
            lambda index: (index / "manifest.json").write_text('{"schema_version": 99}'),
            "schema version 99",
        ),
        (
            lambda index: (index / "manifest.json").write_text(
                json.dumps(json.loads((index / "manifest.json").read_text()) | {"totals": "x"})
            ),
            r"corrupt index manifest \(totals",
        ),
        (lambda index: __import__("shutil").rmtree(index / "gen-000001"), "missing index data"),
        (
            lambda index: (index / "gen-000001" / "default__vector_store.json").write_bytes(
                b"junk"
            ),
            "corrupt index data",
        ),
    ],
    ids=["bad-json", "schema-version", "bad-field", "missing-generation", "corrupt-faiss"],
)
def test_corrupt_index_gives_one_line_fix(
    write_corpus: WriteCorpus,
    tmp_path: Path,
    fake_embedder: FakeEmbedder,
    damage,
    message: str,  # type: ignore[no-untyped-def]
) -> None:
    """A damaged index dir is reported with the file and the way out (--rebuild), never a traceback."""
    corpus, index = write_corpus(DOCS), tmp_path / "index"
    ingest_corpus(corpus, index, IngestConfig(), fake_embedder)
    damage(index)
    with pytest.raises(BadInput, match=message) as caught:
        Retriever(index, fake_embedder)
    assert "--rebuild" in str(caught.value) and "\n" not in str(caught.value)
    report = ingest_corpus(corpus, index, IngestConfig(), fake_embedder, rebuild=True)
    assert report.chunks_embedded == 4
    assert _documents(index, "Aura monitor cost", fake_embedder) == ["pricing.html"]


def test_missing_folder_and_folder_without_documents(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """No folder, or nothing ingestible in it, is a usage error naming the folder."""
    with pytest.raises(BadInput, match="no such folder"):
        ingest_corpus(tmp_path / "nope", tmp_path / "i", IngestConfig(), fake_embedder)
    only_images = write_corpus({"a.png": b"\x89PNG", "b.jpg": b"\xff\xd8"})
    with pytest.raises(BadInput, match=r"no supported documents \(.*\.pdf"):
        ingest_corpus(only_images, tmp_path / "i", IngestConfig(), fake_embedder)
    all_bad = write_corpus({"a.txt": "", "b.md": b"\x00"})
    with pytest.raises(BadInput, match="every document was rejected"):
        ingest_corpus(all_bad, tmp_path / "i", IngestConfig(), fake_embedder)
    assert not (tmp_path / "i").exists()


def test_refuses_to_write_into_a_folder_that_is_not_an_index(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """An existing non-index folder is never written into (nothing of the user's is lost)."""
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(BadInput, match="not an auditor index"):
        ingest_corpus(write_corpus(DOCS), target, IngestConfig(), fake_embedder)
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    "index_config",
    [FlatIndexConfig(), HNSWIndexConfig(kind="hnsw", m=8), IVFIndexConfig(kind="ivf", nprobe=64)],
    ids=["flat", "hnsw", "ivf"],
)
def test_index_types_retrieve_the_right_chunk(
    write_corpus: WriteCorpus,
    tmp_path: Path,
    fake_embedder: FakeEmbedder,
    index_config,  # type: ignore[no-untyped-def]
) -> None:
    """Exact, HNSW and IVF indexes all find a document by its distinctive words."""
    files = {f"doc{i:02d}.txt": f"Document {i} is about subject{i} and item{i}." for i in range(40)}
    index = tmp_path / "index"
    ingest_corpus(write_corpus(files), index, IngestConfig(index=index_config), fake_embedder)
    manifest = read_manifest(index)
    assert manifest.index["kind"] == index_config.kind
    if index_config.kind == "ivf":
        assert manifest.index["nlist"] == int(4 * 40**0.5)
    for i in (0, 17, 39):
        assert _documents(index, f"subject{i} item{i}", fake_embedder) == [f"doc{i:02d}.txt"]


def test_chunks_fit_the_embedder_window_and_overlap(
    write_corpus: WriteCorpus, tmp_path: Path, fake_embedder: FakeEmbedder
) -> None:
    """Long documents split into chunks no longer than chunk_size word pieces, in order."""
    words = " ".join(f"w{i}." for i in range(500))
    index = tmp_path / "index"
    config = IngestConfig.model_validate({"chunking": {"chunk_size": 64, "chunk_overlap": 8}})
    ingest_corpus(write_corpus({"long.txt": words}), index, config, fake_embedder)
    hits = Retriever(index, fake_embedder).search("w1", k=100)
    chunks = sorted((h.chunk for h in hits), key=lambda c: c.index)
    assert len(chunks) >= 500 // 64
    assert all(len(fake_embedder.tokenize(c.text)) <= 64 for c in chunks)
    assert [c.chunk_id for c in chunks] == [f"long.txt#{i}" for i in range(len(chunks))]
    assert (
        chunks[0].char_start == 0
        and words[chunks[1].char_start : chunks[1].char_end] == chunks[1].text
    )


def test_chunk_size_larger_than_embedder_window_is_refused(
    write_corpus: WriteCorpus, tmp_path: Path
) -> None:
    """A chunk that the embedder would truncate is a config error naming the limit."""
    config = IngestConfig.model_validate({"chunking": {"chunk_size": 300}})
    with pytest.raises(BadInput, match="exceeds the embedder's window of 254"):
        ingest_corpus(write_corpus(DOCS), tmp_path / "i", config, FakeEmbedder())
