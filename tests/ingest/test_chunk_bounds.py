"""Property tests of chunking on hostile text: every chunk within the word-piece and the
character bound, offsets exact, and time linear in the text's length."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from auditor.config import ChunkingConfig
from auditor.ingest.chunking import CHARS_PER_PIECE, chunk_document, make_splitter
from auditor.testing import FakeEmbedder
from auditor.types import Document, Page

CHUNK_SIZE = 64
EMBEDDER = FakeEmbedder()
SPLITTER = make_splitter(
    ChunkingConfig(chunk_size=CHUNK_SIZE, chunk_overlap=8), EMBEDDER.tokenize, 254
)


def _document(text: str) -> Document:
    page = Page(number=None, text=text)
    return Document(
        path="x.txt", sha256="0", size=len(text), format="txt", pages=(page,), title="x"
    )


def _random_unicode(rng: random.Random, size: int) -> str:
    """Letters, CJK, emoji, combining marks, odd line and paragraph separators, controls."""
    pools = [
        lambda: chr(rng.randint(0x20, 0x7E)),
        lambda: chr(rng.randint(0x4E00, 0x9FFF)),
        lambda: chr(rng.randint(0x1F600, 0x1F64F)),
        lambda: rng.choice(["\u0301", "\u2028", "\u2029", "\u0085", "\n", "\t", "\u200b", "\x0b"]),
    ]
    return "".join(rng.choice(pools)() for _ in range(size))


def _words_without_sentence_ends(rng: random.Random, size: int) -> str:
    words = []
    while sum(map(len, words)) < size:
        words.append("".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 14))))
    return " ".join(words)[:size]


GENERATORS: dict[str, Callable[[random.Random, int], str]] = {
    "random unicode": _random_unicode,
    "one line, no spaces": lambda rng, size: rng.choice("ab") * size,
    "words, no sentence ends": _words_without_sentence_ends,
    "one huge word among sentences": lambda rng, size: (
        "Short one. " * 20 + "x" * size + " And the end."
    ),
}


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_every_chunk_is_within_both_bounds_with_exact_offsets(kind: str) -> None:
    for seed in range(5):
        rng = random.Random(seed)
        text = GENERATORS[kind](rng, rng.randint(1, 60_000))
        pieces = chunk_document(_document(text), SPLITTER)
        assert pieces or not text.strip()
        for piece in pieces:
            assert len(piece.text) <= CHARS_PER_PIECE * CHUNK_SIZE, (kind, seed)
            assert len(EMBEDDER.tokenize(piece.text)) <= CHUNK_SIZE, (kind, seed)
            assert piece.char_start is not None and piece.char_end is not None
            assert text[piece.char_start : piece.char_end] == piece.text, (kind, seed)
        # nothing lost: every non-space character sits in some chunk
        covered = sum(p.char_end - p.char_start for p in pieces)  # type: ignore[operator]
        assert covered >= len("".join(text.split())) * 0.99 or not text.strip()


def _seconds(work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("kind", ["one line, no spaces", "words, no sentence ends"])
def test_chunking_time_grows_linearly(kind: str) -> None:
    """Chunking time as a ratio to a plain split of the same text (into its characters, which
    costs the same per character whatever the text): 8x the text may not raise that ratio
    more than 3x (a quadratic splitter would raise it 8x; the old one hit a regex time limit
    on a 50 MB line)."""
    rng = random.Random(7)
    small = GENERATORS[kind](rng, 20_000)
    large = GENERATORS[kind](rng, 160_000)

    def ratio(text: str) -> float:
        chunking = _seconds(lambda: chunk_document(_document(text), SPLITTER))
        plain = _seconds(lambda: list(text))
        return chunking / plain

    small_ratio, large_ratio = ratio(small), ratio(large)
    assert large_ratio <= 3 * small_ratio, (small_ratio, large_ratio)
