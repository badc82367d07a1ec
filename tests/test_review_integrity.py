"""The reviewed rate is right or refused: every way a person can feed the review loop a label
that would make the figure quietly wrong (counted twice, contradicting itself, picked inside
the sample, made on another run or check, stale after the run grew) is refused in one line or
kept out of the rate and said. Fake judge: no engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from auditor.claim_rows import Claim, flagged_at
from auditor.cli import cli
from auditor.files import utc_now
from auditor.review import check_fingerprint, run_fingerprint
from tests.test_review import _checked, _labels
from tests.verify.test_calibrate import _labelled


def _drawn(run: Path, size: int, *extra: str) -> list[str]:
    done = CliRunner().invoke(cli, ["review", str(run), "--sample", str(size), *extra])
    assert done.exit_code == 0, done.output
    return [s["id"] for s in json.loads((run / "review.json").read_text())["sample"]]


def _truth() -> dict[str, bool]:
    return {r["id"]: r["hallucinated"] for r in _labelled(40, wrong_every=3)}


def _line(run: Path, ident: str, **extra: Any) -> dict[str, Any]:
    """A label as the review page writes it."""
    manifest = json.loads((run / "manifest.json").read_text())
    check = json.loads((run / "check.json").read_text())
    return {
        "id": ident,
        "pipeline": "run",
        "fingerprint": run_fingerprint(manifest),
        "check_fingerprint": check_fingerprint(check),
        "hallucinated": _truth()[ident],
        "reviewer": "Ana",
        "labelled_at": utc_now(),  # after the run began: a label cannot predate it
    } | extra


def _report(run: Path, labels: Path, *extra: str) -> Result:
    history = str(labels.parent / "h.db")
    return CliRunner().invoke(
        cli, ["report", str(run), "--labels", str(labels), "--history", history, *extra]
    )


def _reviewed(run: Path) -> dict[str, Any]:
    reviewed: dict[str, Any] = json.loads((run / "summary.json").read_text())["reviewed"]
    return reviewed


def _claims(run: Path) -> dict[str, list[Claim]]:
    return {
        row["id"]: [Claim.from_json(c) for c in row["claims"]]
        for row in map(json.loads, (run / "checks.jsonl").read_text().splitlines())
    }


def test_the_same_labels_with_and_without_pipeline_count_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """15 answers labelled, then labelled again without `pipeline`: 15 labels, not 30."""
    run = _checked(tmp_path, monkeypatch, count=40)
    drawn = _drawn(run, 15)
    lines = [_line(run, i) for i in drawn]
    again = [{k: v for k, v in line.items() if k != "pipeline"} for line in lines]
    once = _report(run, _labels(tmp_path / "once.jsonl", lines))
    assert once.exit_code == 0, once.output
    alone = _reviewed(run)["answer_rate"]
    twice = _report(run, _labels(tmp_path / "twice.jsonl", lines + again))
    assert twice.exit_code == 0, twice.output
    assert _reviewed(run)["labels"] == 15 and _reviewed(run)["answer_rate"] == alone


def test_a_disagreeing_copy_by_another_reviewer_is_refused_naming_both_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=20)
    drawn = _drawn(run, 5)
    lines = [_line(run, i) for i in drawn]
    flipped = {k: v for k, v in lines[2].items() if k != "pipeline"}
    flipped |= {"hallucinated": not lines[2]["hallucinated"], "reviewer": "Bo"}
    done = _report(run, _labels(tmp_path / "l.jsonl", [*lines, flipped]))
    assert done.exit_code == 2
    assert (
        f"l.jsonl:6: answer {'run/' + drawn[2]!r} labelled again, differently (first on line 3)"
        in (done.stderr)
    )


def test_a_claim_marked_both_right_and_wrong_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=20)
    drawn = _drawn(run, 3)
    both = [{"index": 0, "judge_right": True}, {"index": 0, "judge_right": False}]
    done = _report(run, _labels(tmp_path / "l.jsonl", [_line(run, drawn[0], claims=both)]))
    assert done.exit_code == 2
    assert "l.jsonl:1: claim 0 is marked both judge right and judge wrong; keep one" in done.stderr


def test_claim_marks_that_contradict_the_answer_label_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hallucinated with every claim held fine, or not hallucinated with a claim held wrong."""
    run = _checked(tmp_path, monkeypatch, count=20)
    drawn = _drawn(run, 20)
    claims, threshold = _claims(run), 0.5
    clean = next(i for i in drawn if not any(flagged_at([c], threshold) for c in claims[i]))
    fine = [{"index": k, "judge_right": True} for k in range(len(claims[clean]))]
    done = _report(
        run, _labels(tmp_path / "a.jsonl", [_line(run, clean, hallucinated=True, claims=fine)])
    )
    assert done.exit_code == 2
    assert f"answer {clean!r} is labelled hallucinated, but every claim is marked" in done.stderr
    wrong = [{"index": 0, "judge_right": False}]
    done = _report(
        run, _labels(tmp_path / "b.jsonl", [_line(run, clean, hallucinated=False, claims=wrong)])
    )
    assert done.exit_code == 2
    assert "labelled not hallucinated, but its claim 0 is marked hallucinated" in done.stderr


