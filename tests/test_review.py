"""People's review: the random sample (`auditor review`), the labels (`report --labels`) and
the reviewed rates (the finite-population difference estimator with the judge's verdicts,
labels alone where the judge does not narrow them), with the fake judge; and simulated audits
with known rates for the intervals' coverage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.review import choose_sample, run_fingerprint
from auditor.reviewed import labels_only_interval, reviewed_rate
from tests.verify.test_calibrate import _fakes, _labelled


def _checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int = 30, name: str = "run"
) -> Path:
    """A run dir of `count` answers checked by the fake judge (every third one wrong)."""
    _fakes(monkeypatch)
    answers = tmp_path / "answers.jsonl"
    rows = _labelled(count, wrong_every=3)
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = tmp_path / name
    done = CliRunner().invoke(cli, ["check", "--answers", str(answers), "--out", str(run), "-q"])
    assert done.exit_code == 0, done.output
    return run


def _labels(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_sample_is_seeded_and_a_larger_one_extends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch)
    runner = CliRunner()
    done = runner.invoke(cli, ["review", str(run), "--sample", "12", "--seed", "7"])
    assert done.exit_code == 0, done.output
    assert "12 of 30 answers to review (uniform, seed 7)" in done.output
    first = json.loads((run / "review.json").read_text())
    assert first["seed"] == 7 and first["population"] == 30 and first["method"] == "uniform"
    assert {s["inclusion_probability"] for s in first["sample"]} == {0.4}
    again = runner.invoke(cli, ["review", str(run), "--sample", "12", "--seed", "7"])
    assert again.exit_code == 0
    assert json.loads((run / "review.json").read_text())["sample"] == first["sample"]
    grown = runner.invoke(cli, ["review", str(run), "--sample", "20"])  # the recorded seed
    assert grown.exit_code == 0, grown.output
    extended = json.loads((run / "review.json").read_text())["sample"]
    assert [s["id"] for s in extended[:12]] == [s["id"] for s in first["sample"]]
    assert len(extended) == 20 and extended[0]["inclusion_probability"] == pytest.approx(20 / 30)
    other = runner.invoke(cli, ["review", str(run), "--sample", "20", "--seed", "8"])
    assert other.exit_code == 2 and "drawn with seed 7" in other.stderr
    # the same ids in another order: the same sample
    ids = [f"a{k}" for k in range(30)]
    assert choose_sample(ids, 5, 7, "f").sample == choose_sample(ids[::-1], 5, 7, "f").sample


def test_report_labels_give_reviewed_rates_with_the_number_of_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch)
    runner = CliRunner()
    assert runner.invoke(cli, ["review", str(run), "--sample", "15", "--seed", "1"]).exit_code == 0
    sample = [s["id"] for s in json.loads((run / "review.json").read_text())["sample"]]
    truth = {r["id"]: r["hallucinated"] for r in _labelled(30, wrong_every=3)}
    fingerprint = run_fingerprint(json.loads((run / "manifest.json").read_text()))
    labels = _labels(
        tmp_path / "labels.jsonl",
        [{"id": i, "hallucinated": truth[i], "fingerprint": fingerprint} for i in sample],
    )
    done = runner.invoke(
        cli,
        [
            *("report", str(run), "--labels", str(labels)),
            *("--gate", "reviewed_hallucination_rate<=0.9", "--history", str(tmp_path / "h.db")),
        ],
    )
    assert done.exit_code == 0, done.output
    header = done.stdout.splitlines()[0]
    assert "reviewed halluc. answers" in header and "goodput reviewed" in header
    assert "n=15)" in done.stdout
    assert "PASS reviewed_hallucination_rate<=0.9" in done.stdout
    summary = json.loads((run / "summary.json").read_text())
    reviewed = summary["reviewed"]
    assert reviewed["labels"] == 15 and reviewed["claim_rate"] is None
    rate = reviewed["answer_rate"]
    # 15 of 30 reviewed by a judge right on every one: the difference estimator gives about
    # the judge's rate, the true one (10 of 30), its interval narrower than the labels'
    assert rate["method"] == "difference (finite population)"
    assert rate["value"] == pytest.approx(10 / 30, abs=0.02)
    assert rate["low"] <= 10 / 30 <= rate["high"]
    assert rate["high"] - rate["low"] < rate["labels_only"][1] - rate["labels_only"][0]
    assert set(rate["labels_for"]) == {"0.05", "0.10"}
    assert reviewed["judge_sensitivity"] == 1.0 and reviewed["judge_specificity"] == 1.0
    assert reviewed["sample"]["seed"] == 1 and reviewed["sample"]["population"] == 30
    metric = summary["metrics"]["reviewed_hallucination_rate"]
    assert metric["value"] == rate["value"] and metric["ci95"] == [rate["low"], rate["high"]]
    # without --labels: no reviewed figures
    plain = runner.invoke(cli, ["report", str(run), "--history", str(tmp_path / "h.db")])
    assert plain.exit_code == 0 and "reviewed" not in plain.stdout.splitlines()[0]
    assert json.loads((run / "summary.json").read_text())["reviewed"] is None


def test_labels_without_a_review_file_count_as_a_uniform_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a spreadsheet: 12 labels of 60 answers, a judge that errs on none: the difference
    estimator with its verdicts, narrower than the labels alone, and the summary says the
    sample was assumed."""
    run = _checked(tmp_path, monkeypatch, count=60)
    truth = {r["id"]: r["hallucinated"] for r in _labelled(60, wrong_every=3)}
    chosen = [f"a{k}" for k in range(0, 60, 5)]  # 12, 4 of them hallucinated
    labels = _labels(tmp_path / "l.jsonl", [{"id": i, "hallucinated": truth[i]} for i in chosen])
    done = CliRunner().invoke(
        cli, ["report", str(run), "--labels", str(labels), "--history", str(tmp_path / "h")]
    )
    assert done.exit_code == 0, done.output
    reviewed = json.loads((run / "summary.json").read_text())["reviewed"]
    assert reviewed["sample"]["method"] == "uniform (assumed)"
    rate = reviewed["answer_rate"]
    assert rate["method"] == "difference (finite population)"
    assert rate["value"] == pytest.approx(20 / 60, abs=0.01)  # a perfect judge: its rate
    assert rate["high"] - rate["low"] < rate["labels_only"][1] - rate["labels_only"][0]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"id": "nope", "hallucinated": True}], "answer 'nope' is not among the checked answers"),
        ([{"id": "a1", "hallucinated": "yes"}], 'l.jsonl:1: "hallucinated" must be true or false'),
        ([{"id": "a1", "hallucinated": True, "pipeline": "other"}], "pipeline 'other' is not in"),
        (
            [{"id": "a1", "hallucinated": True}, {"id": "a1", "hallucinated": False}],
            "l.jsonl:2: answer 'a1' labelled again, differently (first on line 1)",
        ),
        (
            [{"id": "a1", "hallucinated": True, "fingerprint": "0123456789abcdef"}],
            "labelled on the review page of another run",
        ),
        ([{"id": True, "hallucinated": True}], 'l.jsonl:1: missing or empty "id"'),
    ],
    ids=["unknown-id", "not-bool", "other-pipeline", "relabelled", "other-run", "bool-id"],
)
def test_bad_labels_are_one_line_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[dict[str, Any]], message: str
) -> None:
    run = _checked(tmp_path, monkeypatch)
    labels = _labels(tmp_path / "l.jsonl", rows)
    db = tmp_path / "h.db"
    done = CliRunner().invoke(
        cli, ["report", str(run), "--labels", str(labels), "--history", str(db), "--record"]
    )
    assert done.exit_code == 2, done.output
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (run / "summary.json").exists() and not (run / "report.html").exists()
    assert not db.exists()


