"""Labelled answers as examples through a real engine: `check --examples` both ways, on real
RAGTruth answers with their questions' labelled siblings (the light judge: this tests the
path, the prompts and the records, not the verdicts' quality; bench/examples*.py measure that)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.store import read_jsonl

pytestmark = pytest.mark.e2e


def _answers_and_siblings(ragtruth: Path, tmp_path: Path) -> tuple[Path, Path, str]:
    """Two dev answers to the first question that has siblings, and those siblings."""
    dev = [json.loads(line) for line in (ragtruth / "dev.jsonl").read_text().splitlines()]
    siblings = [json.loads(line) for line in (ragtruth / "siblings.jsonl").read_text().splitlines()]
    by_source: dict[str, list[dict]] = {}
    for row in siblings:
        by_source.setdefault(str(row["source_id"]), []).append(row)
    source = next(str(r["source_id"]) for r in dev if str(r["source_id"]) in by_source)
    chosen = [r for r in dev if str(r["source_id"]) == source][:2]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps({k: r[k] for k in ("id", "question", "contexts", "answer", "source_id")})
            + "\n"
            for r in chosen
        ),
        encoding="utf-8",
    )
    examples = tmp_path / "examples.jsonl"
    examples.write_text("".join(json.dumps(r) + "\n" for r in by_source[source]), encoding="utf-8")
    return answers, examples, source


@pytest.mark.timeout(900)
def test_examples_in_the_prompt_and_as_memory_through_a_real_engine(
    ragtruth: Path, light_judge: Path, tmp_path: Path
) -> None:
    answers, examples, _ = _answers_and_siblings(ragtruth, tmp_path)
    sibling_ids = {json.loads(line)["id"] for line in examples.read_text().splitlines()}
    runner = CliRunner()
    rows = {}
    for way in ("prompt", "memory"):
        out = tmp_path / way
        result = runner.invoke(
            cli,
            [
                *("check", "--answers", str(answers), "--out", str(out)),
                *("--judge", str(light_judge), "--examples", str(examples)),
                *("--set", f'examples_in="{way}"', "-q"),
            ],
        )
        assert result.exit_code == 0, result.output
        rows[way] = read_jsonl(out / "checks.jsonl")
        manifest = json.loads((out / "check.json").read_text())
        assert manifest["judge"]["examples"]["answers_matched"] == 2
        for row in rows[way]:
            assert row["outcome"] == "checked" and row["claims"]
            assert set(row["examples"]) == sibling_ids  # every sibling, never the answer itself
    for row in rows["prompt"]:
        # what the verdict prompts showed, each line from a sibling, within the budget
        assert row["reviewed"] and {r["example"] for r in row["reviewed"]} <= sibling_ids
        assert sum(len(r["sentence"]) for r in row["reviewed"]) <= 1200
        assert all(c.get("memory") is None for c in row["claims"])
    assert all("reviewed" not in row for row in rows["memory"])

    # the report lists, per answer, what the judge was shown
    html_path = tmp_path / "report.html"
    reported = runner.invoke(cli, ["report", str(tmp_path / "prompt"), "--out", str(html_path)])
    assert reported.exit_code == 0, reported.output
    html = html_path.read_text()
    assert "What people said of other answers to this question, as the judge was shown it" in html
