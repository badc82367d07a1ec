"""`auditor audit` / `report` / `history` / `baseline` with fake engines: artifacts, gates,
escaping, history and regressions. The real engines and a real browser: tests/e2e."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.audit import AuditOutcome, run_audit
from auditor.cli import cli
from auditor.config import IngestConfig, JudgeConfig, PipelineConfig
from auditor.errors import AuditorError, BadInput
from auditor.gates import parse_gate
from auditor.history import list_audits
from auditor.ingest import ingest_corpus
from auditor.testing import FakeEmbedder, FakeGenerator, FakeJudge
from tests.conftest import WriteCorpus

DOCS = {
    "returns.md": "# Returns\n\nUnopened thermostats can be returned within 30 days of delivery.",
    "warranty.txt": "The T9 thermostat warranty lasts 2 years from the delivery date.",
}
QUESTIONS = [
    {"id": "q1", "question": "How long is the T9 warranty?", "reference": "2 years."},
    {"id": "q2", "question": "Within how many days can I return a thermostat?"},
]
INJECTION = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'
GOOD = [
    "The T9 thermostat warranty lasts 2 years from the delivery date.",
    "Unopened thermostats can be returned within 30 days of delivery.",
]
SLOPPY = [
    f"The T9 thermostat warranty lasts 5 years from the delivery date. {INJECTION}",
    "Unopened thermostats can be returned within 30 days of delivery.",
]


def _pipeline(name: str) -> PipelineConfig:
    return PipelineConfig.model_validate(
        {
            "name": name,
            "ingest": {"embedder": {"model": "fake-words"}},
            "retrieval": {"top_k": 2},
            "generator": {"kind": "vllm", "model": "smollm2-135m-instruct"},
            "slo": {"ttft_ms": 100_000},
        }
    )


@pytest.fixture
def corpus(
    write_corpus: WriteCorpus, tmp_path: Path, use_fake_embedder: FakeEmbedder
) -> tuple[Path, Path]:
    index = tmp_path / "index"
    ingest_corpus(write_corpus(DOCS), index, IngestConfig(), use_fake_embedder)
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return index, questions


def _audit(
    corpus: tuple[Path, Path], out: Path, answers: dict[str, list[str]], gates: list[str] = ()
) -> AuditOutcome:  # type: ignore[assignment]
    index, questions = corpus
    queues = {name: FakeGenerator().enqueue(*texts) for name, texts in answers.items()}
    order = iter(list(queues.values()))
    return run_audit(
        [_pipeline(name) for name in answers],
        questions,
        index,
        out,
        JudgeConfig(metrics=["faithfulness", "context_precision"]),
        gates=[parse_gate(g) for g in gates],
        history_path=out.parent / "history.sqlite",
        generator_factory=lambda *a, **k: next(order),
        judge_factory=lambda config: FakeJudge(),
        embed=FakeEmbedder().embed,
    )


def test_audit_writes_runs_checks_summaries_and_one_report(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "audit"
    outcome = _audit(corpus, out, {"good": GOOD, "sloppy": SLOPPY}, ["hallucination_rate<=0.1"])
    for name in ("good", "sloppy"):
        for artifact in ("records.jsonl", "checks.jsonl", "summary.json", "manifest.json"):
            assert (out / name / artifact).is_file(), artifact
    summary = json.loads((out / "sloppy" / "summary.json").read_text())
    # one contradicted claim (5 vs 2 years) of the sloppy answers' judged claims
    assert summary["claims"]["contradicted"] == 1
    assert summary["metrics"]["hallucination_rate"]["value"] > 0.1
    assert [(r.pipeline, r.passed) for r in outcome.gate_results] == [
        ("good", True),
        ("sloppy", False),
    ]
    html = (out / "report.html").read_text()
    assert "good" in html and "sloppy" in html and 'id="comparison-table"' in html
    assert "<svg" in html and "What the figures mean" in html
    # the report opens with which pipeline has the higher goodput and whether the sample tells
    assert re.search(r'id="headline"><strong>\w+ has the higher goodput: ', html)
    assert "questions both answered" in html and 'id="contrasts"' in html
    assert "Rates are as judged" in html  # the fake judge has no calibration
    assert len(list_audits(tmp_path / "history.sqlite")) == 2


def test_everything_from_models_and_documents_is_escaped(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "audit"
    _audit(corpus, out, {"sloppy": SLOPPY})
    html = (out / "report.html").read_text()
    assert INJECTION not in html
    assert "&lt;script&gt;document.title=" in html
    # the only scripts are the report's own (one inline block)
    assert len(re.findall(r"<script\b", html)) == 1
    assert "onerror=alert" not in html.replace("&lt;img src=x onerror=alert(1)&gt;", "")


def test_a_claim_highlight_links_to_its_detail_with_the_source_passage(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "audit"
    _audit(corpus, out, {"good": GOOD})
    html = (out / "report.html").read_text()
    links = re.findall(r'<a class="claim v-(\w+)" href="#([\w-]+)"', html)
    assert links and all(verdict == "supported" for verdict, _ in links)
    for _, target in links:
        detail = html.split(f'id="{target}"', 1)[1].split("</details>", 1)[0]
        assert "Supported by" in detail and "<blockquote" in detail
        # the judge's probability stands beside the verdict, the evidence under the reason
        assert '<span class="badge p-supported"' in detail and ">p 0.9</span>" in detail
        assert "<strong>Evidence:</strong>" in detail


def test_a_sentence_the_claim_list_left_out_is_checked_and_marked(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    """A judge that lists only an answer's first claim: the second sentence is checked as
    written (here contradicted: 5 vs 2 years) and the report marks it as an answer sentence."""
    index, questions = corpus
    judge = FakeJudge()
    judge.claims_listed = 1
    answer = (
        "Unopened thermostats can be returned within 30 days of delivery. "
        "The T9 thermostat warranty lasts 5 years from the delivery date."
    )
    out = tmp_path / "audit"
    run_audit(
        [_pipeline("one")],
        questions,
        index,
        out,
        JudgeConfig(metrics=["faithfulness"], claims="listed"),
        history_path=None,
        generator_factory=lambda *a, **k: FakeGenerator().enqueue(answer, answer),
        judge_factory=lambda config: judge,
        embed=FakeEmbedder().embed,
    )
    checks = [json.loads(line) for line in (out / "one" / "checks.jsonl").read_text().splitlines()]
    claims = checks[0]["claims"]
    assert [(c["origin"], c["verdict"]) for c in claims] == [
        ("judge", "supported"),
        ("sentence", "contradicted"),
    ]
    html = (out / "report.html").read_text()
    assert html.count(">answer sentence</span>") == 2  # one per answer


def test_cli_report_gates_history_and_baseline(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    """report exits 1 naming the failed gate; history lists audits; baseline marks one."""
    out = tmp_path / "audit"
    _audit(corpus, out, {"good": GOOD, "sloppy": SLOPPY})
    runner = CliRunner()
    db = tmp_path / "history.sqlite"
    result = runner.invoke(
        cli,
        [
            "report",
            str(out / "good"),
            str(out / "sloppy"),
            "--out",
            str(tmp_path / "r.html"),
            "--gate",
            "faithfulness>=0.9",
            "--history",
            str(db),
        ],
    )
    assert result.exit_code == 1, result.output
    assert "gate failed: faithfulness>=0.9 on sloppy" in result.output
    assert "PASS faithfulness>=0.9 on good" in result.output
    assert (tmp_path / "r.html").is_file()

    result = runner.invoke(cli, ["baseline", "accept", str(out / "good"), "--history", str(db)])
    assert result.exit_code == 0, result.output
    listing = runner.invoke(cli, ["history", "--history", str(db)])
    assert listing.exit_code == 0
    starred = [line for line in listing.output.splitlines() if re.match(r"\s*\d+\*", line)]
    assert len(starred) == 1 and "good" in starred[0]

    bad = runner.invoke(cli, ["report", str(out / "good"), "--gate", "faithfulness>>1"])
    assert bad.exit_code == 2 and "expected METRIC OP NUMBER" in bad.output
    unknown = runner.invoke(cli, ["report", str(out / "good"), "--gate", "speed>=1"])
    assert unknown.exit_code == 2 and "unknown figure 'speed'" in unknown.output
    missing = runner.invoke(cli, ["report", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "not a run dir" in missing.output


def test_regression_against_the_baseline_is_flagged(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    """Week 1 faithful and accepted; week 2 hallucinates: the report flags the regression."""
    db = tmp_path / "history.sqlite"
    _audit(corpus, tmp_path / "week1", {"pipe": GOOD})
    CliRunner().invoke(
        cli, ["baseline", "accept", str(tmp_path / "week1" / "pipe"), "--history", str(db)]
    )
    _audit(corpus, tmp_path / "week2", {"pipe": [SLOPPY[0], SLOPPY[0]]})
    html = (tmp_path / "week2" / "report.html").read_text()
    section = html.split('class="fail regressions"', 1)
    assert len(section) == 2 and "hallucination_rate" in section[1].split("</p>", 1)[0]
    assert "Trend across audits (2)" in html
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT pipeline, baseline FROM audits ORDER BY id").fetchall()
    assert rows == [("pipe", 1), ("pipe", 0)]


def test_reaudit_resumes_and_updates_its_history_row(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "audit"
    _audit(corpus, out, {"good": GOOD})
    first = (out / "good" / "checks.jsonl").read_text()
    _audit(corpus, out, {"good": []})  # nothing left to generate or judge
    assert (out / "good" / "checks.jsonl").read_text() == first
    assert len(list_audits(tmp_path / "history.sqlite")) == 1


def test_answers_from_logs_render_with_throughput_not_measured(tmp_path: Path) -> None:
    from auditor.audit import finish_audit
    from auditor.verify.check import check_items, import_answers

    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        json.dumps({"id": "1", "question": "Warranty?", "contexts": [GOOD[0]], "answer": GOOD[0]})
        + "\n"
    )
    items = import_answers(answers, tmp_path / "logs")
    check_items(
        items,
        tmp_path / "logs",
        JudgeConfig(metrics=["faithfulness"]),
        FakeJudge(),
        FakeEmbedder().embed,
    )
    outcome = finish_audit([tmp_path / "logs"], tmp_path / "logs.html", [parse_gate("tps>=1")])
    html = (tmp_path / "logs.html").read_text()
    assert "not measured" in html and "answers from logs" in html
    assert not outcome.passed  # a gate on a figure that was not measured fails


def test_duplicate_pipeline_names_are_refused(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="share the name"):
        _audit_two_same(corpus, tmp_path)


def _audit_two_same(corpus: tuple[Path, Path], tmp_path: Path) -> Any:
    index, questions = corpus
    return run_audit(
        [_pipeline("same"), _pipeline("same")],
        questions,
        index,
        tmp_path / "x",
        JudgeConfig(),
        generator_factory=lambda *a, **k: FakeGenerator(),
        judge_factory=lambda config: FakeJudge(),
        embed=FakeEmbedder().embed,
    )


def test_corrected_figures_regress_only_against_a_baseline_of_the_same_calibration() -> None:
    from auditor.history import AuditRow, regressions

    def summary(rate: float, labels: str) -> dict[str, Any]:
        calibration = {"labels": {"sha256": labels}, "threshold": 0.3, "claim_level": {}}
        entry = {"value": rate, "ci95": [rate - 0.05, rate + 0.05]}
        return {"metrics": {"hallucination_rate_corrected": entry}, "calibration": calibration}

    def row(data: dict[str, Any]) -> AuditRow:
        return AuditRow(1, "2026-12-01", "/r", "pipe", "run", None, None, None, True, data)

    found = regressions(summary(0.30, "a"), row(summary(0.10, "a")))
    assert [r.metric for r in found] == ["hallucination_rate_corrected"]
    assert regressions(summary(0.30, "a"), row(summary(0.10, "b"))) == []
    assert regressions(summary(0.12, "a"), row(summary(0.10, "a"))) == []  # inside the interval


def test_context_precision_regresses_only_against_a_baseline_rated_the_same_way() -> None:
    from auditor.history import AuditRow, regressions

    def summary(value: float, verdict: str | None) -> dict[str, Any]:
        data: dict[str, Any] = {"metrics": {"context_precision": {"value": value, "ci95": None}}}
        return data | ({"context_precision_verdict": verdict} if verdict else {})

    def row(data: dict[str, Any]) -> AuditRow:
        return AuditRow(1, "2026-12-01", "/r", "pipe", "run", None, None, None, True, data)

    found = regressions(summary(0.5, "first_token"), row(summary(0.8, "first_token")))
    assert [r.metric for r in found] == ["context_precision"]
    assert regressions(summary(0.5, None), row(summary(0.8, "reason"))) != []  # reason both
    assert regressions(summary(0.5, "first_token"), row(summary(0.8, None))) == []
    assert regressions(summary(0.5, "reason"), row(summary(0.8, "first_token"))) == []


def test_an_audit_mixes_a_deployed_service_with_a_model_it_serves(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    """A team's http service (no contexts returned) next to a candidate on the auditor's own
    engine: same questions, one report; the service's claims checked on the knowledge base."""
    from auditor.generate import make_generator
    from tests.generate.fake_rag import FakeRag

    index, questions = corpus
    service = FakeRag().start()
    try:
        http = PipelineConfig.model_validate(
            {
                "name": "our-service",
                "ingest": {"embedder": {"model": "fake-words"}},
                "generator": {
                    "kind": "http",
                    "endpoints": [f"{service.base}/ask"],
                    "body": {"query": "{question}"},
                    "answer": "data.answer",
                },
            }
        )
        candidate = FakeGenerator().enqueue(*GOOD)

        def factory(cfg: Any, **kwargs: Any) -> Any:
            return candidate if cfg.kind == "vllm" else make_generator(cfg)

        outcome = run_audit(
            [http, _pipeline("candidate")],
            questions,
            index,
            tmp_path / "audit",
            JudgeConfig(metrics=["faithfulness", "context_precision"]),
            judge_factory=lambda config: FakeJudge(),
            embed=FakeEmbedder().embed,
            generator_factory=factory,
        )
    finally:
        service.stop()
    assert [run.name for run in outcome.runs] == ["our-service", "candidate"]
    service_checks = [
        json.loads(line)
        for line in (tmp_path / "audit" / "our-service" / "checks.jsonl").read_text().splitlines()
    ]
    assert {row["sources"] for row in service_checks} == {"kb"}
    candidate_checks = (tmp_path / "audit" / "candidate" / "checks.jsonl").read_text()
    assert '"sources": "returned"' in candidate_checks
    html = outcome.report_path.read_text()
    assert "our-service" in html and "candidate" in html
    assert "server, concurrency 8" in html and "offline batch" in html
    assert "not measurable (no contexts returned)" in html


