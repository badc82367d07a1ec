"""Retrieval: a question to the top-k chunks of an index dir (LlamaIndex retriever over FAISS)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from auditor.config import EmbedderConfig
from auditor.errors import BadInput
from auditor.ingest import embed
from auditor.ingest.embed import Embedder
from auditor.ingest.manifest import MANIFEST_NAME, IndexManifest, read_manifest
from auditor.llama import import_llama_core, silence_stdout
from auditor.types import Chunk, Hit

__all__ = ["Retriever", "retrieval_recall"]


class Retriever:
    """Searches one index dir with the embedder that built it."""

    def __init__(self, index_dir: Path, embedder: Embedder) -> None:
        self.index_dir = index_dir
        self.manifest: IndexManifest = read_manifest(index_dir)
        ours, theirs = embedder.identity, self.manifest.embedder
        if (ours.sha256, ours.dimension) != (theirs.sha256, theirs.dimension):
            raise BadInput(
                f"{index_dir / MANIFEST_NAME}: index built by embedder {theirs.name} "
                f"({theirs.dimension}-d, {theirs.sha256[:12]}), queries would be embedded by "
                f"{ours.name} ({ours.dimension}-d, {ours.sha256[:12]}); use the same embedder "
                "or re-ingest"
            )
        self._index = _load_index(index_dir / self.manifest.generation, embedder)

    @classmethod
    def open(cls, index_dir: Path, *, device: str = "cpu", batch_size: int = 64) -> Retriever:
        """Open an index with the embedder its manifest names."""

        manifest = read_manifest(index_dir)
        embedder = embed.load_embedder(
            EmbedderConfig(model=manifest.embedder.source, device=device, batch_size=batch_size)
        )
        return cls(index_dir, embedder)

    def search(self, query: str, k: int = 4) -> list[Hit]:
        """The k chunks most similar to the query, best first."""
        if not query.strip():
            raise BadInput("empty query: pass the question to search for")
        retriever = self._index.as_retriever(similarity_top_k=k)
        results = retriever.retrieve(query)
        hits = []
        for rank, result in enumerate(results, start=1):
            node = result.node
            meta = node.metadata
            chunk = Chunk(
                chunk_id=node.node_id,
                document=str(meta["document"]),
                text=node.get_content(),
                index=int(meta["chunk_index"]),
                page=meta.get("page"),
                char_start=meta.get("char_start"),
                char_end=meta.get("char_end"),
            )
            hits.append(Hit(chunk=chunk, score=float(result.score or 0.0), rank=rank))
        return hits


def _load_index(generation_dir: Path, embedder: Embedder) -> Any:
    import_llama_core()
    from llama_index.core import StorageContext, load_index_from_storage
    from llama_index.vector_stores.faiss import FaissVectorStore

    try:
        with silence_stdout():
            store = FaissVectorStore.from_persist_dir(str(generation_dir))
            storage = StorageContext.from_defaults(
                vector_store=store, persist_dir=str(generation_dir)
            )
            return load_index_from_storage(storage, embed_model=embedder.llama_embedding())
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        raise BadInput(
            f"{generation_dir}: corrupt index data ({type(exc).__name__}: {exc}); "
            "re-ingest with --rebuild"
        ) from exc


def retrieval_recall(
    retriever: Retriever, cases: list[tuple[str, set[str]]], ks: tuple[int, ...] = (1, 3, 5)
) -> dict[str, float]:
    """Mean document recall@k and hit@k over (query, gold documents) cases.

    recall@k: share of a query's gold documents among the documents of its top-k chunks;
    hit@k: share of queries with at least one gold document in the top k.
    """
    if not cases:
        raise ValueError("no cases to score")
    top = max(ks)
    sums = dict.fromkeys([f"recall@{k}" for k in ks] + [f"hit@{k}" for k in ks], 0.0)
    for query, gold in cases:
        documents = [hit.chunk.document for hit in retriever.search(query, k=top)]
        for k in ks:
            found = gold & set(documents[:k])
            sums[f"recall@{k}"] += len(found) / len(gold)
            sums[f"hit@{k}"] += 1.0 if found else 0.0
    return {name: total / len(cases) for name, total in sums.items()}


def chunks_by_id(index_dir: Path, ids: list[str]) -> dict[str, str]:
    """The text of each chunk of `ids` the index holds (LlamaIndex node ids, as its
    retrievers report them in traces); ids it does not hold are left out. Loads the docstore
    only: no embedder, no FAISS."""
    import_llama_core()
    from llama_index.core.storage.docstore import SimpleDocumentStore

    manifest = read_manifest(index_dir)
    try:
        with silence_stdout():
            store = SimpleDocumentStore.from_persist_dir(str(index_dir / manifest.generation))
    except (OSError, ValueError, KeyError) as exc:
        raise BadInput(f"{index_dir}: cannot read its docstore ({exc}); re-ingest") from exc
    found = {}
    for ident in dict.fromkeys(ids):
        node = store.get_document(ident, raise_error=False)
        if node is not None:
            found[ident] = node.get_content()
    return found
