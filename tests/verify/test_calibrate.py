"""`auditor calibrate` with the FakeJudge: the judge's sensitivity and specificity on labelled
answers, the chosen threshold, claim-level figures from spans, and the labels it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.testing import FakeEmbedder, FakeJudge

CHUNKS = [
    "The T{n} thermostat warranty lasts {n} years from the delivery date.",
    "Unopened thermostats can be returned within {m} days of delivery.",
]


def _labelled(count: int, wrong_every: int = 2, *, mislabel: bool = False) -> list[dict]:
    """`count` answers; every `wrong_every`-th gives a figure its chunk does not (labelled
    hallucinated, with the span of the wrong sentence)."""
    rows = []
    for k in range(count):
        chunks = [c.format(n=k + 2, m=30 + k) for c in CHUNKS]
        wrong = k % wrong_every == 0
        answer = chunks[1].replace(str(30 + k), str(90 + k)) if wrong else chunks[1]
        hallucinated = wrong != mislabel
        rows.append(
            {
                "id": f"a{k}",
                "question": "What are the return terms?",
                "contexts": chunks,
                "answer": answer,
                "hallucinated": hallucinated,
                "spans": [{"start": 0, "end": len(answer)}] if hallucinated else [],
            }
        )
    return rows


def _run(tmp_path: Path, rows: list[dict] | str, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    labels = tmp_path / "labels.jsonl"
    text = rows if isinstance(rows, str) else "".join(json.dumps(r) + "\n" for r in rows)
    labels.write_text(text, encoding="utf-8")
    out = tmp_path / "cal"
    result = CliRunner().invoke(
        cli, ["calibrate", "--labels", str(labels), "--out", str(out), "-q"]
    )
    return result, out


def test_calibrate_measures_the_judge_and_writes_the_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, out = _run(tmp_path, _labelled(24), monkeypatch)
    assert result.exit_code == 0, result.stderr
    calibration = json.loads((out / "calibration.json").read_text())
    answer = calibration["answer_level"]
    assert calibration["answers"] == 24 and calibration["hallucinated"] == 12
    assert answer["true_positives"] == 12 and answer["true_negatives"] == 12
    assert answer["sensitivity"] == 1.0 and answer["specificity"] == 1.0
    low, high = answer["sensitivity_interval"]
    assert 0.7 < low < 0.8 and high == 1.0  # Wilson, 12 of 12
    assert answer["auroc"] == 1.0 and 0.0 < calibration["threshold"] < 1.0
    assert calibration["claim_level"]["positives"] == 12
    assert calibration["judge"]["identity"]["name"] == "fake-judge"
    assert len(calibration["labels"]["sha256"]) == 64
    assert "sensitivity 1.000 (0.757-1.000)" in result.stdout
    check = json.loads((out / "check.json").read_text())  # claims only: no context precision
    assert check["judge"]["config"]["metrics"] == ["faithfulness"]
    # resumable: a second run judges nothing new and writes the same figures
    again, _ = _run(tmp_path, _labelled(24), monkeypatch)
    assert again.exit_code == 0
    assert json.loads((out / "calibration.json").read_text())["answer_level"] == answer


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (_labelled(10), "10 labelled answers checked; a calibration needs at least 20"),
        (_labelled(24, wrong_every=1), "no clean answer among the labels"),
        ([{**r, "hallucinated": False} for r in _labelled(24)], "no hallucinated answer"),
        (_labelled(24, mislabel=True), "no better than chance"),
        ([{**_labelled(21)[0], "hallucinated": "yes"}], 'labels.jsonl:1: "hallucinated" must be'),
        ([{**_labelled(21)[0], "spans": [[5, 2]]}], 'labels.jsonl:1: each of "spans" must be'),
    ],
    ids=["too-few", "no-clean", "no-hallucinated", "chance", "not-bool", "bad-span"],
)
def test_calibrate_refuses_labels_that_cannot_support_a_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[dict], message: str
) -> None:
    result, out = _run(tmp_path, rows, monkeypatch)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (out / "calibration.json").exists()


def test_a_calibration_corrects_the_report_of_the_judge_it_measured_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """calibrate -> check at the calibration's threshold -> report --calibration: summary.json
    and the report carry corrected rates and say which calibration applied; a calibration of
    other judge settings is refused in one line; without one the report says uncorrected."""
    result, cal = _run(tmp_path, _labelled(24), monkeypatch)
    assert result.exit_code == 0, result.stderr
    threshold = json.loads((cal / "calibration.json").read_text())["threshold"]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(json.dumps(r) + "\n" for r in _labelled(12, wrong_every=3)), encoding="utf-8"
    )
    runner = CliRunner()
    audited = tmp_path / "audited"
    args = ["check", "--answers", str(answers), "--out", str(audited), "-q"]
    done = runner.invoke(cli, [*args, "--set", f"support_threshold={threshold}"])
    assert done.exit_code == 0, done.stderr
    report = tmp_path / "report.html"
    db = tmp_path / "history.sqlite"
    done = runner.invoke(
        cli,
        [
            *("report", str(audited), "--out", str(report), "--calibration", str(cal)),
            *("--history", str(db), "--record"),
        ],
    )
    assert done.exit_code == 0, done.stderr
    header = done.stdout.splitlines()[0].split()
    assert header.count("corrected") == 2  # the terminal table: claim rate and goodput
    metrics = json.loads((audited / "summary.json").read_text())["metrics"]
    assert metrics["hallucination_rate"]["value"] == pytest.approx(4 / 12)
    # a perfect judge on the calibration: the corrected rate is the judged one
    assert metrics["hallucination_rate_corrected"]["value"] == pytest.approx(4 / 12)
    low, high = metrics["hallucination_rate_corrected"]["ci95"]
    assert low < 4 / 12 < high
    html = report.read_text()
    assert "Corrected figures" in html and "hallucinated claims (corrected)" in html
    # the history keeps the corrected figures: listed beside the judged ones, and trended
    listing = runner.invoke(cli, ["history", "--history", str(db)]).stdout.splitlines()
    assert listing[0].split()[5:8] == ["halluc.", "corr.", "goodput"]
    assert listing[1].split()[4:6] == ["33.3%", "33.3%"]
    rows = json.loads(runner.invoke(cli, ["history", "--history", str(db), "--json"]).stdout)
    assert rows[0]["metrics"]["hallucination_rate_corrected"] == pytest.approx(4 / 12)
    assert "hallucination_rate_corrected" in html.split("Trend across audits", 1)[1]

    done = runner.invoke(cli, ["report", str(audited), "--out", str(report)])
    assert done.exit_code == 0 and "Rates are as judged" in report.read_text()
    assert "corrected" not in done.stdout.splitlines()[0]

    other = tmp_path / "other"
    runner.invoke(cli, [*args[:4], str(other), "-q", "--set", "chunks_per_claim=1"])
    done = runner.invoke(
        cli, ["report", str(other), "--out", str(report), "--calibration", str(cal)]
    )
    assert done.exit_code == 2 and "does not apply" in done.stderr
    assert "judge settings" in done.stderr and len(done.stderr.strip().splitlines()) == 1

    done = runner.invoke(cli, ["report", str(audited), "--calibration", str(tmp_path / "none")])
    assert done.exit_code == 2 and "no such calibration" in done.stderr
