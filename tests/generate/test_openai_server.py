"""OpenAIServerGenerator against a scripted fake server: timing fields, faults, load shaping."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterator
from typing import Any

import pytest

from auditor.config import OpenAIGeneratorConfig
from auditor.errors import AuditorError, BadInput
from auditor.generate.base import GenRequest, GenResult, tpot
from auditor.generate.openai_server import (
    OpenAIServerGenerator,
    histogram_sum_count,
    parse_prometheus,
)
from tests.generate.fake_openai import (
    BAD_REQUEST_MESSAGE,
    CHUNKS,
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    FakeOpenAI,
    free_port_url,
    running_fake,
)

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A scripted fake OpenAI server on a free local port."""
    with running_fake() as server:
        yield server


def make_cfg(endpoints: list[str], **overrides: Any) -> OpenAIGeneratorConfig:
    values: dict[str, Any] = {
        "kind": "openai",
        "model": "fake-model",
        "endpoints": endpoints,
        "timeout_s": 5.0,
        "max_retries": 2,
        "retry_backoff_s": 0.01,
    }
    values.update(overrides)
    return OpenAIGeneratorConfig.model_validate(values)


def run(cfg: OpenAIGeneratorConfig, scripts: list[str]) -> tuple[dict[str, GenResult], Any]:
    """Generate one request per script; return results by request id and the stats."""
    requests = [
        GenRequest(f"r{i}", ({"role": "system", "content": "sys"}, {"role": "user", "content": s}))
        for i, s in enumerate(scripts)
    ]
    results: dict[str, GenResult] = {}
    gen = OpenAIServerGenerator.from_config(cfg)
    try:
        stats = gen.generate(requests, lambda r: results.__setitem__(r.request_id, r))
    finally:
        gen.close()
    assert sorted(results) == sorted(r.request_id for r in requests)
    return results, stats


def test_success_fields(fake: FakeOpenAI) -> None:
    """A streamed answer: text joined, tokens from usage, ttft < e2e, one ITL per chunk gap."""
    results, stats = run(make_cfg([fake.url]), ["ok"])
    r = results["r0"]
    assert r.error is None and r.attempts == 1 and r.endpoint == fake.url
    assert r.text == "".join(CHUNKS) and r.finish_reason == "stop"
    assert (r.prompt_tokens, r.output_tokens) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert r.engine["output_tokens_source"] == "usage"
    assert r.ttft_s is not None and r.e2e_s is not None and 0 < r.ttft_s < r.e2e_s
    assert r.itl_s is not None and len(r.itl_s) == len(CHUNKS) - 1
    assert all(gap > 0 for gap in r.itl_s)
    assert r.arrival_time is not None and r.first_token_time is not None
    assert r.last_token_time is not None
    assert r.first_token_time == pytest.approx(r.arrival_time + r.ttft_s, abs=1e-6)
    assert r.tpot_s == pytest.approx(tpot(r.first_token_time, r.last_token_time, COMPLETION_TOKENS))
    # usage counts more tokens than content chunks (the EOS has no text): the last token is
    # the finish chunk, which comes after the last content chunk
    assert r.last_token_time > r.first_token_time + sum(r.itl_s)
    assert stats.wall_s >= r.e2e_s
    assert stats.regime == {
        "mode": "server",
        "concurrency": 8,
        "request_rate": None,
        "endpoints": [fake.url],
    }
    body = fake.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][-1] == {"role": "user", "content": "ok"}
    assert {k: body[k] for k in ("max_tokens", "temperature", "top_p", "seed")} == {
        "max_tokens": 256,
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 0,
    }


def test_no_usage_counts_chunks(fake: FakeOpenAI) -> None:
    """Without a usage chunk, output tokens are counted from content chunks, and flagged so."""
    results, _ = run(make_cfg([fake.url]), ["nousage"])
    r = results["r0"]
    assert r.output_tokens == len(CHUNKS) and r.prompt_tokens is None
    assert r.engine["output_tokens_source"] == "content_chunks"


def test_retry_then_success(fake: FakeOpenAI) -> None:
    """One HTTP 500, then success: attempts == 2 and the earlier failure is kept."""
    results, _ = run(make_cfg([fake.url]), ["fail500:1"])
    r = results["r0"]
    assert r.error is None and r.attempts == 2 and r.text == "".join(CHUNKS)
    assert "HTTP 500" in r.engine["failed_attempts"][0]


def test_429_is_retried(fake: FakeOpenAI) -> None:
    """HTTP 429 (overloaded) is retried like a 5xx."""
    results, _ = run(make_cfg([fake.url]), ["fail429:2"])
    assert results["r0"].error is None and results["r0"].attempts == 3


