"""The index dir's `manifest.json`: what the index holds and how it was built.

The manifest is the commit point of an ingest: it names the generation folder that holds the
FAISS index and docstore, and it is replaced atomically only after that folder is complete.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from auditor.errors import BadInput

__all__ = [
    "MANIFEST_NAME",
    "SCHEMA_VERSION",
    "DocumentEntry",
    "EmbedderEntry",
    "IndexManifest",
    "RejectedEntry",
    "parse_manifest",
    "read_manifest",
]

SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbedderEntry(_Entry):
    """Identity of the embedder: an index refuses queries embedded by another model."""

    name: str
    source: str
    sha256: str
    dimension: int
    max_tokens: int


class DocumentEntry(_Entry):
    """One source document as indexed."""

    path: str
    sha256: str
    size: int
    format: str
    title: str | None
    pages: int
    chunks: int
    cache_key: str


class RejectedEntry(_Entry):
    """A document that was skipped, and why."""

    path: str
    problem: str


class IndexManifest(_Entry):
    """Contents of `INDEX_DIR/manifest.json`."""

    schema_version: int = SCHEMA_VERSION
    generation: str = Field(description="Folder holding the FAISS index and docstore.")
    created_at: str
    updated_at: str
    corpus_dir: str
    embedder: EmbedderEntry
    chunking: dict[str, Any]
    index: dict[str, Any]
    documents: list[DocumentEntry]
    rejected: list[RejectedEntry] = Field(default_factory=list)
    totals: dict[str, int]
    packages: dict[str, str]

    def chunk_ids(self) -> list[str]:
        """Every chunk id, in index order."""
        return [chunk_id(doc.path, i) for doc in self.documents for i in range(doc.chunks)]


def chunk_id(document_path: str, index: int) -> str:
    """Readable, stable id of a chunk: `docs/warranty.md#3`."""
    return f"{document_path}#{index}"


def read_manifest(index_dir: Path) -> IndexManifest:
    """Load and validate an index manifest; BadInput naming the file and the fix otherwise."""
    path = index_dir / MANIFEST_NAME
    if not index_dir.is_dir():
        raise BadInput(
            f"{index_dir}: no such index dir; create it with `auditor ingest CORPUS_DIR --index {index_dir}`"
        )
    if not path.is_file():
        raise BadInput(
            f"{path}: missing, so {index_dir} is not an index; run `auditor ingest CORPUS_DIR --index {index_dir}`"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: corrupt index manifest ({exc}); re-ingest with --rebuild") from exc
    manifest = parse_manifest(text, str(path))
    if not (index_dir / manifest.generation).is_dir():
        raise BadInput(
            f"{index_dir / manifest.generation}: missing index data named by {path}; "
            "re-ingest with --rebuild"
        )
    return manifest


def parse_manifest(text: str, path: str) -> IndexManifest:
    """An index manifest's text (`path` names it) validated; BadInput naming it otherwise. A
    bundle's copy is read with this alone (it holds no index data)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}: corrupt index manifest ({exc}); re-ingest with --rebuild") from exc
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise BadInput(
            f"{path}: index schema version {version!r}, this auditor reads {SCHEMA_VERSION}; "
            "re-ingest with --rebuild"
        )
    try:
        manifest = IndexManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(
            f"{path}: corrupt index manifest ({where}: {first['msg']}); re-ingest with --rebuild"
        ) from exc
    return manifest
