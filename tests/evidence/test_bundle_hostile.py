"""Issue 48: bundle, sign, keygen and the tar reader against what a user or an attacker gives
them. Gates end `bundle` as they end `audit` and `report`; `sign` writes the bundle it was
given (a link's target, its mode kept, a hard-linked one refused) and only after verifying
it; a bundle holds the whole audit wherever it is made from; and every hostile input (a
passphrase too long, a sparse or oversized member, a repeated signature, a compressed
bundle) is one line, a non-zero exit code and nothing written."""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import json
import os
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from auditor.cli import cli
from auditor.config import IngestConfig
from auditor.evidence.bag import ENVELOPE, read_tar, tar_bytes
from auditor.ingest import ingest_corpus
from auditor.testing import FakeEmbedder
from tests.evidence.conftest import PASSPHRASE_ENV, make_key
from tests.test_audit import DOCS, GOOD, QUESTIONS, SLOPPY, _audit


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def bundle(run_dirs: list[Path], key: Path, out: Path, *extra: str | Path) -> Result:
    return run(
        *("bundle", *run_dirs, "--key", key, "--out", out),
        *("--passphrase-env", PASSPHRASE_ENV, *extra),
    )


def sign(path: Path, key: Path, role: str, *trusted: Path) -> Result:
    trust = [arg for pub in trusted for arg in ("--trust", f"{pub}.pub")]
    return run(
        "sign", path, "--key", key, "--role", role, "--passphrase-env", PASSPHRASE_ENV, *trust
    )


def verify(path: Path, *keys: Path, as_json: bool = False) -> Result:
    given = [arg for key in keys for arg in ("--key", f"{key}.pub")]
    return run("verify", path, *given, *(["--json"] if as_json else []))


def _one_line(done: Result, code: int, said: str) -> None:
    """Refused as the fault suite wants it: the exit code, one `Error:` line saying `said`,
    no traceback."""
    assert done.exit_code == code, done.output
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and said in errors[0], done.stderr
    assert "Traceback" not in done.output


def _counted(line: str) -> int:
    """The file count of `bundle`'s or `verify`'s last line: `...: 19 files ...`."""
    words = line.replace(";", "").split()
    return int(words[words.index("files") - 1])


def _statement(path: Path) -> dict[str, Any]:
    envelope = json.loads(read_tar(path)[ENVELOPE])
    return json.loads(base64.b64decode(envelope["payload"]))  # type: ignore[no-any-return]


# -- 4. every command with --gate ends as audit and report do


def test_bundle_prints_each_gate_and_exits_1_on_a_failing_one_with_the_bundle_written(
    audited: list[Path], key: Path, tmp_path: Path
) -> None:
    """A failing gate: the PASS/FAIL lines, `Error: gate failed` and exit code 1, and the
    bundle written (the signed evidence of the failed audit), which verifies."""
    out = tmp_path / "failed.tar"
    done = bundle(audited, key, out, "--gate", "hallucination_rate<=0.01")
    assert done.exit_code == 1, done.output
    lines = done.stdout.splitlines()
    assert "PASS hallucination_rate<=0.01 on good (value 0)" in lines
    assert any(line.startswith("FAIL hallucination_rate<=0.01 on sloppy") for line in lines)
    assert "Error: gate failed: hallucination_rate<=0.01 on sloppy" in done.stderr
    assert lines[-1].startswith(f"bundle {out}: ")
    gates = _statement(out)["predicate"]["gates"]
    assert [(g["pipeline"], g["passed"]) for g in gates] == [("good", True), ("sloppy", False)]
    assert verify(out, key).exit_code == 0
    held = bundle(audited, key, tmp_path / "held.tar", "--gate", "hallucination_rate<=0.9")
    assert held.exit_code == 0, held.output
    assert held.stdout.splitlines()[0].startswith("PASS hallucination_rate<=0.9 on good")


def test_every_command_with_a_gate_option_is_one_whose_failing_gate_exits_1() -> None:
    """The commands with --gate are audit, report and bundle: each ends with
    `exit_on_failed_gates` (audit and report through echo_outcome), which this file and
    tests/test_audit.py check; a new command with --gate must join them."""
    with_gate = sorted(
        name
        for name, command in cli.commands.items()
        if any("--gate" in getattr(p, "opts", []) for p in command.params)
    )
    assert with_gate == ["audit", "bundle", "report"]


