"""Fixtures shared by the end-to-end tests (each module that uses one gets its own)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.servers import vllm_server

__all__ = ["LIGHT_JUDGE", "light_judge", "light_judge_toml", "vllm_server"]


def light_judge_toml(answers_per_batch: int = 2, all_cores: bool = True) -> str:
    """A judge on SmolLM2-135M, for tests of paths, processes and scale, not of verdicts.

    The default 1.5B judge runs in float32 on a CPU without bfloat16 (~12 GB, ~33 s per RAGTruth
    answer on 2 cores): its verdicts are tested in test_check_real; everything else a check
    does (prompts, structured outputs, commits, resumes, calibration, reports) is the same code
    on either model.
    """
    cores = f'cpu_threads = "0-{max(1, os.cpu_count() or 1) - 1}"\n' if all_cores else ""
    return (
        f'name = "smollm2-judge"\nmetrics = ["faithfulness"]\n'
        f"answers_per_batch = {answers_per_batch}\n"
        '[generator]\nkind = "vllm"\nmodel = "smollm2-135m-instruct"\nmax_model_len = 2048\n'
        f"{cores}[generator.sampling]\nmax_tokens = 256\n"
    )


LIGHT_JUDGE = light_judge_toml()


@pytest.fixture
def light_judge(tmp_path: Path, smollm2_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The light judge's TOML, its model prepared where engines look for it."""
    monkeypatch.setenv("AUDITOR_MODELS_DIR", str(smollm2_dir.parent))
    path = tmp_path / "light-judge.toml"
    path.write_text(LIGHT_JUDGE, encoding="utf-8")
    return path
