"""Run dirs to bundle, made with the fakes (no engine), and keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.testing import FakeEmbedder
from tests.test_audit import GOOD, SLOPPY, _audit, corpus  # noqa: F401 - the fixture
from tests.test_review import _checked

PASSPHRASE = "correct horse battery staple"


@pytest.fixture
def passphrase(monkeypatch: pytest.MonkeyPatch) -> str:
    """The keys' passphrase, in AUDITOR_TEST_PASSPHRASE (--passphrase-env)."""
    monkeypatch.setenv("AUDITOR_TEST_PASSPHRASE", PASSPHRASE)
    return "AUDITOR_TEST_PASSPHRASE"


def make_key(tmp_path: Path, name: str, env: str) -> Path:
    key = tmp_path / "keys" / name
    key.parent.mkdir(exist_ok=True)
    done = CliRunner().invoke(cli, ["keygen", "--out", str(key), "--passphrase-env", env])
    assert done.exit_code == 0, done.output
    return key


@pytest.fixture
def key(tmp_path: Path, passphrase: str) -> Path:
    return make_key(tmp_path, "auditor.key", passphrase)


@pytest.fixture
def audited(corpus: tuple[Path, Path], tmp_path: Path, use_fake_embedder: FakeEmbedder) -> list[Path]:  # noqa: F811
    """Two pipelines audited with the fakes: run dirs with an index and a question set."""
    out = tmp_path / "audit"
    _audit(corpus, out, {"good": GOOD, "sloppy": SLOPPY})
    return [out / "good", out / "sloppy"]


@pytest.fixture
def checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run of 30 imported answers checked by the fake judge (no index)."""
    return _checked(tmp_path, monkeypatch, count=30)
