"""Split documents into chunks sized in the embedder's own word pieces (LlamaIndex SentenceSplitter).

SentenceSplitter counts tiktoken tokens unless given a tokenizer; tiktoken fetches its
vocabulary from the network and counts differently from the embedder, so chunks would either
fail offline or overflow the embedder's window and be silently truncated. We pass the
embedder's tokenizer instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from auditor.config import ChunkingConfig
from auditor.errors import BadInput
from auditor.llama import import_llama_core
from auditor.types import Document

__all__ = ["ChunkPiece", "chunk_document", "make_splitter"]

Tokenizer = Callable[[str], Sequence[int]]


@dataclass(frozen=True)
class ChunkPiece:
    """A chunk's text and where it sits in its document; the chunk id is given at indexing."""

    text: str
    page: int | None
    char_start: int | None
    char_end: int | None


def make_splitter(settings: ChunkingConfig, tokenizer: Tokenizer, max_tokens: int) -> object:
    """A SentenceSplitter whose chunks fit the embedder's window of `max_tokens` word pieces."""
    import_llama_core()
    from llama_index.core.node_parser import SentenceSplitter

    if settings.chunk_size > max_tokens:
        raise BadInput(
            f"ingest.chunking.chunk_size={settings.chunk_size} exceeds the embedder's window of "
            f"{max_tokens} word pieces: lower it to at most {max_tokens}"
        )
    if settings.chunk_overlap >= settings.chunk_size:
        raise BadInput(
            f"ingest.chunking.chunk_overlap={settings.chunk_overlap} must be smaller than "
            f"chunk_size={settings.chunk_size}"
        )
    return SentenceSplitter(
        chunk_size=settings.chunk_size,
        chunk_overlap=settings.chunk_overlap,
        tokenizer=tokenizer,
        include_metadata=False,
        include_prev_next_rel=False,
    )


def chunk_document(document: Document, splitter: object) -> list[ChunkPiece]:
    """Chunks of every page of a document, in reading order, with character offsets."""
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import TextNode

    assert isinstance(splitter, SentenceSplitter)
    pieces: list[ChunkPiece] = []
    for page in document.pages:
        nodes = splitter.get_nodes_from_documents([LlamaDocument(text=page.text)])
        for node in nodes:
            assert isinstance(node, TextNode)
            text = node.get_content()
            if not text.strip():
                continue
            pieces.append(
                ChunkPiece(
                    text=text,
                    page=page.number,
                    char_start=node.start_char_idx,
                    char_end=node.end_char_idx,
                )
            )
    return pieces