def test_persistent_500_becomes_error_and_run_continues(fake: FakeOpenAI) -> None:
    """Always 500: one-line error after max_retries+1 attempts; other requests still succeed."""
    results, _ = run(make_cfg([fake.url], max_retries=2), ["fail500", "ok", "ok"])
    bad = results["r0"]
    assert bad.attempts == 3 and bad.finish_reason is None and bad.text == ""
    assert bad.error == f"{fake.url}: HTTP 500 after 3 attempts: engine crashed"
    assert fake.attempts["fail500"] == 3
    assert all(results[k].error is None for k in ("r1", "r2"))


def test_timeout_becomes_error(fake: FakeOpenAI) -> None:
    """A server slower than timeout_s: each attempt is cut at timeout_s, then an error."""
    results, _ = run(make_cfg([fake.url], timeout_s=0.3, max_retries=1), ["slow"])
    r = results["r0"]
    assert r.attempts == 2 and r.finish_reason is None
    assert r.error == f"{fake.url}: timed out (limit 0.3 s) after 2 attempts"


def test_broken_stream_is_retried(fake: FakeOpenAI) -> None:
    """A socket closed mid-stream is retried; the result is the complete second attempt."""
    results, _ = run(make_cfg([fake.url]), ["break:1"])
    r = results["r0"]
    assert r.error is None and r.attempts == 2 and r.text == "".join(CHUNKS)
    assert "stream broken" in r.engine["failed_attempts"][0]


def test_stream_without_done_is_retried(fake: FakeOpenAI) -> None:
    """A body that ends cleanly without [DONE] or finish_reason counts as broken."""
    results, _ = run(make_cfg([fake.url], max_retries=0), ["cut:5"])
    r = results["r0"]
    assert r.attempts == 1 and r.error is not None and "stream broken" in r.error
    results, _ = run(make_cfg([fake.url], max_retries=1), ["cut:1"])
    assert results["r0"].error is None and results["r0"].attempts == 2


def test_400_not_retried(fake: FakeOpenAI) -> None:
    """HTTP 400 is the request's fault: no retry, and the server's message is in the error."""
    results, _ = run(make_cfg([fake.url]), ["bad400"])
    r = results["r0"]
    assert r.attempts == 1 and fake.attempts["bad400"] == 1
    assert r.error == f"{fake.url}: HTTP 400: {BAD_REQUEST_MESSAGE}"


def test_missing_api_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """api_key_env naming an unset variable is bad input that names the variable."""
    monkeypatch.delenv("AUDITOR_TEST_KEY", raising=False)
    cfg = make_cfg(["http://127.0.0.1:9/v1"], api_key_env="AUDITOR_TEST_KEY")
    with pytest.raises(BadInput, match="AUDITOR_TEST_KEY"):
        OpenAIServerGenerator.from_config(cfg)
    monkeypatch.setenv("AUDITOR_TEST_KEY", "")
    with pytest.raises(BadInput, match="AUDITOR_TEST_KEY"):
        OpenAIServerGenerator.from_config(cfg)


