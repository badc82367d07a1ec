"""Ingest: documents -> chunks sized for the embedder -> vectors -> FAISS index dir."""

from auditor.ingest.build import IngestProgress, IngestReport, ingest_corpus
from auditor.ingest.embed import PACKAGED_EMBEDDERS, Embedder, EmbedderIdentity, load_embedder
from auditor.ingest.loaders import SUPPORTED_SUFFIXES, DocumentError
from auditor.ingest.manifest import IndexManifest, read_manifest

__all__ = [
    "PACKAGED_EMBEDDERS",
    "SUPPORTED_SUFFIXES",
    "DocumentError",
    "Embedder",
    "EmbedderIdentity",
    "IndexManifest",
    "IngestProgress",
    "IngestReport",
    "ingest_corpus",
    "load_embedder",
    "read_manifest",
]
