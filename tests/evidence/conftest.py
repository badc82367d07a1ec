"""Run dirs to bundle, made with the fakes (no engine), keys and a bundle of them: made once
per module (an audit and a bundle take seconds on a busy machine), copied where a test
changes them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import IngestConfig
from auditor.evidence.keys import generate_key
from auditor.ingest import ingest_corpus
from auditor.testing import FakeEmbedder
from tests.test_audit import DOCS, GOOD, QUESTIONS, SLOPPY, _audit
from tests.test_review import _checked

PASSPHRASE = "correct horse battery staple"
PASSPHRASE_ENV = "AUDITOR_TEST_PASSPHRASE"


@pytest.fixture
def passphrase(monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of the environment variable that holds the keys' passphrase (--passphrase-env)."""
    monkeypatch.setenv(PASSPHRASE_ENV, PASSPHRASE)
    return PASSPHRASE_ENV


def make_key(tmp_path: Path, name: str, env: str) -> Path:
    key = tmp_path / "keys" / name
    key.parent.mkdir(exist_ok=True)
    done = CliRunner().invoke(cli, ["keygen", "--out", str(key), "--passphrase-env", env])
    assert done.exit_code == 0, done.output
    return key


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Path], Path, Path]]:
    """Two pipelines audited with the fakes (run dirs with an index and a question set), the
    bundler's key and their bundle: (run dirs, key, bundle). Read only: copy to change."""
    root = tmp_path_factory.mktemp("made")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUDITOR_HOME", str(root / "home"))
        patch.setenv(PASSPHRASE_ENV, PASSPHRASE)
        fake = FakeEmbedder()
        patch.setattr("auditor.ingest.embed.load_embedder", lambda config: fake)
        corpus = root / "corpus"
        for name, text in DOCS.items():
            (corpus / name).parent.mkdir(parents=True, exist_ok=True)
            (corpus / name).write_text(text, encoding="utf-8")
        index = root / "index"
        ingest_corpus(corpus, index, IngestConfig(), FakeEmbedder())
        questions = root / "q.jsonl"
        questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
        out = root / "audit"
        _audit((index, questions), out, {"good": GOOD, "sloppy": SLOPPY})
        key = root / "keys" / "auditor.key"
        key.parent.mkdir()
        generate_key(key, PASSPHRASE.encode())
        run_dirs = [out / "good", out / "sloppy"]
        bundle = root / "a.tar"
        args = ["bundle", *map(str, run_dirs), "--key", str(key), "--out", str(bundle)]
        done = CliRunner().invoke(cli, [*args, "--passphrase-env", PASSPHRASE_ENV])
        assert done.exit_code == 0, done.output
        yield run_dirs, key, bundle


@pytest.fixture
def audited(made: tuple[list[Path], Path, Path]) -> list[Path]:
    return made[0]


@pytest.fixture
def key(made: tuple[list[Path], Path, Path], passphrase: str) -> Path:
    return made[1]


@pytest.fixture
def bundled(made: tuple[list[Path], Path, Path], tmp_path: Path) -> Path:
    """A copy of the module's bundle, for the test to change."""
    return Path(shutil.copy(made[2], tmp_path / "a.tar"))


@pytest.fixture
def checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run of 30 imported answers checked by the fake judge (no index)."""
    return _checked(tmp_path, monkeypatch, count=30)
