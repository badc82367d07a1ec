"""Split documents into chunks sized in the embedder's own word pieces (LlamaIndex SentenceSplitter).

SentenceSplitter counts tiktoken tokens unless given a tokenizer; tiktoken fetches its
vocabulary from the network and counts differently from the embedder, so chunks would either
fail offline or overflow the embedder's window and be silently truncated. We pass the
embedder's tokenizer instead.

Bounded on any input: SentenceSplitter's sentence tokenizer is superlinear on text without
sentence ends (a 50 MB line took minutes and 6 GB, then hit a regex time limit), and a
word-piece count is no size limit (a 60,000-character run without spaces is a handful of
unknown-word pieces). So a page is cut into segments of at most SEGMENT_CHARS at a line or
word break before splitting, which makes the whole linear, and chunks longer than
CHARS_PER_PIECE x chunk_size characters are cut again at word breaks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from auditor.config import ChunkingConfig
from auditor.errors import BadInput
from auditor.llama import import_llama_core
from auditor.types import Document

__all__ = [
    "CHARS_PER_PIECE",
    "SEGMENT_CHARS",
    "ChunkPiece",
    "Splitter",
    "chunk_document",
    "make_splitter",
]

Tokenizer = Callable[[str], Sequence[int]]
SEGMENT_CHARS = 20_000  # text handed to the sentence splitter at once
CHARS_PER_PIECE = 8  # a chunk's character bound per word piece (English runs ~4-5)


@dataclass(frozen=True)
class ChunkPiece:
    """A chunk's text and where it sits in its document; the chunk id is given at indexing."""

    text: str
    page: int | None
    char_start: int | None
    char_end: int | None


@dataclass(frozen=True)
class Splitter:
    """A SentenceSplitter with the tokenizer and size its chunks are held to."""

    sentences: object  # llama_index SentenceSplitter (imported lazily)
    tokenizer: Tokenizer
    chunk_size: int


def make_splitter(settings: ChunkingConfig, tokenizer: Tokenizer, max_tokens: int) -> Splitter:
    """A splitter whose chunks fit the embedder's window of `max_tokens` word pieces."""
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
    sentences = SentenceSplitter(
        chunk_size=settings.chunk_size,
        chunk_overlap=settings.chunk_overlap,
        tokenizer=tokenizer,
        include_metadata=False,
        include_prev_next_rel=False,
    )
    return Splitter(sentences, tokenizer, settings.chunk_size)


def chunk_document(document: Document, splitter: Splitter) -> list[ChunkPiece]:
    """Chunks of every page of a document, in reading order, with character offsets; each
    within the splitter's word-piece size and CHARS_PER_PIECE times that in characters."""
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import TextNode

    sentences = splitter.sentences
    assert isinstance(sentences, SentenceSplitter)
    pieces: list[ChunkPiece] = []
    for page in document.pages:
        for offset, segment in segments(page.text, SEGMENT_CHARS):
            nodes = sentences.get_nodes_from_documents([LlamaDocument(text=segment)])
            for node in nodes:
                assert isinstance(node, TextNode)
                text = node.get_content()
                if not text.strip():
                    continue
                start = None if node.start_char_idx is None else offset + node.start_char_idx
                for cut, part in _within_bounds(text, splitter):
                    if part.strip():
                        pieces.append(
                            ChunkPiece(
                                text=part,
                                page=page.number,
                                char_start=None if start is None else start + cut,
                                char_end=None if start is None else start + cut + len(part),
                            )
                        )
    return pieces


def _within_bounds(text: str, splitter: Splitter) -> list[tuple[int, str]]:
    """(offset, part) of a chunk cut until every part is within both bounds (the sentence
    splitter counts word pieces per sentence, and a joined chunk can tokenize longer)."""
    max_chars = CHARS_PER_PIECE * splitter.chunk_size
    parts: list[tuple[int, str]] = []
    for cut, part in segments(text, max_chars):
        if len(part) > 1 and len(splitter.tokenizer(part)) > splitter.chunk_size:
            half = segments(part, (len(part) + 1) // 2)
            for inner_cut, inner in half:
                parts.extend((cut + inner_cut + c, p) for c, p in _within_bounds(inner, splitter))
        else:
            parts.append((cut, part))
    return parts


def segments(text: str, limit: int) -> list[tuple[int, str]]:
    """(offset, piece) of `text` cut into pieces of at most `limit` characters, at the last line
    break, else the last whitespace, in a piece's second half; hard cuts only where there is
    neither. Linear in the text's length."""
    pieces = []
    start = 0
    while len(text) - start > limit:
        end = start + limit
        cut = text.rfind("\n", start + limit // 2, end)
        if cut == -1:
            cut = max(
                text.rfind(" ", start + limit // 2, end), text.rfind("\t", start + limit // 2, end)
            )
        cut = end if cut == -1 else cut + 1
        pieces.append((start, text[start:cut]))
        start = cut
    if start < len(text) or not pieces:
        pieces.append((start, text[start:]))
    return pieces