def test_a_listing_error_is_shown_apart_and_escaped(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    """A claim the judge listed that the answer does not make (here, with markup in it) is
    dropped from the verdicts and shown under its answer as a listing error, escaped."""
    index, questions = corpus
    invented = "The T9 has a <b>keep-warm</b> mode."

    class Inventing(FakeJudge):
        def _answer(self, call: Any) -> dict[str, Any]:
            reply = super()._answer(call)
            if "claims" in reply:
                reply["claims"] = reply["claims"] + [invented]
            return reply

    answer = "Unopened thermostats can be returned within 30 days of delivery."
    out = tmp_path / "audit"
    run_audit(
        [_pipeline("one")],
        questions,
        index,
        out,
        JudgeConfig(metrics=["faithfulness"], claims="listed"),
        history_path=None,
        generator_factory=lambda *a, **k: FakeGenerator().enqueue(answer, answer),
        judge_factory=lambda config: Inventing(),
        embed=FakeEmbedder().embed,
    )
    checks = [json.loads(line) for line in (out / "one" / "checks.jsonl").read_text().splitlines()]
    assert [e["text"] for e in checks[0]["listing_errors"]] == [invented]
    assert invented not in [c["text"] for c in checks[0]["claims"]]
    html = (out / "report.html").read_text()
    assert "listed claim the answer does not make, dropped (listing errors)" in html
    assert "The T9 has a &lt;b&gt;keep-warm&lt;/b&gt; mode." in html and invented not in html


class _Engine(FakeGenerator):
    """A started engine (fake): generators on it share it; the owner's close frees it."""

    def __init__(self, model: str, log: list[str]) -> None:
        super().__init__()
        self.model, self.log = model, log
        log.append(f"start {model}")

    def sharing(self, cfg: Any) -> _Engine:
        self.log.append(f"share {self.model}")
        return self

    def close(self) -> None:
        if not self.closed:
            self.log.append(f"close {self.model}")
        super().close()


def test_the_judge_checks_on_the_engine_of_the_pipeline_with_its_settings(
    corpus: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline whose in-process engine is the judge's (same weights and engine settings,
    other sampling) generates last and its engine checks every run: one engine start fewer,
    freed once, after the check; another pipeline's engine starts and stops as before."""
    from auditor import audit
    from auditor.verify import judges

    judge_config = JudgeConfig(metrics=["faithfulness"])
    same = judge_config.generator.model_dump() | {"sampling": {"max_tokens": 64}}
    pipelines = [
        _pipeline("on-judge").model_copy(
            update={
                "generator": PipelineConfig.model_validate(
                    {"name": "x", "generator": same}
                ).generator
            }
        ),
        _pipeline("small"),
    ]
    log: list[str] = []
    monkeypatch.setattr(
        audit.VLLMGenerator, "from_config", lambda cfg, **_: _Engine(cfg.model, log)
    )

    def judge_on(engine: _Engine) -> FakeJudge:
        assert not engine.closed, "the engine was freed before the check"
        log.append(f"judge on {engine.model}")
        return FakeJudge()

    monkeypatch.setattr(judges, "GeneratorJudge", judge_on)
    monkeypatch.setattr(judges, "make_judge", lambda config: pytest.fail("a second judge engine"))
    index, questions = corpus

    def prepare(name: str, **_: Any) -> None:
        log.append(f"prepare {name}")

    run_audit(
        pipelines,
        questions,
        index,
        tmp_path / "audit",
        judge_config,
        embed=FakeEmbedder().embed,
        prepare=prepare,
        prepare_ahead=False,  # in the order the engines need them (the log's order)
    )
    judge_model = judge_config.generator.model
    assert log == [
        "prepare smollm2-135m-instruct",
        "start smollm2-135m-instruct",
        "close smollm2-135m-instruct",
        f"prepare {judge_model}",
        f"start {judge_model}",
        f"share {judge_model}",
        f"judge on {judge_model}",
        f"close {judge_model}",
    ]
    for name in ("on-judge", "small"):
        assert (tmp_path / "audit" / name / "checks.jsonl").is_file()


def test_engines_that_differ_from_the_judges_are_not_shared() -> None:
    """Another dtype, context, KV cache or engine argument starts another engine; sampling
    does not (it is per request)."""
    from auditor.audit import SharedEngine

    judge = JudgeConfig().generator
    shared = SharedEngine(judge)  # type: ignore[arg-type]
    assert shared.serves(
        judge.model_copy(
            update={
                "sampling": judge.sampling.model_copy(update={"max_tokens": 64, "temperature": 0.7})
            }
        )
    )
    for change in (
        {"dtype": "float32"},
        {"max_model_len": 2048},
        {"kv_cache_gib": 3},
        {"engine_args": {}},
        {"model": "qwen2.5-coder-0.5b-instruct"},
    ):
        assert not shared.serves(judge.model_copy(update=change)), change


def test_the_demos_1_5b_pipeline_runs_on_the_judges_engine_on_two_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make demo` on the 2-core machine: the qwen-1.5b-cpu pipeline starts the default
    judge's engine (its engine settings are the judge's), so the judge needs no engine of
    its own; the 0.5B pipeline starts another."""
    import os

    from auditor.audit import SharedEngine
    from auditor.config import load_pipeline

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    shared = SharedEngine(JudgeConfig().generator)  # type: ignore[arg-type]
    pipelines = Path(__file__).resolve().parents[1] / "pipelines"
    assert shared.serves(load_pipeline(pipelines / "qwen-1.5b-cpu.toml").generator)
    assert not shared.serves(load_pipeline(pipelines / "qwen-0.5b-cpu.toml").generator)


PER_PIPELINE = ("retrieval", "model preparation", "engine start", "generation", "engine stop")


def test_an_audit_says_where_its_time_went(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    """OUT/timings.json holds every stage of the audit, each pipeline's in the order they
    ran, with seconds >= 0 that add up (with "other") to the audit's wall time."""
    out = tmp_path / "audit"
    outcome = _audit(corpus, out, {"good": GOOD, "sloppy": SLOPPY})
    timings = json.loads((out / "timings.json").read_text(encoding="utf-8"))
    stages = [(row["pipeline"], row["stage"]) for row in timings["stages"]]
    assert stages == [
        *((name, stage) for name in ("good", "sloppy") for stage in PER_PIPELINE),
        (None, "checking set-up"),
        (None, "judge start"),
        ("good", "checking"),
        ("sloppy", "checking"),
        (None, "summaries, gates and report"),
    ]
    assert all(row["seconds"] >= 0 for row in timings["stages"])
    assert timings["status"] == "complete" and timings["other_s"] >= 0
    total = sum(row["seconds"] for row in timings["stages"]) + timings["other_s"]
    assert total == pytest.approx(timings["wall_s"], abs=0.01)
    assert outcome.times is not None and outcome.times.wall_s >= timings["wall_s"] - 0.01
    # the audit dir holds its own files and the run dirs, nothing a reader would take for a run
    assert sorted(p.name for p in out.iterdir()) == [
        "good",
        "report.html",
        "sloppy",
        "timings.json",
    ]


@pytest.fixture
def fake_engines(monkeypatch: pytest.MonkeyPatch, use_fake_embedder: FakeEmbedder) -> list[str]:
    """The CLI's engines and judge as fakes; the models they ask for, in order."""
    from auditor.generate.vllm_offline import VLLMGenerator
    from auditor.verify import judges

    started: list[str] = []

    def start(cls: Any, cfg: Any, **_: Any) -> FakeGenerator:
        started.append(cfg.model)
        return FakeGenerator().enqueue(*GOOD)

    monkeypatch.setattr(VLLMGenerator, "from_config", classmethod(start))
    monkeypatch.setattr(judges, "make_judge", lambda config: FakeJudge())
    return started


def _audit_cli(
    corpus: tuple[Path, Path], tmp_path: Path, model: str, env: dict[str, str] | None = None
) -> Any:
    index, questions = corpus
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        'name = "p"\n[ingest.embedder]\nmodel = "fake-words"\n[generator]\nkind = "vllm"\n'
        f'model = "{model}"\n',
        "utf-8",
    )
    args = ["audit", "--pipeline", str(pipeline), "--questions", str(questions)]
    args += ["--index", str(index), "--out", str(tmp_path / "audit")]
    args += ["--history", str(tmp_path / "h.sqlite"), "--judge-set", 'metrics=["faithfulness"]']
    return CliRunner().invoke(cli, args, env=env)


def test_the_audit_command_ends_with_the_table_of_stages_on_stderr(
    corpus: tuple[Path, Path],
    tmp_path: Path,
    fake_engines: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Last on stderr: one line per stage with its seconds, make demo's set-up and ingest
    first when its clock is given, then the rest and the wall time; stdout keeps the results."""
    import time

    prepared: list[str] = []
    monkeypatch.setattr("auditor.audit.prepare_model", lambda name, **_: prepared.append(name))
    now = time.time()
    clock = tmp_path / "demo.clock"
    clock.write_text(f"started {now - 30}\nset-up {now - 10}\n")
    env = {"AUDITOR_MAKE_CLOCK": str(clock), "AUDITOR_MAKE_STARTED": str(now - 31)}
    result = _audit_cli(corpus, tmp_path, "smollm2-135m-instruct", env)
    assert result.exit_code == 0, result.output
    assert "where the time went" not in result.stdout
    table = result.stderr[result.stderr.index("where the time went") :].splitlines()
    labels = [re.split(r"\s{2,}", line.strip())[0] for line in table[1:]]
    assert labels == [
        "make demo: set-up",
        "make demo: ingest",
        "input checks",
        *(f"p: {stage}" for stage in PER_PIPELINE),
        "checking set-up",
        "judge: model preparation",  # the default judge on an engine of its own
        "judge start",
        "p: checking",
        "summaries, gates and report",
        "other",
        "audit (wall)",
        "with the stages before",
    ]
    seconds = [float(re.search(r"\s(-?\d+\.\d) s", line).group(1)) for line in table[1:]]  # type: ignore[union-attr]
    assert all(value >= 0 for value in seconds)
    assert seconds[0] == pytest.approx(20.0, abs=0.2) and seconds[1] >= 10.0
    assert fake_engines == ["smollm2-135m-instruct"]
    # the pipeline's model was prepared in the background, then the judge's
    assert prepared == ["smollm2-135m-instruct", "qwen2.5-coder-1.5b-instruct"]


def test_a_clock_from_an_earlier_make_is_not_read(tmp_path: Path) -> None:
    from auditor.cli.audit_cmd import stages_before

    clock = tmp_path / "demo.clock"
    clock.write_text("started 100.0\nset-up 160.0\n")
    assert stages_before(str(clock), "99.5", now=200.0) == {
        "make demo: set-up": 60.0,
        "make demo: ingest": 40.0,
    }
    assert stages_before(str(clock), "150.0", now=200.0) == {}  # set-up ran for another make
    assert stages_before(str(clock), None, now=200.0) == {}
    assert stages_before(str(tmp_path / "none"), "99.5", now=200.0) == {}
    clock.write_text("started x\n")
    assert stages_before(str(clock), "99.5", now=200.0) == {}


def test_a_model_that_fails_to_prepare_in_the_background_fails_the_audit_in_one_line(
    corpus: tuple[Path, Path],
    tmp_path: Path,
    fake_engines: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The conversion fails in the background thread: the audit stops before that model's
    engine starts, says the error in one line, exits non-zero, and leaves no model folder
    and no work dir in the cache; timings.json says it failed."""
    from auditor.models import PACKAGED_MODELS
    from tests.test_models import make_tiny_package

    model, _ = make_tiny_package(tmp_path, monkeypatch)
    monkeypatch.setitem(PACKAGED_MODELS, "tiny", model)

    def failing_convert(gguf: Path, folder: Path, **_: object) -> dict[str, object]:
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"half the weights")
        raise AuditorError("converting model.gguf failed: MemoryError")

    monkeypatch.setattr("auditor.models.prepare._convert", failing_convert)
    models = tmp_path / "models"
    result = _audit_cli(corpus, tmp_path, "tiny", {"AUDITOR_MODELS_DIR": str(models)})
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert errors == ["Error: converting model.gguf failed: MemoryError"]
    assert "Traceback" not in result.output
    assert [p.name for p in models.iterdir() if not p.name.startswith(".")] == []
    assert fake_engines == []  # no engine started
    timings = json.loads((tmp_path / "audit" / "timings.json").read_text(encoding="utf-8"))
    assert timings["status"] == "failed"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([{"id": "UNDRAWN", "hallucinated": False}], "outside its drawn review sample"),
        (
            [
                {"id": "DRAWN", "hallucinated": False, "reviewer": "Ana"},
                {"id": "DRAWN", "hallucinated": False, "reviewer": "Bo", "role": "second"},
            ],
            "which is not drawn for a second review",
        ),
    ],
    ids=["outside-sample", "second-not-drawn"],
)
def test_audit_labels_outside_the_sample_it_will_review_are_refused_before_any_engine(
    corpus: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lines: list[dict[str, Any]],
    message: str,
) -> None:
    """`audit --review 1 --labels`: the sample is seed 0's first answer over the questions
    asked, known before the work; a label outside it (or a second review none is drawn for)
    is refused in one line with no engine, judge or model preparation started and nothing
    written."""
    from auditor.generate.vllm_offline import VLLMGenerator
    from auditor.review import drawn_order

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an engine, a judge or a model was started")

    monkeypatch.setattr("auditor.verify.judges.make_judge", never)
    monkeypatch.setattr(VLLMGenerator, "from_config", classmethod(never))
    monkeypatch.setattr("auditor.audit.prepare_model", never)
    index, questions = corpus
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        'name = "p"\n[ingest.embedder]\nmodel = "fake-words"\n[generator]\nkind = "vllm"\n'
        'model = "smollm2-135m-instruct"\n',
        encoding="utf-8",
    )
    order = drawn_order(sorted(str(q["id"]) for q in QUESTIONS), 0)
    named = {"DRAWN": order[0], "UNDRAWN": order[1]}
    labels = tmp_path / "l.jsonl"
    labels.write_text(
        "".join(json.dumps(line | {"id": named[line["id"]]}) + "\n" for line in lines),
        encoding="utf-8",
    )
    out = tmp_path / "audit"
    argv = ["audit", "--pipeline", str(pipeline), "--questions", str(questions), "--index",
            str(index), "--out", str(out), "--review", "1", "--labels", str(labels), "-q"]  # fmt: skip
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 2, done.output
    assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not out.exists()