# -- 8. sign writes the bundle it was given


def test_sign_through_a_link_signs_its_target_and_keeps_the_link(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    target = Path(shutil.move(bundled, archive / "audit.tar"))
    link = tmp_path / "current.tar"
    link.symlink_to(target)
    reviewer = make_key(tmp_path, "reviewer.key", PASSPHRASE_ENV)
    done = sign(link, reviewer, "reviewer", key)
    assert done.exit_code == 0, done.output
    assert link.is_symlink() and link.resolve() == target
    assert len(json.loads(read_tar(target)[ENVELOPE])["signatures"]) == 2
    assert verify(target, key, reviewer).exit_code == 0


def test_sign_keeps_a_read_only_bundle_read_only(bundled: Path, key: Path, tmp_path: Path) -> None:
    bundled.chmod(0o444)
    reviewer = make_key(tmp_path, "reviewer.key", PASSPHRASE_ENV)
    done = sign(bundled, reviewer, "reviewer", key)
    assert done.exit_code == 0, done.output
    assert stat.S_IMODE(bundled.stat().st_mode) == 0o444
    assert verify(bundled, key, reviewer).exit_code == 0


def test_sign_refuses_a_bundle_with_another_hard_link(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    """Replacing the file would leave the other link unsigned: refused, both untouched."""
    other = tmp_path / "kept.tar"
    os.link(bundled, other)
    before = bundled.read_bytes()
    reviewer = make_key(tmp_path, "reviewer.key", PASSPHRASE_ENV)
    done = sign(bundled, reviewer, "reviewer", key)
    _one_line(done, 2, "has 2 hard links")
    assert "sign a copy with one link" in done.stderr
    assert bundled.read_bytes() == before and os.stat(bundled).st_nlink == 2


# -- 10. a bundle holds the whole audit wherever it is run from


@pytest.fixture(scope="module")
def relative(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Path]]]:
    """An audit made in REPO with relative paths (as `auditor ingest corpus --index index`
    and `auditor audit --questions q.jsonl --out reports/audit` record them): (REPO, run
    dirs, absolute)."""
    root = tmp_path_factory.mktemp("relative")
    repo = root / "repo"
    repo.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUDITOR_HOME", str(root / "home"))
        fake = FakeEmbedder()
        patch.setattr("auditor.ingest.embed.load_embedder", lambda config: fake)
        patch.chdir(repo)
        for name, text in DOCS.items():
            Path("corpus", name).parent.mkdir(parents=True, exist_ok=True)
            Path("corpus", name).write_text(text, encoding="utf-8")
        ingest_corpus(Path("corpus"), Path("index"), IngestConfig(), FakeEmbedder())
        Path("q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
        out = Path("reports/audit")
        out.parent.mkdir()
        _audit((Path("index"), Path("q.jsonl")), out, {"good": GOOD, "sloppy": SLOPPY})
    manifest = json.loads((repo / out / "good" / "manifest.json").read_text())
    assert manifest["questions"]["path"] == "q.jsonl" and manifest["index"]["path"] == "index"
    yield repo, [repo / out / "good", repo / out / "sloppy"]


@contextlib.contextmanager
def _in(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        yield


def test_a_bundle_made_elsewhere_holds_the_questions_and_documents_and_counts_as_verify(
    relative: tuple[Path, list[Path]], key: Path, tmp_path: Path
) -> None:
    repo, runs = relative
    out = tmp_path / "a.tar"
    with _in(tmp_path / "elsewhere"):
        done = bundle(runs, key, out, "--with-documents")
    assert done.exit_code == 0, done.output
    files = read_tar(out)
    questions = [name for name in files if name.startswith("data/questions/")]
    assert [files[name] for name in questions] == [(repo / "q.jsonl").read_bytes()]
    for name in DOCS:
        assert any(n.endswith(f"/documents/{name}") for n in files), name
    checked = verify(out, key)
    assert checked.exit_code == 0, checked.output
    assert _counted(done.stdout.splitlines()[-1]) == _counted(checked.stdout.splitlines()[-1])
    assert _counted(done.stdout.splitlines()[-1]) == len(files)
    predicate = _statement(out)["predicate"]
    assert all(r["questions"]["file"] == questions[0] for r in predicate["runs"])


def test_a_question_set_found_nowhere_is_refused_naming_it_and_questions(
    relative: tuple[Path, list[Path]], key: Path, tmp_path: Path
) -> None:
    repo, runs = relative
    moved = tmp_path / "kept" / "questions.jsonl"
    moved.parent.mkdir()
    shutil.move(repo / "q.jsonl", moved)
    try:
        out = tmp_path / "a.tar"
        with _in(tmp_path / "elsewhere"):
            lost = bundle(runs, key, out)
            _one_line(lost, 2, "q.jsonl: ")
            assert "question set is not here" in lost.stderr
            assert "give it with --questions FILE" in lost.stderr and not out.exists()
            wrong = tmp_path / "other.jsonl"
            wrong.write_text('{"id": "q9", "question": "?"}\n')
            _one_line(bundle(runs, key, out, "--questions", wrong), 2, "not the question set")
            found = bundle(runs, key, out, "--questions", moved)
        assert found.exit_code == 0, found.output
        assert moved.read_bytes() in read_tar(out).values()
    finally:
        shutil.move(moved, repo / "q.jsonl")


def test_documents_found_nowhere_are_refused_naming_with_documents_dir(
    relative: tuple[Path, list[Path]], key: Path, tmp_path: Path
) -> None:
    repo, runs = relative
    moved = Path(shutil.move(repo / "corpus", tmp_path / "corpus-now"))
    try:
        out = tmp_path / "a.tar"
        with _in(tmp_path / "elsewhere"):
            lost = bundle(runs, key, out, "--with-documents")
            _one_line(lost, 2, "an indexed document is not here")
            assert "--with-documents DIR" in lost.stderr and not out.exists()
            taken = bundle(runs, key, out, "--force", "--with-documents", runs[0])
            _one_line(taken, 2, "a run dir, not the corpus")
            found = bundle(runs, key, out, f"--with-documents={moved}")
        assert found.exit_code == 0, found.output
        assert (moved / "returns.md").read_bytes() in read_tar(out).values()
    finally:
        shutil.move(moved, repo / "corpus")


def test_the_messages_name_options_the_command_has() -> None:
    """Every `--option` a bundle refusal names is one of bundle's (or a command named in
    backquotes beside it): `--with-documents DIR` and `--questions FILE` exist."""
    import re

    from auditor.evidence import statement as build  # computes the predicate

    source = Path(build.__file__).read_text(encoding="utf-8")
    named = set(re.findall(r"(?<![\w`-])(--[a-z][a-z-]+)", source))
    options = {o for p in cli.commands["bundle"].params for o in getattr(p, "opts", [])}
    audit = {o for p in cli.commands["audit"].params for o in getattr(p, "opts", [])}
    assert named - options == set(), named - options
    # audit --bundle plans the bundle too: a refusal there names --index and --questions,
    # both audit options as well
    assert {"--index", "--questions"} <= audit


# -- loud defects: one line, exit code != 0, nothing written


def test_keygen_refuses_a_passphrase_over_1023_bytes_before_writing(tmp_path: Path) -> None:
    key = tmp_path / "k"
    for long in ("x" * 1024, "é" * 512):  # bytes, not characters
        done = run("keygen", "--out", key, "--passphrase-env", "P", env={"P": long})
        _one_line(done, 2, "the passphrase is 1,024 bytes, longer than the 1,023")
        assert list(tmp_path.iterdir()) == []
    done = run("keygen", "--out", key, "--passphrase-env", "P", env={"P": "x" * 1023})
    assert done.exit_code == 0, done.output


def _with_raw_member(bundled: Path, target: Path, header: bytes, data: bytes) -> Path:
    """The bundle's files, then one member written as the raw `header` and `data` given."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, content in sorted(read_tar(bundled).items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        padded = data + b"\0" * (-len(data) % tarfile.BLOCKSIZE)
        buffer.write(header + padded)
        tar.offset += len(header) + len(padded)
    target.write_bytes(buffer.getvalue())
    return target


def _header(info: tarfile.TarInfo, patch: dict[int, bytes]) -> bytes:
    """`info`'s GNU header with bytes at offsets replaced, its checksum made again."""
    buf = bytearray(info.tobuf(format=tarfile.GNU_FORMAT)[: tarfile.BLOCKSIZE])
    for at, value in patch.items():
        buf[at : at + len(value)] = value
    buf[148:156] = b" " * 8
    buf[148:155] = b"%06o\0" % tarfile.calc_chksums(bytes(buf))[0]
    return bytes(buf)


def _sparse_header(name: str, stored: int, declared: int) -> bytes:
    """A GNU sparse member ("S"): `stored` bytes of data at offset 0, `declared` in all (the
    rest holes that read as zeros)."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = stored
    itn = tarfile.itn  # type: ignore[attr-defined]
    patch = {
        386: itn(0, 12, tarfile.GNU_FORMAT),
        398: itn(stored, 12, tarfile.GNU_FORMAT),
        482: b"\0",
        483: itn(declared, 12, tarfile.GNU_FORMAT),
    }
    return _header(info, patch)


def test_a_sparse_member_is_refused_before_it_is_read(
    bundled: Path, key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GNU sparse member declaring 64 MiB (20 GiB reads the same way) is refused from its
    header: nothing is read into memory, nothing extracted."""
    reads: list[str] = []
    real = tarfile.TarFile.extractfile

    def counted(self: tarfile.TarFile, member: Any) -> Any:
        reads.append(getattr(member, "name", member))
        return real(self, member)

    monkeypatch.setattr(tarfile.TarFile, "extractfile", counted)
    for declared in (64 * 1024**2, 20 * 1024**3):
        header = _sparse_header("data/big.bin", 512, declared)
        sparse = _with_raw_member(bundled, tmp_path / "sparse.tar", header, b"x" * 512)
        reads.clear()
        done = verify(sparse, key)
        _one_line(done, 1, f"member 'data/big.bin': a sparse file (declares {declared:,} bytes)")
        assert reads == []


@pytest.mark.parametrize(
    ("kind", "said"),
    [(tarfile.CONTTYPE, "tar type b'7'"), (b"V", "tar type b'V'"), (b"Z", "tar type b'Z'")],
    ids=["contiguous", "volume-header", "unknown"],
)
def test_a_member_of_another_type_is_refused(
    bundled: Path, key: Path, tmp_path: Path, kind: bytes, said: str
) -> None:
    """Only regular files and folders: a contiguous file, a GNU volume header or a type
    tarfile does not know (which it would read as a file) is refused by its type."""
    info = tarfile.TarInfo("data/odd.bin")
    info.size = 3
    header = _header(info, {156: kind})
    done = verify(_with_raw_member(bundled, tmp_path / "odd.tar", header, b"odd"), key)
    _one_line(done, 1, said)


def test_a_member_declaring_more_than_the_tar_holds_is_refused(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    info = tarfile.TarInfo("data/huge.bin")
    info.size = 64 * 1024**2  # 20 GiB the same: refused from the header, nothing read
    raw = tmp_path / "huge.tar"
    buffer = io.BytesIO(tar_bytes(read_tar(bundled), 0))
    with tarfile.open(fileobj=buffer) as tar:
        end = max(m.offset_data + m.size for m in tar.getmembers())
    end += -end % tarfile.BLOCKSIZE
    raw.write_bytes(buffer.getvalue()[:end] + _header(info, {}) + b"x" * 1024)
    done = verify(raw, key)
    _one_line(done, 1, "member 'data/huge.bin': declares 67,108,864 bytes, the tar holds 1,024")


def test_bounds_refuse_an_oversized_bundle_on_verify_and_on_bundle(
    audited: list[Path], bundled: Path, key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bounds (docs/compliance.md) hold both ways: verify reads no more, and bundle writes
    nothing verify would refuse. Made small here to test them."""
    monkeypatch.setattr("auditor.evidence.bag.MAX_TOTAL_BYTES", 10_000)
    _one_line(verify(bundled, key), 1, "bytes in all, more than a bundle holds")
    out = tmp_path / "big.tar"
    done = bundle(audited, key, out)
    _one_line(done, 2, "so `auditor verify` would refuse it: not written")
    assert not out.exists()
    monkeypatch.undo()
    monkeypatch.setattr("auditor.evidence.bag.MAX_MEMBER_BYTES", 1000)
    _one_line(verify(bundled, key), 1, "more than a bundle's file may hold (1,000)")


def test_a_repeated_signature_is_refused_by_verify_and_by_sign(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    """The bundler's signature twice would list the signer twice and verify with one key."""
    files = read_tar(bundled)
    envelope = json.loads(files[ENVELOPE])
    envelope["signatures"] *= 2
    twice = tmp_path / "twice.tar"
    twice.write_bytes(tar_bytes(files | {ENVELOPE: json.dumps(envelope).encode()}, 0))
    _one_line(verify(twice, key), 1, "signature 2 duplicates signature 1")
    before = twice.read_bytes()
    reviewer = make_key(tmp_path, "reviewer.key", PASSPHRASE_ENV)
    _one_line(sign(twice, reviewer, "reviewer", key), 1, "signature 2 duplicates signature 1")
    assert twice.read_bytes() == before


def test_sign_verifies_the_figures_first(
    audited: list[Path], key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement whose figures do not follow from the bundle's records is not
    countersigned: sign verifies as verify does, and writes nothing."""
    from auditor.evidence import statement as build  # computes the predicate

    real = build.headline_figures

    def inflated(run: Any) -> dict[str, Any]:
        figures = real(run)
        if run.name == "sloppy":
            figures["metrics"]["hallucination_rate"]["value"] = 0.0
        return figures

    monkeypatch.setattr(build, "headline_figures", inflated)
    out = tmp_path / "x.tar"
    assert bundle(audited, key, out).exit_code == 0
    monkeypatch.undo()
    before = out.read_bytes()
    reviewer = make_key(tmp_path, "reviewer.key", PASSPHRASE_ENV)
    done = sign(out, reviewer, "reviewer", key)
    _one_line(done, 1, "runs[sloppy].figures.metrics.hallucination_rate.value: 0")
    assert done.stderr.rstrip().endswith("; not signed")
    assert out.read_bytes() == before


def test_sign_needs_the_earlier_signers_keys(bundled: Path, key: Path, tmp_path: Path) -> None:
    """Without --trust the bundler's signature cannot be checked: bad input naming --trust;
    with a key that did not sign, refused as verify refuses; the signer's own is trusted."""
    before = bundled.read_bytes()
    reviewer = make_key(tmp_path, "reviewer.key", PASSPHRASE_ENV)
    _one_line(sign(bundled, reviewer, "reviewer"), 2, "with --trust KEY.pub")
    stranger = make_key(tmp_path, "stranger.key", PASSPHRASE_ENV)
    _one_line(sign(bundled, reviewer, "reviewer", stranger), 1, "by no key given with --trust")
    assert bundled.read_bytes() == before
    assert sign(bundled, key, "approver").exit_code == 0  # the bundler's own key


@pytest.mark.parametrize(
    ("pack", "said"),
    [
        (lambda data, path: path.write_bytes(gzip.compress(data)), "a gzip file, not a bundle"),
        (
            lambda data, path: zipfile.ZipFile(path, "w").writestr("audit.tar", data),
            "a zip archive, not a bundle",
        ),
    ],
    ids=["gzip", "zip"],
)
def test_a_compressed_or_zipped_bundle_is_named_as_what_it_is(
    bundled: Path, key: Path, tmp_path: Path, pack: Any, said: str
) -> None:
    packed = tmp_path / "audit.tar.packed"
    pack(bundled.read_bytes(), packed)
    done = verify(packed, key)
    _one_line(done, 2, said)
    assert "a bundle is the plain tar `auditor bundle` writes" in done.stderr
    assert "truncated" not in done.stderr


def test_verify_json_prints_an_object_on_every_exit(
    bundled: Path, key: Path, tmp_path: Path
) -> None:
    """0, 1 and 2 (bad input: no such bundle, no such key, a gzip, a missing --key): each
    prints one JSON object on stdout."""
    assert json.loads(verify(bundled, key, as_json=True).stdout)["verified"] is True
    cases = [
        (1, ["verify", tmp_path / "t.tar", "--key", f"{key}.pub"]),
        (2, ["verify", tmp_path / "none.tar", "--key", f"{key}.pub"]),
        (2, ["verify", bundled, "--key", tmp_path / "none.pub"]),
        (2, ["verify", bundled]),
        (2, ["verify", bundled, "--key", f"{key}.pub", "--no-such-option"]),
    ]
    (tmp_path / "t.tar").write_bytes(bundled.read_bytes()[:700])
    for code, args in cases:
        done = run(*args, "--json")
        assert done.exit_code == code, (args, done.output)
        shown = json.loads(done.stdout)
        assert shown["verified"] is False and shown["failure"], shown
        assert done.stderr.startswith("Error: ") or "Error: " in done.stderr
