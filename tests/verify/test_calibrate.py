"""`auditor calibrate` with the FakeJudge: the judge's sensitivity and specificity on labelled
answers, out-of-fold by question, the chosen threshold, claim-level figures from spans, the
labels it refuses; and how a calibration is applied: only with `--calibration`, at its
threshold (`check` and `audit`), refused in one line naming the setting and the flag that
fixes it, its domain shown next to the corrected figures."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from auditor.calibrate import (
    HumanLabel,
    build_calibration,
    question_folds,
    resolve_calibration,
    shipped_calibrations,
)
from auditor.cli import cli
from auditor.config import JudgeConfig
from auditor.errors import BadInput
from auditor.store import read_jsonl
from auditor.testing import FakeEmbedder, FakeJudge
from auditor.verify.thresholds import balanced_accuracy, best_threshold

CHUNKS = [
    "The T{n} thermostat warranty lasts {n} years from the delivery date.",
    "Unopened thermostats can be returned within {m} days of delivery.",
]


def _labelled(
    count: int, wrong_every: int = 2, *, mislabel: bool = False, one_question: bool = False
) -> list[dict]:
    """`count` answers, each to its own question; every `wrong_every`-th gives a figure its
    chunk does not (labelled hallucinated, with the span of the wrong sentence)."""
    rows = []
    for k in range(count):
        chunks = [c.format(n=k + 2, m=30 + k) for c in CHUNKS]
        wrong = k % wrong_every == 0
        answer = chunks[1].replace(str(30 + k), str(90 + k)) if wrong else chunks[1]
        hallucinated = wrong != mislabel
        rows.append(
            {
                "id": f"a{k}",
                "question": "What are the return terms?"
                if one_question
                else f"What are the return terms of the T{k + 2}?",
                "contexts": chunks,
                "answer": answer,
                "hallucinated": hallucinated,
                "spans": [{"start": 0, "end": len(answer)}] if hallucinated else [],
            }
        )
    return rows


def _fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())


def _run(  # type: ignore[no-untyped-def]
    tmp_path: Path, rows: list[dict] | str, monkeypatch: pytest.MonkeyPatch, *extra: str
):
    _fakes(monkeypatch)
    labels = tmp_path / "labels.jsonl"
    text = rows if isinstance(rows, str) else "".join(json.dumps(r) + "\n" for r in rows)
    labels.write_text(text, encoding="utf-8")
    out = tmp_path / "cal"
    result = CliRunner().invoke(
        cli, ["calibrate", "--labels", str(labels), "--out", str(out), "-q", *extra]
    )
    return result, out


def test_calibrate_measures_the_judge_and_writes_the_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file says which figures are out-of-fold, records the verdict settings and the
    domain (the labels file, with --domain's text)."""
    result, out = _run(tmp_path, _labelled(24), monkeypatch, "--domain", "thermostat FAQ")
    assert result.exit_code == 0, result.stderr
    calibration = json.loads((out / "calibration.json").read_text())
    answer = calibration["answer_level"]
    assert calibration["schema_version"] == 2
    assert calibration["answers"] == 24 and calibration["hallucinated"] == 12
    assert calibration["questions"] == 24 and calibration["out_of_fold"]["folds"] == 5
    assert calibration["out_of_fold"]["figures"] == ["answer_level", "claim_level"]
    assert answer["true_positives"] == 12 and answer["true_negatives"] == 12
    assert answer["sensitivity"] == 1.0 and answer["specificity"] == 1.0
    low, high = answer["sensitivity_interval"]
    assert 0.7 < low < 0.8 and high == 1.0  # Wilson, 12 of 12
    assert answer["auroc"] == 1.0 and 0.0 < calibration["threshold"] < 1.0
    assert calibration["claim_level"]["positives"] == 12
    assert calibration["in_sample"]["answer_level"]["sensitivity"] == 1.0
    assert calibration["judge"]["identity"]["name"] == "fake-judge"
    settings = calibration["judge"]["verdict_settings"]
    assert settings["support_threshold"] == calibration["threshold"]
    assert "metrics" not in settings and "cpu_threads" not in settings["generator"]
    assert calibration["domain"] == "labels.jsonl: thermostat FAQ"
    assert len(calibration["labels"]["sha256"]) == 64
    assert "out-of-fold (5 folds by question): sensitivity 1.000 (0.757-1.000)" in result.stdout
    check = json.loads((out / "check.json").read_text())  # claims only: no context precision
    assert check["judge"]["config"]["metrics"] == ["faithfulness"]
    # resumable: a second run judges nothing new and writes the same figures
    again, _ = _run(tmp_path, _labelled(24), monkeypatch)
    assert again.exit_code == 0
    rewritten = json.loads((out / "calibration.json").read_text())
    assert rewritten["answer_level"] == answer and rewritten["domain"] == "labels.jsonl"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (_labelled(10), "10 labelled answers; a calibration needs at least 20"),
        (_labelled(24, wrong_every=1), "no clean answer among the 24 labels"),
        ([{**r, "hallucinated": False} for r in _labelled(24)], "no hallucinated answer"),
        (_labelled(24, mislabel=True), "out-of-fold, the judge is no better than chance"),
        (_labelled(24, one_question=True), "all 24 answers are to one question"),
        ([{**_labelled(21)[0], "hallucinated": "yes"}], 'labels.jsonl:1: "hallucinated" must be'),
        ([{**_labelled(21)[0], "spans": [[5, 2]]}], 'labels.jsonl:1: each of "spans" must be'),
    ],
    ids=[
        "too-few",
        "no-clean",
        "no-hallucinated",
        "chance",
        "one-question",
        "not-bool",
        "bad-span",
    ],
)
def test_calibrate_refuses_labels_that_cannot_support_a_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[dict], message: str
) -> None:
    result, out = _run(tmp_path, rows, monkeypatch)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (out / "calibration.json").exists()


