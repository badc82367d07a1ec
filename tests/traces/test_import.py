"""`auditor traces`: trace exports into a run dir (fast: spans built by hand in the shapes the
instrumentations write; tests/e2e/test_traces_real.py reads real instrumentation's)."""

from __future__ import annotations

import base64
import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import BadInput
from auditor.results import load_run
from auditor.traces import Window, draw_sample, import_traces, parse_moment
from auditor.traces.conventions import VLLM
from auditor.traces.otlp import CONTENT_LIMIT
from tests.traces.spans import (
    BASE_NS,
    genai_trace,
    openinference_trace,
    request,
    span,
    vllm_span,
    write_export,
)


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def rows(run: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / name).read_text().splitlines()]


def test_openinference_and_vllm_spans_join_into_one_record(tmp_path: Path) -> None:
    app = request("kestrel-assistant", openinference_trace(1))
    engine = request("vllm", [vllm_span(1, parent=103, ttft=0.25, e2e=0.85)])
    found = import_traces([write_export(tmp_path / "e.jsonl", [app, engine])], tmp_path / "run")
    (record,) = records(tmp_path / "run")
    assert record["id"] == record["trace_id"] == f"{1:032x}"
    assert record["question"] == "When was the Kestrel bridge opened?"
    assert record["answer"] == "It opened in 1931."
    assert [c["text"] for c in record["retrieved"]] == [
        "The Kestrel bridge opened in 1931.",
        "It spans the river.",
    ]
    assert record["retrieved"][0]["chunk_id"] == "node-1-0"
    assert record["retrieved"][0]["document"] == "bridge.md"
    assert record["ttft_s"] == 0.25
    assert record["timing_sources"]["ttft_s"].startswith("gen_ai.latency.time_to_first_token")
    assert record["e2e_s"] == pytest.approx(0.9)  # the request's own span, not the engine's
    assert record["tpot_s"] == pytest.approx((0.85 - 0.25) / 8)
    assert record["output_tokens"] == 9 and record["model"] == "smollm2"
    assert record["conventions"] == ["openinference", "vllm"]
    assert found.answers == found.records == 1 and found.traces_in_window == 1


def test_genai_question_comes_from_the_retrieval_query_not_the_prompt(tmp_path: Path) -> None:
    export = write_export(tmp_path / "e.jsonl", [request("app", genai_trace(7))])
    import_traces([export], tmp_path / "run")
    (record,) = records(tmp_path / "run")
    assert record["question"] == "How long is the Kestrel bridge?"
    assert record["answer"] == "It is 410 metres long."
    assert record["retrieved"][0]["text"] == "The bridge is 410 metres long."
    assert record["e2e_s"] == pytest.approx(1.2)  # the root span POST /ask
    assert "ttft_s" not in record  # nobody recorded it: absent, never zero
    assert record["output_tokens"] == 11


def test_genai_content_in_span_events_of_the_earlier_conventions(tmp_path: Path) -> None:
    events = [
        {"name": "gen_ai.user.message", "attributes": [_a("content", "Who built it?")]},
        {"name": "gen_ai.choice", "attributes": [_a("message", '{"content": "Ada Byrne."}')]},
    ]
    chat = span(9, 901, "chat m", {"gen_ai.operation.name": "chat"}, events=events)
    import_traces([write_export(tmp_path / "e.jsonl", [request("a", [chat])])], tmp_path / "r")
    (record,) = records(tmp_path / "r")
    assert (record["question"], record["answer"]) == ("Who built it?", "Ada Byrne.")
    assert record["retrieved"] == [] and record["contexts_returned"] is False


