"""`auditor run` orchestration with a fake generator: records, resume, faults, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import IngestConfig, PipelineConfig
from auditor.errors import AuditorError, BadInput
from auditor.ingest import ingest_corpus
from auditor.run import run_pipeline
from auditor.store import read_records
from auditor.testing import FakeEmbedder, FakeGenerator
from tests.conftest import WriteCorpus

DOCS = {
    "returns.md": "# Returns\n\nUnopened thermostats can be returned within 30 days of delivery.",
    "warranty.txt": "The T9 thermostat warranty lasts two years from the delivery date.",
}
QUESTIONS = [
    {"id": "q1", "question": "How long is the T9 warranty?", "reference": "Two years."},
    {"id": "q2", "question": "Within how many days can I return a thermostat?"},
    {"id": "q3", "question": "Who won the 1998 world cup?"},
]
PIPELINE = {
    "name": "fake",
    "ingest": {"embedder": {"model": "fake-words"}},
    "retrieval": {"top_k": 2},
    "generator": {"kind": "vllm", "model": "smollm2-135m-instruct"},
}


@pytest.fixture
def setup(
    write_corpus: WriteCorpus, tmp_path: Path, use_fake_embedder: FakeEmbedder
) -> tuple[Path, Path]:
    index = tmp_path / "index"
    ingest_corpus(write_corpus(DOCS), index, IngestConfig(), use_fake_embedder)
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return index, questions


def _run(setup: tuple[Path, Path], out: Path, fake: FakeGenerator, **kwargs) -> object:  # type: ignore[no-untyped-def]
    index, questions = setup
    config = PipelineConfig.model_validate(PIPELINE)
    return run_pipeline(
        config, questions, index, out, generator_factory=lambda *a, **k: fake, **kwargs
    )


def test_records_hold_retrieval_prompt_answer_and_timings(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """Each question becomes one record with chunks, messages, answer, tokens and timings."""
    fake = FakeGenerator().enqueue("Two years [1].", "30 days [1].", "I cannot answer.")
    summary = _run(setup, tmp_path / "run", fake)
    records = read_records(tmp_path / "run")
    assert [r["id"] for r in records] == ["q1", "q2", "q3"]
    first = records[0]
    assert first["reference"] == "Two years." and first["answer"] == "Two years [1]."
    assert first["retrieved"][0]["document"] == "warranty.txt" and len(first["retrieved"]) == 2
    assert first["retrieved"][0]["chunk_id"] == "warranty.txt#0" and first["retrieved"][0]["text"]
    user = first["messages"][-1]["content"]
    assert "[1] (warranty.txt)" in user and "Question: How long is the T9 warranty?" in user
    assert first["messages"][0]["role"] == "system"
    assert (first["output_tokens"], first["finish_reason"], first["error"]) == (3, "stop", None)
    assert first["ttft_s"] == 0.1 and first["tpot_s"] == 0.01
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["schema_version"] == 1
    assert manifest["model"]["name"] == "fake" and len(manifest["pipeline"]["sha256"]) == 64
    assert manifest["questions"]["count"] == 3 and len(manifest["index"]["manifest_sha256"]) == 64
    assert manifest["load_regime"]["mode"] == "offline-batch"
    assert summary.output_tokens == 9 and summary.tokens_per_s == pytest.approx(9 / 3)
    assert fake.closed


def test_interrupted_run_resumes_without_duplicates(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """Ctrl-C after one answer keeps it; the same call resumes with the other two only."""
    fake = FakeGenerator()
    fake.stop_after = 1
    with pytest.raises(KeyboardInterrupt):
        _run(setup, tmp_path / "run", fake)
    assert [r["id"] for r in read_records(tmp_path / "run")] == ["q1"]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["sessions"][0]["interrupted"]
    again = FakeGenerator()
    summary = _run(setup, tmp_path / "run", again)
    assert [r.request_id for r in again.history] == ["q2", "q3"]
    assert [r["id"] for r in read_records(tmp_path / "run")] == ["q1", "q2", "q3"]
    assert summary.skipped == 1 and summary.requests == 3
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["sessions"]) == 2
    third = FakeGenerator()
    assert _run(setup, tmp_path / "run", third).skipped == 3 and third.history == []


def test_torn_last_line_is_cut_and_redone(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """A record half-written by a crash is dropped on resume and that question is asked again."""
    _run(setup, tmp_path / "run", FakeGenerator())
    path = tmp_path / "run" / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][:40])
    again = FakeGenerator()
    _run(setup, tmp_path / "run", again)
    assert [r.request_id for r in again.history] == ["q3"]
    assert [r["id"] for r in read_records(tmp_path / "run")] == ["q1", "q2", "q3"]


def test_failed_request_is_recorded_and_run_goes_on(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """One failing request becomes an error record; the others are answered."""
    summary = _run(setup, tmp_path / "run", FakeGenerator().fail("q2", "HTTP 500 after 3 attempts"))
    records = {r["id"]: r for r in read_records(tmp_path / "run")}
    assert records["q2"]["error"] == "HTTP 500 after 3 attempts" and records["q2"]["attempts"] == 3
    assert records["q1"]["error"] is None
    assert (summary.completed, summary.errors) == (2, 1)


def test_all_requests_failing_fails_the_run(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """When every request fails the run as a whole fails (records are still written)."""
    fake = FakeGenerator().fail("q1", "down").fail("q2", "down").fail("q3", "down")
    with pytest.raises(AuditorError, match="every request failed"):
        _run(setup, tmp_path / "run", fake)
    assert len(read_records(tmp_path / "run")) == 3


def test_run_dir_of_another_configuration_is_refused(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """Resuming into a dir written with another config would mix two audits: refused."""
    _run(setup, tmp_path / "run", FakeGenerator())
    index, questions = setup
    other = PipelineConfig.model_validate(PIPELINE | {"retrieval": {"top_k": 1}})
    with pytest.raises(BadInput, match="holds a run with another pipeline config"):
        run_pipeline(
            other,
            questions,
            index,
            tmp_path / "run",
            generator_factory=lambda *a, **k: FakeGenerator(),
        )


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _invoke_run(
    pipeline: Path, questions: Path, index: Path, out: Path, *extra: str
) -> tuple[int, str, str]:
    return _invoke(
        "run", "--pipeline", str(pipeline), "--questions", str(questions), "--index", str(index),
        "--out", str(out), *extra,
    )  # fmt: skip


def test_cli_run_prints_summary(
    setup: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`auditor run` prints tok/s with the load regime, TTFT p50/p95 and errors."""
    monkeypatch.setattr("auditor.generate.make_generator", lambda *a, **k: FakeGenerator())
    index, questions = setup
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        'name = "fake"\n[ingest.embedder]\nmodel = "fake-words"\n'
        '[generator]\nkind = "vllm"\nmodel = "smollm2-135m-instruct"\n'
    )
    code, out, _ = _invoke_run(pipeline, questions, index, tmp_path / "run", "-q")
    assert code == 0
    assert "fake: 3/3 answered, 0 errors" in out
    assert "tok/s" in out and "offline batch of 3" in out and "TTFT p50 100 ms, p95 100 ms" in out