class _JudgeMustNotStart(FakeJudge):
    def __init__(self) -> None:
        raise AssertionError("the judge started for labels that were refusable without it")


@pytest.mark.parametrize(
    ("rows", "extra", "message"),
    [
        (_labelled(10), (), "10 labelled answers; a calibration needs at least 20"),
        (_labelled(24, wrong_every=1), (), "no clean answer among the 24 labels"),
        ([{**r, "hallucinated": False} for r in _labelled(24)], (), "no hallucinated answer"),
        (_labelled(24, one_question=True), (), "all 24 answers are to one question"),
        (_labelled(40), ("--limit", "12"), "12 labelled answers (--limit 12); a calibration"),
        (
            [
                {**r, "question": "What are the return terms?"} if r["hallucinated"] else r
                for r in _labelled(24)
            ],
            (),
            "the hallucinated answers all fall in one of the",
        ),
    ],
    ids=["too-few", "no-clean", "no-hallucinated", "one-question", "limit", "one-fold"],
)
def test_label_refusals_come_before_any_engine_and_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[dict], extra: tuple[str, ...],
    message: str,
) -> None:  # fmt: skip
    """What depends only on the labels is refused in about a second: the judge (and the
    embedder) would fail if started, and no --out dir is made."""
    _fakes(monkeypatch)
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: _JudgeMustNotStart())
    monkeypatch.setattr(
        "auditor.ingest.embed.load_embedder",
        lambda config: (_ for _ in ()).throw(AssertionError("embedder started")),
    )
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "cal"
    result = CliRunner().invoke(
        cli, ["calibrate", "--labels", str(labels), "--out", str(out), "-q", *extra]
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_labels_file_that_grew_resumes_into_the_same_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused for too few labels, the user labels more and re-runs into the same --out: the
    answers already checked are kept (not re-judged), the new ones checked."""
    first, out = _run(tmp_path, _labelled(24)[:20], monkeypatch)
    assert first.exit_code == 0, first.stderr
    kept = (out / "checks.jsonl").read_text().splitlines()
    assert len(kept) == 20
    judged: list[int] = []

    class Counting(FakeJudge):
        def complete(self, calls: Any, on_reply: Any = None) -> list[Any]:
            judged.append(len(calls))
            return super().complete(calls, on_reply)

    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in _labelled(24)), encoding="utf-8")
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: Counting())
    grown = CliRunner().invoke(cli, ["calibrate", "--labels", str(labels), "--out", str(out), "-q"])
    assert grown.exit_code == 0, grown.stderr
    rows = (out / "checks.jsonl").read_text().splitlines()
    assert rows[:20] == kept and len(rows) == 24  # the first 20 untouched, 4 added
    assert judged  # the 4 new answers were judged ...
    assert {json.loads(r)["id"] for r in rows[20:]} == {"a20", "a21", "a22", "a23"}
    assert json.loads((out / "calibration.json").read_text())["answers"] == 24
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["count"] == 24
    # an answer that changed text is another file's: refused, nothing rewritten
    changed = _labelled(24)
    changed[3] = {**changed[3], "answer": changed[3]["answer"] + " Also free shipping."}
    refused, _ = _run(tmp_path, changed, monkeypatch)
    assert refused.exit_code == 2
    assert "answer 'a3' differs between this dir and" in refused.stderr
    assert (out / "checks.jsonl").read_text().splitlines() == rows


def test_labels_without_spans_give_no_claim_level_and_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole-answer labels (no spans): clean answers still give claims, hallucinated ones none,
    so claim figures would have no positives: the calibration has no claim level and says
    why, in the file and on the terminal."""
    rows = [{k: v for k, v in r.items() if k != "spans"} for r in _labelled(24)]
    result, out = _run(tmp_path, rows, monkeypatch)
    assert result.exit_code == 0, result.stderr
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["claim_level"] is None
    assert calibration["in_sample"]["claim_level"] is None
    assert "carry no spans" in calibration["claim_level_absent"]
    assert "no claim level (claim rates stay as judged)" in result.stdout
    provenance = resolve_calibration(out).provenance()
    assert (
        provenance["claim_level"] is None and "carry no spans" in provenance["claim_level_absent"]
    )


def _scored(count: int, seed: int = 3) -> tuple[list[dict[str, Any]], dict[str, HumanLabel]]:
    """Checked answers with one claim each whose p_supported overlaps between the kinds (a
    judge that errs), two answers to each question."""
    rng = np.random.default_rng(seed)
    rows, labels = [], {}
    for k in range(count):
        bad = k % 2 == 0
        score = round(float(np.clip(rng.normal(0.35 if bad else 0.65, 0.2), 0, 1)), 3)
        claim = {"text": "x", "span": [0, 5], "verdict": "supported", "p_supported": score}
        rows.append({"id": f"a{k}", "claims": [claim]})
        labels[f"a{k}"] = HumanLabel(bad, ((0, 5),) if bad else (), f"q{k // 2}")
    return rows, labels


def test_out_of_fold_figures_differ_from_in_sample_ones() -> None:
    """On a judge that errs, the threshold chosen on all answers flatters it in-sample; the
    calibration's figures are out-of-fold instead: each fold of questions judged at the
    threshold chosen on the others, counts pooled (recomputed here independently)."""
    rows, labels = _scored(30)
    figures = build_calibration(rows, labels, Path("labels.jsonl"))
    scores = [row["claims"][0]["p_supported"] for row in rows]
    gold = [labels[row["id"]].hallucinated for row in rows]
    assert figures["threshold"] == round(best_threshold(scores, gold), 3)  # shipped: on all
    folds = question_folds([labels[row["id"]].question for row in rows])
    assert all(folds[2 * q] == folds[2 * q + 1] for q in range(15))  # one question, one fold
    pairs = []
    for fold in set(folds):
        train = [n for n, f in enumerate(folds) if f != fold]
        t = best_threshold([scores[n] for n in train], [gold[n] for n in train])
        pairs += [(gold[n], scores[n] < t) for n, f in enumerate(folds) if f == fold]
    answer, in_sample = figures["answer_level"], figures["in_sample"]["answer_level"]
    assert answer["true_positives"] == sum(g and f for g, f in pairs)
    assert answer["true_negatives"] == sum(not g and not f for g, f in pairs)
    assert answer["balanced_accuracy"] == pytest.approx(balanced_accuracy(pairs))
    assert answer["balanced_accuracy"] < in_sample["balanced_accuracy"] - 0.05
    assert (answer["sensitivity"], answer["specificity"]) != (
        in_sample["sensitivity"],
        in_sample["specificity"],
    )
    assert figures["claim_level"]["claims"] == 30
    assert (
        figures["claim_level"]["balanced_accuracy"]
        < (figures["in_sample"]["claim_level"]["balanced_accuracy"])
    )


def test_a_kind_of_answer_in_one_fold_only_is_refused() -> None:
    """Out-of-fold needs both kinds outside every fold: hallucinated answers to one question
    leave its fold's threshold nothing to be chosen on."""
    rows, labels = _scored(24)
    labels = {
        i: HumanLabel(label.hallucinated, label.spans, "one" if label.hallucinated else i)
        for i, label in labels.items()
    }
    with pytest.raises(
        BadInput, match=r"the hallucinated answers all fall in one of the [0-9] folds by question"
    ):
        build_calibration(rows, labels, Path("labels.jsonl"))


def _check(runner: CliRunner, answers: Path, out: Path, *extra: str) -> Any:
    return runner.invoke(cli, ["check", "--answers", str(answers), "--out", str(out), "-q", *extra])


def test_a_calibration_corrects_only_when_given_and_only_the_judge_it_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a new user: calibrate on 24 labelled answers, check 12 more with --calibration (the
    judge runs at its threshold), report --calibration: corrected rates with the domain beside
    them. Without --calibration: judged rates and the one-line how-to. A check at another
    threshold or with other settings: refused in one line naming the setting and the flag."""
    result, cal = _run(tmp_path, _labelled(24), monkeypatch, "--domain", "thermostat FAQ")
    assert result.exit_code == 0, result.stderr
    threshold = json.loads((cal / "calibration.json").read_text())["threshold"]
    assert threshold != JudgeConfig().support_threshold  # the default would not do
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(json.dumps(r) + "\n" for r in _labelled(12, wrong_every=3)), encoding="utf-8"
    )
    runner = CliRunner()
    audited = tmp_path / "audited"
    done = _check(runner, answers, audited, "--calibration", str(cal))
    assert done.exit_code == 0, done.stderr
    check = json.loads((audited / "check.json").read_text())
    assert check["judge"]["config"]["support_threshold"] == threshold
    as_json = json.loads(
        _check(runner, answers, audited, "--calibration", str(cal), "--json").stdout
    )
    assert as_json["calibration"] == str(cal) and as_json["threshold"] == threshold

    # no --calibration: judged rates only, and how to calibrate in one line
    report = tmp_path / "report.html"
    done = runner.invoke(cli, ["report", str(audited), "--out", str(report)])
    assert done.exit_code == 0, done.stderr
    assert "corrected" not in done.stdout
    summary = json.loads((audited / "summary.json").read_text())
    assert summary["calibration"] is None
    assert summary["metrics"]["hallucination_rate_corrected"]["value"] is None
    html = report.read_text()
    assert "Rates are as judged" in html and "auditor calibrate --labels" in html
    assert "hallucinated claims (corrected)" not in html and "Corrected figures" not in html

    db = tmp_path / "history.sqlite"
    done = runner.invoke(
        cli,
        [
            *("report", str(audited), "--out", str(report), "--calibration", str(cal)),
            *("--history", str(db), "--record"),
        ],
    )
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split().count("corrected") == 2  # the terminal table: claim rate and goodput
    assert f"corrected with calibration {cal} (labels.jsonl: thermostat FAQ)" in done.stdout
    metrics = json.loads((audited / "summary.json").read_text())["metrics"]
    assert metrics["hallucination_rate"]["value"] == pytest.approx(4 / 12)
    # a perfect judge on the calibration: the corrected rate is the judged one
    assert metrics["hallucination_rate_corrected"]["value"] == pytest.approx(4 / 12)
    low, high = metrics["hallucination_rate_corrected"]["ci95"]
    assert low < 4 / 12 < high
    html = report.read_text()
    assert "Corrected figures" in html and "hallucinated claims (corrected)" in html
    assert "domain: labels.jsonl: thermostat FAQ" in html  # under the corrected column
    assert "domain: <strong>labels.jsonl: thermostat FAQ</strong>" in html
    assert "out-of-fold (5 folds by question" in html
    # the history keeps the corrected figures: listed beside the judged ones, and trended
    listing = runner.invoke(cli, ["history", "--history", str(db)]).stdout.splitlines()
    assert listing[0].split()[5:8] == ["halluc.", "corr.", "goodput"]
    assert listing[1].split()[4:6] == ["33.3%", "33.3%"]
    rows = json.loads(runner.invoke(cli, ["history", "--history", str(db), "--json"]).stdout)
    assert rows[0]["metrics"]["hallucination_rate_corrected"] == pytest.approx(4 / 12)
    assert "hallucination_rate_corrected" in html.split("Trend across audits", 1)[1]

    # checked at the default threshold (no --calibration): refused, naming both
    default = tmp_path / "default"
    assert _check(runner, answers, default).exit_code == 0
    done = runner.invoke(cli, ["report", str(default), "--calibration", str(cal)])
    assert done.exit_code == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    here = JudgeConfig().support_threshold
    assert f"support_threshold is {here:g} here, {threshold} calibrated" in done.stderr
    assert f"auditor check ... --calibration {cal}" in done.stderr

    # another verdict setting: named, with the --set that fixes it
    other = tmp_path / "other"
    done = _check(
        runner,
        answers,
        other,
        "--set",
        f"support_threshold={threshold}",
        "--set",
        "chunks_per_claim=1",
    )
    assert done.exit_code == 0, done.stderr
    done = runner.invoke(cli, ["report", str(other), "--calibration", str(cal)])
    assert done.exit_code == 2 and "does not apply" in done.stderr
    assert "chunks_per_claim is 1 here, 2 calibrated" in done.stderr
    assert "--set chunks_per_claim=2" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    # and check --calibration refuses it before any engine starts
    done = _check(
        runner, answers, tmp_path / "x", "--calibration", str(cal), "--set", "chunks_per_claim=1"
    )
    assert done.exit_code == 2 and not (tmp_path / "x" / "checks.jsonl").exists()
    assert "chunks_per_claim is 1 here, 2 calibrated; give --set chunks_per_claim=2" in done.stderr

    done = runner.invoke(cli, ["report", str(audited), "--calibration", str(tmp_path / "none")])
    assert done.exit_code == 2 and "no such calibration" in done.stderr


def test_audit_names_its_own_flag_when_the_judge_settings_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`audit` sets judge keys with --judge-set: its refusal says so."""
    result, cal = _run(tmp_path, _labelled(24), monkeypatch)
    assert result.exit_code == 0, result.stderr
    calibration = resolve_calibration(str(cal))
    judge = JudgeConfig(chunks_per_claim=1)
    with pytest.raises(BadInput, match="give --judge-set chunks_per_claim=2") as raised:
        calibration.judge_config(judge, flag="--judge-set")
    assert "chunks_per_claim is 1 here, 2 calibrated" in str(raised.value)
    at = calibration.judge_config(JudgeConfig())
    assert at.support_threshold == calibration.data["threshold"]


def test_a_shipped_calibration_applies_by_name_and_shows_its_domain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--calibration NAME` finds auditor/calibrations/NAME.json (a stand-in here: the tests do
    not depend on the shipped file's figures); an unknown name lists the shipped ones; a
    calibration of the earlier, in-sample format is refused in one line."""
    result, cal = _run(tmp_path, _labelled(24), monkeypatch)
    assert result.exit_code == 0, result.stderr
    shipped = tmp_path / "calibrations"
    shipped.mkdir()
    data = json.loads((cal / "calibration.json").read_text())
    data["domain"] = "RAGTruth-like news passages"
    (shipped / "fake-judge.json").write_text(json.dumps(data))
    (shipped / "old.json").write_text(json.dumps(data | {"schema_version": 1}))
    monkeypatch.setattr(
        "auditor.calibrate.shipped_calibrations",
        lambda: {p.stem: p for p in sorted(shipped.glob("*.json"))},
    )
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in _labelled(6)), encoding="utf-8")
    runner = CliRunner()
    audited = tmp_path / "audited"
    done = _check(runner, answers, audited, "--calibration", "fake-judge")
    assert done.exit_code == 0, done.stderr
    assert "judged at calibration fake-judge's threshold" in done.stdout
    done = runner.invoke(cli, ["report", str(audited), "--calibration", "fake-judge"])
    assert done.exit_code == 0, done.stderr
    assert "corrected with calibration fake-judge (RAGTruth-like news passages)" in done.stdout
    html = (audited / "report.html").read_text()
    assert "domain: <strong>RAGTruth-like news passages</strong>" in html
    assert json.loads((audited / "summary.json").read_text())["calibration"]["name"] == "fake-judge"

    done = runner.invoke(cli, ["report", str(audited), "--calibration", "nope"])
    assert done.exit_code == 2 and "nope: no such calibration" in done.stderr
    assert "fake-judge, old" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    done = runner.invoke(cli, ["report", str(audited), "--calibration", "old"])
    assert done.exit_code == 2 and "in-sample calibration of an earlier auditor" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_shipped_calibrations_load_or_are_refused_in_one_line() -> None:
    """Whatever verdict logic made them: each shipped file is a calibration by its name, or a
    one-line refusal (an earlier format), never a traceback."""
    for name in shipped_calibrations():
        try:
            calibration = resolve_calibration(name)
        except BadInput as exc:
            assert "\n" not in str(exc) and name in str(exc)
        else:
            assert calibration.label == name and calibration.domain


def test_a_run_dir_of_the_earlier_default_correction_still_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """summary.json and a history row with the corrected fields and calibration of an earlier
    auditor (applied by default then): the report renders, its rates as judged."""
    from auditor.history import record_audit

    _fakes(monkeypatch)
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in _labelled(4)), encoding="utf-8")
    runner = CliRunner()
    audited = tmp_path / "audited"
    assert _check(runner, answers, audited).exit_code == 0
    check = json.loads((audited / "check.json").read_text())
    check["judge"].pop("verdict_logic", None)  # before the logic was versioned
    (audited / "check.json").write_text(json.dumps(check))
    assert runner.invoke(cli, ["report", str(audited)]).exit_code == 0
    old = json.loads((audited / "summary.json").read_text())
    entry = {"value": 0.5, "ci95": [0.2, 1.0], "unit": "", "higher_is_better": False}
    old["metrics"] |= {"hallucination_rate_corrected": entry, "goodput_tps_corrected": entry}
    old["calibration"] = {
        "path": "auditor/calibrations/qwen-1.5b-cpu-judge.json",
        "labels": {"path": "RAGTruth QA dev", "sha256": "6d1b6775"},
        "answers": 150,
        "hallucinated": 75,
        "threshold": 0.264,
        "answer_level": {"sensitivity": 0.65, "specificity": 0.87},
        "claim_level": {"sensitivity": 0.45, "specificity": 0.93, "claims": 786},
    }
    (audited / "summary.json").write_text(json.dumps(old))
    db = tmp_path / "history.sqlite"
    manifest = json.loads((audited / "manifest.json").read_text())
    record_audit(db, audited, manifest, old, None, None)
    done = runner.invoke(cli, ["report", str(audited), "--history", str(db)])
    assert done.exit_code == 0, done.stderr
    html = (audited / "report.html").read_text()
    assert "Rates are as judged" in html and "Trend across audits" in html
    assert json.loads((audited / "summary.json").read_text())["calibration"] is None


@pytest.mark.parametrize("old_style", [False, True], ids=["no-claim-level", "one-class-level"])
def test_a_span_less_calibration_renders_in_check_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old_style: bool
) -> None:
    """The documented path with whole-answer labels: calibrate, check --calibration, report
    --calibration. The report renders and says why no claim rate is corrected, also for a
    calibration an earlier auditor wrote with a one-class claim level (intervals null)."""
    rows = [{k: v for k, v in r.items() if k != "spans"} for r in _labelled(24)]
    result, cal = _run(tmp_path, rows, monkeypatch)
    assert result.exit_code == 0, result.stderr
    if old_style:
        data = json.loads((cal / "calibration.json").read_text())
        one_class = {"true_positives": 0, "positives": 0, "true_negatives": 11, "negatives": 12}
        data["claim_level"] = one_class | {
            "sensitivity": None,
            "sensitivity_interval": None,
            "specificity": 11 / 12,
            "specificity_interval": [0.6, 0.99],
            "claims": 12,
        }
        del data["claim_level_absent"]
        (cal / "calibration.json").write_text(json.dumps(data))
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in _labelled(6)), encoding="utf-8")
    runner, audited = CliRunner(), tmp_path / "audited"
    done = _check(runner, answers, audited, "--calibration", str(cal))
    assert done.exit_code == 0, done.stderr
    done = runner.invoke(cli, ["report", str(audited), "--calibration", str(cal)])
    assert done.exit_code == 0, done.output
    html = (audited / "report.html").read_text()
    assert "no claim rate is corrected" in html
    summary = json.loads((audited / "summary.json").read_text())
    assert summary["calibration"]["claim_level"] is None
    assert summary["metrics"]["hallucination_rate_corrected"]["value"] is None


def test_a_claim_level_at_chance_says_why_no_claim_rate_is_corrected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A weak judge's claim level can be two-class and still no better than chance: the
    corrected claim rate is absent and the report says why, not just "n/a"."""
    result, cal = _run(tmp_path, _labelled(24), monkeypatch)
    assert result.exit_code == 0, result.stderr
    data = json.loads((cal / "calibration.json").read_text())
    data["claim_level"] |= {
        "true_positives": 3,
        "positives": 11,
        "true_negatives": 31,
        "negatives": 52,
        "sensitivity": 3 / 11,
        "sensitivity_interval": [0.1, 0.57],
        "specificity": 31 / 52,
        "specificity_interval": [0.46, 0.72],
        "informative": False,
    }
    (cal / "calibration.json").write_text(json.dumps(data))
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in _labelled(6)), encoding="utf-8")
    runner, audited = CliRunner(), tmp_path / "audited"
    assert _check(runner, answers, audited, "--calibration", str(cal)).exit_code == 0
    done = runner.invoke(cli, ["report", str(audited), "--calibration", str(cal)])
    assert done.exit_code == 0, done.output
    html = (audited / "report.html").read_text()
    assert "at the claim level the judge did no better than chance on these labels" in html
    summary = json.loads((audited / "summary.json").read_text())
    assert summary["metrics"]["hallucination_rate_corrected"]["value"] is None


@pytest.mark.parametrize("native_bf16", [True, False], ids=["bfloat16", "float32"])
def test_the_default_judge_decides_at_its_shipped_calibrations_threshold(
    native_bf16: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One threshold per dtype: on a CPU with native bfloat16 the default judge runs in
    bfloat16 and decides at auditor/calibrations/qwen-1.5b-cpu-judge.bfloat16.json's
    threshold, without it in float32 at the float32 file's; each file is of the verdict logic
    and the settings that ship (re-made together whenever verdicts change: `auditor calibrate`,
    then copied here); `--calibration qwen-1.5b-cpu-judge` names the one for this machine."""
    from auditor import engine_dtype
    from auditor.calibrate import verdict_settings
    from auditor.verify.check import VERDICT_LOGIC

    monkeypatch.setattr(engine_dtype, "is_cpu_build", lambda: True)
    monkeypatch.setattr(engine_dtype, "cpu_has_bf16", lambda: native_bf16)
    dtype = "bfloat16" if native_bf16 else "float32"
    default = JudgeConfig()
    shipped = json.loads(shipped_calibrations()[f"{default.name}.{dtype}"].read_text("utf-8"))
    assert default.support_threshold == shipped["threshold"]
    assert default.claims == "sentences"
    assert shipped["judge"]["fingerprint"]["dtype"] == dtype
    assert shipped["judge"]["fingerprint"]["verdict_logic"] == VERDICT_LOGIC
    ours = verdict_settings(default.model_dump(mode="json"))
    theirs = shipped["judge"]["verdict_settings"]
    assert {k: v for k, v in ours.items() if k != "generator"} == {
        k: v for k, v in theirs.items() if k != "generator"
    }
    engine_only = {"cpu_threads", "kv_cache_gib", "tensor_parallel_size", "enforce_eager"}
    assert {k: v for k, v in ours["generator"].items() if k not in engine_only} == theirs[
        "generator"
    ]
    by_judge = resolve_calibration(default.name)
    assert by_judge.data["threshold"] == default.support_threshold
    assert by_judge.data["judge"]["fingerprint"]["dtype"] == dtype
    # a threshold given is kept whatever the machine
    assert JudgeConfig(support_threshold=0.5).support_threshold == 0.5


def test_a_check_in_the_other_dtype_is_pointed_at_its_shipped_calibration() -> None:
    """A bfloat16 calibration named for a float32 check: refused naming the file that ships
    for float32 (the two dtypes decide at different probabilities)."""
    bf16 = resolve_calibration(f"{JudgeConfig().name}.bfloat16")
    judge = json.loads(shipped_calibrations()[f"{JudgeConfig().name}.float32"].read_text("utf-8"))[
        "judge"
    ]
    manifest = {
        "judge": {
            "identity": judge["identity"],
            "config": judge["verdict_settings"],
            "verdict_logic": judge["fingerprint"]["verdict_logic"],
        }
    }
    why = bf16.mismatch(manifest)
    assert why is not None and "float32 here, bfloat16 calibrated" in why
    assert "`--calibration qwen-1.5b-cpu-judge.float32`" in why


def test_calibrate_with_its_own_labels_as_examples_never_judges_an_answer_by_its_own_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`calibrate --examples LABELS` with the labels file itself: each answer is judged with
    the labels of the other answer to its question (leave one out), the calibration records
    the examples, and it is the calibration of the judge with examples."""
    rows = _labelled(24)
    for k, row in enumerate(rows):  # two answers to each of 12 questions, one wrong
        row["question"] = f"What are the return terms of the T{k // 2 + 2}?"
    labels = tmp_path / "labels.jsonl"
    result, out = _run(tmp_path, rows, monkeypatch, "--examples", str(labels))
    assert result.exit_code == 0, result.stderr
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["examples"]["sha256"] == hashlib.sha256(labels.read_bytes()).hexdigest()
    assert calibration["examples"]["answers_matched"] == 24
    assert calibration["judge"]["verdict_settings"]["examples"] == "given"
    assert "with examples from" in result.stdout
    for row in read_jsonl(out / "checks.jsonl"):
        k = int(row["id"][1:])
        assert row["examples"] == [f"a{k ^ 1}"]  # the other answer, never itself
    (tmp_path / "plain").mkdir()
    plain, plain_out = _run(tmp_path / "plain", rows, monkeypatch)
    assert plain.exit_code == 0, plain.stderr
    without = json.loads((plain_out / "calibration.json").read_text())
    assert without["examples"] is None
    fingerprint = calibration["judge"]["fingerprint"]["verdict_sha256"]
    assert without["judge"]["fingerprint"]["verdict_sha256"] != fingerprint


def test_bad_examples_stop_calibrate_before_any_engine_or_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    examples = tmp_path / "examples.jsonl"
    examples.write_text(json.dumps({"id": "e", "question": "q?", "answer": "a b c"}) + "\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in _labelled(24)), encoding="utf-8")
    monkeypatch.setattr(
        "auditor.verify.judges.make_judge",
        lambda config: pytest.fail("a judge started before the examples were read"),
    )
    out = tmp_path / "cal"
    result = CliRunner().invoke(
        cli,
        ["calibrate", "--labels", str(labels), "--out", str(out), "--examples", str(examples)],
    )
    assert result.exit_code == 2 and f'{examples}:1: "hallucinated" must be' in result.stderr
    assert not out.exists()