def test_a_label_needs_its_pipeline_when_the_report_has_several(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch)
    other = _checked(tmp_path, monkeypatch, name="other")
    labels = _labels(tmp_path / "l.jsonl", [{"id": "a1", "hallucinated": True}])
    done = CliRunner().invoke(
        cli, ["report", str(run), str(other), "--labels", str(labels), "--out", str(tmp_path / "r")]
    )
    assert done.exit_code == 2
    assert 'l.jsonl:1: no "pipeline", and the report has 2 runs' in done.stderr


def test_few_labels_alike_labels_or_a_wrong_judge_fall_back_to_the_labels() -> None:
    flags = [1.0, 0.0] * 10
    few = reviewed_rate([True, False, False], [1.0, 0.0, 0.0], flags)
    assert few.method == "labels (Wilson, finite population)" and few.labels == 3
    alike = reviewed_rate([False] * 12, [1.0] + [0.0] * 11, flags)
    assert alike.method == "labels (Wilson, finite population)"
    # the judge's flags are a wrong guess: no weight on them, the labels alone
    wrong = reviewed_rate([True] * 5 + [False] * 5, [0.0] * 5 + [1.0] * 5, flags)
    assert wrong.method == "labels (Wilson, finite population)"
    every = reviewed_rate([True, False], [1.0, 0.0], [1.0, 0.0])
    assert (every.value, every.low, every.high) == (0.5, 0.5, 0.5)  # all reviewed: exact
    assert every.method == "labels (all reviewed)"
    assert labels_only_interval(3, 10, 10) == (0.3, 0.3)


