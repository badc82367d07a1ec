"""`ingest_corpus`: a knowledge-base folder into a FAISS index dir, incrementally and atomically."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.config import IngestConfig
from auditor.errors import BadInput
from auditor.files import utc_now, write_json_atomic
from auditor.ingest.chunking import (
    CHARS_PER_PIECE,
    SEGMENT_CHARS,
    ChunkPiece,
    Splitter,
    chunk_document,
    make_splitter,
)
from auditor.ingest.embed import Embedder
from auditor.ingest.index import (
    GENERATION_PREFIX,
    ChunkCache,
    gpu_count,
    import_faiss,
    index_params,
    remove_stale_generations,
    write_generation,
)
from auditor.ingest.loaders import SUPPORTED_SUFFIXES, DocumentError, discover_files, read_document
from auditor.ingest.manifest import (
    MANIFEST_NAME,
    DocumentEntry,
    EmbedderEntry,
    IndexManifest,
    RejectedEntry,
    chunk_id,
    read_manifest,
)
from auditor.types import Document
from auditor.versions import package_versions

if TYPE_CHECKING:
    import numpy as np

__all__ = ["IngestProgress", "IngestReport", "ingest_corpus"]

# Bumped when reading or chunking changes what a document version turns into.
_PIPELINE_VERSION = "1"
# Embed this many chunks between checkpoints: an interrupt loses at most one group.
_CHECKPOINT_CHUNKS = 2048


@dataclass
class IngestReport:
    """What an ingest did, for the CLI summary and the tests."""

    index_dir: Path
    manifest: IndexManifest
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    rejected: list[DocumentError] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why): links, FIFOs
    chunks_embedded: int = 0
    chunks_reused: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0

    @property
    def chunks(self) -> int:
        return self.manifest.totals["chunks"]


class IngestProgress:
    """Callbacks the CLI turns into a progress bar; the default does nothing."""

    def start_embedding(self, total_chunks: int) -> None:
        """Called once with the number of chunks that need embedding."""

    def embedded(self, count: int) -> None:
        """Called after each batch of `count` chunks."""

    def rejected(self, error: DocumentError) -> None:
        """Called for each document that is skipped."""


def _cache_key(document: Document, embedder_sha: str, config: IngestConfig) -> str:
    parts = (
        document.sha256,
        embedder_sha,
        str(config.chunking.chunk_size),
        str(config.chunking.chunk_overlap),
        _PIPELINE_VERSION,
    )
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


@contextmanager
def _locked(index_dir: Path) -> Iterator[None]:
    """One ingest at a time per index dir."""
    with (index_dir / ".lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise BadInput(
                f"{index_dir}: another ingest is writing this index; wait for it"
            ) from exc
        yield


def _previous_manifest(index_dir: Path, embedder: Embedder, rebuild: bool) -> IndexManifest | None:
    """The live manifest, if any, after checking it was built by the same embedder."""
    if not index_dir.exists():
        return None
    if not index_dir.is_dir():
        raise BadInput(f"{index_dir}: exists and is not a folder; choose another --index path")
    if not (index_dir / MANIFEST_NAME).exists():
        foreign = [
            p.name
            for p in index_dir.iterdir()
            if p.name not in {"cache", ".lock"} and not p.name.startswith(GENERATION_PREFIX)
        ]
        if foreign:
            raise BadInput(
                f"{index_dir}: not empty and not an auditor index (found {foreign[0]}); "
                "choose another --index path"
            )
        return None
    if rebuild:
        return None
    previous = read_manifest(index_dir)
    ours = embedder.identity
    theirs = previous.embedder
    if (theirs.name, theirs.sha256, theirs.dimension) != (ours.name, ours.sha256, ours.dimension):
        raise BadInput(
            f"{index_dir / MANIFEST_NAME}: index built by embedder {theirs.name} "
            f"({theirs.dimension}-d, {theirs.sha256[:12]}), not {ours.name} "
            f"({ours.dimension}-d, {ours.sha256[:12]}); use another --index dir or pass --rebuild"
        )
    return previous


def _live_generation(index_dir: Path) -> str | None:
    """The generation the manifest names, read leniently (even from a manifest we reject)."""
    try:
        data = json.loads((index_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
        return str(data["generation"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _next_generation(index_dir: Path) -> str:
    """A generation name newer than every folder present, so the live one is never reused."""
    numbers = [
        int(digits)
        for path in index_dir.glob(f"{GENERATION_PREFIX}*")
        if (digits := path.name.removeprefix(GENERATION_PREFIX).split(".")[0]).isdigit()
    ]
    return f"{GENERATION_PREFIX}{max(numbers, default=0) + 1:06d}"


def ingest_corpus(
    corpus_dir: Path,
    index_dir: Path,
    config: IngestConfig,
    embedder: Embedder,
    *,
    strict: bool = False,
    rebuild: bool = False,
    progress: IngestProgress | None = None,
    allow_outside_links: bool = False,
) -> IngestReport:
    """Index every supported document of `corpus_dir` into `index_dir`.

    Unchanged documents (same sha256, embedder and chunking) reuse their chunks and vectors;
    changed and deleted ones disappear from the index. The index dir changes only when the
    whole ingest succeeds.

    Raises:
        BadInput: missing folder, no supported files, a bad file under `strict`, an index
            built by another embedder, a corrupt index.
    """
    progress = progress or IngestProgress()
    started = time.perf_counter()
    if not corpus_dir.is_dir():
        raise BadInput(f"{corpus_dir}: no such folder; pass the folder that holds the documents")
    found = discover_files(corpus_dir, allow_outside_links)
    files, unsupported = found.supported, found.unsupported
    if not files:
        suffixes = ", ".join(sorted(set(SUPPORTED_SUFFIXES)))
        raise BadInput(f"{corpus_dir}: no supported documents ({suffixes}) in this folder")
    previous = _previous_manifest(index_dir, embedder, rebuild)
    splitter = make_splitter(config.chunking, embedder.tokenize, embedder.identity.max_tokens)

    documents: list[Document] = []
    rejected: list[DocumentError] = []
    max_bytes = int(config.max_file_mb * 2**20)
    for path in files:
        try:
            documents.append(read_document(path, corpus_dir, max_bytes))
        except DocumentError as error:
            if strict:
                raise BadInput(f"{error} (--strict stops at the first bad document)") from error
            rejected.append(error)
            progress.rejected(error)
    if not documents:
        raise BadInput(f"{corpus_dir}: every document was rejected; first: {rejected[0]}")

    index_dir.mkdir(parents=True, exist_ok=True)
    with _locked(index_dir):
        report = _ingest_locked(
            corpus_dir,
            index_dir,
            config,
            embedder,
            documents,
            rejected,
            previous,
            splitter,
            progress,
            use_cache=not rebuild,
        )
    report.rejected = rejected
    report.unsupported = [p.relative_to(corpus_dir).as_posix() for p in unsupported]
    report.skipped = found.skipped
    report.seconds = time.perf_counter() - started
    return report


def _ingest_locked(
    corpus_dir: Path,
    index_dir: Path,
    config: IngestConfig,
    embedder: Embedder,
    documents: list[Document],
    rejected: list[DocumentError],
    previous: IndexManifest | None,
    splitter: Splitter,
    progress: IngestProgress,
    *,
    use_cache: bool,
) -> IngestReport:
    import numpy as np

    live = _live_generation(index_dir)
    remove_stale_generations(index_dir, live)  # leftovers of an interrupted ingest
    cache = ChunkCache(index_dir / "cache")
    keys = {doc.path: _cache_key(doc, embedder.identity.sha256, config) for doc in documents}

    cached: dict[str, tuple[list[ChunkPiece], np.ndarray]] = {}
    todo: list[tuple[Document, list[ChunkPiece]]] = []
    for doc in documents:
        hit = cache.get(keys[doc.path]) if use_cache else None
        if hit is not None:
            cached[doc.path] = hit
        else:
            todo.append((doc, chunk_document(doc, splitter)))

    embed_started = time.perf_counter()
    progress.start_embedding(sum(len(pieces) for _, pieces in todo))
    chunks_embedded = 0
    for group in _checkpoint_groups(todo):
        texts = [piece.text for _, pieces in group for piece in pieces]
        vectors = embedder.embed(texts, on_batch=progress.embedded) if texts else None
        offset = 0
        for doc, pieces in group:
            part = (
                vectors[offset : offset + len(pieces)]
                if vectors is not None
                else np.zeros((0, embedder.identity.dimension), dtype=np.float32)
            )
            offset += len(pieces)
            cache.put(keys[doc.path], pieces, part)  # checkpoint: a resumed ingest skips it
            cached[doc.path] = (pieces, part)
        chunks_embedded += len(texts)
    embed_seconds = time.perf_counter() - embed_started

    ids: list[str] = []
    all_pieces: list[ChunkPiece] = []
    metadata: list[dict[str, Any]] = []
    blocks: list[np.ndarray] = []
    entries: list[DocumentEntry] = []
    for doc in documents:
        pieces, vectors = cached[doc.path]
        for i, piece in enumerate(pieces):
            ids.append(chunk_id(doc.path, i))
            all_pieces.append(piece)
            metadata.append(
                {
                    "document": doc.path,
                    "title": doc.title,
                    "page": piece.page,
                    "chunk_index": i,
                    "char_start": piece.char_start,
                    "char_end": piece.char_end,
                }
            )
        blocks.append(vectors)
        entries.append(
            DocumentEntry(
                path=doc.path,
                sha256=doc.sha256,
                size=doc.size,
                format=doc.format,
                title=doc.title,
                pages=len(doc.pages),
                chunks=len(pieces),
                cache_key=keys[doc.path],
            )
        )
    if not ids:
        raise BadInput(f"{corpus_dir}: the documents produced no chunks (no text to index)")
    all_vectors = np.ascontiguousarray(np.concatenate(blocks), dtype=np.float32)

    rejected_entries = [
        RejectedEntry(path=e.path, problem=f"{e.problem}; {e.fix}") for e in rejected
    ]
    chunking = {
        "chunk_size": config.chunking.chunk_size,
        "chunk_overlap": config.chunking.chunk_overlap,
        "unit": "embedder word pieces",
        "splitter": "llama_index SentenceSplitter",
        "max_chars": CHARS_PER_PIECE * config.chunking.chunk_size,
        "segment_chars": SEGMENT_CHARS,
    }
    wanted_index = index_params(config.index, len(ids), gpu_count(import_faiss()))
    if (
        previous is not None
        and live == previous.generation
        and (index_dir / live).is_dir()
        and previous.documents == entries
        and previous.rejected == rejected_entries
        and previous.embedder == EmbedderEntry(**embedder.identity.__dict__)
        and previous.chunking == chunking
        and previous.index == wanted_index
    ):
        # nothing changed: the live generation and manifest stay as they are, so runs made
        # against this index (which record the manifest's hash) still match and resume
        cache.prune(set(keys.values()))
        return _report(index_dir, previous, previous, documents, chunks_embedded, embed_seconds)

    generation = _next_generation(index_dir)
    staging = index_dir / f"{generation}.tmp"
    try:
        written_index = write_generation(
            staging,
            ids,
            all_pieces,
            metadata,
            all_vectors,
            config.index,
            embedder.llama_embedding(),
        )
        staging.rename(index_dir / generation)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise

    now = utc_now()
    manifest = IndexManifest(
        generation=generation,
        created_at=previous.created_at if previous else now,
        updated_at=now,
        corpus_dir=str(corpus_dir),
        embedder=EmbedderEntry(**embedder.identity.__dict__),
        chunking=chunking,
        index=written_index,
        documents=entries,
        rejected=rejected_entries,
        totals={"documents": len(entries), "chunks": len(ids)},
        packages=package_versions(),
    )
    write_json_atomic(index_dir / MANIFEST_NAME, manifest.model_dump(mode="json"))
    remove_stale_generations(index_dir, generation)
    cache.prune(set(keys.values()))

    return _report(index_dir, manifest, previous, documents, chunks_embedded, embed_seconds)


def _report(
    index_dir: Path,
    manifest: IndexManifest,
    previous: IndexManifest | None,
    documents: list[Document],
    chunks_embedded: int,
    embed_seconds: float,
) -> IngestReport:
    """What an ingest did: documents added, changed, unchanged and deleted since `previous`."""
    before = {d.path: d.sha256 for d in previous.documents} if previous else {}
    report = IngestReport(index_dir=index_dir, manifest=manifest)
    for doc in documents:
        if doc.path not in before:
            report.added.append(doc.path)
        elif before[doc.path] != doc.sha256:
            report.changed.append(doc.path)
        else:
            report.unchanged.append(doc.path)
    report.deleted = sorted(set(before) - {doc.path for doc in documents})
    report.chunks_embedded = chunks_embedded
    report.chunks_reused = manifest.totals["chunks"] - chunks_embedded
    report.embed_seconds = embed_seconds
    return report


def _checkpoint_groups(
    todo: list[tuple[Document, list[ChunkPiece]]],
) -> Iterator[list[tuple[Document, list[ChunkPiece]]]]:
    group: list[tuple[Document, list[ChunkPiece]]] = []
    size = 0
    for item in todo:
        group.append(item)
        size += len(item[1])
        if size >= _CHECKPOINT_CHUNKS:
            yield group
            group, size = [], 0
    if group:
        yield group
