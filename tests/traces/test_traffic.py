"""Goodput of real traffic: a window of traces imported, its sample checked (fake judge), its
figures in summary.json and the report, each recomputed here by hand from the files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.reviewed import labels_only_interval
from tests.traces.spans import (
    BASE_NS,
    genai_trace,
    openinference_trace,
    request,
    vllm_span,
    write_export,
)
from tests.verify.test_calibrate import _fakes, _labelled

DAY_MS = 86_400_000.0


def _export(tmp_path: Path, count: int = 30) -> tuple[Path, list[float]]:
    """`count` traced answers over a day (every third hallucinated), vLLM spans with TTFTs
    from 0.1 to 0.5 s, and one trace with content capture off."""
    app: list[dict[str, Any]] = []
    engine: list[dict[str, Any]] = []
    ttfts = []
    for k, row in enumerate(_labelled(count, wrong_every=3)):
        trace, start = k + 1, k * DAY_MS / count
        app += openinference_trace(
            trace, row["question"], row["answer"], tuple(row["contexts"]), start_ms=start
        )
        ttft = 0.1 + (k % 5) / 10
        ttfts.append(ttft)
        engine.append(vllm_span(trace, trace * 100 + 3, start_ms=start + 60, ttft=ttft, e2e=1.5))
    app += openinference_trace(count + 1, content=False, start_ms=DAY_MS - 10)
    path = write_export(
        tmp_path / "week.jsonl", [request("assistant", app), request("vllm", engine)]
    )
    return path, ttfts


def _cli(*args: str) -> str:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 0, done.output
    return done.output


def test_window_goodput_is_recomputed_from_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fakes(monkeypatch)
    export, ttfts = _export(tmp_path)
    run = tmp_path / "week"
    said = _cli(
        "traces",
        str(export),
        "--out",
        str(run),
        "--since",
        "2026-11-30",
        "--until",
        "2026-12-07",
        "--sample",
        "12",
        "--seed",
        "5",
        "--slo",
        "ttft_ms=300",
    )
    assert "imported 30 of 31 traces in the window; skipped 1:" in said
    assert "sampled 12 of 30 answers for checking" in said
    _cli("check", str(run), "-q")
    _cli("report", str(run), "--out", str(tmp_path / "r.html"), "--history", str(tmp_path / "h.db"))
    summary = json.loads((run / "summary.json").read_text())
    traffic = summary["traffic"]
    week = 7 * 86_400.0
    assert traffic["window"]["seconds"] == week
    assert traffic["requests_per_s"] == pytest.approx(31 / week)
    met = sum(t <= 0.3 for t in ttfts)
    assert (traffic["slo_met"], traffic["slo_measured"]) == (met, 30)
    assert traffic["slo_attainment"] == pytest.approx(met / 30)
    assert traffic["slo_rps"] == pytest.approx(met / week)
    checks = [json.loads(line) for line in (run / "checks.jsonl").read_text().splitlines()]
    records = {
        r["id"]: r for r in map(json.loads, (run / "records.jsonl").read_text().splitlines())
    }
    assert len(checks) == 12
    flagged = sum(c["hallucinated"] for c in checks)
    assert 0 < flagged < 12  # the fake judge finds the wrong figures
    assert traffic["hallucinated_answer_rate"] == pytest.approx(flagged / 12)
    assert traffic["hallucinated_answer_rate_ci95"] == pytest.approx(
        list(labels_only_interval(flagged, 12, 30))
    )
    good = sum(records[c["id"]]["ttft_s"] <= 0.3 and not c["hallucinated"] for c in checks)
    assert traffic["quality_slo_goodput_rps"] == pytest.approx(30 / week * good / 12)
    low, high = labels_only_interval(good, 12, 30)
    assert traffic["quality_slo_goodput_rps_ci95"] == pytest.approx(
        [30 / week * low, 30 / week * high]
    )
    metrics = summary["metrics"]
    assert metrics["quality_slo_goodput_rps"]["value"] == traffic["quality_slo_goodput_rps"]
    assert metrics["tps"]["value"] == pytest.approx(30 * 9 / week)  # 9 tokens each (vLLM span)
    html = (tmp_path / "r.html").read_text()
    assert 'id="traffic-1"' in html and "production traffic from traces" in html
    assert "1 without an answer recorded (content capture off" in html
    assert "judged on a uniform sample of 12 of the window's 30 answers" in html


def test_absent_timings_are_absent_with_the_reason_never_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fakes(monkeypatch)
    rows = _labelled(6, wrong_every=3)
    spans = [
        s
        for k, row in enumerate(rows)
        for s in openinference_trace(
            k + 1, row["question"], row["answer"], tuple(row["contexts"]), start_ms=k * 1000
        )
    ]
    export = write_export(tmp_path / "e.jsonl", [request("assistant", spans)])
    run = tmp_path / "r"
    _cli("traces", str(export), "--out", str(run), "--slo", "ttft_ms=300")
    _cli("check", str(run), "-q")
    _cli("report", str(run), "--out", str(tmp_path / "r.html"), "--history", str(tmp_path / "h.db"))
    traffic = json.loads((run / "summary.json").read_text())["traffic"]
    assert traffic["slo_attainment"] is None and "recorded ttft_s" in traffic["slo_absent"]
    assert traffic["quality_slo_goodput_rps"] is None
    assert "absent: no trace of the window recorded ttft_s" in (tmp_path / "r.html").read_text()


def test_slo_option_is_checked_before_anything_is_read(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        cli,
        ["traces", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "r"), "--slo", "p99=3"],
    )
    assert done.exit_code == 2 and "--slo 'p99=3': give KEY=MS" in done.output


def test_audit_of_two_windows_imports_checks_reports_gates_and_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fakes(monkeypatch)
    export, _ = _export(tmp_path, count=40)  # 40 traces over 2026-11-30
    out, history = tmp_path / "audit", tmp_path / "h.db"
    args = [
        "audit",
        "--traces",
        str(export),
        "--out",
        str(out),
        "--history",
        str(history),
        "--window",
        "night=2026-11-30T00:00..2026-11-30T12:00",
        "--window",
        "day=2026-11-30T12:00..2026-12-01",
        "--sample",
        "8",
        "--slo",
        "ttft_ms=300",
        "--gate",
        "hallucinated_answer_rate<=0.9",
        "-q",
    ]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    summaries = {w: json.loads((out / w / "summary.json").read_text()) for w in ("night", "day")}
    starts = [BASE_NS / 1e9 + k * 86_400 / 40 for k in range(40)]  # as _export spreads them
    noon = datetime(2026, 11, 30, 12, tzinfo=UTC).timestamp()
    expected = {
        "night": sum(t < noon for t in starts),
        "day": sum(noon <= t < noon + 43_200 for t in starts),
    }
    assert {w: s["traffic"]["answers"] for w, s in summaries.items()} == expected
    assert all(s["traffic"]["checked"] == 8 for s in summaries.values())
    html = (out / "report.html").read_text()
    assert 'id="traffic-1"' in html and 'id="traffic-2"' in html
    again = CliRunner().invoke(cli, args)  # resumes: nothing imported or checked twice
    assert again.exit_code == 0, again.output
    assert len((out / "day" / "checks.jsonl").read_text().splitlines()) == 8
    strict = CliRunner().invoke(cli, [*args[:-2], "hallucinated_answer_rate<=0.0", "-q"])
    assert strict.exit_code == 1


def test_audit_of_traffic_refuses_what_does_not_go_with_it(tmp_path: Path) -> None:
    export, _ = _export(tmp_path, count=3)
    base = ["audit", "--traces", str(export), "--out", str(tmp_path / "a")]
    for extra, said in (
        (["--pipeline", "qwen-0.5b-cpu"], "--pipeline does not go with --traces"),
        (["--window", "x=2026-12-02..2026-12-01"], "its start is not before its end"),
        (["--window", "bad name=..2026-12-01"], "give NAME=SINCE..UNTIL"),
    ):
        done = CliRunner().invoke(cli, [*base, *extra])
        assert done.exit_code == 2 and said in done.output, done.output
    done = CliRunner().invoke(cli, ["audit", "--sample", "3", "--out", str(tmp_path / "b")])
    assert done.exit_code == 2 and "go with --traces" in done.output


def test_the_reviewed_rate_of_a_window_covers_the_windows_rate() -> None:
    """Two phases: 200 of a window's 2,000 answers checked, 40 of those labelled. Over 300
    draws the interval holds the window's own rate about 95 % of the time; without the window
    (the checked sample taken for the population) it would be too narrow."""
    import numpy as np

    from auditor.reviewed import reviewed_rate

    rng = np.random.default_rng(0)
    window = 2_000
    truth = rng.random(window) < 0.3
    judged = np.clip(truth * 0.5 + rng.random(window) * 0.6, 0, 1)  # a useful, noisy judge
    rate = truth.mean()
    held, narrow = 0, 0
    for _ in range(300):
        checked = rng.choice(window, 200, replace=False)
        labelled = rng.choice(checked, 40, replace=False)
        args = (
            [bool(truth[k]) for k in labelled],
            judged[labelled].tolist(),
            judged[checked].tolist(),
        )
        two_phase = reviewed_rate(*args, window=window)
        one_phase = reviewed_rate(*args)
        assert two_phase.population == window and one_phase.population == 200
        assert two_phase.high - two_phase.low >= one_phase.high - one_phase.low - 1e-12
        held += two_phase.low <= rate <= two_phase.high
        narrow += one_phase.low <= rate <= one_phase.high
    assert held / 300 >= 0.92
    assert narrow < held


def test_a_traffic_run_is_reviewed_bundled_and_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fakes(monkeypatch)
    monkeypatch.setenv("AUDITOR_KEY_PASSPHRASE", "a passphrase for the test")
    export, _ = _export(tmp_path, count=20)
    run = tmp_path / "week"
    _cli("traces", str(export), "--out", str(run), "--sample", "10", "--slo", "ttft_ms=300")
    _cli("check", str(run), "-q")
    said = _cli("review", str(run), "--sample", "4", "--seed", "2")
    assert "4 of 10 answers to review" in said
    key = tmp_path / "audit.key"
    _cli("keygen", "--out", str(key), "--passphrase-env", "AUDITOR_KEY_PASSPHRASE")
    bundle = tmp_path / "audit.tar"
    _cli(
        "bundle",
        str(run),
        "--key",
        str(key),
        "--passphrase-env",
        "AUDITOR_KEY_PASSPHRASE",
        "--out",
        str(bundle),
    )
    assert "verified" in _cli("verify", str(bundle), "--key", f"{key}.pub")


def test_passages_named_by_id_are_looked_up_in_the_knowledge_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retriever span that records document ids only: the record says so, and the check
    with --index takes those chunks' text from the index (no retrieval, no guess)."""
    from auditor.retrieve import chunks_by_id

    _fakes(monkeypatch)
    corpus = tmp_path / "kb"
    corpus.mkdir()
    (corpus / "bridge.md").write_text(
        "# Kestrel bridge\n\nThe Kestrel bridge opened in 1931 and is 410 metres long.\n"
    )
    index = tmp_path / "index"
    _cli("ingest", str(corpus), "--index", str(index), "-q")
    generation = json.loads((index / "manifest.json").read_text())["generation"]
    store = json.loads((index / generation / "docstore.json").read_text())
    (node_id,) = store["docstore/data"]
    spans = genai_trace(
        1, answer="It opened in 1931.", documents=[{"id": node_id}, {"id": "not-in-the-index"}]
    )
    export = write_export(tmp_path / "e.jsonl", [request("app", spans)])
    run = tmp_path / "r"
    _cli("traces", str(export), "--out", str(run))
    (record,) = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert record["retrieved"] == [] and record["contexts_returned"] is False
    assert record["unresolved_documents"] == [node_id, "not-in-the-index"]
    refused = CliRunner().invoke(cli, ["check", str(run), "-q"])
    assert refused.exit_code == 2 and "give --index KB_DIR" in refused.output
    assert list(chunks_by_id(index, [node_id, "not-in-the-index"])) == [node_id]
    _cli("check", str(run), "--index", str(index), "-q")
    (check,) = [json.loads(line) for line in (run / "checks.jsonl").read_text().splitlines()]
    checked = {c for claim in check["claims"] for c in claim.get("checked_chunks", [])}
    assert node_id in checked
