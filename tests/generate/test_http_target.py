"""The `http` target backend against a scripted local RAG service (real sockets, real httpx)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from auditor.config import HttpGeneratorConfig
from auditor.errors import AuditorError, BadInput
from auditor.generate.base import GenRequest, GenResult
from auditor.generate.http_target import HttpTargetGenerator, fill_template
from tests.generate.fake_rag import ANSWER, OUTPUT_TOKENS, FakeRag


@pytest.fixture
def fake() -> Iterator[FakeRag]:
    server = FakeRag().start()
    yield server
    server.stop()


def _config(fake: FakeRag, path: str = "/ask", **overrides: Any) -> HttpGeneratorConfig:
    fields: dict[str, Any] = {
        "kind": "http",
        "endpoints": [fake.base + path],
        "body": {"query": "{question}", "options": {"id": "{id}", "top_k": 3}},
        "answer": "data.answer",
        "contexts": "data.sources",
        "context_id": "id",
        "context_source": "doc",
        "context_score": "score",
        "output_tokens": "usage.tokens",
        "timeout_s": 1.0,
        "retry_backoff_s": 0.01,
    }
    if path != "/ask":
        fields |= {
            "stream": "sse" if path == "/sse" else "jsonl",
            "stream_token": "token",
            "answer": "answer",
            "contexts": "sources",
        }
        if path == "/sse":
            fields["stream_done"] = "[DONE]"
    return HttpGeneratorConfig.model_validate(fields | overrides)


def _run(config: HttpGeneratorConfig, *questions: str) -> list[GenResult]:
    generator = HttpTargetGenerator.from_config(config)
    results: list[GenResult] = []
    requests = [GenRequest(f"q{i}", (), question=q) for i, q in enumerate(questions)]
    generator.generate(requests, results.append)
    generator.close()
    return sorted(results, key=lambda r: r.request_id)


def test_json_reply_gives_answer_contexts_tokens_and_latency(fake: FakeRag) -> None:
    (result,) = _run(_config(fake), 'ok "quoted" question')
    assert result.error is None
    assert result.text == ANSWER
    assert result.output_tokens == 7 and result.engine["output_tokens_source"] == "service"
    # not streamed: end-to-end latency only, no TTFT or TPOT invented
    assert result.ttft_s is None and result.tpot_s is None and result.itl_s is None
    assert result.e2e_s is not None and result.e2e_s >= 0.08
    assert result.contexts == [
        {"chunk_id": "geo-1", "document": "geo.md", "page": None, "score": 0.91,
         "text": "Paris is the capital of France."},
        {"chunk_id": "geo-3", "document": "travel.md", "page": None, "score": 0.33,
         "text": "Lyon is in France."},
    ]  # fmt: skip
    # the body template: every string value filled, JSON-escaped by the encoder
    assert fake.bodies[0] == {
        "query": 'ok "quoted" question',
        "options": {"id": "q0", "top_k": 3},
    }


def test_contexts_as_plain_strings_and_counted_tokens(fake: FakeRag) -> None:
    config = _config(fake, contexts="data.sources[].text", output_tokens=None)
    (result,) = _run(config, "ok")
    assert [c["text"] for c in result.contexts or []] == [
        "Paris is the capital of France.",
        "Lyon is in France.",
    ]
    assert [c["chunk_id"] for c in result.contexts or []] == ["returned-1", "returned-3"]
    assert result.engine["output_tokens_source"] == "cl100k_base count of the answer"
    assert 4 <= result.output_tokens <= 12


def test_no_contexts_mapping_means_none_returned(fake: FakeRag) -> None:
    (result,) = _run(_config(fake, contexts=None), "ok")
    assert result.error is None and result.contexts is None


@pytest.mark.parametrize("path", ["/sse", "/jsonl"])
def test_streamed_reply_measures_ttft_like_the_server(fake: FakeRag, path: str) -> None:
    results = _run(_config(fake, path), "ok-1", "ok-2", "ok-3")
    for result, question in zip(results, ("ok-1", "ok-2", "ok-3"), strict=True):
        assert result.error is None
        assert result.text == ANSWER
        assert result.output_tokens == OUTPUT_TOKENS
        assert [c["chunk_id"] for c in result.contexts or []] == ["geo-1", "geo-3"]
        assert result.itl_s is not None and len(result.itl_s) == 3
        assert result.tpot_s is not None and result.tpot_s > 0
        # the client's TTFT includes the request's way in and the first event's way out:
        # never below the server's own measurement, and close above it on a local socket
        server = fake.server_ttft_s[question]
        assert result.ttft_s is not None
        assert server - 0.005 <= result.ttft_s <= server + 0.1


def test_non_json_body_is_an_error_with_its_start_not_retried(fake: FakeRag) -> None:
    (result,) = _run(_config(fake), "html")
    assert result.error is not None
    assert "reply is not JSON" in result.error
    assert "<html><body>Service temporarily moved" in result.error
    assert result.attempts == 1


def test_mapping_that_matches_nothing_names_the_expression_and_shows_the_body(
    fake: FakeRag,
) -> None:
    (result,) = _run(_config(fake), "nomatch")
    assert result.error is not None
    assert "answer mapping matched nothing" in result.error
    assert "'data.answer'" in result.error and '{"result": {"text": "Paris' in result.error
    assert result.attempts == 1


def test_400_is_not_retried_and_keeps_the_message(fake: FakeRag) -> None:
    (result,) = _run(_config(fake), "bad400")
    assert result.error is not None and "HTTP 400" in result.error
    assert "query must not be empty" in result.error and result.attempts == 1


@pytest.mark.parametrize("script", ["fail500:2", "fail429:1"])
def test_5xx_and_429_are_retried(fake: FakeRag, script: str) -> None:
    (result,) = _run(_config(fake), script)
    assert result.error is None and result.text == ANSWER
    assert result.attempts == int(script.split(":")[1]) + 1
    assert len(result.engine["failed_attempts"]) == result.attempts - 1


def test_persistent_5xx_and_timeouts_become_errors_and_the_run_goes_on(fake: FakeRag) -> None:
    results = _run(_config(fake, max_retries=1), "fail500", "slow", "ok")
    by_question = dict(zip(("fail500", "slow", "ok"), results, strict=True))
    assert "HTTP 500 after 2 attempts" in (by_question["fail500"].error or "")
    assert "timed out" in (by_question["slow"].error or "")
    assert by_question["ok"].error is None


def test_a_stream_cut_midway_is_retried(fake: FakeRag) -> None:
    (result,) = _run(_config(fake, "/sse"), "cut:1")
    assert result.error is None and result.text == ANSWER and result.attempts == 2
    assert "ended without [DONE]" in result.engine["failed_attempts"][0]


def test_unreachable_endpoint_fails_fast_in_one_line() -> None:
    config = HttpGeneratorConfig.model_validate(
        {"kind": "http", "endpoints": ["http://127.0.0.1:9/ask"], "answer": "a"}
    )
    with pytest.raises(AuditorError) as caught:
        HttpTargetGenerator.from_config(config).identity()
    message = str(caught.value)
    assert "\n" not in message
    assert "http://127.0.0.1:9/ask (connection refused)" in message
    assert "fix generator.endpoints" in message


def test_a_down_replica_is_skipped_and_the_other_serves(fake: FakeRag) -> None:
    config = _config(fake, endpoints=["http://127.0.0.1:9/ask", fake.base + "/ask"])
    results = _run(config, "ok", "ok-2")
    assert all(r.error is None and r.endpoint == fake.base + "/ask" for r in results)


def test_secret_headers_come_from_the_environment(
    fake: FakeRag, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(
        fake, headers={"X-Team": "audit"}, headers_env={"Authorization": "RAG_TEST_AUTH"}
    )
    monkeypatch.delenv("RAG_TEST_AUTH", raising=False)
    with pytest.raises(BadInput, match="environment variable RAG_TEST_AUTH is not set"):
        HttpTargetGenerator.from_config(config)
    monkeypatch.setenv("RAG_TEST_AUTH", "Bearer s3cret")
    _run(config, "ok")
    assert fake.headers[0]["Authorization"] == "Bearer s3cret"
    assert fake.headers[0]["X-Team"] == "audit"


def test_bad_mappings_are_refused_when_the_config_loads() -> None:
    with pytest.raises(ValidationError, match="answer: not a JMESPath expression"):
        HttpGeneratorConfig.model_validate(
            {"kind": "http", "endpoints": ["http://x/ask"], "answer": "data.[answer"}
        )
    with pytest.raises(ValidationError, match="method GET sends body as query parameters"):
        HttpGeneratorConfig.model_validate(
            {"kind": "http", "endpoints": ["http://x/ask"], "answer": "a", "method": "GET",
             "body": {"q": "{question}", "opts": {"k": 3}}}
        )  # fmt: skip
    with pytest.raises(ValidationError, match="needs stream_token"):
        HttpGeneratorConfig.model_validate(
            {"kind": "http", "endpoints": ["http://x/ask"], "answer": "a", "stream": "sse"}
        )


def test_fill_template_reaches_nested_values_and_leaves_others() -> None:
    body = {"q": "{question}", "n": 3, "list": ["{question}!", True], "meta": {"id": "{id}"}}
    assert fill_template(body, "why?", "q7") == {
        "q": "why?",
        "n": 3,
        "list": ["why?!", True],
        "meta": {"id": "q7"},
    }


def test_get_sends_the_question_as_query_parameters(fake: FakeRag) -> None:
    config = _config(fake, method="GET", body={"query": "{question}", "k": 3})
    (result,) = _run(config, "what & why?")
    assert result.error is None and result.text == ANSWER
    assert fake.bodies[0] == {"query": "what & why?", "k": "3"}
