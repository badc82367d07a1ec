"""Plain data passed between stages: frozen, no behaviour, nothing heavy imported."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Chunk", "Document", "Hit", "Page"]


@dataclass(frozen=True)
class Page:
    """A span of a document's text that came from one page (PDFs) or the whole file."""

    number: int | None
    text: str


@dataclass(frozen=True)
class Document:
    """A source document as read from the knowledge base."""

    path: str  # relative to the corpus root, POSIX separators
    sha256: str
    size: int
    format: str  # "md" | "txt" | "html" | "pdf"
    pages: tuple[Page, ...]
    title: str | None = None

    @property
    def text(self) -> str:
        return "\n\n".join(page.text for page in self.pages)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document sized for the embedder; what retrieval returns."""

    chunk_id: str
    document: str
    text: str
    index: int  # position of the chunk within its document
    page: int | None = None
    char_start: int | None = None  # offsets within the page's text
    char_end: int | None = None


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk with its similarity score (inner product of normalised vectors)."""

    chunk: Chunk
    score: float
    rank: int