def test_one_claim_mark_does_not_switch_goodput_to_a_claim_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=30)
    drawn = _drawn(run, 12)
    lines = [_line(run, i) for i in drawn]
    claims = _claims(run)[drawn[0]]
    flagged = flagged_at([claims[0]], 0.5)
    # the judge right on claim 0: hallucinated exactly when the judge flagged it
    lines[0] |= {
        "claims": [{"index": 0, "judge_right": True}],
        "hallucinated": lines[0]["hallucinated"] or flagged,
    }
    if lines[0]["hallucinated"] != _truth()[drawn[0]]:
        pytest.skip("the fake judge's first claim disagrees with the truth here")
    done = _report(run, _labels(tmp_path / "l.jsonl", lines))
    assert done.exit_code == 0, done.output
    reviewed = _reviewed(run)
    assert reviewed["goodput_from"] == "answer_rate" and reviewed["claim_rate"] is None
    assert "leave claims unmarked" in reviewed["claim_rate_withheld"]


def test_only_the_labelled_prefix_of_the_drawn_order_makes_a_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Labels of the flagged drawn answers only (a reviewer picking): the rate counts the
    drawn order's labelled prefix, the rest are counted out and said; none at the start of the
    order: refused naming the first drawn answer."""
    run = _checked(tmp_path, monkeypatch, count=40)
    drawn = _drawn(run, 25)
    truth = _truth()
    picked = [i for i in drawn if truth[i]]
    start = drawn.index(picked[0])
    done = _report(run, _labels(tmp_path / "l.jsonl", [_line(run, i) for i in picked]))
    if start > 0:
        assert done.exit_code == 2
        assert f"the first drawn answer of run, {drawn[0]!r}, has no label" in done.stderr
    prefix = [_line(run, i) for i in drawn[:6]]
    later = [_line(run, i) for i in drawn[8:12]]
    done = _report(run, _labels(tmp_path / "gap.jsonl", prefix + later))
    assert done.exit_code == 0, done.output
    reviewed = _reviewed(run)
    assert reviewed["labels"] == 6 and reviewed["labels_past_gap"] == 4
    assert f"past drawn answer {drawn[6]!r}, which has none, count in no rate" in done.stderr


def test_after_a_re_check_old_claim_marks_and_the_old_sample_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=20)
    drawn = _drawn(run, 5)
    lines = [_line(run, i, claims=[{"index": 0, "judge_right": True}]) for i in drawn]
    lines = [line | {"hallucinated": line["hallucinated"]} for line in lines]
    labels = _labels(tmp_path / "l.jsonl", lines)
    old = check_fingerprint(json.loads((run / "check.json").read_text()))
    (run / "checks.jsonl").unlink()
    again = CliRunner().invoke(cli, ["check", str(run), "-q"])
    assert again.exit_code == 0, again.output
    new = check_fingerprint(json.loads((run / "check.json").read_text()))
    assert new != old, "a check begun anew has a fingerprint of its own"
    done = _report(run, labels)
    assert done.exit_code == 2
    assert "checked again" in done.stderr and str(old) in done.stderr


def test_another_runs_review_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=40, name="run")
    other = _checked(tmp_path, monkeypatch, count=8, name="other")
    _drawn(run, 25)
    shutil.copy(run / "review.json", other / "review.json")
    lines = [_line(other, "a0", pipeline="other")]
    done = _report(other, _labels(tmp_path / "l.jsonl", lines))
    assert done.exit_code == 2
    assert "review.json: drawn on another run" in done.stderr


def test_a_grown_run_keeps_every_drawn_answer_in_order_and_stale_samples_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 answers checked, 5 drawn; the run grows to 30: its labels make no rate until the
    sample is drawn again, which keeps the 5 in their order (new answers placed among them)."""
    _checked(tmp_path, monkeypatch, count=1)  # the fakes
    answers = tmp_path / "answers.jsonl"
    rows = _labelled(30, wrong_every=3)
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = tmp_path / "run"
    first = ["check", "--answers", str(answers), "--out", str(run), "-q"]
    assert CliRunner().invoke(cli, [*first, "--limit", "8"]).exit_code == 0
    before = _drawn(run, 5)
    grow = CliRunner().invoke(cli, ["check", str(run), "-q"])
    assert grow.exit_code == 0, grow.output
    done = _report(run, _labels(tmp_path / "l.jsonl", [_line(run, i) for i in before]))
    assert done.exit_code == 2
    assert "drawn from 8 answers, the run has 30 checked now" in done.stderr
    after = _drawn(run, 5)
    assert [i for i in after if i in before] == before and len(after) >= 5
    redraw = _drawn(run, len(after))
    assert redraw == after, "the same seed draws the same"


