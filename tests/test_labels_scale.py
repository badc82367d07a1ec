"""Reading labels grows linearly with the file (issue 48: 20 MB took 40 s, each copy of a
label settled by building its lines tuple anew). Counted, not timed: the elements of every
`lines` tuple the readers build, 1x against 4x the same labels; `bench/labels_scale.py` gives
the seconds per MB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import auditor.labels
import auditor.review
from auditor.cli import cli
from auditor.labels import ReviewLabel, settle
from tests.test_review import _checked


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each `lines` tuple a label is made with (dataclasses.replace in the label
    readers), as they are built."""
    built: list[int] = []
    for module in (auditor.labels, auditor.review):
        real = module.replace

        def counting(label: Any, /, real: Any = real, **changes: Any) -> Any:
            built.append(len(changes.get("lines", ())))
            return real(label, **changes)

        monkeypatch.setattr(module, "replace", counting)
    return built


def test_settling_copies_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _counting(monkeypatch)

    def elements(copies: int) -> int:
        built.clear()
        labels = [ReviewLabel("a1", False, where=f"l.jsonl:{k}") for k in range(1, copies + 1)]
        (settled,) = settle(labels)
        assert len(settled.lines) == copies
        return sum(built)

    small, large = elements(500), elements(2000)
    assert large <= 4 * small + 10, (small, large)  # a tuple grown per copy: 16x


def test_report_reads_four_times_the_labels_with_four_times_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report --labels`: reading, settling and assigning copies of the labels of a reviewed
    run (the downloads of several reviewers concatenated)."""
    run = _checked(tmp_path, monkeypatch, count=6)
    assert CliRunner().invoke(cli, ["review", str(run), "--sample", "6"]).exit_code == 0
    drawn = [e["id"] for e in json.loads((run / "review.json").read_text())["sample"]]
    hallucinated = {
        row["id"]: row["hallucinated"]
        for row in map(json.loads, (tmp_path / "answers.jsonl").read_text().splitlines())
    }
    lines = [json.dumps({"id": i, "hallucinated": hallucinated[i]}) + "\n" for i in drawn]
    built = _counting(monkeypatch)

    def elements(copies: int) -> int:
        labels = tmp_path / f"labels-{copies}.jsonl"
        labels.write_text("".join(lines * copies))
        built.clear()
        args = ["report", str(run), "--labels", str(labels), "--out", str(tmp_path / "r.html")]
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 0, done.output
        return sum(built)

    small, large = elements(100), elements(400)
    assert small >= 600 and large <= 4 * small + 100, (small, large)