def _a(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def test_content_capture_off_is_skipped_and_said(tmp_path: Path) -> None:
    spans = openinference_trace(1) + openinference_trace(2, content=False, start_ms=10)
    export = write_export(tmp_path / "e.jsonl", [request("app", spans)])
    result = CliRunner().invoke(cli, ["traces", str(export), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "imported 1 of 2 traces in the window; skipped 1:" in result.output
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in result.output
    (skip,) = rows(tmp_path / "run", "skipped.jsonl")
    assert skip == {"trace_id": f"{2:032x}", "reason": "no_content"}
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["population"]["skipped"] == {"no_content": 1}
    assert manifest["population"]["traces_in_window"] == 2


def test_two_llm_answers_in_one_trace_are_two_turns(tmp_path: Path) -> None:
    def chat(span_id: int, start: float, question: str, answer: str) -> dict[str, Any]:
        return span(
            4,
            span_id,
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps([{"role": "user", "content": question}]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": answer}]),
            },
            parent=400,
            start_ms=start,
            end_ms=start + 50,
        )

    spans = [
        span(4, 400, "session", {}, end_ms=500),
        chat(401, 10, "First?", "One."),
        chat(402, 200, "Second?", "Two."),
    ]
    found = import_traces(
        [write_export(tmp_path / "e.jsonl", [request("a", spans)])], tmp_path / "r"
    )
    got = records(tmp_path / "r")
    assert [(r["id"], r["turn"], r["turns"], r["answer"]) for r in got] == [
        (f"{4:032x}-1", 1, 2, "One."),
        (f"{4:032x}-2", 2, 2, "Two."),
    ]
    assert found.answers == 2 and found.traces_imported == 1


def test_error_span_duplicates_and_conflicts(tmp_path: Path) -> None:
    failed = openinference_trace(1)
    failed[0]["status"] = {"code": 2, "message": "upstream timeout"}
    retried = openinference_trace(2, start_ms=10)
    conflicting = openinference_trace(3, start_ms=20)
    changed = json.loads(json.dumps(conflicting[2]))
    changed["name"] = "other"
    export = write_export(
        tmp_path / "e.jsonl",
        [
            request("a", failed + retried + conflicting),
            request("a", retried),  # an exporter's retry of the same batch
            request("a", [changed]),
        ],
    )
    found = import_traces([export], tmp_path / "r")
    assert [r["trace_id"] for r in records(tmp_path / "r")] == [f"{2:032x}"]
    assert found.duplicate_spans == 3
    reasons = {
        s["trace_id"][-1]: (s["reason"], s.get("detail"))
        for s in rows(tmp_path / "r", "skipped.jsonl")
    }
    assert reasons == {
        "1": ("error", "upstream timeout"),
        "3": ("conflicting_spans", f"span {303:016x}"),
    }


def test_a_request_that_failed_before_its_answer_is_an_error_not_content_off(
    tmp_path: Path,
) -> None:
    # the LLM call timed out: the LLM span and the chain above it end in ERROR, no output
    failed = openinference_trace(1, content=False)
    failed[0]["status"] = {"code": 2, "message": "Request timed out."}
    failed[2]["status"] = {"code": 2, "message": "Request timed out."}
    capture_off = openinference_trace(2, content=False, start_ms=10)
    chat = genai_trace(3, start_ms=20)
    chat[2]["attributes"] = [a for a in chat[2]["attributes"] if "output" not in a["key"]]
    chat[2]["status"] = {"code": 2, "message": "ReadTimeout"}
    spans = failed + capture_off + chat + openinference_trace(4, start_ms=30)
    import_traces([write_export(tmp_path / "e.jsonl", [request("a", spans)])], tmp_path / "r")
    reasons = {
        s["trace_id"][-1]: (s["reason"], s.get("detail"), s.get("span_id"))
        for s in rows(tmp_path / "r", "skipped.jsonl")
    }
    assert reasons == {
        "1": ("error", "Request timed out.", f"{101:016x}"),
        "2": ("no_content", None, None),
        "3": ("error", "ReadTimeout", f"{303:016x}"),
    }


def test_window_service_and_empty_windows(tmp_path: Path) -> None:
    day = 86_400_000.0
    spans = (
        openinference_trace(1)
        + openinference_trace(2, start_ms=day)
        + openinference_trace(3, start_ms=2 * day)
    )
    export = write_export(
        tmp_path / "e.jsonl", [request("shop", spans), request("vllm", [vllm_span(9, 1)])]
    )
    start = BASE_NS / 1e9
    since = parse_moment(_iso(start + 3600), "--since")
    until = parse_moment(_iso(start + 2 * 86_400), "--until")
    found = import_traces([export], tmp_path / "r", window=Window(since, until), service="shop")
    assert [r["trace_id"][-1] for r in records(tmp_path / "r")] == ["2"]
    assert (found.traces_seen, found.traces_in_window) == (3, 1)
    with pytest.raises(
        BadInput, match=r"no trace holds a span of service 'web' \(services seen: shop, vllm\)"
    ):
        import_traces([export], tmp_path / "r2", service="web")
    later = parse_moment(_iso(start + 30 * 86_400), "--since")
    with pytest.raises(BadInput, match="no trace starts in the window"):
        import_traces([export], tmp_path / "r3", window=Window(later, None))
    assert not (tmp_path / "r2" / "records.jsonl").exists()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x0a\x12\x0a\x10binary protobuf bytes", "not JSON text"),
        (b'{"resourceLogs": []}\n', "an OTLP logs export, not traces"),
        (b'{"hello": 1}\n', "without resourceSpans: not an OTLP trace export"),
        (b"", "empty"),
    ],
)
def test_files_that_are_not_trace_exports_are_refused(
    tmp_path: Path, content: bytes, message: str
) -> None:
    export = tmp_path / "e.jsonl"
    export.write_bytes(content)
    result = CliRunner().invoke(cli, ["traces", str(export), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "manifest.json").exists()


def test_damaged_line_is_refused_naming_it_but_a_torn_last_line_waits(tmp_path: Path) -> None:
    good = json.dumps(request("a", openinference_trace(1)))
    more = json.dumps(request("a", openinference_trace(2, start_ms=5)))
    export = tmp_path / "e.jsonl"
    export.write_text(good + "\n" + more[:-40] + "\n" + good + "\n")
    with pytest.raises(BadInput, match=r"e\.jsonl:2: not a JSON object"):
        import_traces([export], tmp_path / "r")
    export.write_bytes(
        good.encode() + b"\n" + more.encode().replace(b"Kestrel", b"K\xffstrel") + b"\n"
    )
    with pytest.raises(BadInput, match=r"e\.jsonl:2: not UTF-8"):
        import_traces([export], tmp_path / "r")
    export.write_text(good + "\n" + more[:-40])  # the collector is still writing line 2
    found = import_traces([export], tmp_path / "r")
    assert found.torn == [f"{export}:2"] and found.records == 1
    export.write_text(good + "\n" + more + "\n")  # line 2 complete: the import adds it
    found = import_traces([export], tmp_path / "r")
    assert found.added == 1 and len(records(tmp_path / "r")) == 2


def test_gzip_base64_ids_and_a_pretty_printed_http_body(tmp_path: Path) -> None:
    body = request("a", openinference_trace(5))
    for item in body["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        item["traceId"] = base64.b64encode(bytes.fromhex(item["traceId"])).decode()
    (tmp_path / "body.json").write_text(json.dumps(body, indent=2))
    import_traces([tmp_path / "body.json"], tmp_path / "r1")
    assert records(tmp_path / "r1")[0]["trace_id"] == f"{5:032x}"
    with gzip.open(tmp_path / "e.jsonl.gz", "wt") as handle:
        handle.write(json.dumps(request("a", openinference_trace(6))) + "\n")
    import_traces([tmp_path / "e.jsonl.gz"], tmp_path / "r2")
    assert records(tmp_path / "r2")[0]["trace_id"] == f"{6:032x}"


def test_content_over_the_limit_skips_the_trace(tmp_path: Path) -> None:
    big = openinference_trace(1, answer="x" * (CONTENT_LIMIT + 1))
    found = import_traces(
        [
            write_export(
                tmp_path / "e.jsonl", [request("a", big + openinference_trace(2, start_ms=9))]
            )
        ],
        tmp_path / "r",
    )
    assert found.skipped == {"content_over_limit": 1} and found.records == 1


def test_clock_skew_is_counted_and_the_start_is_the_roots(tmp_path: Path) -> None:
    spans = openinference_trace(1, start_ms=100)
    spans[1]["startTimeUnixNano"] = str(BASE_NS)  # the retriever "starts" before its parent
    found = import_traces(
        [write_export(tmp_path / "e.jsonl", [request("a", spans)])], tmp_path / "r"
    )
    assert found.clock_skew == 1
    assert records(tmp_path / "r")[0]["arrival_time"] == pytest.approx(BASE_NS / 1e9 + 0.1)


def test_sample_is_drawn_from_the_window_and_recomputable(tmp_path: Path) -> None:
    spans = [s for n in range(1, 41) for s in openinference_trace(n, start_ms=n * 1000)]
    export = write_export(tmp_path / "e.jsonl", [request("a", spans)])
    found = import_traces([export], tmp_path / "r", sample=10, seed=3)
    population = rows(tmp_path / "r", "population.jsonl")
    assert len(population) == 40 and found.records == 10
    drawn = draw_sample([row["id"] for row in population], 10, 3)
    assert sorted(r["id"] for r in records(tmp_path / "r")) == drawn
    assert drawn != draw_sample([row["id"] for row in population], 10, 4)
    again = import_traces([export], tmp_path / "r", sample=10, seed=3)
    assert again.added == 0 and len(records(tmp_path / "r")) == 10
    with pytest.raises(BadInput, match=r"imported with seed 3, now 4"):
        import_traces([export], tmp_path / "r", sample=10, seed=4)
    grown = [s for n in range(41, 61) for s in openinference_trace(n, start_ms=n * 1000)]
    with export.open("a") as handle:
        handle.write(json.dumps(request("a", grown)) + "\n")
    with pytest.raises(BadInput, match="the window gained answers"):
        import_traces([export], tmp_path / "r", sample=10, seed=3)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["sample"] == {"size": 10, "seed": 3, "records": 10, "of": 40}


def test_a_grown_export_adds_only_new_traces_and_a_rewritten_one_is_refused(tmp_path: Path) -> None:
    export = write_export(tmp_path / "e.jsonl", [request("a", openinference_trace(1))])
    import_traces([export], tmp_path / "r")
    first = (tmp_path / "r" / "records.jsonl").read_text()
    with export.open("a") as handle:
        handle.write(json.dumps(request("a", openinference_trace(2, start_ms=50))) + "\n")
    found = import_traces([export], tmp_path / "r")
    assert found.added == 1 and (tmp_path / "r" / "records.jsonl").read_text().startswith(first)
    write_export(export, [request("a", openinference_trace(3))])
    with pytest.raises(BadInput, match="rewritten, not appended to"):
        import_traces([export], tmp_path / "r")


def test_the_run_dir_reads_as_a_run(tmp_path: Path) -> None:
    app = request("a", openinference_trace(1) + openinference_trace(2, start_ms=10))
    import_traces([write_export(tmp_path / "e.jsonl", [app])], tmp_path / "r", sample=1, seed=0)
    run = load_run(tmp_path / "r")
    assert len(run.records) == 1
    with (tmp_path / "r" / "records.jsonl").open("a") as handle:
        handle.write(json.dumps(records(tmp_path / "r")[0] | {"id": "extra"}) + "\n")
    with pytest.raises(BadInput, match=r"2 rows, but manifest.json says the import chose 1 answer"):
        load_run(tmp_path / "r")


def test_vllm_names_are_vllms_own() -> None:
    utils = pytest.importorskip("vllm.tracing.utils")
    names = utils.SpanAttributes
    assert VLLM.TIME_TO_FIRST_TOKEN == names.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN
    assert VLLM.E2E == names.GEN_AI_LATENCY_E2E
    assert VLLM.TIME_IN_QUEUE == names.GEN_AI_LATENCY_TIME_IN_QUEUE
    assert VLLM.COMPLETION_TOKENS == names.GEN_AI_USAGE_COMPLETION_TOKENS
    assert VLLM.PROMPT_TOKENS == names.GEN_AI_USAGE_PROMPT_TOKENS


def test_nested_llm_spans_are_one_call_and_the_tokens_are_the_inner_ones(tmp_path: Path) -> None:
    """LlamaIndex under OpenInference: LLM.predict (no token counts) over the LLM's own
    complete (with them); one model call, its tokens read."""
    spans = openinference_trace(1)
    inner = json.loads(json.dumps(spans[2]))
    inner["spanId"], inner["parentSpanId"], inner["name"] = (
        f"{104:016x}",
        spans[2]["spanId"],
        "complete",
    )
    spans[2]["attributes"] = [
        a for a in spans[2]["attributes"] if not a["key"].startswith("llm.token_count")
    ]
    import_traces(
        [write_export(tmp_path / "e.jsonl", [request("a", [*spans, inner])])], tmp_path / "r"
    )
    (record,) = records(tmp_path / "r")
    assert record["llm_calls"] == 1 and record["output_tokens"] == 9


def test_hostile_values_are_dropped_not_a_traceback(tmp_path: Path) -> None:
    """Values nested thousands deep, JSON strings nested as deep, a start time of 5,000
    digits, an infinite latency: the import reads the rest of the trace."""
    deep: dict[str, Any] = {"stringValue": "x"}
    for _ in range(300):  # orjson's own limit is 1,024 levels
        deep = {"arrayValue": {"values": [deep]}}
    spans = openinference_trace(1)
    spans[2]["attributes"].append({"key": "llm.output_messages.1.message.content", "value": deep})
    chat = span(
        2,
        201,
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": "[" * 100_000 + "]" * 100_000,
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Fine."}]),
        },
    )
    chat["startTimeUnixNano"] = "9" * 5_000
    engine = vllm_span(1, parent=103)
    engine["attributes"].append({"key": "gen_ai.latency.e2e", "value": {"doubleValue": "Infinity"}})
    export = write_export(
        tmp_path / "e.jsonl", [request("a", [*spans, chat]), request("v", [engine])]
    )
    found = import_traces([export], tmp_path / "r")
    got = {r["trace_id"][-1]: r for r in records(tmp_path / "r")}
    assert got["1"]["answer"] == "It opened in 1931."
    # messages that do not parse are read as one message of that text (a bare string)
    assert got["2"]["answer"] == "Fine." and got["2"]["question"].startswith("[[[")
    assert got["2"]["arrival_time"] == 0.0  # a start time that is no int64: 0, not a crash
    assert "e2e_s" in got["1"] and "tpot_s" not in got["1"]  # the engine's infinite e2e: unread
    assert found.answers == 2
