"""`auditor keygen`, `bundle`, `sign`, `verify` end to end on run dirs the fakes made: a
bundle verifies, the same command gives the same bytes, bagit validates the bag, and every
kind of tampering is refused naming what changed."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from auditor.cli import cli
from auditor.evidence.bag import ENVELOPE, read_tar, tar_bytes
from tests.evidence.conftest import make_key


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def bundle(run_dirs: list[Path], key: Path, out: Path, env: str, *extra: str) -> Result:
    return run("bundle", *run_dirs, "--key", key, "--out", out, "--passphrase-env", env, *extra)


def verify(out: Path, *keys: Path, json_out: bool = False) -> Result:
    args: list[str | Path] = ["verify", out]
    for key in keys:
        args += ["--key", key.with_name(key.name + ".pub") if key.suffix != ".pub" else key]
    return run(*args, *(["--json"] if json_out else []))


def _retar(source: Path, target: Path, change: Any = None, order: Any = sorted) -> Path:
    """The bundle's members written again (in `order`), after `change(files)`."""
    files = read_tar(source)
    if change is not None:
        change(files)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in order(files):
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            tar.addfile(info, io.BytesIO(files[name]))
    target.write_bytes(buffer.getvalue())
    return target


def test_a_bundle_verifies_and_names_its_signer(bundled: Path, key: Path) -> None:
    done = verify(bundled, key)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0].startswith("signer ") and " auditor " in lines[0]
    assert lines[-1].startswith("verified: statement sha256 ")
    as_json = json.loads(verify(bundled, key, json_out=True).stdout)
    assert as_json["verified"] is True and as_json["pipelines"] == ["good", "sloppy"]
    assert [s["role"] for s in as_json["signers"]] == ["auditor"]
    assert as_json["signers"][0]["rfc3161_timestamp"] is None


def test_the_same_command_twice_gives_the_same_bytes(
    audited: list[Path], key: Path, passphrase: str, tmp_path: Path
) -> None:
    one, two = tmp_path / "one.tar", tmp_path / "two.tar"
    assert bundle(audited, key, one, passphrase).exit_code == 0
    assert bundle(audited, key, two, passphrase).exit_code == 0
    assert one.read_bytes() == two.read_bytes()
    with tarfile.open(one) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(0, 0, "", "", 0o644)}
    assert len({m.mtime for m in members}) == 1


def test_the_bag_holds_records_index_and_questions_and_bagit_validates_it(
    bundled: Path, tmp_path: Path
) -> None:
    bagit = pytest.importorskip("bagit")
    files = read_tar(bundled)
    for name in (
        "bagit.txt",
        "bag-info.txt",
        "manifest-sha256.txt",
        ENVELOPE,
        "data/runs/good/records.jsonl",
        "data/runs/sloppy/checks.jsonl",
        "data/runs/sloppy/check.json",
    ):
        assert name in files, name
    # nothing derived: the summaries and the report are rendered from the records
    assert not [n for n in files if n.endswith(("summary.json", ".html"))]
    assert any(n.startswith("data/index/") and n.endswith("/manifest.json") for n in files)
    assert any(n.startswith("data/questions/") for n in files)
    where = tmp_path / "bag"
    with tarfile.open(bundled) as tar:
        tar.extractall(where, filter="data")
    bagit.Bag(str(where)).validate()


