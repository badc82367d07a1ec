"""The CLI: output, --json shapes, one-line errors and exit codes (fake embedder, real FAISS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.testing import FakeEmbedder, FakeJudge
from tests.conftest import WriteCorpus
from tests.test_faults_inputs import _good_run

DOCS = {
    "returns.md": "# Returns\n\nUnopened thermostats can be returned within 30 days of delivery.",
    "warranty.txt": "The T9 thermostat warranty lasts two years from the delivery date.",
    "notes.png": b"\x89PNG",
}


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def index(write_corpus: WriteCorpus, tmp_path: Path, use_fake_embedder: FakeEmbedder) -> Path:
    target = tmp_path / "index"
    code, _, _ = _invoke("ingest", str(write_corpus(DOCS)), "--index", str(target), "-q")
    assert code == 0
    return target


def test_ingest_prints_what_it_indexed(
    write_corpus: WriteCorpus, tmp_path: Path, use_fake_embedder: FakeEmbedder
) -> None:
    """The summary lists each document with format, chunks and status, and the totals."""
    corpus = write_corpus(DOCS)
    code, out, _ = _invoke("ingest", str(corpus), "--index", str(tmp_path / "i"), "-q")
    assert code == 0
    assert "returns.md" in out and "warranty.txt" in out
    assert "Indexed 2 documents (1 md, 1 txt) into 2 chunks" in out
    assert "2 added, 0 changed, 0 unchanged, 0 deleted" in out
    assert "1 files of unsupported types ignored (e.g. notes.png)" in out
    code, out, _ = _invoke("ingest", str(corpus), "--index", str(tmp_path / "i"), "--json")
    report = json.loads(out)
    assert code == 0 and report["unchanged"] == ["returns.md", "warranty.txt"]
    assert report["chunks_embedded"] == 0 and report["chunks"] == 2


def test_ingest_flags_override_pipeline_file(
    write_corpus: WriteCorpus, tmp_path: Path, use_fake_embedder: FakeEmbedder
) -> None:
    """--index-type and --chunk-size beat the pipeline file and --set."""
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[ingest.index]\nkind = "ivf"\nnprobe = 2\n[ingest.chunking]\nchunk_size = 100\n'
    )
    code, out, _ = _invoke(
        "ingest",
        str(write_corpus(DOCS)),
        "--index",
        str(tmp_path / "i"),
        "--pipeline",
        str(pipeline),
        "--set",
        "ingest.chunking.chunk_size=90",
        "--chunk-size",
        "80",
        "--index-type",
        "hnsw",
        "--json",
    )
    manifest = json.loads((tmp_path / "i" / "manifest.json").read_text())
    assert code == 0, out
    assert manifest["index"]["kind"] == "hnsw" and manifest["chunking"]["chunk_size"] == 80


def test_bad_file_is_warned_on_stderr_and_strict_exits_2(
    write_corpus: WriteCorpus, tmp_path: Path, use_fake_embedder: FakeEmbedder
) -> None:
    """A bad file is a warning line on stderr; with --strict it is an error with exit code 2."""
    corpus = write_corpus(DOCS | {"bad.txt": b"ok\n\xff\n"})
    code, out, err = _invoke("ingest", str(corpus), "--index", str(tmp_path / "a"), "-q")
    assert code == 0
    assert "warning: skipped bad.txt:2: not UTF-8 (byte 0xff); convert it, e.g. iconv" in err
    assert "1 documents skipped" in out
    code, out, err = _invoke("ingest", str(corpus), "--index", str(tmp_path / "b"), "--strict")
    assert code == 2 and out == ""
    assert err.strip().startswith("Error: bad.txt:2: not UTF-8") and err.count("\n") == 1
    assert not (tmp_path / "b").exists()


def test_a_link_out_of_the_corpus_is_warned_and_never_indexed(
    write_corpus: WriteCorpus, tmp_path: Path, use_fake_embedder: FakeEmbedder
) -> None:
    """`passwd.txt -> a file elsewhere`: one warning naming it, and its text is not indexed."""
    corpus = write_corpus(DOCS)
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:hunter2")
    (corpus / "passwd.txt").symlink_to(secret)
    code, out, err = _invoke("ingest", str(corpus), "--index", str(tmp_path / "i"), "-q")
    assert code == 0, err
    assert "warning: skipped passwd.txt: symbolic link to " in err
    assert "1 links or special files skipped" in out
    index_text = b"".join(f.read_bytes() for f in (tmp_path / "i").rglob("*") if f.is_file())
    assert b"hunter2" not in index_text
    assert b"warranty" in index_text.lower()  # the real documents are there


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest", "{tmp}/missing", "--index", "{tmp}/i"], "missing: no such folder"),
        (
            ["ingest", "{tmp}", "--index", "{tmp}/i", "--set", "ingest.chunking.chunk_sise=3"],
            "ingest.chunking.chunk_sise: unknown key",
        ),
        (
            ["ingest", "{tmp}", "--index", "{tmp}/i", "--pipeline", "nosuch"],
            "nosuch: no such pipeline file",
        ),
        (
            ["search", "--index", "{tmp}/nowhere", "query"],
            "nowhere: no such index dir; create it with `auditor ingest",
        ),
        (["search", "--index", "{tmp}", "query"], "manifest.json: missing"),
        (["config", "show", "{tmp}/p.toml"], "p.toml: ingest.index: unknown kind; valid kinds"),
    ],
    ids=[
        "missing-corpus",
        "unknown-key",
        "unknown-pipeline",
        "missing-index",
        "not-an-index",
        "bad-kind",
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(
    tmp_path: Path, use_fake_embedder: FakeEmbedder, args: list[str], message: str
) -> None:
    """Bad input: `Error: <file>: <problem and fix>` on one line of stderr, exit code 2."""
    (tmp_path / "p.toml").write_text('[ingest.index]\nkind = "lsh"\n')
    code, out, err = _invoke(*(a.format(tmp=tmp_path) for a in args))
    assert code == 2, err
    assert out == ""
    assert err.startswith("Error: ") and message in err and err.count("\n") == 1


def test_search_prints_hits_and_json(index: Path, use_fake_embedder: FakeEmbedder) -> None:
    """search prints ranked hits; --json gives document, score, text and chunk_id for each."""
    code, out, _ = _invoke("search", "--index", str(index), "warranty", "two", "years", "-k", "1")
    assert code == 0
    assert out.startswith("[1] ") and "warranty.txt  (warranty.txt#0)" in out
    code, out, _ = _invoke("search", "--index", str(index), "returned within 30 days", "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 2
    assert {"document", "score", "text", "chunk_id", "rank", "page"} <= set(rows[0])
    assert rows[0]["document"] == "returns.md" and rows[0]["chunk_id"] == "returns.md#0"
    assert rows[0]["score"] >= rows[1]["score"]


def test_config_show_prints_resolved_toml_and_json(tmp_path: Path) -> None:
    """config show fills in defaults, applies --set and prints a hash of the result."""
    import tomllib

    (tmp_path / "p.toml").write_text('name = "mine"\n[retrieval]\ntop_k = 6\n')
    code, out, _ = _invoke(
        "config", "show", str(tmp_path / "p.toml"), "--set", "ingest.chunking.chunk_size=120"
    )
    assert code == 0
    data = tomllib.loads(out)
    assert data["name"] == "mine" and data["retrieval"]["top_k"] == 6
    assert data["ingest"]["chunking"] == {"chunk_size": 120, "chunk_overlap": 32}
    assert data["ingest"]["embedder"]["model"] == "all-MiniLM-L6-v2"
    code, out, _ = _invoke("config", "show", str(tmp_path / "p.toml"), "--json")
    assert code == 0 and len(json.loads(out)["sha256"]) == 64


def test_help_lists_commands() -> None:
    """The group help names every command."""
    code, out, _ = _invoke("--help")
    assert code == 0
    for command in ("ingest", "search", "config"):
        assert command in out


def test_a_negative_review_seed_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`review --sample 3 --seed -1` is refused by Click (exit 2), not a ValueError from the
    draw, and no review.json is written."""
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    run = _good_run(tmp_path)
    result = CliRunner().invoke(cli, ["review", str(run), "--sample", "3", "--seed", "-1"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--seed': -1 is not in the range x>=0."
    )
    assert not (run / "review.json").exists()


@pytest.mark.parametrize("command", ["check", "calibrate"])
@pytest.mark.parametrize("option", ["--judge-set", "--set"])
def test_judge_settings_are_judge_set_everywhere_with_set_kept_as_an_alias(
    tmp_path: Path, command: str, option: str
) -> None:
    """`--judge-set` on every command that judges (as `audit`); `--set`, its former name on
    check and calibrate, still works, and a message names the option the user typed."""
    answers = tmp_path / "a.jsonl"
    answers.write_text(
        '{"id": "a", "question": "q?", "contexts": ["c"], "answer": "x", "hallucinated": false}\n'
    )
    given = ["--answers" if command == "check" else "--labels", str(answers)]
    done = CliRunner().invoke(
        cli, [command, *given, "--out", str(tmp_path / "out"), option, "claims"]
    )
    assert done.exit_code == 2, done.output
    assert f"{option} claims:" in done.stderr or f"{option} 'claims'" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_megabyte_value_in_an_error_is_cut_to_a_readable_line(tmp_path: Path) -> None:
    """A 1 MB id in a questions file is named by its start and end, not echoed whole."""
    questions = tmp_path / "q.jsonl"
    long_id = "q" * 1_000_000
    questions.write_text(
        json.dumps({"id": long_id, "question": "a?"})
        + "\n"
        + json.dumps({"id": long_id, "question": "b?"})
        + "\n",
        encoding="utf-8",
    )
    done = CliRunner().invoke(
        cli,
        [
            "run",
            "--pipeline",
            "qwen-0.5b-cpu",
            "--questions",
            str(questions),
            "--index",
            str(tmp_path / "none"),
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert done.exit_code == 2, done.output
    line = done.output.strip().splitlines()[-1]
    assert line.startswith("Error: ") and len(line) < 1_000, line[:300]
    assert "characters cut" in line
