"""A stopped engine's processes are given 1 s, not vLLM's 5 s, before they are killed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from auditor.generate import vllm_offline
from auditor.generate.vllm_offline import VLLMGenerator


class _Core:
    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    def shutdown(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)


def _generator(core: Any) -> VLLMGenerator:
    generator = object.__new__(VLLMGenerator)
    generator.llm = SimpleNamespace(llm_engine=SimpleNamespace(engine_core=core))
    generator._owner = None
    return generator


def test_close_gives_the_engine_core_a_short_grace() -> None:
    core = _Core()
    generator = _generator(core)
    generator.close()
    assert core.timeouts == [vllm_offline.ENGINE_STOP_GRACE_S]
    assert vllm_offline.ENGINE_STOP_GRACE_S <= 1.0
    assert not hasattr(generator, "llm")
    generator.close()  # a second close frees nothing twice
    assert len(core.timeouts) == 1
