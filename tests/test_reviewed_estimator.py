"""The reviewed rate's estimators on synthetic populations (no engine): the finite-population
correction (exact when every answer is labelled, narrower than plain Wilson at 40 of 150),
the judge-assisted difference estimator never wider than the labels alone and covering the
true rate, `labels_needed` monotone and right about the width it promises, and the review
page's JavaScript port equal to Python on random cases (under node)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditor.calibration import wilson_interval
from auditor.reviewed import (
    ReviewedRate,
    labels_advice,
    labels_for_half_width,
    labels_needed,
    labels_only_interval,
    reviewed_difference,
    reviewed_rate,
)

REVIEW_JS = Path(__file__).resolve().parents[1] / "auditor/report/templates/review.js"
PORT_START = "  // --- the provisional rate: auditor.reviewed.reviewed_rate"
PORT_END = "  // --- end of the reviewed_rate port ---"


def _population(
    rng: np.random.Generator, size: int, rate: float, separation: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(truth, the judge's score, its flag at 0.5) of `size` answers: the score a logistic of a
    normal shifted by `separation` for hallucinated answers (AUROC ~0.8 at 1.2)."""
    truth = (rng.random(size) < rate).astype(float)
    latent = rng.normal(0, 1, size) + separation * truth
    score = 1 / (1 + np.exp(-1.2 * (latent - separation / 2)))
    return truth, score, (score >= 0.5).astype(float)


def test_the_finite_population_correction_is_exact_at_n_equal_n_and_narrows_wilson() -> None:
    assert labels_only_interval(3, 10, 10) == (0.3, 0.3)
    every = reviewed_rate([True, False, True], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0])
    assert (every.value, every.low, every.high, every.method) == (
        2 / 3,
        2 / 3,
        2 / 3,
        "labels (all reviewed)",
    )
    assert every.to_json()["labels_for"] == {"0.05": 3, "0.10": 3}
    paired = reviewed_difference([1.0, 0.0, -1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0])
    assert paired == (0.0, 0.0, 0.0, "labels (all reviewed)")
    # 40 of 150: every share's interval about sqrt((N - n) / (N - 1)) = 0.86x Wilson's
    for positives in range(1, 40):
        low, high = labels_only_interval(positives, 40, 150)
        plain = wilson_interval(positives, 40)
        assert plain is not None
        ratio = (high - low) / (plain[1] - plain[0])
        assert 0.80 < ratio < 0.88, (positives, ratio)
    # a small share of a large population: about Wilson's
    low, high = labels_only_interval(10, 40, 1_000_000)
    plain = wilson_interval(10, 40)
    assert plain is not None and high - low == pytest.approx(plain[1] - plain[0], rel=1e-3)


def test_the_judges_interval_is_never_wider_than_the_labels_alone() -> None:
    rng = np.random.default_rng(3)
    used = 0
    for _ in range(600):
        size = int(rng.integers(12, 300))
        truth, score, flag = _population(rng, size, rng.uniform(0.02, 0.7), rng.uniform(0, 3))
        n = int(rng.integers(1, size + 1))
        picked = rng.choice(size, n, replace=False)
        predictions = score if rng.random() < 0.5 else flag
        rate = reviewed_rate(
            truth[picked].astype(bool).tolist(), predictions[picked].tolist(), predictions.tolist()
        )
        alone = labels_only_interval(int(truth[picked].sum()), n, size)
        assert rate.labels_only == alone
        assert rate.high - rate.low <= alone[1] - alone[0] + 1e-12
        assert rate.low > -1e-12 and rate.high < 1 + 1e-12
        assert rate.low - 1e-12 <= rate.value <= rate.high + 1e-12
        used += rate.method == "difference (finite population)"
    assert used > 200  # the judge narrows most of them


