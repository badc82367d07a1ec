"""The drawn sample is a function of the seed and the run, not a file (issue 48): every reader
of review.json (`report`, its review page, `bundle`, `verify`, `auditor review` itself) draws
it again from the seed over the run's checked answers and refuses, naming the field, a sample,
size, seed, method, population or second review that is not that draw; a second-review share
draws round(share x n) of the n drawn answers. Fake judge: no engine."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner, Result

from auditor.cli import cli
from auditor.errors import BadInput
from auditor.evidence.build import plan_bundle
from auditor.files import utc_now
from auditor.results import load_run
from auditor.review import (
    _key,
    check_review,
    population_sha256,
    read_checked_review,
    run_fingerprint,
    second_order,
    second_review_count,
)
from tests.evidence.conftest import PASSPHRASE, PASSPHRASE_ENV, make_key
from tests.test_review import _checked, _labels
from tests.test_review_integrity import _line
from tests.verify.test_calibrate import _labelled


def _review(run: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["review", str(run), *args])


def _drawn(run: Path, *args: str) -> dict[str, Any]:
    done = _review(run, *args)
    assert done.exit_code == 0, done.output
    data: dict[str, Any] = json.loads((run / "review.json").read_text())
    return data


def _edit(run: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads((run / "review.json").read_text())
    change(data)
    (run / "review.json").write_text(json.dumps(data), encoding="utf-8")


def _report(run: Path, *extra: str) -> Result:
    history = str(run.parent / "h.db")
    return CliRunner().invoke(cli, ["report", str(run), "--history", history, *extra])


def _truth() -> dict[str, bool]:
    return {r["id"]: r["hallucinated"] for r in _labelled(30, wrong_every=3)}


def test_the_four_answers_the_judge_passed_are_not_a_sample_of_seed_7(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: review.json edited to hold four answers nobody would call
    hallucinated (0 % where the honest draw gives its own rate): `report --labels`, the
    review page and `bundle` refuse it, naming the field and the draw to make."""
    run = _checked(tmp_path, monkeypatch, count=30)
    honest = [e["id"] for e in _drawn(run, "--sample", "12", "--seed", "7")["sample"]]
    truth = _truth()
    clean = [i for i in sorted(truth) if not truth[i] and i not in honest][:4]

    def cherry_pick(data: dict[str, Any]) -> None:
        data["sample"] = [{"id": i, "inclusion_probability": round(4 / 30, 6)} for i in clean]
        data["size"] = 4

    _edit(run, cherry_pick)
    said = (
        f'{run / "review.json"}: "sample" is not the draw of seed 7 over the run\'s 30 checked '
        f"answers (answer {clean[0]!r} is not among the first 4); remove it and draw again: "
        f"auditor review {run} --seed 7 --sample 4"
    )
    labels = _labels(tmp_path / "l.jsonl", [_line(run, i) for i in clean])
    done = _report(run, "--labels", str(labels))
    assert done.exit_code == 2 and said in done.stderr, done.output
    assert not (run / "summary.json").exists()
    # the page: the problem said, none of the four shown to label
    page = _report(run)
    assert page.exit_code == 0 and said in page.stderr
    html = (run / "report.html").read_text(encoding="utf-8")
    assert 'class="review-item' not in html and "is not the draw of seed 7" in html
    with pytest.raises(BadInput, match='"sample" is not the draw of seed 7'):
        plan_bundle([run])
    # `auditor review` does not extend it either: nothing written
    before = (run / "review.json").read_bytes()
    again = _review(run, "--sample", "12")
    assert again.exit_code == 2 and said in again.stderr
    assert (run / "review.json").read_bytes() == before


def test_an_edited_seed_is_refused_and_does_not_grow_the_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=30)
    _drawn(run, "--sample", "12", "--seed", "7")
    _edit(run, lambda data: data.update(seed=8))
    before = (run / "review.json").read_bytes()
    grown = _review(run, "--sample", "12")  # today: the sample grew to cover seed 8's order
    assert grown.exit_code == 2, grown.output
    said = '"seed" is 8, but "sample" is the draw of seed 7 over the run\'s 30 checked answers'
    assert said in grown.stderr and 'write back "seed": 7' in grown.stderr
    assert (run / "review.json").read_bytes() == before
    labels = _labels(tmp_path / "l.jsonl", [_line(run, "a0")])
    done = _report(run, "--labels", str(labels))
    assert done.exit_code == 2 and said in done.stderr


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(method="stratified"), '"method" is \'stratified\''),
        (lambda d: d.update(order="by id"), '"order" is \'by id\''),
        (lambda d: d.update(population=40), '"population" is 40'),
        (lambda d: d.update(population_sha256="0" * 16), '"population_sha256" is not the hash'),
        (lambda d: d["sample"].reverse(), '"sample" is not the draw of seed 7'),
        (
            lambda d: d["sample"][0].update(inclusion_probability=1.0),
            '"inclusion_probability" of answer',
        ),
        (
            lambda d: d["second_review"].update(ids=d["second_review"]["ids"][1:]),
            '"second_review" is not the draw of seed 7',
        ),
        (
            lambda d: d["second_review"].update(
                ids=second_order([e["id"] for e in d["sample"]], 7)[:2]
            ),
            '"second_review" names 2 answers, but a share of 0.5 of the 6 drawn is 3',
        ),
        (
            lambda d: d["second_review"].update(share=float("nan")),
            '"second_review" must have a "share" above 0 and at most 1',
        ),
    ],
    ids=["method", "order", "population", "population_sha256", "order-of-sample", "probability",
         "second-ids", "second-count", "second-share"],
)  # fmt: skip
def test_every_drawn_field_edited_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, field: str
) -> None:
    run = _checked(tmp_path, monkeypatch, count=30)
    _drawn(run, "--sample", "6", "--seed", "7", "--second-review", "0.5")
    assert read_checked_review(load_run(run)) is not None  # as drawn: accepted
    _edit(run, change)
    labels = _labels(tmp_path / "l.jsonl", [_line(run, "a0")])
    done = _report(run, "--labels", str(labels))
    assert done.exit_code == 2 and field in done.stderr, done.output
    assert f"{run / 'review.json'}:" in done.stderr