def test_api_key_sent_as_bearer(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key from the environment goes out as `Authorization: Bearer <key>`."""
    monkeypatch.setenv("AUDITOR_TEST_KEY", "sk-test-123")
    run(make_cfg([fake.url], api_key_env="AUDITOR_TEST_KEY"), ["ok", "ok"])
    assert fake.auth_headers == ["Bearer sk-test-123"] * 2


def test_no_key_no_header(fake: FakeOpenAI) -> None:
    """Without api_key_env no Authorization header is sent."""
    run(make_cfg([fake.url]), ["ok"])
    assert fake.auth_headers == [None]


def test_concurrency_limit(fake: FakeOpenAI) -> None:
    """The server never sees more than `concurrency` requests at once, and does see that many."""
    results, _ = run(make_cfg([fake.url], concurrency=3), ["ok"] * 9)
    assert all(r.error is None for r in results.values())
    assert fake.max_in_flight == 3


def test_request_rate_poisson(fake: FakeOpenAI) -> None:
    """With request_rate R, the planned arrivals are spaced ~1/R apart on average (seeded
    Poisson) and no request is sent before its planned time (observed gaps on a loaded
    machine are no test of the schedule: they stretch when the cores are busy)."""
    from auditor.generate.scheduler import arrival_offsets

    rate, count = 40.0, 30
    planned = arrival_offsets(count, rate, 0)
    gaps = [b - a for a, b in itertools.pairwise(planned)]
    assert statistics.mean(gaps) == pytest.approx(1 / rate, rel=0.5)
    assert statistics.pstdev(gaps) > 0.2 / rate  # not evenly spaced
    results, stats = run(make_cfg([fake.url], request_rate=rate, concurrency=64), ["ok"] * count)
    arrivals = sorted(r.arrival_time for r in results.values() if r.arrival_time is not None)
    assert len(arrivals) == count
    # sent by the schedule, not all at once: the last goes out no sooner than the plan says
    # (less the first request's own start-up, ~20 ms); a busy machine only stretches it
    assert arrivals[-1] - arrivals[0] >= planned[-1] - 0.1 > 0.3
    assert stats.regime["request_rate"] == rate


def test_request_rate_is_reproducible(fake: FakeOpenAI) -> None:
    """The same seed gives the same arrival schedule (the generator sends by this schedule;
    observed send times on a loaded machine are no test of it)."""
    from auditor.generate.scheduler import arrival_offsets

    planned = arrival_offsets(8, 50.0, 0)
    assert planned == arrival_offsets(8, 50.0, 0) and planned != arrival_offsets(8, 50.0, 1)
    assert planned[0] == 0.0 and all(b > a for a, b in itertools.pairwise(planned))
    assert arrival_offsets(3, None, 0) == [0.0, 0.0, 0.0]
    results, _ = run(make_cfg([fake.url], request_rate=50.0), ["ok"] * 8)
    assert len(results) == 8 and all(r.arrival_time is not None for r in results.values())


def test_two_endpoints_share_traffic() -> None:
    """Requests are spread over both endpoints (least outstanding, ties round-robin). Which
    endpoint frees a slot first depends on the machine's load, so the split is near even,
    not exact (a loaded CI machine gave 3 and 5 once)."""
    with running_fake() as a, running_fake() as b:
        results, stats = run(make_cfg([a.url, b.url], concurrency=4), ["ok"] * 8)
    assert a.chat_requests + b.chat_requests == 8
    assert 3 <= a.chat_requests <= 5 and 3 <= b.chat_requests <= 5
    assert {r.endpoint for r in results.values()} == {a.url, b.url}
    assert stats.regime["endpoints"] == [a.url, b.url]


def test_down_endpoint_skipped(fake: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    """An endpoint down at start is skipped with a warning when another one works."""
    down = free_port_url()
    results, stats = run(make_cfg([down, fake.url]), ["ok"] * 3)
    assert all(r.endpoint == fake.url and r.error is None for r in results.values())
    assert stats.regime["endpoints"] == [fake.url]
    assert any(down in rec.getMessage() for rec in caplog.records)


def test_all_endpoints_down() -> None:
    """No endpoint answers: AuditorError in one line saying how to fix it."""
    down = free_port_url()
    gen = OpenAIServerGenerator.from_config(make_cfg([down]))
    with pytest.raises(AuditorError) as info:
        gen.generate([GenRequest("r0", ({"role": "user", "content": "ok"},))], lambda r: None)
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        f"{down}: server not reachable (connection refused); start it or fix generator.endpoints"
    )
    two = OpenAIServerGenerator.from_config(make_cfg([down, free_port_url()]))
    with pytest.raises(AuditorError, match="no endpoint reachable") as info:
        two.identity()
    assert "\n" not in str(info.value)


def test_unknown_model_lists_served(fake: FakeOpenAI) -> None:
    """A model the server does not serve: AuditorError listing the models it serves."""
    gen = OpenAIServerGenerator.from_config(make_cfg([fake.url], model="llama-3"))
    with pytest.raises(AuditorError, match="'llama-3' is not served; it serves: fake-model"):
        gen.identity()


def test_identity(fake: FakeOpenAI) -> None:
    """identity() names the model, backend, endpoints and the server's own model entry."""
    gen = OpenAIServerGenerator.from_config(make_cfg([fake.url]))
    assert gen.identity() == {
        "name": "fake-model",
        "backend": "openai",
        "endpoints": [fake.url],
        "served": {"id": "fake-model", "root": "/models/fake-model", "max_model_len": 2048},
    }
    gen.close()


def test_on_result_failure_stops_the_run(fake: FakeOpenAI) -> None:
    """If the caller's on_result raises (e.g. disk full), generate stops and re-raises it."""
    gen = OpenAIServerGenerator.from_config(make_cfg([fake.url], concurrency=1))
    requests = [GenRequest(f"r{i}", ({"role": "user", "content": "ok"},)) for i in range(5)]

    def boom(result: GenResult) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        gen.generate(requests, boom)
    assert fake.chat_requests < 5


def test_parse_prometheus() -> None:
    """Prometheus text: samples keyed by name and labels; histogram sum/count added up."""
    text = (
        "# HELP vllm:time_to_first_token_seconds TTFT\n"
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 3.0\n'
        'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 3.0\n'
        'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.75\n'
        'vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 0.25\n'
        'vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 1.0\n'
        "process_start_time_seconds 1.7e9\n"
        "garbage line\n"
    )
    metrics = parse_prometheus(text)
    assert metrics['vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"}'] == 3.0
    assert metrics["process_start_time_seconds"] == 1.7e9
    assert histogram_sum_count(metrics, "vllm:time_to_first_token_seconds") == (1.0, 4.0)
    assert histogram_sum_count(metrics, "vllm:nothing") == (0.0, 0.0)