@pytest.mark.parametrize("kind", ["flag", "score"])
@pytest.mark.parametrize("n", [20, 40, 60])
def test_the_reviewed_rate_covers_the_true_rate_of_a_finite_population(kind: str, n: int) -> None:
    """1,000 reviews of n of 150 answers, a new population (true rate 5-60 %, judge AUROC
    0.65-0.9) each time: the interval holds the true rate in >= 93 % of them, and is on
    average narrower than the labels' alone with the finite-population correction."""
    rng = np.random.default_rng(n)
    covered, widths, alone = 0, [], []
    for _ in range(1000):
        truth, score, flag = _population(rng, 150, rng.uniform(0.05, 0.6), rng.uniform(0.6, 2.0))
        predictions = score if kind == "score" else flag
        picked = rng.choice(150, n, replace=False)
        rate = reviewed_rate(
            truth[picked].astype(bool).tolist(), predictions[picked].tolist(), predictions.tolist()
        )
        covered += rate.low <= truth.mean() <= rate.high
        widths.append(rate.high - rate.low)
        alone.append(rate.labels_only[1] - rate.labels_only[0])
    assert covered / 1000 >= 0.93, covered
    assert np.mean(widths) < 0.97 * np.mean(alone)


def test_a_judge_right_on_every_labelled_answer_does_not_give_a_zero_width_interval() -> None:
    """A judge right on 98 % of 200 answers is often right on all 40 labelled ones: the
    residual variance is floored, so the interval still covers the true rate."""
    rng = np.random.default_rng(5)
    covered = 0
    for _ in range(300):
        truth = rng.random(200) < rng.uniform(0.05, 0.4)
        flags = np.where(truth, rng.random(200) < 0.98, rng.random(200) >= 0.98).astype(float)
        picked = rng.choice(200, 40, replace=False)
        rate = reviewed_rate(truth[picked].tolist(), flags[picked].tolist(), flags.tolist())
        assert rate.high - rate.low > 0.02
        covered += rate.low <= truth.mean() <= rate.high
    assert covered / 300 >= 0.95


def test_the_paired_difference_covers_and_is_never_wider_than_the_labels() -> None:
    rng = np.random.default_rng(8)
    covered = 0
    for _ in range(300):
        a, _, flag_a = _population(rng, 150, rng.uniform(0.1, 0.5), 1.5)
        b, _, flag_b = _population(rng, 150, rng.uniform(0.1, 0.5), 1.5)
        picked = rng.choice(150, 40, replace=False)
        d, g = a - b, flag_a - flag_b
        _, low, high, method = reviewed_difference(
            d[picked].tolist(), g[picked].tolist(), g.tolist()
        )
        spread = float(d[picked].var(ddof=1))
        alone = 2 * 1.959963984540054 * math.sqrt((1 - 40 / 150) * spread / 40)
        assert high - low <= alone + 1e-12
        assert method in ("difference (finite population)", "labels (normal, finite population)")
        covered += low <= d.mean() <= high
    assert covered / 300 >= 0.93


def test_labels_needed_is_monotone_and_none_without_a_population() -> None:
    for population in (30, 150, 1000, 10**6):
        for variance in (0.01, 0.05, 0.1, 0.25):
            wide = labels_for_half_width(variance, population, 0.10)
            narrow = labels_for_half_width(variance, population, 0.05)
            assert 1 <= wide <= narrow <= population
            assert narrow <= labels_for_half_width(variance * 1.5, population, 0.05)
            assert narrow <= labels_for_half_width(variance, population * 2, 0.05)
    # a large population, p = 0.5: the textbook 385 for +-0.05
    assert labels_for_half_width(0.25, 10**9, 0.05) == 385
    nobody = ReviewedRate(0.0, 0.0, 1.0, 0, 0, "no labels", (0.0, 1.0))
    assert labels_needed(nobody, 0.05) is None
    # no labels yet: the widest variance, 0.25 (p = 0.5), gives the most labels
    unlabelled = reviewed_rate([], [], [0.0, 1.0] * 75)
    assert unlabelled.to_json()["labels_for"] == {"0.05": 108, "0.10": 59}
    # every label clean: the Agresti-Coull share keeps the advice from saying 1 label
    clean = reviewed_rate([False] * 20, [0.0] * 20, [0.0, 1.0] * 75)
    assert clean.labels_for()["0.05"] > 20 and clean.labels_for()["0.10"] > 10