@pytest.mark.parametrize(
    ("questions_text", "pipeline_text", "message"),
    [
        ('{"id": "a", "question": "q"}\n{"id": "b"\n', None, r"q.jsonl:2: not valid JSON"),
        (
            None,
            '[generator]\nkind = "tgi"\nmodel = "x"\n',
            r"generator: unknown kind; valid kinds: 'vllm', 'openai', 'http'",
        ),
        (None, 'name = "nogen"\n', r"pipeline 'nogen' has no \[generator\] table"),
        (
            None,
            '[generator]\nkind = "vllm"\nmodel = "gpt-17"\n[ingest.embedder]\nmodel = "fake-words"\n',
            r"unknown model 'gpt-17': not a packaged model \(smollm2-135m-instruct",
        ),
        (
            None,
            '[generator]\nkind = "vllm"\nmodel = "smollm2-135m-instruct"\n',
            r"index built with embedder fake-words, pipeline 'p' expects all-MiniLM-L6-v2",
        ),
    ],
    ids=["bad-question-line", "unknown-kind", "no-generator", "unknown-model", "embedder-mismatch"],
)
def test_cli_run_bad_input(
    setup: tuple[Path, Path],
    tmp_path: Path,
    questions_text: str | None,
    pipeline_text: str | None,
    message: str,
) -> None:
    """Bad question files and configs are one-line errors with exit code 2."""
    index, questions = setup
    if questions_text is not None:
        questions = tmp_path / "q.jsonl"
        questions.write_text(questions_text)
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(pipeline_text or PIPELINE_TOML)
    code, out, err = _invoke_run(pipeline, questions, index, tmp_path / "run", "-q")
    assert code == 2, err
    assert out == "" and err.startswith("Error: ") and err.count("\n") == 1
    import re

    assert re.search(message, err), err


