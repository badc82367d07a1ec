"""FAISS index and docstore on disk (LlamaIndex FaissVectorStore persist format).

Layout of an index dir:
    manifest.json      the commit point; names the live generation
    gen-000007/        LlamaIndex persist dir: FAISS index, docstore, index store
    cache/KEY.json     chunks of one document version (text, page, offsets) ...
    cache/KEY.npy      ... and their vectors; content-addressed, so unchanged documents are
                       never re-embedded and an interrupted ingest resumes where it stopped
A new generation is written beside the live one and swapped in by replacing manifest.json, so
the index is never left half-written and a stale chunk is never retrievable.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.config import FlatIndexConfig, HNSWIndexConfig, IndexConfig, IVFIndexConfig
from auditor.errors import BackendUnavailable
from auditor.ingest.chunking import ChunkPiece
from auditor.llama import import_llama_core

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ChunkCache",
    "build_faiss_index",
    "gpu_count",
    "import_faiss",
    "index_params",
    "write_generation",
]

GENERATION_PREFIX = "gen-"


def import_faiss() -> Any:
    """faiss from faiss-gpu when installed (the GPU extra), faiss-cpu otherwise."""
    try:
        import faiss
    except ImportError as exc:
        raise BackendUnavailable("faiss", "cpu") from exc
    return faiss


def gpu_count(faiss: Any) -> int:
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get else 0


def build_faiss_index(vectors: np.ndarray, config: IndexConfig) -> tuple[Any, dict[str, Any]]:
    """An empty (trained, for IVF) inner-product index for these vectors, and its settings."""
    faiss = import_faiss()
    dim = int(vectors.shape[1])
    params = index_params(config, int(vectors.shape[0]), gpu_count(faiss))
    if isinstance(config, FlatIndexConfig):
        index = faiss.IndexFlatIP(dim)
    elif isinstance(config, HNSWIndexConfig):
        index = faiss.IndexHNSWFlat(dim, config.m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.ef_construction
        index.hnsw.efSearch = config.ef_search
    elif isinstance(config, IVFIndexConfig):
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, params["nlist"], faiss.METRIC_INNER_PRODUCT)
        if gpu_count(faiss) > 0:
            # k-means is the expensive part of IVF; train on the GPUs, keep a CPU index to persist.
            gpu_index = faiss.index_cpu_to_all_gpus(index)
            gpu_index.train(vectors)
            index = faiss.index_gpu_to_cpu(gpu_index)
        else:
            index.train(vectors)
        index.nprobe = params["nprobe"]
        index.quantizer_trains_alone = 0
    else:  # pragma: no cover - the discriminated union admits nothing else
        raise TypeError(config)
    return index, params


def index_params(config: IndexConfig, count: int, gpus: int) -> dict[str, Any]:
    """The settings an index of `count` vectors gets (recorded in the manifest)."""
    params: dict[str, Any] = {"kind": config.kind, "metric": "inner_product"}
    if isinstance(config, HNSWIndexConfig):
        params |= {
            "m": config.m,
            "ef_construction": config.ef_construction,
            "ef_search": config.ef_search,
        }
    elif isinstance(config, IVFIndexConfig):
        nlist = config.nlist or max(1, int(4 * math.sqrt(count)))
        nlist = max(1, min(nlist, count))  # k-means needs at least one point per cluster
        if gpus > 0:
            params["trained_on"] = "gpu"
        params |= {"nlist": nlist, "nprobe": min(config.nprobe, nlist)}
    params["faiss"] = "gpu" if gpus > 0 else "cpu"
    return params


def write_generation(
    target: Path,
    ids: Sequence[str],
    pieces: Sequence[ChunkPiece],
    metadata: Sequence[dict[str, Any]],
    vectors: np.ndarray,
    config: IndexConfig,
    llama_embedding: Any,
) -> dict[str, Any]:
    """Persist a complete FAISS vector store + docstore into `target` (a new folder)."""
    import_llama_core()
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.faiss import FaissVectorStore

    faiss_index, params = build_faiss_index(vectors, config)
    nodes = []
    for chunk_id, piece, meta, vector in zip(ids, pieces, metadata, vectors, strict=True):
        keys = list(meta)
        nodes.append(
            TextNode(
                id_=chunk_id,
                text=piece.text,
                metadata=meta,
                embedding=vector.tolist(),
                # metadata is for citing the source, not for embedding or prompting
                excluded_embed_metadata_keys=keys,
                excluded_llm_metadata_keys=keys,
            )
        )
    store = FaissVectorStore(faiss_index=faiss_index)
    storage = StorageContext.from_defaults(vector_store=store)
    VectorStoreIndex(nodes, storage_context=storage, embed_model=llama_embedding)
    target.mkdir(parents=True)
    storage.persist(persist_dir=str(target))
    _fsync_tree(target)
    return params


def _fsync_tree(folder: Path) -> None:
    for path in folder.iterdir():
        with path.open("rb") as handle:
            os.fsync(handle.fileno())


class ChunkCache:
    """Chunks and vectors of document versions, keyed by content + embedder + chunking."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, key: str) -> tuple[list[ChunkPiece], np.ndarray] | None:
        import numpy as np

        meta_path, vec_path = self._paths(key)
        if not meta_path.exists() or not vec_path.exists():
            return None
        try:
            rows = json.loads(meta_path.read_text(encoding="utf-8"))
            vectors = np.load(vec_path)
        except (OSError, ValueError):
            return None  # a damaged entry is recomputed, never trusted
        if len(rows) != len(vectors):
            return None
        return [ChunkPiece(**row) for row in rows], vectors

    def put(self, key: str, pieces: Sequence[ChunkPiece], vectors: np.ndarray) -> None:
        import numpy as np

        self.folder.mkdir(parents=True, exist_ok=True)
        meta_path, vec_path = self._paths(key)
        tmp_vec = vec_path.with_suffix(".npy.tmp")
        with tmp_vec.open("wb") as handle:
            np.save(handle, vectors)
        os.replace(tmp_vec, vec_path)
        tmp_meta = meta_path.with_suffix(".json.tmp")
        rows = [piece.__dict__ for piece in pieces]
        tmp_meta.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp_meta, meta_path)  # written last: its presence marks a complete entry

    def prune(self, keep: set[str]) -> int:
        """Delete entries not in `keep` (and leftovers of interrupted writes)."""
        if not self.folder.is_dir():
            return 0
        removed = 0
        for path in self.folder.iterdir():
            key = path.name.split(".", 1)[0]
            if key not in keep or path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.folder / f"{key}.json", self.folder / f"{key}.npy"


def remove_stale_generations(index_dir: Path, live: str | None) -> None:
    """Delete every generation folder but the live one (and interrupted ones)."""
    for path in index_dir.glob(f"{GENERATION_PREFIX}*"):
        if path.name != live and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
