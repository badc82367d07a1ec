"""Taming LlamaIndex's side effects: import-time warnings and prints to stdout.

`--json` output goes to stdout, so nothing else may write there: LlamaIndex's key-value store
prints "Loading ... from ..." when an index is loaded.
"""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from collections.abc import Iterator

__all__ = ["import_llama_core", "silence_stdout"]


def import_llama_core() -> None:
    """Import llama_index.core once, without the pydantic warning its models raise."""
    if "llama_index.core" in sys.modules:
        return
    with warnings.catch_warnings():
        # llama-index-core's models put validate_default on union members (harmless).
        warnings.filterwarnings("ignore", message=".*'validate_default' attribute.*")
        import llama_index.core  # noqa: F401


@contextlib.contextmanager
def silence_stdout() -> Iterator[None]:
    """Drop what library code prints to stdout (chatter, never data) inside the block."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield
