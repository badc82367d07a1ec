"""`auditor run` output tok/s next to `vllm.LLM.generate` on the same prompts and engine, in one run.

    .venv/bin/python bench/run_overhead.py [--model smollm2-135m-instruct] [--questions 20] [--rounds 3]

The auditor side is `run_pipeline` for real (engine stepped by the auditor, a record written
and fsynced per answer, timings collected); the direct side is `LLM.generate` on the exact
token ids the auditor sent. Both use one engine, the prefix cache is reset before each side,
and the sides alternate their order round by round so machine noise and warm caches hit
both. The figure is the median ratio of output
tokens per second (target >= 0.95: the auditor must not distort what it measures).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.config import IngestConfig, PipelineConfig
from auditor.generate.vllm_offline import VLLMGenerator
from auditor.ingest import ingest_corpus, load_embedder
from auditor.run import run_pipeline
from auditor.store import read_records
from auditor.testing import SharedGenerator
from bench.harness import side_order, spread, spread_line, write_result

REPO = Path(__file__).resolve().parents[1]
KESTREL = REPO / "corpora" / "kestrel"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    args = parser.parse_args()

    config = PipelineConfig.model_validate(
        {
            "name": f"bench-{args.model}",
            "generator": {
                "kind": "vllm",
                "model": args.model,
                "max_model_len": 4096,
                "sampling": {"max_tokens": args.max_tokens},
            },
        }
    )
    assert config.generator is not None and config.generator.kind == "vllm"
    workdir = Path(tempfile.mkdtemp(prefix="auditor-bench-run-"))
    try:
        index = workdir / "index"
        ingest_corpus(
            KESTREL / "docs", index, IngestConfig(), load_embedder(config.ingest.embedder)
        )
        engine = VLLMGenerator.from_config(config.generator)
        shared = SharedGenerator(engine)

        def auditor_side(round_no: int) -> tuple[float, int]:
            engine.llm.reset_prefix_cache()
            summary = run_pipeline(
                config, KESTREL / "questions.jsonl", index, workdir / f"run{round_no}",
                limit=args.questions, generator_factory=lambda *a, **k: shared,
            )  # fmt: skip
            return summary.generation_s, summary.output_tokens

        auditor_side(0)  # warm-up, and the prompts for the direct side
        prompts = _recorded_prompts(engine, workdir / "run0")

        def direct_side() -> tuple[float, int]:
            engine.llm.reset_prefix_cache()
            started = time.perf_counter()
            outputs = engine.llm.generate(prompts, engine.sampling_params(), use_tqdm=False)
            return time.perf_counter() - started, sum(len(o.outputs[0].token_ids) for o in outputs)

        ratios, ours, theirs = [], [], []
        for round_no in range(1, args.rounds + 1):
            timed: dict[str, tuple[float, int]] = {}
            for side in side_order(round_no, ["auditor", "direct"]):
                timed[side] = auditor_side(round_no) if side == "auditor" else direct_side()
            (wall, tokens), (direct_wall, direct_tokens) = timed["auditor"], timed["direct"]
            a, d = tokens / wall, direct_tokens / direct_wall
            ours.append(a)
            theirs.append(d)
            ratios.append(a / d)
            first = side_order(round_no, ["auditor run", "LLM.generate"])[0]
            print(
                f"round {round_no} ({first} first): auditor run {tokens} tok in {wall:.2f} s "
                f"({a:.1f} tok/s) | LLM.generate {direct_tokens} tok in {direct_wall:.2f} s "
                f"({d:.1f} tok/s) | ratio {a / d:.3f}"
            )
        print(f"\nmodel {args.model}, {args.questions} questions, max_tokens {args.max_tokens}")
        print(
            f"auditor run {statistics.median(ours):.1f} tok/s, LLM.generate "
            f"{statistics.median(theirs):.1f} tok/s; ratio {spread_line(ratios)} (target >= 0.95)"
        )
        if args.name:
            write_result(
                args.name,
                "run overhead",
                {
                    "ratio": spread(ratios),
                    "auditor_tps": spread(ours),
                    "direct_tps": spread(theirs),
                },
                note=f"model {args.model}, {args.questions} questions, max_tokens {args.max_tokens}",
                dtype=config.generator.dtype,
            )
        engine.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _recorded_prompts(engine: VLLMGenerator, run_dir: Path) -> list[Any]:
    from vllm.inputs import TokensPrompt

    return [
        TokensPrompt(
            prompt_token_ids=engine.tokenizer.encode(r["prompt"], add_special_tokens=False)
        )
        for r in read_records(run_dir)
    ]


if __name__ == "__main__":
    main()
