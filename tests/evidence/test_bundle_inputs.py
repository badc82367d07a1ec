"""Bad input to keygen, bundle, sign and verify: one line, exit code 2, nothing written. And
the figures a bundle carries with people's labels and a calibration verify."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tarfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from auditor.cli import cli
from auditor.evidence.bag import ENVELOPE, read_tar
from tests.evidence.conftest import PASSPHRASE, make_key
from tests.test_review import _labels
from tests.test_review_integrity import _drawn, _line
from tests.verify.test_calibrate import _fakes, _labelled


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def bundle(
    run_dirs: list[Path],
    key: Path,
    out: Path,
    env_name: str,
    *extra: str | Path,
    env: dict[str, str] | None = None,
) -> Result:
    return run(
        "bundle",
        *run_dirs,
        "--key",
        key,
        "--out",
        out,
        "--passphrase-env",
        env_name,
        *extra,
        env=env,
    )


def _refused(done: Result, said: str, out: Path | None = None) -> None:
    assert done.exit_code == 2, done.output
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and said in errors[0], done.stderr
    if out is not None:
        assert not out.exists()


def test_keygen_writes_an_encrypted_private_key_0600_and_its_public_key(
    tmp_path: Path, passphrase: str
) -> None:
    key = make_key(tmp_path, "k", passphrase)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert key.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert (tmp_path / "keys" / "k.pub").read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    again = run("keygen", "--out", key, "--passphrase-env", passphrase)
    _refused(again, "exists; give another --out, or --force")
    unset = run("keygen", "--out", tmp_path / "new", "--passphrase-env", "AUDITOR_NO_SUCH_VAR")
    _refused(unset, "--passphrase-env AUDITOR_NO_SUCH_VAR: the environment variable is unset")
    assert not (tmp_path / "new").exists()


def test_keygen_asks_for_the_passphrase_twice_without_passphrase_env(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["keygen", "--out", str(tmp_path / "k")], input="pw\npw\n")
    assert done.exit_code == 0, done.output
    assert "fingerprint " in done.stdout


def test_a_wrong_passphrase_or_a_missing_key_is_refused_before_writing(
    audited: list[Path], key: Path, tmp_path: Path
) -> None:
    out = tmp_path / "a.tar"
    wrong = bundle(audited, key, out, "WRONG", env={"WRONG": "not it"})
    _refused(wrong, "wrong passphrase", out)
    missing = bundle(audited, tmp_path / "nokey", out, "WRONG", env={"WRONG": PASSPHRASE})
    _refused(missing, "--key", out)
    assert "no such key file" in missing.stderr
    public = bundle(audited, key.with_name(key.name + ".pub"), out, "W", env={"W": PASSPHRASE})
    _refused(public, "not a private key", out)
    nothing = run("verify", tmp_path / "a.tar", "--key", tmp_path / "nokey.pub")
    _refused(nothing, "no such key file")


def test_an_existing_output_is_refused_unless_force(
    audited: list[Path], key: Path, passphrase: str, tmp_path: Path
) -> None:
    out = tmp_path / "a.tar"
    out.write_bytes(b"keep me")
    _refused(bundle(audited, key, out, passphrase), "exists; give another path, or --force")
    assert out.read_bytes() == b"keep me"
    done = bundle(audited, key, out, passphrase, "--force")
    assert done.exit_code == 0, done.output
    assert tarfile.is_tarfile(out)
    inside = bundle(audited, key, audited[0] / "a.tar", passphrase)
    _refused(inside, "would write into RUN_DIR", audited[0] / "a.tar")


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda r: (r / "checks.jsonl").unlink() or (r / "check.json").unlink(), "not checked"),
        (lambda r: (r / "manifest.json").write_text("{not json"), "corrupt run manifest"),
        (
            lambda r: (r / "records.jsonl").write_text(
                (r / "records.jsonl").read_text() + '{"id": "q9", "quest'
            ),
            "records.jsonl",
        ),
        (
            lambda r: (r / "manifest.json").write_text(
                json.dumps(json.loads((r / "manifest.json").read_text()) | {"status": "partial"})
            ),
            "the run is partial, not complete",
        ),
        (
            lambda r: (r / "check.json").write_text(
                json.dumps(json.loads((r / "check.json").read_text()) | {"status": "running"})
            ),
            "the check is 'running', not complete",
        ),
    ],
    ids=["unchecked", "corrupt-manifest", "torn-records", "incomplete-run", "incomplete-check"],
)
def test_an_unchecked_incomplete_or_damaged_run_dir_is_refused(
    audited: list[Path], key: Path, passphrase: str, tmp_path: Path, damage: Any, said: str
) -> None:
    run_dir = _copy(audited[0], tmp_path)
    damage(run_dir)
    out = tmp_path / "a.tar"
    _refused(bundle([run_dir], key, out, passphrase), said, out)


def test_an_index_that_changed_since_the_run_is_refused(
    audited: list[Path], key: Path, passphrase: str, tmp_path: Path
) -> None:
    index = Path(json.loads((audited[0] / "manifest.json").read_text())["index"]["path"])
    moved = Path(shutil.copytree(index, tmp_path / "index"))
    manifest = json.loads((moved / "manifest.json").read_text())
    (moved / "manifest.json").write_text(json.dumps(manifest | {"updated_at": "later"}))
    out = tmp_path / "a.tar"
    done = bundle([audited[0]], key, out, passphrase, "--index", moved)
    _refused(done, "not the index", out)


def _reviewed_run(checked: Path, tmp_path: Path, size: int = 15) -> tuple[Path, list[str]]:
    drawn = _drawn(checked, size)
    return _labels(tmp_path / "labels.jsonl", [_line(checked, i) for i in drawn]), drawn


def test_labels_not_of_the_drawn_sample_are_refused(
    checked: Path, key: Path, passphrase: str, tmp_path: Path
) -> None:
    drawn = _drawn(checked, 5)
    outside = next(f"a{k}" for k in range(30) if f"a{k}" not in drawn)
    labels = _labels(tmp_path / "l.jsonl", [_line(checked, i) for i in [*drawn, outside]])
    out = tmp_path / "a.tar"
    done = bundle([checked], key, out, passphrase, "--labels", labels)
    _refused(done, "outside its drawn review sample", out)


def test_reviewed_rates_and_a_calibration_are_bundled_and_recomputed_on_verify(
    key: Path, passphrase: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fakes(monkeypatch)
    answers = tmp_path / "labelled.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in _labelled(40, wrong_every=3)))
    calibrated = run("calibrate", "--labels", answers, "--out", tmp_path / "cal", "-q")
    assert calibrated.exit_code == 0, calibrated.output
    calibration = tmp_path / "cal" / "calibration.json"
    checked = tmp_path / "run"
    done = run("check", "--answers", answers, "--out", checked, "--calibration", calibration, "-q")
    assert done.exit_code == 0, done.output
    labels, _ = _reviewed_run(checked, tmp_path)
    out = tmp_path / "a.tar"
    extra = ("--labels", labels, "--calibration", calibration, "--gate", "hallucination_rate<=0.5")
    done = bundle([checked], key, out, passphrase, *extra)
    assert done.exit_code == 0, done.output
    files = read_tar(out)
    assert files["data/labels/labels.jsonl"] == labels.read_bytes()
    assert files["data/calibration/calibration.json"] == calibration.read_bytes()
    statement = json.loads(__import__("base64").b64decode(json.loads(files[ENVELOPE])["payload"]))
    predicate = statement["predicate"]
    (only,) = predicate["runs"]
    assert only["figures"]["reviewed_labels"] == 15
    assert only["figures"]["metrics"]["reviewed_hallucination_rate"]["value"] is not None
    assert only["figures"]["metrics"]["hallucination_rate_corrected"]["value"] is not None
    assert [(r["name"], r["labels"]) for r in only["reviewers"]] == [("Ana", 15)]
    assert only["review"]["size"] == 15 and only["review"]["population"] == 40
    assert predicate["gates"][0]["gate"] == "hallucination_rate<=0.5"
    verified = run("verify", out, "--key", key.with_name(key.name + ".pub"))
    assert verified.exit_code == 0, verified.output