def test_one_byte_changed_in_any_member_is_refused_naming_it(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    for name in sorted(read_tar(bundled)):
        if name == ENVELOPE:
            continue

        def flip(files: dict[str, bytes], name: str = name) -> None:
            data = bytearray(files[name])
            data[len(data) // 2] ^= 0x01
            files[name] = bytes(data)

        done = verify(_retar(bundled, tmp_path / "t.tar", flip), key)
        assert done.exit_code == 1, (name, done.output)
        assert f"{name}: changed" in done.stderr, done.stderr


def test_a_member_removed_or_added_is_refused(bundled: Path, key: Path, tmp_path: Path) -> None:
    removed = verify(
        _retar(bundled, tmp_path / "r.tar", lambda f: f.pop("data/runs/good/checks.jsonl")), key
    )
    assert removed.exit_code == 1
    assert (
        "data/runs/good/checks.jsonl: in the statement, missing from the bundle" in removed.stderr
    )

    def add(files: dict[str, bytes]) -> None:
        files["data/extra.txt"] = b"slipped in\n"

    added = verify(_retar(bundled, tmp_path / "a.tar", add), key)
    as_json = verify(tmp_path / "a.tar", key, json_out=True)
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout) == {
        "verified": False,
        "failure": f"{tmp_path / 'a.tar'}: data/extra.txt: in the bundle, not in the statement (added)",
    }
    assert (
        added.exit_code == 1
        and "data/extra.txt: in the bundle, not in the statement" in added.stderr
    )


def test_a_bundle_retarred_in_another_order_still_verifies(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    again = _retar(bundled, tmp_path / "r.tar", order=lambda f: sorted(f, reverse=True))
    assert again.read_bytes() != bundled.read_bytes()
    done = verify(again, key)
    assert done.exit_code == 0, done.output


def test_a_signature_by_another_key_is_refused(
    bundled: Path, key: Path, passphrase: str, tmp_path: Path
) -> None:
    other = make_key(tmp_path, "other.key", passphrase)
    done = verify(bundled, other)
    assert done.exit_code == 1
    assert "signature 1 (auditor, key " in done.stderr and "by no key given" in done.stderr
    # a signature made by another key under the right key's id
    files = read_tar(bundled)
    envelope = json.loads(files[ENVELOPE])
    signed = tmp_path / "s.tar"
    signed.write_bytes(tar_bytes(files, 0))
    assert (
        run(
            *("sign", signed, "--key", other, "--role", "reviewer"),
            *("--trust", f"{key}.pub", "--passphrase-env", passphrase),
        ).exit_code
        == 0
    )
    forged = json.loads(read_tar(signed)[ENVELOPE])
    forged["signatures"] = [forged["signatures"][1] | {"keyid": envelope["signatures"][0]["keyid"]}]
    forged_tar = tmp_path / "f.tar"
    forged_tar.write_bytes(tar_bytes(files | {ENVELOPE: json.dumps(forged).encode()}, 0))
    done = verify(forged_tar, key)
    assert done.exit_code == 1 and "does not match the statement" in done.stderr


def test_countersignatures_name_each_signer_and_role(
    bundled: Path, key: Path, passphrase: str, tmp_path: Path
) -> None:
    reviewer = make_key(tmp_path, "reviewer.key", passphrase)
    approver = make_key(tmp_path, "approver.key", passphrase)
    trusted = ["--trust", f"{key}.pub"]
    for signer, role in ((reviewer, "reviewer"), (approver, "approver")):
        done = run(
            *("sign", bundled, "--key", signer, "--role", role, "--passphrase-env", passphrase),
            *trusted,
        )
        assert done.exit_code == 0, done.output
        trusted += ["--trust", f"{signer}.pub"]
    done = verify(bundled, key, reviewer, approver)
    assert done.exit_code == 0, done.output
    roles = [line.split()[2] for line in done.stdout.splitlines() if line.startswith("signer ")]
    assert roles == ["auditor", "reviewer", "approver"]
    # every signature must be checked: a signer's key left out fails
    assert verify(bundled, key, reviewer).exit_code == 1
    again = run(
        "sign", bundled, "--key", reviewer, "--role", "reviewer", "--passphrase-env", passphrase
    )
    assert again.exit_code == 2 and "already signed" in again.stderr
    # a role changed after signing
    files = read_tar(bundled)
    envelope = json.loads(files[ENVELOPE])
    envelope["signatures"][1]["role"] = "approver"
    changed = tmp_path / "c.tar"
    changed.write_bytes(tar_bytes(files | {ENVELOPE: json.dumps(envelope).encode()}, 0))
    done = verify(changed, key, reviewer, approver)
    assert done.exit_code == 1 and "signature 2 (approver" in done.stderr
    assert "role or time was changed" in done.stderr


def test_signing_a_changed_bundle_is_refused(
    bundled: Path, key: Path, passphrase: str, tmp_path: Path
) -> None:
    def edit(files: dict[str, bytes]) -> None:
        files["data/runs/good/records.jsonl"] += b"\n"

    changed = _retar(bundled, tmp_path / "c.tar", edit)
    done = run("sign", changed, "--key", key, "--role", "approver", "--passphrase-env", passphrase)
    assert done.exit_code == 1 and "data/runs/good/records.jsonl: changed" in done.stderr


def test_a_truncated_tar_is_refused(bundled: Path, key: Path, tmp_path: Path) -> None:
    data = bundled.read_bytes()
    for cut in (len(data) // 2, 700):
        short = tmp_path / "short.tar"
        short.write_bytes(data[:cut])
        done = verify(short, key)
        assert done.exit_code == 1, done.output
        assert "short.tar: " in done.stderr


def _with_member(bundled: Path, target: Path, info: tarfile.TarInfo, data: bytes = b"") -> Path:
    """The bundle with one more member, appended as given."""
    buffer = io.BytesIO(bundled.read_bytes())
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        tar.addfile(info, io.BytesIO(data) if data else None)
    target.write_bytes(buffer.getvalue())
    return target


@pytest.mark.parametrize(
    ("name", "kind", "said"),
    [
        ("../escape.txt", tarfile.REGTYPE, "outside the bundle"),
        ("data/../../escape.txt", tarfile.REGTYPE, "outside the bundle"),
        ("/etc/escape.txt", tarfile.REGTYPE, "absolute"),
        ("data/link", tarfile.SYMTYPE, "a link"),
        ("data/hard", tarfile.LNKTYPE, "a link"),
        ("data/dev", tarfile.CHRTYPE, "a device"),
        ("data/runs/good/records.jsonl", tarfile.REGTYPE, "appears twice"),
    ],
)
def test_unsafe_members_are_refused_before_anything_is_extracted(
    bundled: Path,
    key: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    kind: bytes,
    said: str,
) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    data = b""
    if kind == tarfile.REGTYPE:
        data = b"x"
        info.size = 1
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        info.linkname = "/etc/passwd"
    extracted: list[Any] = []
    monkeypatch.setattr("auditor.evidence.verify.extract_to", lambda *a: extracted.append(a))
    done = verify(_with_member(bundled, tmp_path / "u.tar", info, data), key)
    assert done.exit_code == 1 and said in done.stderr, done.output
    assert extracted == [] and not (tmp_path.parent / "escape.txt").exists()


def test_a_newer_predicate_version_is_bad_input(
    audited: list[Path], key: Path, passphrase: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "auditor.evidence.statement.PREDICATE_TYPE", "https://auditor.invalid/audit-bundle/v2"
    )
    out = tmp_path / "v2.tar"
    assert bundle(audited, key, out, passphrase).exit_code == 0
    monkeypatch.undo()
    done = verify(out, key)
    assert done.exit_code == 2
    assert "predicate version 2, from a newer auditor" in done.stderr