JUDGES = {  # sensitivity, specificity: from chance to near perfect
    "chance": (0.5, 0.5),
    "weak": (0.6, 0.7),
    "today's": (0.7, 0.75),
    "good": (0.9, 0.9),
    "near-perfect": (0.98, 0.98),
}


@pytest.mark.parametrize("judge", list(JUDGES))
def test_reviewed_intervals_cover_the_true_rate_and_are_never_wider_than_the_labels(
    judge: str,
) -> None:
    """1,000 simulated audits per judge: 200 answers with a true rate of 5-40 %, 40 of them
    reviewed at random; the reviewed interval covers the audit's true rate in >= 93 % of them
    and is never wider than the labels-alone (Wilson, finite population) interval by more than
    rounding."""
    se, sp = JUDGES[judge]
    rng = np.random.default_rng(11)
    covered, widths, alone = 0, [], []
    for _ in range(1000):
        truth = rng.random(200) < rng.uniform(0.05, 0.4)
        flags = np.where(truth, rng.random(200) < se, rng.random(200) >= sp).astype(float)
        sample = rng.choice(200, 40, replace=False)
        rate = reviewed_rate(truth[sample].tolist(), flags[sample].tolist(), flags.tolist())
        covered += rate.low <= truth.mean() <= rate.high
        widths.append(rate.high - rate.low)
        alone.append(rate.labels_only[1] - rate.labels_only[0])
    assert covered / 1000 >= 0.93, covered
    assert max(w - a for w, a in zip(widths, alone, strict=True)) <= 1e-6
    if judge == "near-perfect":  # a good judge narrows the interval markedly
        assert np.mean(widths) < 0.7 * np.mean(alone)


def test_two_reviewed_pipelines_get_the_peoples_headline_and_paired_difference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both pipelines labelled on the same questions: the report's headline and paired
    difference come from the reviewed rates; one without labels says "no labels" and the
    headline stays the goodput one."""
    first = _checked(tmp_path, monkeypatch, count=40, name="first")
    second = _checked(tmp_path, monkeypatch, count=40, name="second")
    truth = {r["id"]: r["hallucinated"] for r in _labelled(40, wrong_every=3)}
    chosen = [f"a{k}" for k in range(0, 40, 3)] + ["a1", "a2", "a4"]
    rows = [
        {"id": i, "hallucinated": truth[i], "pipeline": name}
        for name in ("first", "second")
        for i in chosen
    ]
    labels = _labels(tmp_path / "l.jsonl", rows)
    out = tmp_path / "report.html"
    args = ["report", str(first), str(second), "--out", str(out), "--history", str(tmp_path / "h")]
    done = CliRunner().invoke(cli, [*args, "--labels", str(labels)])
    assert done.exit_code == 0, done.output
    html = out.read_text()
    assert "hallucinated answers (reviewed)" in html and 'id="reviewed-note"' in html
    assert "By people&#39;s review" in html, html[html.find('id="headline"') :][:400]
    assert "questions labelled in both" in html and 'id="reviewed-contrast"' in html
    one = _labels(tmp_path / "one.jsonl", [r for r in rows if r["pipeline"] == "first"])
    done = CliRunner().invoke(cli, [*args, "--labels", str(one)])
    assert done.exit_code == 0, done.output
    html = out.read_text()
    assert "no labels" in html and "By people&#39;s review" not in html
    assert 'id="reviewed-contrast"' not in html


def test_an_audit_can_draw_its_review_sample_before_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`audit --review N` (finish_audit's `review`): each run's sample is drawn as `auditor
    review` draws it, and the report's review section shows it."""
    from auditor.audit import finish_audit

    run = _checked(tmp_path, monkeypatch)
    report = tmp_path / "report.html"
    finish_audit([run], report, review=6)
    drawn = json.loads((run / "review.json").read_text())
    ids = [f"a{k}" for k in range(30)]
    assert [s["id"] for s in drawn["sample"]] == choose_sample(ids, 6, 0, "").sample
    assert report.read_text().count('class="review-item') == 6