def test_a_sample_id_the_run_does_not_have_is_said_to_be_not_among_its_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not "the first drawn answer has no label": the id is no answer of the run."""
    run = _checked(tmp_path, monkeypatch, count=30)
    drawn = [e["id"] for e in _drawn(run, "--sample", "6", "--seed", "7")["sample"]]
    _edit(run, lambda data: data["sample"][0].update(id="q-elsewhere"))
    labels = _labels(tmp_path / "l.jsonl", [_line(run, i) for i in drawn[1:]])
    done = _report(run, "--labels", str(labels))
    assert done.exit_code == 2
    assert (
        "\"sample\" names answer 'q-elsewhere', which is not among "
        f"{run}'s 30 checked answers" in done.stderr
    )
    assert "has no label" not in done.stderr


def test_a_second_review_share_draws_round_share_times_n_and_only_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.5 of 6 drawn answers is 3 (a share keyed per answer drew 1 of them); a larger sample
    keeps every answer marked before; a larger share adds to them."""
    run = _checked(tmp_path, monkeypatch, count=30)
    done = _review(run, "--sample", "6", "--seed", "0", "--second-review", "0.5")
    assert done.exit_code == 0, done.output
    first = json.loads((run / "review.json").read_text())
    marked = first["second_review"]["ids"]
    assert len(marked) == 3 and "3 of them for a blind second review" in done.output
    sample = [e["id"] for e in first["sample"]]
    assert set(marked) == set(second_order(sample, 0)[:3])
    previous = set(marked)
    for size, share in ((12, "0.5"), (20, "0.5"), (20, "0.8"), (30, "0.8")):
        data = _drawn(run, "--sample", str(size), "--second-review", share)
        now = set(data["second_review"]["ids"])
        assert previous <= now, (size, share)
        assert len(now) >= second_review_count(float(share), size)
        previous = now
    assert read_checked_review(load_run(run)) is not None


@pytest.mark.parametrize(("share", "drawn", "count"), [(0.5, 6, 3), (0.5, 5, 3), (0.2, 12, 2),
                                                       (0.01, 6, 1), (1.0, 7, 7), (0.5, 0, 0)])  # fmt: skip
def test_the_second_review_count_is_the_share_of_the_drawn_rounded_half_up(
    share: float, drawn: int, count: int
) -> None:
    assert second_review_count(share, drawn) == count


@pytest.mark.parametrize("share", ["nan", "inf", "-0.2", "1.5", "0"])
def test_a_share_that_is_no_share_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, share: str
) -> None:
    run = _checked(tmp_path, monkeypatch, count=6)
    done = _review(run, "--sample", "3", "--second-review", share)
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert done.exit_code == 2 and len(errors) == 1, done.output
    assert "is not a share above 0 and at most 1" in errors[0]
    assert not (run / "review.json").exists()


def test_a_sample_of_no_answers_says_its_second_review_drew_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=4)
    rows = [json.loads(line) for line in (run / "checks.jsonl").read_text().splitlines()]
    (run / "checks.jsonl").write_text(
        "".join(json.dumps(r | {"error": "judge failed", "claims": []}) + "\n" for r in rows)
    )
    check = json.loads((run / "check.json").read_text())  # as a check whose every call failed
    check["totals"]["claims"] = 0
    (run / "check.json").write_text(json.dumps(check))
    done = _review(run, "--sample", "3", "--second-review", "0.5")
    assert done.exit_code == 0, done.output
    assert "0 of 0 answers to review" in done.output and "none for a second review" in done.output


