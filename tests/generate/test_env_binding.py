"""The CPU core binding of one engine must not leak into the next engine of the same process."""

from __future__ import annotations

import os

import pytest

from auditor.config import VLLMGeneratorConfig
from auditor.generate import vllm_offline


def test_binding_is_per_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_offline, "is_cpu_build", lambda: True)
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.delenv("VLLM_CPU_NUM_OF_RESERVED_CPU", raising=False)
    bound = VLLMGeneratorConfig(kind="vllm", model="m", cpu_threads="0-1")
    vllm_offline._configure_environment(bound)
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    vllm_offline._configure_environment(VLLMGeneratorConfig(kind="vllm", model="m"))
    assert "VLLM_CPU_OMP_THREADS_BIND" not in os.environ
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" not in os.environ


def test_a_users_own_binding_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_offline, "is_cpu_build", lambda: True)
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "2-5")
    vllm_offline._configure_environment(VLLMGeneratorConfig(kind="vllm", model="m"))
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "2-5"


def test_a_long_cpu_engine_step_does_not_kill_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's 300 s limit per engine step is lifted on the CPU build (a 4,096-token prefill of
    the 1.5B judge on 2 busy cores outlasted it and the engine died), unless the user set it."""
    monkeypatch.setattr(vllm_offline, "is_cpu_build", lambda: True)
    monkeypatch.delenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", raising=False)
    vllm_offline._configure_environment(VLLMGeneratorConfig(kind="vllm", model="m"))
    assert int(os.environ["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"]) >= 3600
    monkeypatch.setenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "120")
    vllm_offline._configure_environment(VLLMGeneratorConfig(kind="vllm", model="m"))
    assert os.environ["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "120"
