"""The trusted knowledge base that claims are looked up in (`--sources kb` / `both`).

A deployed service may retrieve badly or not say what it retrieved; the audit then checks each
claim against the chunks the auditor itself retrieves for that claim from the index it trusts.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from auditor.claim_rows import Claim
from auditor.ingest.manifest import MANIFEST_NAME
from auditor.retrieve import Retriever
from auditor.verify.answers import AnswerItem

__all__ = ["KnowledgeBase", "attach_kb_chunks", "kb_identity"]


def kb_identity(index_dir: Path, chunks: int | None) -> dict[str, Any]:
    """What check.json records of the knowledge base claims were looked up in."""
    manifest = index_dir / MANIFEST_NAME
    return {
        "path": str(index_dir),
        "manifest_sha256": hashlib.sha256(manifest.read_bytes()).hexdigest(),
        "chunks": chunks,
    }


class KnowledgeBase:
    """One index dir, searched with the embedder that built it."""

    def __init__(self, index_dir: Path) -> None:

        self.index_dir = index_dir
        self._retriever = Retriever.open(index_dir)
        self._identity = kb_identity(index_dir, self._retriever.manifest.totals.get("chunks"))
        self.meta: dict[str, dict[str, Any]] = {}  # chunk id -> document, page (for the report)

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def search(self, text: str, k: int) -> list[tuple[str, str]]:
        """The k chunks most similar to `text`: (chunk id, text), best first."""
        hits = self._retriever.search(text, k=k)
        for hit in hits:
            self.meta[hit.chunk.chunk_id] = {"document": hit.chunk.document, "page": hit.chunk.page}
        return [(hit.chunk.chunk_id, hit.chunk.text) for hit in hits]


def attach_kb_chunks(
    item: AnswerItem, claims: list[Claim], kb: KnowledgeBase, k: int
) -> list[list[int]]:
    """Retrieve k knowledge-base chunks for each claim into `item.kb_chunks`; per claim, their
    indices in `item.pool` (a chunk the pipeline also returned keeps its returned index)."""
    positions = {chunk_id: index for index, (chunk_id, _) in enumerate(item.pool)}
    found: list[list[int]] = []
    for claim in claims:
        indices = []
        for chunk_id, text in kb.search(claim.text, k):
            if chunk_id not in positions:
                positions[chunk_id] = len(item.chunks) + len(item.kb_chunks)
                item.kb_chunks.append((chunk_id, text))
            indices.append(positions[chunk_id])
        found.append(indices)
    return found
