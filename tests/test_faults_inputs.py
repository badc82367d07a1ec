"""Fault suite, bad inputs: every case is one line on stderr naming the file (and line where
there is one) with the fix, the right exit code, and no traceback. The README's fault table
lists the same cases. Fake embedder and judge: no engine needed; run alone with -m faults.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.testing import FakeEmbedder, FakeJudge

pytestmark = pytest.mark.faults

GOOD_DOC = "Unopened thermostats can be returned within 30 days of delivery."
QUESTION = {"id": "q1", "question": "How long can I return a thermostat?"}
ANSWER = {"id": "a1", "question": "q?", "contexts": [GOOD_DOC], "answer": "30 days."}


class Case:
    """One bad input: how to make it, the command, the exit code and what the line names."""

    def __init__(self, name: str, make: Callable[[Path], list[str]], code: int, names: str) -> None:
        self.name, self.make, self.code, self.names = name, make, code, names


def _write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _corpus(tmp: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        _write(tmp / "corpus" / rel, content)
    return tmp / "corpus"


def _index(tmp: Path) -> Path:
    """A good index (fake embedder) for commands that need one."""
    target = tmp / "index"
    if not target.exists():
        result = CliRunner().invoke(
            cli, ["ingest", str(_corpus(tmp, {"a.md": GOOD_DOC})), "--index", str(target), "-q"]
        )
        assert result.exit_code == 0, result.output
    return target


def _ingest(files: dict[str, str | bytes], *extra: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["ingest", str(_corpus(tmp, files)), "--index", str(tmp / "i"), *extra]


def _pipeline(text: str | bytes) -> Callable[[Path], list[str]]:
    return lambda tmp: ["config", "show", str(_write(tmp / "p.toml", text))]


def _judge(text: str | bytes) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        answers = _write(tmp / "answers.jsonl", json.dumps(ANSWER) + "\n")
        judge = _write(tmp / "judge.toml", text)
        return ["check", "--judge", str(judge), "--answers", str(answers), "--out", str(tmp / "o")]

    return make


def _questions(text: str | bytes) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        questions = _write(tmp / "q.jsonl", text)
        return [
            "run", "--pipeline", "smollm2-135m-cpu", "--questions", str(questions),
            "--index", str(_index(tmp)), "--out", str(tmp / "run"),
        ]  # fmt: skip

    return make


def _answers(text: str | bytes) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        answers = _write(tmp / "answers.jsonl", text)
        return ["check", "--answers", str(answers), "--out", str(tmp / "o")]

    return make


def _run_dir(files: dict[str, str | bytes], command: str = "check") -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        for rel, content in files.items():
            _write(tmp / "run" / rel, content)
        return [command, str(tmp / "run")]

    return make


def _good_run(tmp: Path) -> Path:
    """A checked run dir from --answers (fake judge), to damage."""
    answers = _write(tmp / "answers.jsonl", json.dumps(ANSWER) + "\n")
    result = CliRunner().invoke(
        cli, ["check", "--answers", str(answers), "--out", str(tmp / "good"), "-q"]
    )
    assert result.exit_code == 0, result.output
    return tmp / "good"


def _damaged_run(
    damage: Callable[[Path], None], command: list[str] | None = None
) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        run = _good_run(tmp)
        damage(run)
        return [*(command or ["report"]), str(run)]

    return make


def _history(content: bytes) -> Callable[[Path], list[str]]:
    return lambda tmp: ["history", "--history", str(_write(tmp / "h.sqlite", content))]


def _wrong_table_history(tmp: Path) -> list[str]:
    path = tmp / "h.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE audits (x TEXT)")
    return ["history", "--history", str(path)]


def _damaged_index(damage: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        index = _index(tmp)
        damage(index)
        return ["search", "warranty", "--index", str(index)]

    return make


def _remove_vectors(index: Path) -> None:
    (vectors,) = index.glob("gen-*/default__vector_store.json")
    vectors.unlink()


def _run_with_index(index: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        questions = _write(tmp / "q.jsonl", json.dumps(QUESTION) + "\n")
        return [
            "run", "--pipeline", "smollm2-135m-cpu", "--questions", str(questions),
            "--index", str(index(tmp)), "--out", str(tmp / "run"),
            "--set", 'ingest.embedder.model="fake-words"',
        ]  # fmt: skip

    return make


def _gate(expression: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["report", str(_good_run(tmp)), "--gate", expression]


CASES = [
    # documents (ingest)
    Case("missing corpus folder", lambda tmp: ["ingest", str(tmp / "nope"), "--index", str(tmp / "i")], 2, "nope"),
    Case("no supported documents", _ingest({"a.png": b"\x89PNG"}), 2, "no supported documents"),
    Case("every document rejected", _ingest({"a.txt": b"\x00\x01"}), 2, "every document was rejected"),
    Case("not UTF-8 (--strict)", _ingest({"a.txt": b"ok\n\xff\n"}, "--strict"), 2, "a.txt:2"),
    Case("NUL byte in text (--strict)", _ingest({"a.txt": b"ok\nx\x00y"}, "--strict"), 2, "a.txt:2"),
    Case("empty file (--strict)", _ingest({"a.md": ""}, "--strict"), 2, "a.md: empty file"),
    Case("broken PDF (--strict)", _ingest({"a.pdf": b"%PDF-1.4 garbage"}, "--strict"), 2, "a.pdf"),
    Case("HTML with no text (--strict)", _ingest({"a.html": "<script>x()</script>"}, "--strict"), 2, "a.html"),
    Case("oversized file (--strict)", _ingest({"a.txt": "x " * 600_000}, "--strict", "--set", "ingest.max_file_mb=1"), 2, "a.txt: oversized"),
    Case("chunk overlap >= size", _ingest({"a.md": GOOD_DOC}, "--chunk-size", "32", "--chunk-overlap", "40"), 2, "chunk_overlap=40"),
    # pipeline files
    Case("pipeline: invalid TOML", _pipeline("name = \n"), 2, "p.toml: invalid TOML"),
    Case("pipeline: not UTF-8", _pipeline('name = "x"\n# caf\xe9\n'.encode("latin-1")), 2, "p.toml:2: not UTF-8"),
    Case("pipeline: unknown key", _pipeline("[retrieval]\ntop_kk = 3\n"), 2, "retrieval.top_kk: unknown key"),
    Case("pipeline: wrong type", _pipeline('[retrieval]\ntop_k = "many"\n'), 2, "retrieval.top_k"),
    Case("pipeline: unknown generator kind", _pipeline('[generator]\nkind = "tgi"\n'), 2, "generator"),
    Case("http target: mapping not JMESPath", _pipeline('[generator]\nkind = "http"\nendpoints = ["http://127.0.0.1:9/ask"]\nanswer = "data.[answer"\n'), 2, "generator.http: answer: not a JMESPath expression"),
    Case("http target: streamed without a token path", _pipeline('[generator]\nkind = "http"\nendpoints = ["http://127.0.0.1:9/ask"]\nanswer = "a"\nstream = "sse"\n'), 2, "stream = 'sse' needs stream_token"),
    Case("pipeline: no such name", lambda tmp: ["config", "show", "no-such-pipeline"], 2, "no-such-pipeline: no such pipeline file"),
    Case("--set without =", lambda tmp: ["config", "show", "smollm2-135m-cpu", "--set", "retrieval.top_k"], 2, "expected KEY=VALUE"),
    # judge files
    Case("judge: invalid TOML", _judge("metrics = [\n"), 2, "judge.toml: invalid TOML"),
    Case("judge: not UTF-8", _judge('name = "j"\n# \xff\n'.encode("latin-1")), 2, "judge.toml:2: not UTF-8"),
    Case("judge: unknown metric", _judge('metrics = ["vibes"]\n'), 2, "metrics"),
    Case("judge: threshold above 1", _judge("support_threshold = 1.5\n"), 2, "support_threshold"),
    # question sets (run)
    Case("questions: not JSON", _questions("{nope\n"), 2, "q.jsonl:1: not valid JSON"),
    Case("questions: not an object", _questions("[1, 2]\n"), 2, "q.jsonl:1"),
    Case("questions: missing id", _questions('{"question": "q?"}\n'), 2, "q.jsonl:1"),
    Case("questions: duplicate id", _questions(json.dumps(QUESTION) + "\n" + json.dumps(QUESTION) + "\n"), 2, "q.jsonl:2"),
    Case("questions: empty question", _questions('{"id": "x", "question": "  "}\n'), 2, "q.jsonl:1"),
    Case("questions: not UTF-8", _questions(b'{"id": "x", "question": "caf\xe9"}\n'), 2, "q.jsonl:1: not UTF-8"),
    Case("questions: no such file", lambda tmp: ["run", "--pipeline", "smollm2-135m-cpu", "--questions", str(tmp / "none.jsonl"), "--index", str(_index(tmp)), "--out", str(tmp / "r")], 2, "none.jsonl"),
    # answers from elsewhere (check --answers)
    Case("answers: contexts not a list", _answers('{"id": "1", "question": "q", "contexts": "c", "answer": "a"}\n'), 2, "answers.jsonl:1"),
    Case("answers: missing answer", _answers('{"id": "1", "question": "q", "contexts": ["c"]}\n'), 2, "answers.jsonl:1"),
    Case("answers: not JSON", _answers('{"id": "1",\n'), 2, "answers.jsonl:1: not valid JSON"),
    Case("answers: line 3 bad", _answers(json.dumps(ANSWER) + "\n\n" + "nope\n"), 2, "answers.jsonl:3"),
    Case("answers without --out", lambda tmp: ["check", "--answers", str(_write(tmp / "a.jsonl", json.dumps(ANSWER)))], 2, "--out"),
    # run dirs
    Case("run dir without records", _run_dir({"note.txt": "x"}), 2, "records.jsonl: missing"),
    Case("corrupt run manifest", _run_dir({"manifest.json": "{broken", "records.jsonl": ""}), 2, "manifest.json"),
    Case("run manifest of another schema", _run_dir({"manifest.json": '{"schema_version": 99}', "records.jsonl": ""}), 2, "manifest.json"),
    Case("records: corrupt middle line", _damaged_run(lambda run: (run / "records.jsonl").write_text("{bad\n" + (run / "records.jsonl").read_text())), 2, "records.jsonl:1"),
    Case("checks: NaN edited in", _damaged_run(lambda run: (run / "checks.jsonl").write_text((run / "checks.jsonl").read_text().replace('"faithfulness": 1.0', '"faithfulness": NaN').replace('"faithfulness": 0.0', '"faithfulness": NaN'))), 2, "checks.jsonl:1: NaN is not a number"),
    Case("--out is a folder of other files", lambda tmp: [*_run_with_index(_index)(tmp), "--out", str(_corpus(tmp, {"x.md": "x"}))], 2, "not empty and not a run dir"),
    # indexes
    Case("search: no such index", lambda tmp: ["search", "q", "--index", str(tmp / "none")], 2, "none"),
    Case("index manifest corrupt", _damaged_index(lambda index: (index / "manifest.json").write_text("{")), 2, "manifest.json"),
    Case("index vectors missing", _damaged_index(_remove_vectors), 2, "index"),
    Case("run: index is not an index", _run_with_index(lambda tmp: _corpus(tmp, {"x.md": "x"})), 2, "corpus"),
    # history databases and gates
    Case("history: not a database", _history(b"this is not sqlite at all" * 40), 2, "h.sqlite"),
    Case("history: another schema", _wrong_table_history, 2, "h.sqlite"),
    Case("gate: no operator", _gate("faithfulness"), 2, "faithfulness"),
    Case("gate: unknown metric", _gate("vibes>=0.5"), 2, "vibes"),
    Case("report: no such run dir", lambda tmp: ["report", str(tmp / "none")], 2, "none"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_one_line_with_exit_code_and_no_traceback(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setenv("AUDITOR_HISTORY", str(tmp_path / "history.sqlite"))
    args = case.make(tmp_path)
    result = CliRunner().invoke(cli, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == case.code, (args, result.output)
    assert len(errors) == 1 and case.names in errors[0], lines


def test_the_suite_has_at_least_forty_cases() -> None:
    assert len(CASES) >= 40
