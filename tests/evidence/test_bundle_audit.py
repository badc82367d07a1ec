"""`auditor audit --bundle OUT --key KEY` makes the bundle at the end of an audit and records
its statement digest in the history; `auditor report` of an extracted bundle works and shows
the statement's digest and its signers."""

from __future__ import annotations

import json
import sqlite3
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.evidence.bag import ENVELOPE, read_tar
from auditor.evidence.dsse import Envelope
from auditor.history import list_audits
from tests.test_audit import corpus, fake_engines  # noqa: F401 - fixtures


def _audit_args(given: tuple[Path, Path], tmp_path: Path) -> list[str]:
    """`auditor audit` of one fake-engine pipeline, as tests/test_audit.py's `_audit_cli`."""
    index, questions = given
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        'name = "p"\n[ingest.embedder]\nmodel = "fake-words"\n[generator]\nkind = "vllm"\n'
        'model = "smollm2-135m-instruct"\n',
        "utf-8",
    )
    return [
        *("audit", "--pipeline", str(pipeline), "--questions", str(questions)),
        *("--index", str(index), "--out", str(tmp_path / "audit")),
        *("--history", str(tmp_path / "h.sqlite"), "--judge-set", 'metrics=["faithfulness"]'),
    ]


def test_audit_bundle_writes_a_bundle_that_verifies_and_records_its_digest(
    corpus: tuple[Path, Path],  # noqa: F811
    tmp_path: Path,
    fake_engines: list[str],  # noqa: F811
    key: Path,
    passphrase: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("auditor.audit.prepare_model", lambda name, **_: None)
    out = tmp_path / "audit.tar"
    args = _audit_args(corpus, tmp_path)
    lone = CliRunner().invoke(cli, [*args, "--bundle", str(out)])
    assert lone.exit_code == 2 and "--bundle and --key go together" in lone.stderr
    assert not (tmp_path / "audit").exists()
    signing = ["--bundle", str(out), "--key", str(key), "--passphrase-env", passphrase]
    done = CliRunner().invoke(cli, [*args, *signing])
    assert done.exit_code == 0, done.output
    envelope = Envelope.from_bytes(read_tar(out)[ENVELOPE])
    assert f"bundle: {out} (statement sha256 {envelope.statement_sha256})" in done.stdout
    rows = list_audits(tmp_path / "h.sqlite")
    assert [r.statement_sha256 for r in rows] == [envelope.statement_sha256]
    verified = CliRunner().invoke(cli, ["verify", str(out), "--key", f"{key}.pub"])
    assert verified.exit_code == 0, verified.output
    history = CliRunner().invoke(
        cli, ["history", "--history", str(tmp_path / "h.sqlite"), "--json"]
    )
    assert json.loads(history.stdout)[0]["statement_sha256"] == envelope.statement_sha256
    # the bundle exists now: a second audit refuses it before any engine starts
    again = CliRunner().invoke(cli, [*args, *signing])
    assert again.exit_code == 2 and "exists; give another path, or remove it" in again.stderr
    assert fake_engines == ["smollm2-135m-instruct"]


def test_an_old_history_gains_the_statement_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE audits (id INTEGER PRIMARY KEY AUTOINCREMENT, recorded_at TEXT NOT NULL,"
            " run_dir TEXT NOT NULL UNIQUE, run_id TEXT, pipeline TEXT NOT NULL, kind TEXT NOT NULL,"
            " config_sha256 TEXT, index_sha256 TEXT, questions_sha256 TEXT, model_sha256 TEXT,"
            " judge_sha256 TEXT, gates_passed INTEGER, baseline INTEGER NOT NULL DEFAULT 0,"
            " summary TEXT NOT NULL);"
            "INSERT INTO audits (recorded_at, run_dir, pipeline, kind, summary) VALUES"
            " ('2026-12-01T00:00:00+00:00', '/r', 'p', 'run', '{}');"
        )
    (row,) = list_audits(path)
    assert row.statement_sha256 is None and row.pipeline == "p"


def test_the_report_of_an_extracted_bundle_shows_its_digest_and_signers(
    bundled: Path, tmp_path: Path
) -> None:
    where = tmp_path / "bag"
    with tarfile.open(bundled) as tar:
        tar.extractall(where, filter="data")
    envelope = Envelope.from_bytes((where / ENVELOPE).read_bytes())
    html = tmp_path / "r.html"
    runs = [str(where / "data" / "runs" / name) for name in ("good", "sloppy")]
    done = CliRunner().invoke(
        cli, ["report", *runs, "--out", str(html), "--history", str(tmp_path / "h.sqlite")]
    )
    assert done.exit_code == 0, done.output
    page = html.read_text()
    assert envelope.statement_sha256 in page
    assert f"{envelope.signatures[0].keyid[:16]}</code> as auditor" in page