def test_cli_run_missing_index(tmp_path: Path) -> None:
    """A missing index names the dir and the command that creates it."""
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "q"}\n')
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(PIPELINE_TOML)
    code, _, err = _invoke_run(pipeline, questions, tmp_path / "nope", tmp_path / "run")
    assert code == 2 and "nope: no such index dir; create it with `auditor ingest" in err


PIPELINE_TOML = '[ingest.embedder]\nmodel = "fake-words"\n[generator]\nkind = "vllm"\nmodel = "smollm2-135m-instruct"\n'


def test_artifacts_with_nan_are_refused_in_one_line(tmp_path: Path) -> None:
    """A hand-edited NaN would flow into summaries and reports as "nan%": refused by file and
    line, even on the last line (which a torn-line repair would otherwise cut silently)."""
    from auditor.errors import BadInput
    from auditor.store import read_jsonl

    path = tmp_path / "checks.jsonl"
    path.write_text('{"id": "a", "faithfulness": 1.0}\n{"id": "b", "faithfulness": NaN}\n')
    with pytest.raises(BadInput, match=r"checks.jsonl:2: NaN is not a number .* write null"):
        read_jsonl(path, repair=True)
    assert path.read_text().count("\n") == 2  # nothing cut


def test_cli_run_on_an_http_service_records_what_it_returned(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """A deployed service is sent the bare question (no retrieval, no prompt of ours); its
    answer, its contexts and the client's timings become the record."""
    from tests.generate.fake_rag import ANSWER, FakeRag

    index, questions = setup
    fake = FakeRag().start()
    try:
        pipeline = tmp_path / "service.toml"
        pipeline.write_text(
            'name = "our-service"\n[ingest.embedder]\nmodel = "fake-words"\n'
            f'[generator]\nkind = "http"\nendpoints = ["{fake.base}/ask"]\n'
            'body = { query = "{question}" }\nanswer = "data.answer"\n'
            'contexts = "data.sources[].text"\n'
        )
        code, out, err = _invoke_run(pipeline, questions, index, tmp_path / "run", "-q")
    finally:
        fake.stop()
    assert code == 0, err
    assert "our-service: 3/3 answered, 0 errors" in out and "server, concurrency 8" in out
    assert sorted(b["query"] for b in fake.bodies) == sorted(q["question"] for q in QUESTIONS)
    records = read_records(tmp_path / "run")
    first = records[0]
    assert first["retrieval"] == "target" and first["contexts_returned"] is True
    assert first["answer"] == ANSWER and first["messages"] == []
    assert [c["chunk_id"] for c in first["retrieved"]] == ["returned-1", "returned-3"]
    assert first["ttft_s"] is None and first["e2e_s"] > 0 and first["output_tokens"] > 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["model"]["backend"] == "http" and manifest["load_regime"]["mode"] == "server"