def test_a_sample_drawn_by_the_earlier_rule_is_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """review.json of schema 2 (each drawn answer's second key below the share) is the draw of
    its rule; extended, it keeps its marks and is written by the new one."""
    run = _checked(tmp_path, monkeypatch, count=30)
    data = _drawn(run, "--sample", "12", "--seed", "3")
    sample = [e["id"] for e in data["sample"]]
    old = [i for i in sample if _key("second", 3, i) < 0.3]
    data |= {"schema_version": 2, "second_review": {"share": 0.3, "ids": old}}
    (run / "review.json").write_text(json.dumps(data), encoding="utf-8")
    assert read_checked_review(load_run(run)) is not None
    wrong = data | {"second_review": {"share": 0.3, "ids": second_order(sample, 3)[: len(old) + 1]}}
    (run / "review.json").write_text(json.dumps(wrong), encoding="utf-8")
    with pytest.raises(BadInput, match=f"a share of 0.3 drew {len(old)} of them"):
        read_checked_review(load_run(run))
    (run / "review.json").write_text(json.dumps(data), encoding="utf-8")
    grown = _drawn(run, "--sample", "20")
    assert grown["schema_version"] == 3 and set(old) <= set(grown["second_review"]["ids"])
    assert len(grown["second_review"]["ids"]) >= second_review_count(0.3, 20)


def _run(ids: list[str], manifest: dict[str, Any]) -> Any:
    """What check_review reads of a run."""
    return SimpleNamespace(
        run_dir=Path("/runs/r"),
        manifest=manifest,
        check_manifest=None,
        checks=[{"id": i, "claims": []} for i in ids],
    )


def test_a_run_that_grew_is_extended_only_from_the_draw_of_its_seed() -> None:
    """The answers a sample was drawn from are known by their hash and number: the first of
    the run's checked answers, or, where the run's rows do not say, the drawn answers in the
    seed's order with no more answers between them than the run gained."""
    manifest = {"run_id": "r", "started_at": "2026-12-07T00:00:00+00:00", "kind": "answers"}
    before = [f"a{k}" for k in range(10)]
    order = sorted(before, key=lambda i: (_key("review", 5, i), i))
    review = {
        "schema_version": 3,
        "method": "uniform",
        "order": "sha256 keys of seed and id",
        "seed": 5,
        "size": 4,
        "population": 10,
        "population_sha256": population_sha256(before),
        "fingerprint": run_fingerprint(manifest),
        "check_fingerprint": None,
        "sample": [{"id": i, "inclusion_probability": 0.4} for i in order[:4]],
        "second_review": None,
    }
    grown = before + [f"b{k}" for k in range(10)]
    check_review(_run(grown, manifest), review, grown=True)  # the first 10 rows: exact
    with pytest.raises(BadInput, match="drawn from 10 answers, the run has 20 checked now"):
        check_review(_run(grown, manifest), review)  # a reader: extend it first
    shuffled = grown[::-1]  # the rows in another order: the seed's order and the gaps tell
    check_review(_run(shuffled, manifest), review, grown=True)
    # an answer skipped in the draw: more gaps than the 10 answers gained allow
    skipped = dict(review, sample=[{"id": i} for i in drawn_skipping(grown, 5)])
    skipped["size"] = len(skipped["sample"])
    with pytest.raises(BadInput, match='"sample" is not the draw of seed 5'):
        check_review(_run(shuffled, manifest), skipped, grown=True)


def drawn_skipping(ids: list[str], seed: int) -> list[str]:
    """Every third answer of the seed's order over `ids` (20): twelve answers skipped between
    the seven drawn, more than the ten the run gained."""
    order = sorted(ids, key=lambda i: (_key("review", seed, i), i))
    return order[::3]


def test_verify_refuses_a_bundle_whose_sample_is_not_the_draw_of_its_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle made by an auditor that did not draw the sample again (the check switched
    off here) holds an edited review.json: `verify` draws it again and refuses."""
    run = _checked(tmp_path, monkeypatch, count=30)
    drawn = [e["id"] for e in _drawn(run, "--sample", "12", "--seed", "7")["sample"]]
    labels = _labels(tmp_path / "l.jsonl", [_line(run, i) for i in drawn])
    _edit(run, lambda data: data.update(seed=8))
    monkeypatch.setenv(PASSPHRASE_ENV, PASSPHRASE)
    key = make_key(tmp_path, "auditor.key", PASSPHRASE_ENV)
    out = tmp_path / "a.tar"
    with monkeypatch.context() as unchecked:
        unchecked.setattr("auditor.review.check_review", lambda *args, **kwargs: None)
        args = ["bundle", str(run), "--key", str(key), "--out", str(out)]
        args += ["--passphrase-env", PASSPHRASE_ENV, "--labels", str(labels)]
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 0, done.output
    verified = CliRunner().invoke(cli, ["verify", str(out), "--key", f"{key}.pub"])
    assert verified.exit_code != 0, verified.output
    assert '"seed" is 8, but "sample" is the draw of seed 7' in verified.stderr


def test_labels_made_now_on_an_honest_draw_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=30)
    drawn = [e["id"] for e in _drawn(run, "--sample", "12", "--seed", "7")["sample"]]
    labels = _labels(tmp_path / "l.jsonl", [_line(run, i, labelled_at=utc_now()) for i in drawn])
    done = _report(run, "--labels", str(labels))
    assert done.exit_code == 0, done.output