def test_a_lost_check_row_is_refused_not_a_smaller_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    drawn = _drawn(run, 12)
    rows = (run / "checks.jsonl").read_text().splitlines()
    (run / "checks.jsonl").write_text("\n".join(rows[:-1]) + "\n" + rows[-1][:20])  # torn
    done = _report(run, _labels(tmp_path / "l.jsonl", [_line(run, i) for i in drawn[:3]]))
    assert done.exit_code == 2
    assert "is no longer among" in done.stderr
    refused = CliRunner().invoke(cli, ["review", str(run), "--sample", "12"])
    assert refused.exit_code == 2 and "is no longer among" in refused.stderr


def test_checking_a_checked_run_with_examples_refuses_then_re_checks_into_a_new_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check RUN --examples` on a checked run never prints its old verdicts as new: refused
    before anything is written, naming both judges and --out; with --out a new run dir shares
    the records and is checked with the examples."""
    run = _checked(tmp_path, monkeypatch, count=8)
    examples = tmp_path / "examples.jsonl"
    examples.write_text(
        "".join(json.dumps(r | {"id": "x" + r["id"]}) + "\n" for r in _labelled(8)),
        encoding="utf-8",
    )
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    refused = CliRunner().invoke(cli, ["check", str(run), "--examples", str(examples), "-q"])
    assert refused.exit_code == 2, refused.output
    assert "re-check into a new run dir that shares its records: add --out NEW_DIR" in (
        refused.stderr
    )
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    fork = tmp_path / "with-examples"
    done = CliRunner().invoke(
        cli, ["check", str(run), "--examples", str(examples), "--out", str(fork), "-q"]
    )
    assert done.exit_code == 0, done.output
    assert (fork / "records.jsonl").read_bytes() == (run / "records.jsonl").read_bytes()
    assert len((fork / "checks.jsonl").read_text().splitlines()) == 8
    assert json.loads((fork / "check.json").read_text())["judge"]["examples"]["sha256"]
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("labelled_at", "yesterday", "\"labelled_at\" 'yesterday' is not a time"),
        ("labelled_at", "2099-01-01T00:00:00Z", "is in the future on this machine"),
        ("labelled_at", "2026-12-06T10:00:00", "has no time zone"),
        ("reviewer", "Ana\u202eoB", "invisible or control character (U+202E)"),
        ("reviewer", "Ana\u3164", "invisible or control character (U+3164)"),
        ("reviewer", "Ana\ufe0f", "invisible or control character (U+FE0F)"),
        ("reviewer", "An\u034fa", "invisible or control character (U+034F)"),
        ("role", "boss", '"role" must be one of first, second, adjudicator'),
    ],
    ids=["words", "future", "no-zone", "rtl-override", "hangul-filler", "vs16", "cgj", "role"],
)
def test_label_fields_that_would_mislead_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: str, message: str
) -> None:
    run = _checked(tmp_path, monkeypatch, count=8)
    drawn = _drawn(run, 3)
    done = _report(run, _labels(tmp_path / "l.jsonl", [_line(run, drawn[0], **{field: value})]))
    assert done.exit_code == 2 and message in done.stderr and done.stderr.count("\n") == 1


def test_reviewers_times_compare_as_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another zone and fractions of a second: the first and last label by time, not text."""
    run = _checked(tmp_path, monkeypatch, count=8)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["started_at"] = "2026-12-06T08:00:00+00:00"  # the labels below come after it
    (run / "manifest.json").write_text(json.dumps(manifest))
    drawn = _drawn(run, 3)
    times = ["2026-12-06T10:00:00.500Z", "2026-12-06T11:30:00+02:00", "2026-12-06T10:00:00Z"]
    lines = [_line(run, i, labelled_at=t) for i, t in zip(drawn, times, strict=True)]
    done = _report(run, _labels(tmp_path / "l.jsonl", lines))
    assert done.exit_code == 0, done.output
    (ana,) = _reviewed(run)["reviewers"]
    assert ana["first"] == "2026-12-06T09:30:00Z" and ana["last"] == "2026-12-06T10:00:00.500000Z"


def test_a_utf16_labels_file_gets_the_utf16_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=8)
    drawn = _drawn(run, 3)
    path = tmp_path / "l.jsonl"
    path.write_bytes((json.dumps(_line(run, drawn[0])) + "\n").encode("utf-16"))
    done = _report(run, path)
    assert done.exit_code == 2 and "iconv -f utf-16 -t utf-8" in done.stderr


# issue 48: no label, no reviewed figure; an adjudicator settles disagreements, nothing else;
# a label cannot predate the run


def test_labels_none_of_which_counts_make_no_reviewed_figure_and_fail_its_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every label outside the drawn sample, kept for the judge's agreement: not reviewed
    (not 0.0 % over n=0), the gate fails "not measured", and the bundle signs it failed."""
    from auditor.evidence.build import plan_bundle
    from auditor.gates import parse_gate
    from auditor.review import read_review_labels

    run = _checked(tmp_path, monkeypatch, count=30)
    drawn = _drawn(run, 12)
    outside = sorted({f"a{k}" for k in range(30)} - set(drawn))[:3]
    labels = _labels(tmp_path / "l.jsonl", [_line(run, i) for i in outside])
    gate = "reviewed_hallucination_rate<=0.5"
    keep = ("--labels-outside-sample", "keep")
    done = _report(run, labels, *keep, "--gate", gate, "--out", str(tmp_path / "r.html"))
    assert done.exit_code == 1, done.output
    assert f"FAIL {gate} on run (value not measured)" in done.output
    assert "Error: gate failed: reviewed_hallucination_rate<=0.5 on run" in done.stderr
    summary = json.loads((run / "summary.json").read_text())
    reviewed = summary["reviewed"]
    assert reviewed["labels"] == 0 and reviewed["labels_outside_sample"] == 3
    assert reviewed["answer_rate"] is None and reviewed["goodput_tps"] is None
    assert "no label counts in a rate (3 outside the drawn sample)" in reviewed["rate_withheld"]
    assert reviewed["judge_specificity"] is not None  # the kept labels: the judge's agreement
    assert summary["metrics"]["reviewed_hallucination_rate"]["value"] is None
    assert summary["metrics"]["goodput_tps_reviewed"]["value"] is None
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "not reviewed: no label counts in a rate (3 outside the drawn sample)" in html
    assert "0.0 %" not in html.split('id="reviewed-note"')[-1].split("</p>")[0]
    plan = plan_bundle(
        [run],
        labels=read_review_labels(labels),
        labels_path=labels,
        labels_outside="keep",
        gates=[parse_gate(gate)],
    )
    assert plan.predicate["gates"] == [
        {"gate": gate, "pipeline": "run", "value": None, "passed": False}
    ]
    figures = plan.predicate["runs"][0]["figures"]
    assert figures["metrics"]["reviewed_hallucination_rate"]["value"] is None
    assert figures["reviewed_labels"] == 0


def test_an_adjudicator_settles_only_where_the_two_reviews_disagree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: adjudicator lines on answers nobody disagreed on (they would turn the
    first review's rate into the adjudicator's) are refused naming the line, and so are those
    without a second review, or without a first."""
    run = _checked(tmp_path, monkeypatch, count=20)
    drawn = _drawn(run, 8, "--second-review", "0.5")
    review = json.loads((run / "review.json").read_text())
    second = [i for i in drawn if i in set(review["second_review"]["ids"])]
    alone = next(i for i in drawn if i not in set(second))
    first = [_line(run, i) for i in drawn]
    agreeing = [_line(run, i, role="second", reviewer="Bo") for i in second]
    # the adjudicator "settles" every double-reviewed answer, though the two agree on each
    settling = [
        _line(run, i, role="adjudicator", reviewer="Cy", hallucinated=False) for i in second
    ]
    done = _report(run, _labels(tmp_path / "a.jsonl", first + agreeing + settling))
    assert done.exit_code == 2
    at = len(first) + len(agreeing) + 1
    assert (
        f"a.jsonl:{at}: an adjudicator's label of 'run/{second[0]}', on which the first "
        f"(line {drawn.index(second[0]) + 1}) and second (line {len(first) + 1}) reviews agree; "
        "an adjudicator settles only a disagreement: drop the line"
    ) in done.stderr, done.stderr
    # on an answer without a second review
    done = _report(
        run,
        _labels(
            tmp_path / "b.jsonl",
            [*first, _line(run, alone, role="adjudicator", reviewer="Cy", hallucinated=False)],
        ),
    )
    assert done.exit_code == 2
    assert (
        f"b.jsonl:{len(first) + 1}: an adjudicator's label of 'run/{alone}' without a second "
        "review" in done.stderr
    )
    # on an answer without a first review in the file
    done = _report(
        run,
        _labels(
            tmp_path / "c.jsonl",
            [*first[1:], _line(run, drawn[0], role="adjudicator", reviewer="Cy")],
        ),
    )
    assert done.exit_code == 2
    assert (
        f"c.jsonl:{len(first)}: an adjudicator's label of 'run/{drawn[0]}' without a first"
        in done.stderr
    )


def test_nobody_adjudicates_their_own_disagreement_and_names_compare_as_people(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ana, ANA and ana (and Ana in full-width letters) are one person: she cannot review the
    answer a second time, nor settle a disagreement she is part of."""
    run = _checked(tmp_path, monkeypatch, count=20)
    drawn = _drawn(run, 8, "--second-review", "0.5")
    review = json.loads((run / "review.json").read_text())
    second = [i for i in drawn if i in set(review["second_review"]["ids"])]
    apart = second[0]
    first = [_line(run, i) for i in drawn]  # by "Ana"
    differing = _line(run, apart, role="second", reviewer="Bo", hallucinated=not _truth()[apart])
    again = _line(run, apart, role="second", reviewer="ana")
    done = _report(run, _labels(tmp_path / "a.jsonl", [*first, again]))
    assert done.exit_code == 2
    assert (
        f"a.jsonl:{len(first) + 1}: the second review of 'run/{apart}' is by 'ana', who made the "
        f"first (line {drawn.index(apart) + 1}, as 'Ana')" in done.stderr
    )
    for name in ("ANA", "\uff21\uff4e\uff41", "bo"):
        own = _line(run, apart, role="adjudicator", reviewer=name)
        done = _report(run, _labels(tmp_path / "b.jsonl", [*first, differing, own]))
        assert done.exit_code == 2, name
        assert (
            f"b.jsonl:{len(first) + 2}: 'run/{apart}' is adjudicated by {name!r}, who made the "
            in done.stderr
        )
        assert "nobody adjudicates their own disagreement" in done.stderr
    settled = _line(run, apart, role="adjudicator", reviewer="Cy")
    done = _report(run, _labels(tmp_path / "c.jsonl", [*first, differing, settled]))
    assert done.exit_code == 0, done.output


def test_a_label_made_before_the_run_began_is_refused_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _checked(tmp_path, monkeypatch, count=12)
    drawn = _drawn(run, 4)
    began = json.loads((run / "manifest.json").read_text())["started_at"]
    lines = [_line(run, i) for i in drawn]
    lines[2]["labelled_at"] = "2026-01-05T09:00:00Z"
    done = _report(run, _labels(tmp_path / "l.jsonl", lines))
    assert done.exit_code == 2
    assert (
        f'l.jsonl:3: "labelled_at" 2026-01-05T09:00:00Z is before {run} began '
        f"({began.replace('+00:00', 'Z')}): a label cannot predate the answers it labels"
    ) in done.stderr
    # a label from a spreadsheet (no fingerprint) of imported answers may predate the import
    sheet = [{k: v for k, v in line.items() if k != "fingerprint"} for line in lines]
    done = _report(run, _labels(tmp_path / "s.jsonl", sheet))
    assert done.exit_code == 0, done.output
