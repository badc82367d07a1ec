"""Prompt building (pure): retrieved chunks and a question -> chat messages."""

from __future__ import annotations

from collections.abc import Sequence

from auditor.config import PromptConfig
from auditor.types import Hit

__all__ = ["build_messages"]


def build_messages(
    config: PromptConfig, question: str, hits: Sequence[Hit]
) -> tuple[dict[str, str], ...]:
    """System message (if any) and the user message with numbered passages, best first."""
    context = "\n\n".join(
        config.passage.format(n=hit.rank, document=hit.chunk.document, text=hit.chunk.text)
        for hit in hits
    )
    user = config.template.format(context=context, question=question)
    messages: list[dict[str, str]] = []
    if config.system:
        messages.append({"role": "system", "content": config.system})
    messages.append({"role": "user", "content": user})
    return tuple(messages)
