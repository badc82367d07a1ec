"""Generator backends, looked up lazily by the `kind` of the pipeline's generator config.

Only strings here, so choosing a backend imports nothing heavy until it is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from auditor.config import GeneratorConfig
from auditor.generate.base import GenerationStats, Generator, GenRequest, GenResult, OnResult

__all__ = [
    "BACKENDS",
    "GenRequest",
    "GenResult",
    "GenerationStats",
    "Generator",
    "OnResult",
    "make_generator",
]

BACKENDS: dict[str, str] = {
    "vllm": "auditor.generate.vllm_offline:VLLMGenerator",
    "openai": "auditor.generate.openai_server:OpenAIServerGenerator",
    "http": "auditor.generate.http_target:HttpTargetGenerator",
    "python": "auditor.generate.python_target:PythonTargetGenerator",
}


def make_generator(
    cfg: GeneratorConfig,
    on_stage: Callable[[str], None] | None = None,
    on_bytes: Callable[[int, int], None] | None = None,
) -> Generator:
    """Build the backend a config names (the config's `kind` was validated against BACKENDS)."""
    module_name, _, class_name = BACKENDS[cfg.kind].partition(":")
    backend: Any = getattr(importlib.import_module(module_name), class_name)
    if cfg.kind == "vllm":
        generator: Generator = backend.from_config(cfg, on_stage=on_stage, on_bytes=on_bytes)
    else:
        generator = backend.from_config(cfg)
    return generator