@pytest.mark.parametrize("half_width", [0.05, 0.10])
@pytest.mark.parametrize("kind", ["labels", "judge"])
def test_at_the_advised_number_of_labels_the_half_width_is_about_the_one_asked(
    kind: str, half_width: float
) -> None:
    """A pilot review of 150 of 1,000 answers advises n; 200 reviews of n labels then give a
    mean half width within 15 % of the one asked (the advice is a large-sample one)."""
    rng = np.random.default_rng(21)
    truth, score, _ = _population(rng, 1000, 0.3, 1.6)
    predictions = score if kind == "judge" else np.zeros(1000)
    pilot = rng.choice(1000, 150, replace=False)
    rate = reviewed_rate(
        truth[pilot].astype(bool).tolist(), predictions[pilot].tolist(), predictions.tolist()
    )
    expected = "difference" if kind == "judge" else "labels"
    assert rate.method.startswith(expected)
    advised = labels_needed(rate, half_width)
    assert advised is not None and 30 < advised < 1000
    halves = []
    for _ in range(200):
        picked = rng.choice(1000, advised, replace=False)
        again = reviewed_rate(
            truth[picked].astype(bool).tolist(), predictions[picked].tolist(), predictions.tolist()
        )
        halves.append((again.high - again.low) / 2)
    assert np.mean(halves) == pytest.approx(half_width, rel=0.15)


def test_to_json_carries_the_advice_and_the_advice_line_says_it() -> None:
    rng = np.random.default_rng(4)
    truth, _, flag = _population(rng, 150, 0.4, 1.8)
    picked = rng.choice(150, 40, replace=False)
    rate = reviewed_rate(truth[picked].astype(bool).tolist(), flag[picked].tolist(), flag.tolist())
    found = json.loads(json.dumps(rate.to_json()))
    assert set(found) >= {"value", "low", "high", "labels", "population", "method"}
    assert set(found) >= {"labels_only", "residual_variance", "judge_weight", "labels_for"}
    more = found["labels_for"]
    assert 40 < more["0.05"] <= 150 and more["0.10"] <= more["0.05"]
    line = labels_advice(rate, "pipeline-a")
    assert line.startswith("pipeline-a: 40 labels of 150, +-")
    assert f"+-5 at about {more['0.05']} ({more['0.05'] - 40} more)" in line


def _random_case(rng: np.random.Generator) -> dict[str, Any]:
    size = int(rng.integers(1, 220))
    truth, score, flag = _population(rng, size, rng.uniform(0, 0.8), rng.uniform(-0.5, 3))
    shape = rng.random()
    if shape < 0.4:
        predictions = flag
    elif shape < 0.8:
        predictions = score
    elif shape < 0.9:
        predictions = np.full(size, float(rng.integers(0, 2)))  # a constant judge
    else:
        predictions = np.round(score, 1)
    n = (
        int(rng.integers(0, size + 1))
        if rng.random() < 0.3
        else min(size, int(rng.integers(8, 70)))
    )
    picked = rng.choice(size, n, replace=False)
    return {
        "labels": [bool(x) for x in truth[picked]],
        "labelled": [float(x) for x in predictions[picked]],
        "all": [float(x) for x in predictions],
    }


NODE_RUNNER = """
const fs = require("fs");
const source = fs.readFileSync(process.argv[1], "utf8");
const start = source.indexOf(process.argv[2]);
const end = source.indexOf(process.argv[3]);
if (start < 0 || end < start) { throw new Error("the port's markers are not in review.js"); }
const reviewedRate = new Function(source.slice(start, end) + "\\nreturn reviewedRate;")();
const cases = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(cases.map((c) => reviewedRate(c.labels, c.labelled, c.all))));
"""


@pytest.mark.skipif(
    shutil.which("node") is None, reason="no node (the e2e browser test checks two cases)"
)
def test_the_review_pages_port_computes_what_python_computes() -> None:
    """3,000 random reviews (flags, scores, a constant judge, 0 to all labels): the page's
    `reviewedRate` gives Python's method, value, interval and advice."""
    rng = np.random.default_rng(2026)
    cases = [_random_case(rng) for _ in range(3000)]
    done = subprocess.run(
        ["node", "-e", NODE_RUNNER, str(REVIEW_JS), PORT_START, PORT_END],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    shown = json.loads(done.stdout)
    methods = set()
    for case, page in zip(cases, shown, strict=True):
        rate = reviewed_rate(case["labels"], case["labelled"], case["all"])
        methods.add(rate.method)
        assert page["method"] == rate.method, case
        for key in ("value", "low", "high"):
            assert page[key] == pytest.approx(getattr(rate, key), abs=1e-9), (key, case)
        assert page["labels"] == rate.labels and page["population"] == rate.population
        assert page["labelsFor"] == rate.labels_for(), case
    assert methods == {
        "no labels",
        "labels (all reviewed)",
        "labels (Wilson, finite population)",
        "difference (finite population)",
    }
