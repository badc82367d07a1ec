"""The hostile pass over the review loop and the bundle: a small audit made with the fakes (no
engine), and hostile inputs run through the real CLI commands, each classified mechanically.

`bench/hostile_review.py` runs every case and writes the results file; `tests/test_hostile_bench.py`
runs a handful through the same machinery (benches are not imported by tests, so the
machinery lives here, beside the other tools of tests/).

The base (`build`): two runs of imported answers checked by the fake judge ("first", "second",
30 answers each), a review sample of 12 drawn with a blind second review of about half,
labels as the review page writes them (Ana labels the first 8 drawn of each run, Bo reviews
the second-review answers among them blind and disagrees on one, Cy adjudicates that one),
keys (the auditor's, a reviewer's, a stranger's), the signed bundle of both runs with the labels
and its countersigned copy; optionally an audit of two pipelines (fake engines, an index) with
its own sample and labels, and a bundle of it with its documents.

Each case copies the base into a workspace of its own, damages something, runs one command
(in process with `CliRunner`, or in a subprocess where a hang or a real file descriptor
matters: a FIFO, /dev/zero, a 20 GiB sparse member) and is classified:

- refused: exit != 0, one `Error:` line on stderr (click's usage lines and log warnings
  aside), at most 2,000 characters, no traceback, every declared word in it, and no file of
  the workspace written or changed (a failing gate may write its report: `writes_on_failure`);
- honest: exit 0 and the case's honest figures (recomputed by the bench's own arithmetic from
  the untouched labels, or "as on the clean run"), no input overwritten;
- silent-wrong: exit 0 (or "verified") with a figure, verdict or file that differs from the
  honest one, or an input lost or overwritten;
- loud-defect: a traceback, a hang, a MemoryError, a refusal that changed files, more than one
  line, or a message without the words the case declares (misleading).
A case expects `refused` (with the words its message must hold; `a|b` is either) or `honest`.
"""

from __future__ import annotations

import codecs
import contextlib
import copy
import gzip
import hashlib
import io
import json
import math
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
import unicodedata
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from auditor.cli import cli

REPO = Path(__file__).resolve().parents[1]
PASS_ENV = "AUDITOR_HOSTILE_PASSPHRASE"
PASSPHRASE = "hostile bench passphrase"
RUNS = ("first", "second")
SAMPLE, LABELLED, SHARE = 12, 8, 0.5
REPORT_WRITES = ("*/summary.json", "report.html", "h.db")
MAX_MESSAGE = 2000
SUBPROCESS_MEMORY = 2 << 30  # RLIMIT_AS of a subprocess case: /dev/zero must not eat the host
HANG_S = 30.0  # a subprocess case's limit (a refusal takes ~3 s there)
PROCESS_HANG_S = 60.0  # an in-process case's limit
Z95 = 1.959963984540054
OUTCOMES = ("refused", "honest", "silent-wrong", "loud-defect")


# --------------------------------------------------------------------------- the base audit


def install_fakes() -> Callable[[], None]:
    """The engines, judge, embedder and model preparation as the tests' fakes, for this
    process; returns the undo."""
    import pytest

    from auditor.generate.vllm_offline import VLLMGenerator
    from auditor.testing import FakeEmbedder, FakeGenerator, FakeJudge
    from tests.test_audit import GOOD, SLOPPY

    answers = iter([GOOD, SLOPPY])
    patch = pytest.MonkeyPatch()

    def start(cls: Any, cfg: Any, **_: Any) -> FakeGenerator:
        return FakeGenerator().enqueue(*next(answers, GOOD))

    patch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    patch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    patch.setattr(VLLMGenerator, "from_config", classmethod(start))
    patch.setattr("auditor.audit.prepare_model", lambda name, **_: None)
    patch.setenv(PASS_ENV, PASSPHRASE)
    return patch.undo


@dataclass
class Base:
    """What every case starts from (read only: each case copies `root`)."""

    root: Path
    seed: int
    drawn: dict[str, list[str]]  # pipeline -> the drawn order (SAMPLE answers)
    second: dict[str, list[str]]  # pipeline -> the answers drawn for a second review
    truth: dict[str, dict[str, bool]]  # pipeline -> answer -> hallucinated
    flagged: dict[str, dict[str, bool]]  # pipeline -> answer -> the judge flagged it
    claims: dict[str, dict[str, list[dict[str, Any]]]]  # pipeline -> answer -> claims
    fingerprints: dict[str, tuple[str, str]]  # pipeline -> (run, check)
    disputed: dict[str, str]  # pipeline -> the answer Bo disagreed on (Cy adjudicated)
    labels: list[dict[str, Any]]  # the clean labels' rows
    when: str  # the clean labels' labelled_at
    started: dict[str, str]  # pipeline -> the run's started_at
    clean: dict[str, dict[str, Any]] = field(default_factory=dict)  # pipeline -> reviewed
    clean_predicate: dict[str, Any] = field(default_factory=dict)
    statement_sha256: str = ""
    audit: bool = False
    audit_drawn: dict[str, list[str]] = field(default_factory=dict)
    audit_labels: list[dict[str, Any]] = field(default_factory=list)
    audit_clean: dict[str, dict[str, Any]] = field(default_factory=dict)

    def prefix(self, pipeline: str) -> list[str]:
        return self.drawn[pipeline][:LABELLED]

    def positives(self, pipeline: str, ids: list[str]) -> int:
        return sum(self.truth[pipeline][i] for i in ids)


def _invoke(argv: list[str], env: dict[str, str] | None = None) -> Any:
    done = CliRunner().invoke(cli, [str(a) for a in argv], env=env)
    if done.exit_code != 0:
        raise RuntimeError(f"the base failed: {' '.join(map(str, argv))}: {done.output[-2000:]}")
    return done


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _choose_seed(
    base_ids: dict[str, list[str]], fps: dict[str, tuple[str, str]], truth: Any, flagged: Any
) -> int:
    """The first seed whose draw gives every case its material in both runs: two second
    reviews in the labelled prefix, an answer of the prefix without one at positions 3-6 (a
    gap), flagged and passed answers of the prefix without one, a mixed prefix."""
    from auditor.review import choose_sample

    for seed in range(500):
        good = True
        for name, ids in base_ids.items():
            drawn = choose_sample(ids, SAMPLE, seed, fps[name][0], fps[name][1], SHARE)
            prefix, second = drawn.sample[:LABELLED], set(drawn.second_review)
            single = [i for i in prefix if i not in second]
            positives = sum(truth[name][i] for i in prefix)
            good = good and (
                prefix[0] not in second
                and len([i for i in prefix if i in second]) >= 2
                and any(prefix[k] not in second for k in range(3, 7))
                and any(flagged[name][i] and truth[name][i] for i in single[1:])
                and any(not flagged[name][i] and not truth[name][i] for i in single[1:])
                and 0 < positives < LABELLED
            )
        if good:
            return seed
    raise RuntimeError("no seed gives every case its material")


def label(base: Base, pipeline: str, ident: str, **extra: Any) -> dict[str, Any]:
    """A label as the review page writes it: Ana's first review, the truth."""
    run, check = base.fingerprints[pipeline]
    return {
        "id": ident,
        "pipeline": pipeline,
        "fingerprint": run,
        "check_fingerprint": check,
        "hallucinated": base.truth[pipeline][ident],
        "reviewer": "Ana",
        "role": "first",
        "labelled_at": base.when,
    } | extra


def clean_labels(base: Base) -> list[dict[str, Any]]:
    """Ana: the labelled prefix of each run; Bo: the second reviews among it (disagreeing on
    the first of them); Cy: the adjudication of that one."""
    rows = [label(base, p, i) for p in RUNS for i in base.prefix(p)]
    for p in RUNS:
        seconds = [i for i in base.prefix(p) if i in base.second[p]]
        base.disputed[p] = seconds[0]
        for i in seconds:
            verdict = base.truth[p][i] != (i == seconds[0])
            rows.append(label(base, p, i, reviewer="Bo", role="second", hallucinated=verdict))
    for p in RUNS:
        rows.append(label(base, p, base.disputed[p], reviewer="Cy", role="adjudicator"))
    return rows


def reviewed_of(run_dir: Path) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text("utf-8"))
    return {
        "reviewed": summary.get("reviewed"),
        "metric": summary["metrics"].get("reviewed_hallucination_rate"),
    }


def build(root: Path, answers: int = 30, audit: bool = True) -> Base:
    """The base every case copies (module doc); the fakes must be installed."""
    from auditor.claim_rows import Claim, flagged_at
    from auditor.evidence.keys import generate_key
    from auditor.review import check_fingerprint, run_fingerprint
    from tests.verify.test_calibrate import _labelled

    root.mkdir(parents=True)
    truth: dict[str, dict[str, bool]] = {}
    for name, every in zip(RUNS, (3, 4), strict=True):
        rows = _labelled(answers, wrong_every=every)
        truth[name] = {r["id"]: r["hallucinated"] for r in rows}
        source = _jsonl(root / f"{name}-answers.jsonl", rows)
        _invoke(
            [
                "check",
                "--answers",
                source,
                "--out",
                root / name,
                "-q",
                "--judge-set",
                'metrics=["faithfulness"]',
            ]
        )
    fps, flagged, claims, started = {}, {}, {}, {}
    for name in RUNS:
        manifest = json.loads((root / name / "manifest.json").read_text("utf-8"))
        check = json.loads((root / name / "check.json").read_text("utf-8"))
        fps[name] = (run_fingerprint(manifest), check_fingerprint(check) or "")
        started[name] = str(manifest["started_at"])
        threshold = float(check["judge"]["config"].get("support_threshold", 0.5))
        rows = _rows(root / name / "checks.jsonl")
        claims[name] = {r["id"]: r["claims"] for r in rows}
        flagged[name] = {
            r["id"]: flagged_at([Claim.from_json(c) for c in r["claims"]], threshold) for r in rows
        }
    ids = {name: sorted(truth[name]) for name in RUNS}
    seed = _choose_seed(ids, fps, truth, flagged)
    _invoke(["review", *(root / n for n in RUNS), "--sample", SAMPLE, "--seed", seed,
             "--second-review", SHARE])  # fmt: skip
    drawn, second = {}, {}
    for name in RUNS:
        review = json.loads((root / name / "review.json").read_text("utf-8"))
        drawn[name] = [e["id"] for e in review["sample"]]
        second[name] = list(review["second_review"]["ids"])
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    base = Base(root, seed, drawn, second, truth, flagged, claims, fps, {}, [], when, started)
    base.labels = clean_labels(base)
    _jsonl(root / "labels.jsonl", base.labels)
    # the clean figures, on a scratch copy
    scratch = root.parent / f"{root.name}-clean"
    shutil.copytree(root, scratch)
    _invoke(["report", *(scratch / n for n in RUNS), "--labels", scratch / "labels.jsonl",
             "--out", scratch / "report.html", "--history", scratch / "h.db"])  # fmt: skip
    base.clean = {name: reviewed_of(scratch / name) for name in RUNS}
    shutil.rmtree(scratch)
    keys = root / "keys"
    keys.mkdir()
    for name in ("auditor", "reviewer", "stranger"):
        generate_key(keys / f"{name}.key", PASSPHRASE.encode())
    _invoke(["bundle", *(root / n for n in RUNS), "--key", keys / "auditor.key",
             "--out", root / "bundle.tar", "--passphrase-env", PASS_ENV,
             "--labels", root / "labels.jsonl", "--gate", "hallucination_rate<=0.5",
             "--gate", "reviewed_hallucination_rate<=0.9"])  # fmt: skip
    shutil.copy(root / "bundle.tar", root / "signed.tar")
    _invoke(["sign", root / "signed.tar", "--key", keys / "reviewer.key",
             "--trust", keys / "auditor.key.pub", "--role", "reviewer",
             "--passphrase-env", PASS_ENV])  # fmt: skip
    _, envelope, statement = open_bundle(root / "bundle.tar")
    base.clean_predicate = statement["predicate"]
    base.statement_sha256 = envelope.statement_sha256
    if audit:
        _build_audit(base)
    return base


def _build_audit(base: Base) -> None:
    """An audit of two pipelines on an index (fake engines), one answer of each drawn for
    review and labelled; and a bundle of it with the indexed documents."""
    from auditor.config import IngestConfig
    from auditor.files import utc_now
    from auditor.ingest import ingest_corpus
    from auditor.review import run_fingerprint
    from auditor.testing import FakeEmbedder
    from tests.test_audit import DOCS, QUESTIONS

    root = base.root
    corpus = root / "corpus"
    for name, text in DOCS.items():
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        (corpus / name).write_text(text, encoding="utf-8")
    ingest_corpus(corpus, root / "index", IngestConfig(), FakeEmbedder())
    _jsonl(root / "q.jsonl", QUESTIONS)
    for name in ("p1", "p2"):
        (root / f"{name}.toml").write_text(
            f'name = "{name}"\n[ingest.embedder]\nmodel = "fake-words"\n[retrieval]\ntop_k = 2\n'
            '[generator]\nkind = "vllm"\nmodel = "smollm2-135m-instruct"\n',
            "utf-8",
        )
    _invoke(audit_argv(root, "--review", "1"))
    after_the_runs = utc_now()  # labels are made on the runs' review pages, after the runs
    rows = []
    for name in ("p1", "p2"):
        run = root / "audit" / name
        review = json.loads((run / "review.json").read_text("utf-8"))
        base.audit_drawn[name] = [e["id"] for e in review["sample"]]
        fingerprint = run_fingerprint(json.loads((run / "manifest.json").read_text("utf-8")))
        rows += [
            {
                "id": i,
                "pipeline": name,
                "fingerprint": fingerprint,
                "hallucinated": name == "p2",
                "reviewer": "Ana",
                "labelled_at": after_the_runs,
            }
            for i in base.audit_drawn[name]
        ]
    base.audit_labels = rows
    _jsonl(root / "audit-labels.jsonl", rows)
    scratch = root.parent / f"{root.name}-audit-clean"
    shutil.copytree(root, scratch, symlinks=True)
    _invoke(audit_argv(scratch, "--labels", scratch / "audit-labels.jsonl"))
    base.audit_clean = {n: reviewed_of(scratch / "audit" / n) for n in ("p1", "p2")}
    shutil.rmtree(scratch)
    _invoke(["bundle", root / "audit" / "p1", root / "audit" / "p2", "--key",
             root / "keys" / "auditor.key", "--out", root / "docs.tar", "--passphrase-env",
             PASS_ENV, "--with-documents"])  # fmt: skip
    base.audit = True


def audit_argv(root: Path, *extra: Any) -> list[Any]:
    return [
        "audit", "--pipeline", root / "p1.toml", "--pipeline", root / "p2.toml",
        "--questions", root / "q.jsonl", "--index", root / "index", "--out", root / "audit",
        "--history", root / "audit-h.sqlite", "--judge-set", 'metrics=["faithfulness"]', "-q",
        *extra,
    ]  # fmt: skip


# --------------------------------------------------------------------------- bundles by hand


def open_bundle(path: Path) -> tuple[dict[str, bytes], Any, dict[str, Any]]:
    """A bundle's files, envelope and statement (read with the product's safe reader)."""
    from auditor.evidence.bag import ENVELOPE, read_tar
    from auditor.evidence.dsse import Envelope

    files = read_tar(path)
    envelope = Envelope.from_bytes(files[ENVELOPE])
    return files, envelope, json.loads(envelope.payload)


def private_key(path: Path) -> Any:
    from auditor.evidence.keys import load_private_key

    return load_private_key(path, PASSPHRASE.encode())


def reseal(
    path: Path,
    files: dict[str, bytes],
    statement: dict[str, Any],
    signers: list[tuple[Path, str]],
    signed_at: str,
) -> None:
    """Write `files` as a bundle whose bag tags and subjects are made again from them and
    whose statement is signed by `signers` (key file, role): what someone holding the keys
    would do after editing a bundle."""
    from auditor.evidence.bag import BAG_INFO, ENVELOPE, bag_tag_files, tar_bytes
    from auditor.evidence.build import epoch_of
    from auditor.evidence.canonical import canonical_json
    from auditor.evidence.dsse import PAYLOAD_TYPE, Envelope, sign_payload

    files = {n: b for n, b in files.items() if n != ENVELOPE}
    info = dict(
        line.split(": ", 1) for line in files[BAG_INFO].decode().splitlines() if ": " in line
    )
    payload = {n: b for n, b in files.items() if n.startswith("data/")}
    files |= bag_tag_files(payload, info["Bag-Software-Agent"], info["Bagging-Date"])
    statement = copy.deepcopy(statement)
    statement["subject"] = [
        {"name": n, "digest": {"sha256": hashlib.sha256(files[n]).hexdigest()}}
        for n in sorted(files)
    ]
    body = canonical_json(statement)
    entries = tuple(
        sign_payload(private_key(key), PAYLOAD_TYPE, body, role, signed_at) for key, role in signers
    )
    files[ENVELOPE] = Envelope(PAYLOAD_TYPE, body, entries).to_bytes()
    end = (statement["predicate"].get("audit_period") or {}).get("end")
    path.write_bytes(tar_bytes(files, epoch_of(end)))


def edit_bundle(
    path: Path,
    edit: Callable[[dict[str, bytes], dict[str, Any]], None],
    signers: tuple[str, ...] = ("auditor",),
) -> None:
    """Edit a bundle's files and statement in place, then re-sign it with its own keys."""
    files, envelope, statement = open_bundle(path)
    edit(files, statement)
    keys = path.parent / "keys"
    reseal(
        path,
        files,
        statement,
        [(keys / f"{name}.key", name) for name in signers],
        envelope.signatures[0].signed_at,
    )


def rewrite_tar(path: Path, files: dict[str, bytes]) -> None:
    """`files` as the bundle's tar, signatures untouched."""
    from auditor.evidence.bag import tar_bytes

    path.write_bytes(tar_bytes(files, 0))


def sparse_member(name: str, real_size: int) -> bytes:
    """A GNU old-style sparse member (type 'S'): 512 bytes stored, `real_size` declared (base
    256), its one data block at the end of the file."""
    header = bytearray(512)

    def put(offset: int, width: int, value: bytes) -> None:
        header[offset : offset + len(value)] = value[:width]

    def octal(value: int, width: int) -> bytes:
        return f"{value:0{width - 1}o}".encode() + b"\0"

    def base256(value: int, width: int) -> bytes:
        return b"\x80" + value.to_bytes(width - 1, "big")

    put(0, 100, name.encode())
    put(100, 8, octal(0o644, 8))
    put(108, 8, octal(0, 8))
    put(116, 8, octal(0, 8))
    put(124, 12, octal(512, 12))
    put(136, 12, octal(0, 12))
    header[156] = ord("S")
    put(257, 8, b"ustar  \0")
    put(386, 12, base256(real_size - 512, 12))  # the one sparse entry: offset, numbytes
    put(398, 12, octal(512, 12))
    header[482] = 0  # no extended sparse headers
    put(483, 12, base256(real_size, 12))
    header[148:156] = b" " * 8
    header[148:156] = f"{sum(header):06o}\0 ".encode()
    return bytes(header) + b"x" * 512


def with_sparse(path: Path, real_size: int = 20 << 30) -> None:
    """The bundle at `path` with a sparse member declaring `real_size` before its end blocks."""
    data = path.read_bytes()
    end = len(data)
    while end >= 512 and data[end - 512 : end] == bytes(512):
        end -= 512
    body = data[:end] + sparse_member("data/zeros.bin", real_size)
    body += bytes(1024)
    body += bytes(-len(body) % 10240)
    path.write_bytes(body)


# --------------------------------------------------------------------------- running a case


@dataclass
class Call:
    """One command of a case: its arguments, what counts as honest, what it may write."""

    argv: list[Any]
    honest: Callable[[Workspace, Ran], str | None] = lambda ws, ran: None
    writes: tuple[str, ...] = ()  # fnmatch patterns (workspace-relative) a success may change
    writes_on_failure: bool = False  # a failing gate writes its report first
    subprocess: bool = False
    timeout: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    json_stdout: bool = False  # --json: stdout must be JSON whatever the exit code


@dataclass
class Case:
    id: str
    cls: str
    command: str
    expected: str  # "refused" or "honest"
    make: Callable[[Workspace], Call]
    words: tuple[str, ...] = ()
    what: str = ""  # the input, in words (the Markdown table)
    needs_audit: bool = False


@dataclass
class Ran:
    code: int | None
    stdout: str
    stderr: str
    crash: str | None  # a traceback's last line or the exception
    hung: bool
    seconds: float


class Workspace:
    """A case's copy of the base."""

    def __init__(self, root: Path, base: Base) -> None:
        self.root, self.base = root, base

    def p(self, rel: str) -> Path:
        return self.root / rel

    def rows(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self.base.labels)

    def labels(self, rows: list[dict[str, Any]], name: str = "l.jsonl") -> Path:
        return _jsonl(self.p(name), rows)

    def raw(self, data: bytes | str, name: str = "l.jsonl") -> Path:
        path = self.p(name)
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return path

    def edit_json(self, rel: str, edit: Callable[[Any], Any]) -> None:
        path = self.p(rel)
        data = json.loads(path.read_text("utf-8"))
        data = edit(data) or data
        path.write_text(json.dumps(data, indent=2), "utf-8")

    def edit_lines(self, rel: str, edit: Callable[[list[str]], list[str]]) -> None:
        path = self.p(rel)
        lines = path.read_text("utf-8").splitlines()
        path.write_text("".join(line + "\n" for line in edit(lines)), "utf-8")

    def report(self, labels: Path | str | None = "labels.jsonl", *extra: Any) -> list[Any]:
        argv: list[Any] = ["report", *(self.p(r) for r in RUNS)]
        if labels is not None:
            argv += ["--labels", labels if isinstance(labels, Path) else self.p(labels)]
        return [*argv, "--out", self.p("report.html"), "--history", self.p("h.db"), *extra]

    def bundle(self, labels: Path | str | None = "labels.jsonl", *extra: Any) -> list[Any]:
        argv: list[Any] = [
            "bundle",
            *(self.p(r) for r in RUNS),
            "--key",
            self.p("keys/auditor.key"),
        ]
        argv += ["--out", self.p("new.tar"), "--passphrase-env", PASS_ENV]
        if labels is not None:
            argv += ["--labels", labels if isinstance(labels, Path) else self.p(labels)]
        return [*argv, *extra]

    def verify(self, bundle: str = "bundle.tar", *keys: str) -> list[Any]:
        given = keys or ("auditor",)
        return ["verify", self.p(bundle), *(a for k in given for a in ("--key", self.p(f"keys/{k}.key.pub")))]  # fmt: skip

    def sign(self, bundle: Path | str = "bundle.tar", key: str = "reviewer") -> list[Any]:
        target = bundle if isinstance(bundle, Path) else self.p(bundle)
        # the bundler's key trusted (sign verifies the bundle first: issue 48)
        return ["sign", target, "--key", self.p(f"keys/{key}.key"),
                "--trust", self.p("keys/auditor.key.pub"), "--role", "reviewer",
                "--passphrase-env", PASS_ENV]  # fmt: skip


class _Hang(BaseException):
    """An in-process command past its limit (BaseException: CliRunner does not catch it)."""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SUBPROCESS_MEMORY, SUBPROCESS_MEMORY))


def run_call(ws: Workspace, call: Call) -> Ran:
    argv = [str(a) for a in call.argv]
    started = time.monotonic()
    if call.subprocess:
        limit = call.timeout or HANG_S
        env = os.environ | {PASS_ENV: PASSPHRASE} | call.env
        proc = subprocess.Popen(
            [sys.executable, "-m", "auditor", *argv],
            cwd=ws.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limit_memory,
        )
        hung = False
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            hung = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        crash = None
        if "Traceback (most recent call last)" in stderr:
            tail = [line for line in stderr.splitlines() if line.strip()]
            crash = tail[-1][:300] if tail else "Traceback"
        code = None if hung else proc.returncode
        return Ran(code, stdout, stderr, crash, hung, time.monotonic() - started)
    limit = call.timeout or PROCESS_HANG_S

    def alarm(signum: int, frame: Any) -> None:
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        done = CliRunner().invoke(cli, argv, env={PASS_ENV: PASSPHRASE, **call.env})
    except _Hang:
        return Ran(None, "", "", None, True, time.monotonic() - started)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    crash = None
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        crash = f"{type(done.exception).__name__}: {done.exception}"[:300]
    return Ran(done.exit_code, done.stdout, done.stderr, crash, False, time.monotonic() - started)


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under `root` (links not followed, FIFOs never opened): type, and a file's
    sha256 and mode, a link's target."""
    found: dict[str, tuple[Any, ...]] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if name.endswith("-journal"):
                continue
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[rel] = ("file", digest, stat.S_IMODE(info.st_mode))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir",)
            else:
                found[rel] = ("special", stat.S_IFMT(info.st_mode))
    return found


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    found = []
    for rel in sorted(before.keys() | after.keys()):
        if rel not in after:
            found.append(f"{rel} removed")
        elif rel not in before:
            found.append(f"{rel} added")
        elif before[rel] != after[rel]:
            found.append(f"{rel} changed")
    return found


def _words_missing(line: str, words: tuple[str, ...]) -> list[str]:
    low = line.lower()
    return [w for w in words if not any(alt.lower() in low for alt in w.split("|"))]


def classify(case: Case, call: Call, ran: Ran, ws: Workspace, moved: list[str]) -> tuple[str, str]:
    """(outcome, what the user gets) of a case (module doc)."""
    if ran.hung:
        return (
            "loud-defect",
            f"hang: no answer in {call.timeout or (HANG_S if call.subprocess else PROCESS_HANG_S):.0f} s",
        )
    text = ran.stdout + ran.stderr
    if ran.crash or "MemoryError" in text:
        return "loud-defect", f"traceback: {ran.crash or 'MemoryError'}"
    if ran.code == 0:
        touched = [m for m in moved if not _allowed(m, call.writes)]
        lost = [m for m in touched if not m.endswith(" added")]
        if lost:
            return "silent-wrong", f"exit 0, and an input was lost or overwritten: {lost[0]}"
        if call.json_stdout and _json(ran.stdout) is None:
            return "loud-defect", "exit 0 without JSON on stdout (--json)"
        try:
            problem = call.honest(ws, ran)
        except Exception as exc:  # the bench's own check failed: said, not hidden
            return "bench-error", f"the honest check failed: {type(exc).__name__}: {exc}"
        if problem:
            return "silent-wrong", f"exit 0: {problem}"
        return "honest", "exit 0 with the honest figures"
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(("Usage:", "Try '", "WARNING "))]
    errors = [line for line in said if line.startswith("Error:")]
    if ran.code == 1 and len(errors) == 1 and errors[0].startswith("Error: gate failed"):
        said = errors  # a failed gate is the answer: the command's table and gate lines go with it
    if len(said) != 1 or len(errors) != 1:
        return (
            "loud-defect",
            f"exit {ran.code} with {len(said)} lines on stderr: {(said or [''])[0][:200]}",
        )
    # the workspace's path aside (it holds the case's id): what the message itself says
    line = errors[0].replace(f"{ws.root}/", "").replace(str(ws.root), ".")
    touched = [m for m in moved if not (call.writes_on_failure and _allowed(m, call.writes))]
    if touched:
        return "loud-defect", f"refused, but changed {touched[0]}: {line[:200]}"
    if len(line) > MAX_MESSAGE:
        return "loud-defect", f"a {len(line):,}-character message: {line[:120]}..."
    if call.json_stdout:
        shown = _json(ran.stdout)
        if not isinstance(shown, dict) or shown.get("verified") is not False:
            return "loud-defect", f"exit {ran.code} without JSON on stdout (--json): {line[:200]}"
    missing = _words_missing(line, case.words) if case.expected == "refused" else []
    if missing:
        return "loud-defect", f"misleading (no {' / '.join(missing)}): {line[:240]}"
    return "refused", line


def _allowed(change: str, writes: tuple[str, ...]) -> bool:
    rel = change.rsplit(" ", 1)[0]
    return any(fnmatch(rel, pattern) for pattern in writes)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def run_case(case: Case, base: Base, work: Path) -> dict[str, Any]:
    """Run one case in a fresh copy of the base; its results entry."""
    root = work / case.id
    shutil.copytree(base.root, root, symlinks=True)
    ws = Workspace(root, base)
    started = time.monotonic()
    try:
        call = case.make(ws)
    except Exception as exc:  # the bench's own setup failed: said, not hidden
        return _entry(case, "bench-error", None, f"setup: {type(exc).__name__}: {exc}", 0.0, "")
    before = snapshot(root)
    ran = run_call(ws, call)
    moved = changes(before, snapshot(root))
    outcome, detail = classify(case, call, ran, ws, moved)
    first = next((line for line in ran.stderr.splitlines() if line.strip()), "")
    entry = _entry(case, outcome, ran.code, detail, ran.seconds, first, str(root))
    entry["setup_seconds"] = round(time.monotonic() - started - ran.seconds, 2)
    with contextlib.suppress(OSError):
        for folder, dirs, _ in os.walk(root):
            for name in dirs:
                os.chmod(Path(folder) / name, 0o755)
        shutil.rmtree(root)
    return entry


def _entry(case: Case, outcome: str, code: int | None, detail: str, seconds: float,
           first: str, root: str = "") -> dict[str, Any]:  # fmt: skip
    def clean(text: str) -> str:
        text = text.replace(root + "/", "").replace(root, ".") if root else text
        return text[:400]

    return {
        "id": case.id,
        "class": case.cls,
        "command": case.command,
        "input": case.what,
        "expected": case.expected,
        "words": list(case.words),
        "outcome": outcome,
        "as_expected": outcome == case.expected,
        "exit_code": code,
        "stderr_first_line": clean(first),
        "detail": clean(detail),
        "seconds": round(seconds, 3),
    }


# --------------------------------------------------------------------------- honest figures


def wilson(positives: int, n: int, population: int) -> tuple[float, float, float]:
    """The bench's own arithmetic of a labels-only reviewed rate: the share, and Wilson's 95 %
    interval at the effective sample size n (N - 1) / (N - n) of a draw without replacement."""
    share = positives / n
    if n >= population:
        return share, share, share
    m = n * (population - 1) / (population - n)
    z2 = Z95 * Z95
    centre = (share + z2 / (2 * m)) / (1 + z2 / m)
    half = Z95 * math.sqrt(share * (1 - share) / m + z2 / (4 * m * m)) / (1 + z2 / m)
    return share, max(0.0, centre - half), min(1.0, centre + half)


# the fields a difference is named by first: the rate before its interval, the reviewers
# before the bootstrap's details
PRIORITY = ("metric", "reviewed", "figures", "labels", "value", "answer_rate", "reviewers", "name",
            "agreement", "kappa", "disagreements", "sample", "review")  # fmt: skip


def _order(key: Any) -> tuple[int, str]:
    return (PRIORITY.index(key) if key in PRIORITY else len(PRIORITY), str(key))


def _first_difference(got: Any, want: Any, where: str = "") -> str | None:
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(got.keys() | want.keys(), key=_order):
            found = _first_difference(got.get(key), want.get(key), f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        for n, (one, other) in enumerate(zip(got, want, strict=True)):
            found = _first_difference(one, other, f"{where}[{n}]")
            if found:
                return found
        return None
    if isinstance(got, float) and isinstance(want, float) and abs(got - want) < 1e-9:
        return None
    return None if got == want else f"{where.lstrip('.')} {_short(got)} (honest: {_short(want)})"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 90 else text[:87] + "..."


Honest = Callable[[Workspace, Ran], str | None]


def same_review(
    *pipelines: str, ignore: tuple[str, ...] = (), audit: bool = False, **expected: Any
) -> Honest:
    """Each pipeline's reviewed figures as on the clean run (but the `ignore`d fields of
    `reviewed`, and those `expected` gives: {field: value})."""

    def check(ws: Workspace, ran: Ran) -> str | None:
        for name in pipelines or RUNS:
            folder = ws.p(f"audit/{name}") if audit else ws.p(name)
            if not (folder / "summary.json").is_file():
                return f"{name}: no summary.json"
            got = reviewed_of(folder)
            want = copy.deepcopy((ws.base.audit_clean if audit else ws.base.clean)[name])
            for key in ignore:
                (got["reviewed"] or {}).pop(key, None)
                (want["reviewed"] or {}).pop(key, None)
            for key, value in expected.items():
                want["reviewed"][key] = value
            found = _first_difference(got, want)
            if found:
                return f"{name}: {found}"
        return None

    return check


def rate_is(pipeline: str, n: int, positives: int, outside: int = 0, gap: int = 0) -> Honest:
    """The pipeline's reviewed answer rate as the bench computes it from the untouched labels:
    n counted, `positives` of them hallucinated (labels alone: n < 10)."""

    def check(ws: Workspace, ran: Ran) -> str | None:
        got = reviewed_of(ws.p(pipeline))["reviewed"]
        if got is None:
            return f"{pipeline}: no reviewed figures"
        population = got["answer_rate"]["population"]
        value, low, high = wilson(positives, n, population)
        want = {"labels": n, "labels_outside_sample": outside, "labels_past_gap": gap}
        for key, wanted in want.items():
            if got.get(key) != wanted:
                return f"{pipeline}: {key} {got.get(key)} (honest: {wanted})"
        rate = got["answer_rate"]
        for key, wanted in (("value", value), ("low", low), ("high", high)):
            if abs(rate[key] - wanted) > 2e-6:
                return f"{pipeline}: answer_rate.{key} {rate[key]:.6f} (honest: {wanted:.6f})"
        return None

    return check


FILLERS = {"\u115f", "\u1160", "\u3164", "\uffa0"}  # Hangul fillers: letters that show nothing


def same_person(name: str) -> str:
    """A reviewer's name as a person reads it: NFKC, case folded, blanks and characters that
    show nothing (format, combining marks that join nothing, fillers) left out."""
    hidden = {"Cf", "Cc", "Mn", "Zs", "Zl", "Zp", "Co", "Cn"}
    text = unicodedata.normalize("NFKC", name).casefold()
    text = "".join(c for c in text if unicodedata.category(c) not in hidden and c not in FILLERS)
    return unicodedata.normalize("NFC", text)


def distinct_reviewers(pipeline: str) -> Honest:
    """The two reviews of each answer are by two people (names compared as people read them)."""

    def check(ws: Workspace, ran: Ran) -> str | None:
        reviewed = reviewed_of(ws.p(pipeline))["reviewed"] or {}
        people = (reviewed.get("agreement") or {}).get("reviewers") or {}
        firsts = {same_person(n): n for n in people.get("first") or []}
        for name in people.get("second") or []:
            if same_person(name) in firsts:
                return (
                    f"{pipeline}: the second review by {name!r} counted as another person's than "
                    f"the first by {firsts[same_person(name)]!r} (their agreement is one person's)"
                )
        return None

    return check


def own_adjudication(ws: Workspace, ran: Ran) -> str | None:
    """An adjudication by one of the two reviewers it settles is no adjudication."""
    for name in RUNS:
        agreement = (reviewed_of(ws.p(name))["reviewed"] or {}).get("agreement") or {}
        people = agreement.get("reviewers") or {}
        both = {same_person(n) for role in ("first", "second") for n in people.get(role) or []}
        for entry in agreement.get("disagreements") or []:
            if same_person(entry.get("adjudicator") or "") in both:
                return f"{name}: {entry['adjudicator']!r} settled a disagreement of their own"
    return None


def all_of(*checks: Honest) -> Honest:
    def check(ws: Workspace, ran: Ran) -> str | None:
        return next((found for c in checks if (found := c(ws, ran))), None)

    return check


def html_free_of(payload: str) -> Honest:
    def check(ws: Workspace, ran: Ran) -> str | None:
        html = ws.p("report.html").read_text("utf-8")
        return f"report.html holds {payload!r} unescaped" if payload in html else None

    return check


def gate_not_passed(metric: str) -> Honest:
    def check(ws: Workspace, ran: Ran) -> str | None:
        passed = [line for line in ran.stdout.splitlines() if line.startswith(f"PASS {metric}")]
        return f"{passed[0]}, on no counted label" if passed else None

    return check


def verified_as(bundle: str, roles: tuple[str, ...], same_statement: bool = True) -> Honest:
    """verify's stdout: these signers' roles, in order, and (same_statement) the clean
    statement."""

    def check(ws: Workspace, ran: Ran) -> str | None:
        shown = re.findall(r"^signer ([0-9a-f]{64}) (\w+) ", ran.stdout, re.M)
        if tuple(role for _, role in shown) != roles:
            return f"signers {[r for _, r in shown]} (honest: {list(roles)})"
        if same_statement and ws.base.statement_sha256 not in ran.stdout:
            return "another statement than the clean bundle's"
        return None

    return check


def never_verified(what: str) -> Honest:
    return lambda ws, ran: f"verified {what}"


def bundle_verifies(
    path: str,
    roles: tuple[str, ...] = ("auditor",),
    predicate: bool = True,
    keys: tuple[str, ...] = ("figures", "reviewers", "review"),
) -> Honest:
    """The bundle at `path` verifies under the keys of `roles`, and (predicate) its figures,
    reviewers and gates are the clean bundle's."""

    def check(ws: Workspace, ran: Ran) -> str | None:
        from auditor.evidence.keys import load_public_key
        from auditor.evidence.verify import verify_bundle

        public = [(r, load_public_key(ws.p(f"keys/{r}.key.pub"))) for r in dict.fromkeys(roles)]
        try:
            done = verify_bundle(ws.p(path), public)
        except Exception as exc:
            return f"{path} does not verify: {exc}"
        if tuple(s.role for s in done.signers) != roles:
            return f"{path}: signers {[s.role for s in done.signers]} (honest: {list(roles)})"
        if predicate:
            for got, want in zip(
                done.predicate["runs"], ws.base.clean_predicate["runs"], strict=False
            ):
                for key in keys:
                    found = _first_difference(got[key], want[key], f"{got['pipeline']}.{key}")
                    if found:
                        return found
            found = _first_difference(
                done.predicate["gates"], ws.base.clean_predicate["gates"], "gates"
            )
            if found:
                return found
        return None

    return check


def key_usable(path: str, passphrase: str) -> Honest:
    def check(ws: Workspace, ran: Ran) -> str | None:
        from auditor.evidence.keys import fingerprint, load_private_key, load_public_key

        try:
            key = load_private_key(ws.p(path), passphrase.encode())
            public = load_public_key(ws.p(path + ".pub"))
        except Exception as exc:
            return f"the key it made cannot be used: {exc}"
        if fingerprint(key.public_key()) != fingerprint(public):
            return "KEY.pub is not KEY's public key"
        return None

    return check


# --------------------------------------------------------------------------- the cases

CASES: list[Case] = []


def add(id: str, cls: str, command: str, expected: str, make: Callable[[Workspace], Call],
        words: tuple[str, ...] = (), what: str = "", audit: bool = False) -> None:  # fmt: skip
    if any(c.id == id for c in CASES):
        raise ValueError(f"case {id} twice")
    CASES.append(Case(id, cls, command, expected, make, words, what, audit))


def report_call(ws: Workspace, labels: Any = "labels.jsonl", *extra: Any, honest: Honest | None = None,
                **kw: Any) -> Call:  # fmt: skip
    return Call(ws.report(labels, *extra), honest or same_review(), REPORT_WRITES, **kw)


def _refused_report(id: str, cls: str, words: tuple[str, ...], what: str,
                    edit: Callable[[Workspace], Any], *extra: Any) -> None:  # fmt: skip
    """A report of both runs with labels after `edit` (which may return the labels path)."""

    def make(ws: Workspace) -> Call:
        given = edit(ws)
        return report_call(ws, given if given is not None else "labels.jsonl", *extra)

    add(id, cls, "report --labels", "refused", make, words, what)


def _with_rows(edit: Callable[[Workspace, list[dict[str, Any]]], list[dict[str, Any]] | None]
               ) -> Callable[[Workspace], Path]:  # fmt: skip
    def make(ws: Workspace) -> Path:
        rows = ws.rows()
        return ws.labels(edit(ws, rows) or rows)

    return make


def _pick(ws: Workspace, pipeline: str = "first", *, second: bool | None = None,
          flagged: bool | None = None, truth: bool | None = None, start: int = 1) -> str:  # fmt: skip
    """An answer of the labelled prefix (from position `start`) with these properties."""
    b = ws.base
    for ident in b.prefix(pipeline)[start:]:
        if second is not None and (ident in b.second[pipeline]) != second:
            continue
        if flagged is not None and b.flagged[pipeline][ident] != flagged:
            continue
        if truth is not None and b.truth[pipeline][ident] != truth:
            continue
        return ident
    raise LookupError("no such answer in the prefix")


def _row(
    rows: list[dict[str, Any]], pipeline: str, ident: str, role: str = "first"
) -> dict[str, Any]:
    return next(
        r for r in rows if r["pipeline"] == pipeline and r["id"] == ident and r["role"] == role
    )


def _review_cases() -> None:
    cls = "review.json"

    def swap(ws: Workspace) -> Path:
        """Drawn answers the judge flagged swapped for undrawn ones it passed, with labels."""
        b, name = ws.base, "first"
        passed = [
            i for i in sorted(b.truth[name]) if i not in b.drawn[name] and not b.flagged[name][i]
        ]
        mapping = {
            i: passed.pop(0)
            for i in b.prefix(name)[1:]
            if b.flagged[name][i] and i not in b.second[name]
        }
        ws.edit_json(
            f"{name}/review.json",
            lambda d: d.update(
                sample=[{**e, "id": mapping.get(e["id"], e["id"])} for e in d["sample"]]
            ),
        )
        rows = ws.rows()
        for r in rows:
            if r["pipeline"] == name and r["id"] in mapping:
                r["id"] = mapping[r["id"]]
                r["hallucinated"] = b.truth[name][r["id"]]
        return ws.labels(rows)

    _refused_report("rj-swap-passed", cls, ("review.json",),
                    "drawn answers the judge flagged swapped for undrawn ones it passed (labels to match)", swap)  # fmt: skip
    edits: list[tuple[str, tuple[str, ...], str, Callable[[dict[str, Any]], Any]]] = [
        ("rj-seed", ("seed",), "seed changed, sample kept", lambda d: d.update(seed=d["seed"] + 1)),
        ("rj-size-up", ("size",), "size 12 -> 13, sample kept", lambda d: d.update(size=13)),
        ("rj-method", ("method",), 'method "uniform" -> "stratified"', lambda d: d.update(method="stratified")),
        ("rj-population", ("population",), "population 30 -> 60", lambda d: d.update(population=d["population"] * 2)),
        ("rj-population-sha", ("population_sha256",), "population_sha256 replaced",
         lambda d: d.update(population_sha256="0" * 16)),
        ("rj-fingerprint", ("another run",), "fingerprint of another run", lambda d: d.update(fingerprint="0" * 16)),
        ("rj-check-fingerprint", ("check",), "check_fingerprint of another check",
         lambda d: d.update(check_fingerprint="0" * 16)),
        ("rj-second-share", ("second_review",), "second_review.share 0.5 -> 0.9, ids kept",
         lambda d: d["second_review"].update(share=0.9)),
        ("rj-order", ("review.json",), "the sample's order reversed", lambda d: d.update(sample=d["sample"][::-1])),
        ("rj-inclusion", ("inclusion",), "inclusion_probability 0.4 -> 0.9",
         lambda d: d.update(sample=[{**e, "inclusion_probability": 0.9} for e in d["sample"]])),
        ("rj-schema-1", ("earlier auditor",), "schema_version 2 -> 1", lambda d: d.update(schema_version=1)),
        ("rj-dup-id", ("sample",), "the last drawn id replaced by the first",
         lambda d: d["sample"].__setitem__(-1, dict(d["sample"][0]))),
        ("rj-foreign-id", ("review.json",), "an unlabelled drawn id replaced by one of no answer",
         lambda d: d["sample"].__setitem__(-1, {"id": "zz-none", "inclusion_probability": 0.4})),
        ("rj-size-string", ("size",), 'size "12" (a string)', lambda d: d.update(size="12")),
        ("rj-sample-null", ("sample",), "sample null", lambda d: d.update(sample=None)),
    ]  # fmt: skip
    for id, words, what, edit in edits:
        _refused_report(
            id, cls, words, what, lambda ws, e=edit: ws.edit_json("first/review.json", e)
        )

    def torn(ws: Workspace) -> None:
        path = ws.p("first/review.json")
        path.write_bytes(path.read_bytes()[:200])

    _refused_report("rj-torn", cls, ("review.json",), "review.json cut at 200 bytes", torn)

    def second_added(ws: Workspace) -> Path:
        b = ws.base
        extra = next(i for i in b.prefix("first")[1:] if i not in b.second["first"])
        ws.edit_json("first/review.json", lambda d: d["second_review"]["ids"].append(extra))
        rows = ws.rows()
        rows.append(label(b, "first", extra, reviewer="Bo", role="second"))
        return ws.labels(rows)

    _refused_report("rj-second-ids-added", cls, ("second_review",),
                    "an answer added to second_review.ids, with a second review of it", second_added)  # fmt: skip
    _refused_report("rj-second-ids-emptied", cls, ("second_review",), "second_review.ids emptied",
                    lambda ws: ws.edit_json("first/review.json", lambda d: d["second_review"].update(ids=[])))  # fmt: skip

    def truncated(ws: Workspace) -> Call:
        b = ws.base

        def edit(d: dict[str, Any]) -> None:
            d.update(size=LABELLED, sample=d["sample"][:LABELLED])
            d["second_review"]["ids"] = [
                i for i in d["second_review"]["ids"] if i in b.prefix("first")
            ]

        ws.edit_json("first/review.json", edit)
        return report_call(ws, honest=same_review(ignore=("sample",)))

    add("rj-truncated-to-prefix", cls, "report --labels", "honest", truncated,
        what="size and sample cut to the labelled prefix (a smaller uniform sample, same labels)")  # fmt: skip


def _review_command_cases() -> None:
    cls = "review"

    def kept_draw(ws: Workspace, ran: Ran) -> str | None:
        """review.json still strict JSON, the drawn answers first in order, every answer drawn
        for a second review still drawn for one."""

        def refuse(constant: str) -> Any:
            raise ValueError(f"{constant} in review.json (not JSON)")

        try:
            data = json.loads(ws.p("first/review.json").read_text("utf-8"), parse_constant=refuse)
        except ValueError as exc:
            return str(exc)
        ids = [e["id"] for e in data["sample"]]
        if ids[:SAMPLE] != ws.base.drawn["first"]:
            return "the drawn answers are no longer the first of the order"
        second = set((data.get("second_review") or {}).get("ids") or [])
        lost = [i for i in ws.base.second["first"] if i not in second]
        return (
            f"{len(lost)} answers no longer drawn for a second review ({lost[0]})" if lost else None
        )

    def review(ws: Workspace, *extra: Any, honest: Honest | None = None) -> Call:
        return Call(["review", ws.p("first"), *extra], honest or kept_draw, ("first/review.json",))

    def kept_prefix(size: int) -> Honest:
        def check(ws: Workspace, ran: Ran) -> str | None:
            found = kept_draw(ws, ran)
            if found:
                return found
            data = json.loads(ws.p("first/review.json").read_text("utf-8"))
            return (
                None
                if len(data["sample"]) == size
                else f"{len(data['sample'])} drawn (honest: {size})"
            )

        return check

    def seed_edited(ws: Workspace) -> Call:
        ws.edit_json("first/review.json", lambda d: d.update(seed=d["seed"] + 1))
        return review(ws, "--sample", SAMPLE + 2, honest=kept_prefix(SAMPLE + 2))

    add(
        "rv-grow-after-seed-edit",
        cls,
        "review",
        "refused",
        seed_edited,
        ("seed",),
        "review.json's seed edited, then the sample grown by 2",
    )
    plain: list[tuple[str, str, tuple[Any, ...], tuple[str, ...], str]] = [
        ("rv-second-shrinks", "refused", ("--sample", SAMPLE, "--second-review", 0.2), ("only grows",),
         "--second-review 0.2 after 0.5"),
        ("rv-second-nan", "refused", ("--sample", SAMPLE, "--second-review", "nan"), ("second-review",),
         "--second-review nan"),
        ("rv-second-zero", "refused", ("--sample", SAMPLE, "--second-review", "0"), ("second-review",),
         "--second-review 0"),
        ("rv-second-inf", "refused", ("--sample", SAMPLE, "--second-review", "inf"), ("second-review",),
         "--second-review inf"),
        ("rv-sample-shrinks", "refused", ("--sample", 5), ("only grows",), "--sample 5 after 12"),
        ("rv-sample-zero", "refused", ("--sample", 0), ("sample",), "--sample 0"),
        ("rv-other-seed", "refused", ("--sample", SAMPLE, "--seed", 999), ("seed",), "another --seed over a drawn sample"),
        ("rv-seed-negative", "refused", ("--sample", SAMPLE, "--seed", -1), ("seed",), "--seed -1"),
    ]  # fmt: skip
    for id, expected, extra, words, what in plain:
        add(id, cls, "review", expected, lambda ws, e=extra: review(ws, *e), words, what)
    add("rv-sample-huge", cls, "review", "honest",
        lambda ws: review(ws, "--sample", 10**9, honest=kept_prefix(len(ws.base.truth["first"]))),
        what="--sample 1000000000 (every answer, the drawn ones first)")  # fmt: skip

    def huge_seed(ws: Workspace) -> Call:
        ws.p("first/review.json").unlink()
        seed = 2**80

        def check(ws: Workspace, ran: Ran) -> str | None:
            data = json.loads(ws.p("first/review.json").read_text("utf-8"))
            return (
                None if data["seed"] == seed and data["size"] == SAMPLE else f"seed {data['seed']}"
            )

        return review(ws, "--sample", SAMPLE, "--seed", seed, honest=check)

    add("rv-seed-2-80", cls, "review", "honest", huge_seed, what="a fresh draw with --seed 2**80")

    def link(ws: Workspace) -> Call:
        ws.p("first/review.json").unlink()
        ws.p("first/review.json").symlink_to(ws.p("labels.jsonl"))
        return review(ws, "--sample", SAMPLE)

    add(
        "rv-review-json-symlink",
        cls,
        "review",
        "refused",
        link,
        ("review.json",),
        "review.json a symlink to the labels file",
    )

    def grown(ws: Workspace) -> Call:
        for name in ("records.jsonl", "checks.jsonl"):
            rows = _rows(ws.p(f"first/{name}"))
            rows.append(dict(rows[-1], id="a999"))
            _jsonl(ws.p(f"first/{name}"), rows)
        return review(ws, "--sample", SAMPLE, honest=kept_prefix_at_least(SAMPLE))

    def kept_prefix_at_least(size: int) -> Honest:
        def check(ws: Workspace, ran: Ran) -> str | None:
            data = json.loads(ws.p("first/review.json").read_text("utf-8"))
            ids = [e["id"] for e in data["sample"]]
            kept = [i for i in ids if i in ws.base.drawn["first"]]
            return (
                None
                if kept == ws.base.drawn["first"] and len(ids) >= size
                else "drawn answers lost or moved"
            )

        return check

    add(
        "rv-run-grew",
        cls,
        "review",
        "honest",
        grown,
        what="an answer appended to the run, the sample drawn again",
    )


def _labels_cases() -> None:
    cls = "labels"
    b_rows = _with_rows

    def clean(ws: Workspace) -> Call:
        b = ws.base
        checks = [rate_is(p, LABELLED, b.positives(p, b.prefix(p))) for p in RUNS]
        return report_call(ws, honest=all_of(*checks, same_review()))

    add(
        "lb-clean",
        cls,
        "report --labels",
        "honest",
        clean,
        what="the clean labels: rate recomputed by the bench (8 labels, Wilson)",
    )

    def outside(keep: bool) -> Callable[[Workspace], Call]:
        def make(ws: Workspace) -> Call:
            b = ws.base
            extra_id = next(i for i in sorted(b.truth["first"]) if i not in b.drawn["first"])
            rows = [*ws.rows(), label(b, "first", extra_id)]
            path = ws.labels(rows)
            if not keep:
                return report_call(ws, path)
            honest = all_of(
                rate_is("first", LABELLED, b.positives("first", b.prefix("first")), outside=1),
                same_review("second"),
            )
            return report_call(ws, path, "--labels-outside-sample", "keep", honest=honest)

        return make

    add("lb-outside-keep", cls, "report --labels --labels-outside-sample keep", "honest", outside(True),
        what="a label outside the sample, kept: counted in no rate")  # fmt: skip
    add(
        "lb-outside-refused",
        cls,
        "report --labels",
        "refused",
        outside(False),
        ("outside its drawn review sample",),
        "a label outside the sample",
    )

    def gap(ws: Workspace) -> Call:
        b = ws.base
        k = next(k for k in range(3, 7) if b.prefix("first")[k] not in b.second["first"])
        gone = b.prefix("first")[k]
        rows = [r for r in ws.rows() if not (r["pipeline"] == "first" and r["id"] == gone)]
        honest = all_of(
            rate_is("first", k, b.positives("first", b.prefix("first")[:k]), gap=LABELLED - 1 - k),
            same_review("second"),
        )
        return report_call(ws, ws.labels(rows), honest=honest)

    add(
        "lb-gap",
        cls,
        "report --labels",
        "honest",
        gap,
        what="a drawn answer of the prefix unlabelled: only the labels before it count",
    )

    def gap_first(ws: Workspace, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        first = ws.base.drawn["first"][0]
        return [r for r in rows if not (r["pipeline"] == "first" and r["id"] == first)]

    _refused_report(
        "lb-gap-first", cls, ("no label",), "the first drawn answer unlabelled", b_rows(gap_first)
    )
    add(
        "lb-duplicates",
        cls,
        "report --labels",
        "honest",
        lambda ws: report_call(ws, ws.labels(ws.rows() + ws.rows())),
        what="every line twice",
    )
    add("lb-duplicates-reordered", cls, "report --labels", "honest",
        lambda ws: report_call(ws, ws.raw("".join(json.dumps(dict(sorted(r.items())), indent=None, separators=(" , ", " : ")) + "\n"
                                                  for r in ws.rows() + ws.rows()[::-1]))),
        what="every line again in reverse order, keys sorted, other spacing")  # fmt: skip

    def flip_copy(
        reviewer: str,
    ) -> Callable[[Workspace, list[dict[str, Any]]], list[dict[str, Any]]]:
        def edit(ws: Workspace, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            ident = _pick(ws, second=False)
            row = dict(_row(rows, "first", ident), reviewer=reviewer)
            row["hallucinated"] = not row["hallucinated"]
            return [*rows, row]

        return edit

    _refused_report(
        "lb-conflicting-copy",
        cls,
        ("labelled again",),
        "the same label again, flipped",
        b_rows(flip_copy("Ana")),
    )
    _refused_report("lb-conflicting-other-first", cls, ("labelled again",),
                    "a second first-role reviewer (Dan) disagreeing", b_rows(flip_copy("Dan")))  # fmt: skip

    def adjudicate(kind: str) -> Callable[[Workspace, list[dict[str, Any]]], list[dict[str, Any]]]:
        def edit(ws: Workspace, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            b = ws.base
            if kind == "agreed":  # first and second agree; an adjudicator overrules both
                ident = next(
                    i
                    for i in b.prefix("first")
                    if i in b.second["first"] and i != b.disputed["first"]
                )
                flipped = not b.truth["first"][ident]
                return [
                    *rows,
                    label(
                        b, "first", ident, reviewer="Cy", role="adjudicator", hallucinated=flipped
                    ),
                ]
            if kind == "no-second":
                ident = _pick(ws, second=False)
                flipped = not b.truth["first"][ident]
                return [
                    *rows,
                    label(
                        b, "first", ident, reviewer="Cy", role="adjudicator", hallucinated=flipped
                    ),
                ]
            ident = b.disputed["first"]
            row = _row(rows, "first", ident, "adjudicator")
            second = _row(rows, "first", ident, "second")
            if kind == "own-second":
                row.update(reviewer=second["reviewer"], hallucinated=second["hallucinated"])
            else:
                row.update(reviewer="Ana")
            return rows

        return edit

    for kind, what in (
        ("agreed", "an adjudicator overruling two reviews that agree"),
        ("no-second", "an adjudicator on an answer with no second review, overruling the first"),
        ("own-second", "the second reviewer adjudicating their own disagreement (their way)"),
        ("own-first", "the first reviewer adjudicating their own disagreement (their way)"),
    ):

        def make(ws: Workspace, kind: str = kind) -> Call:
            rows = ws.rows()
            path = ws.labels(adjudicate(kind)(ws, rows) or rows)
            if kind.startswith("own"):
                return report_call(ws, path, honest=own_adjudication)
            return report_call(ws, path)

        add(f"lb-adjudicator-{kind}", cls, "report --labels", "refused", make, ("adjudicat",), what)

    def second_named(
        name: str, first: str | None = None
    ) -> Callable[[Workspace, list[dict[str, Any]]], None]:
        def edit(ws: Workspace, rows: list[dict[str, Any]]) -> None:
            for r in rows:
                if r["pipeline"] == "first" and r["role"] == "second":
                    r["reviewer"] = name
                if first is not None and r["pipeline"] == "first" and r["role"] == "first":
                    r["reviewer"] = first

        return edit

    names = [
        ("lb-second-same-person", "Ana", None, "second review by the first reviewer"),
        ("lb-second-case", "ana", None, 'second review by "ana" (first by "Ana")'),
        ("lb-second-upper", "ANA", None, 'second review by "ANA"'),
        ("lb-second-nfd", "Zoe\u0308", "Zo\u00eb", "first by Zoë (NFC), second by Zoë (NFD)"),
        (
            "lb-second-fullwidth",
            "\uff21\uff4e\uff41",
            None,
            "second review by fullwidth \uff21\uff4e\uff41 (NFKC: Ana)",
        ),
        ("lb-second-nbsp", "Ana\u00a0", None, "second review by Ana + no-break space"),
        (
            "lb-second-hangul-filler",
            "Ana\u3164",
            None,
            "second review by Ana + HANGUL FILLER (blank)",
        ),
        (
            "lb-second-variation-selector",
            "Ana\ufe0f",
            None,
            "second review by Ana + VARIATION SELECTOR-16",
        ),
        (
            "lb-second-combining-joiner",
            "An\u034fa",
            None,
            "second review by An + COMBINING GRAPHEME JOINER + a",
        ),
    ]
    for id, name, first, what in names:

        def make(ws: Workspace, name: str = name, first: str | None = first) -> Call:
            rows = ws.rows()
            second_named(name, first)(ws, rows)
            return report_call(
                ws, ws.labels(rows), honest=all_of(distinct_reviewers("first"), same_review())
            )

        add(id, cls, "report --labels", "refused", make, ("another person|invisible",), what)

    def drop(
        ws: Workspace, rows: list[dict[str, Any]], role: str, ident: str | None = None
    ) -> list[dict[str, Any]]:
        ident = ident or ws.base.disputed["first"]
        return [
            r
            for r in rows
            if not (r["pipeline"] == "first" and r["id"] == ident and r["role"] == role)
        ]

    _refused_report("lb-disagreement-unsettled", cls, ("disagree",), "the adjudication dropped",
                    b_rows(lambda ws, rows: drop(ws, rows, "adjudicator")))  # fmt: skip

    def second_alone(ws: Workspace, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ident = next(
            i
            for i in ws.base.prefix("first")
            if i in ws.base.second["first"] and i != ws.base.disputed["first"]
        )
        return drop(ws, rows, "first", ident)

    _refused_report("lb-second-without-first", cls, ("without a first",), "a second review whose first is dropped",
                    b_rows(second_alone))  # fmt: skip

    def marks(kind: str) -> Callable[[Workspace, list[dict[str, Any]]], None]:
        def edit(ws: Workspace, rows: list[dict[str, Any]]) -> None:
            b = ws.base
            if kind == "contradict-clean":
                ident = _pick(ws, second=False, flagged=False, truth=False)
                _row(rows, "first", ident)["claims"] = [{"index": 0, "judge_right": False}]
                return
            if kind == "contradict-hallucinated":
                ident = _pick(ws, second=False, flagged=True, truth=True)
                count = len(b.claims["first"][ident])
                _row(rows, "first", ident)["claims"] = [
                    {"index": k, "judge_right": False} for k in range(count)
                ]
                return
            ident = _pick(ws, second=False)
            given = {
                "out-of-range": [{"index": 99, "judge_right": True}],
                "negative": [{"index": -1, "judge_right": True}],
                "both": [{"index": 0, "judge_right": True}, {"index": 0, "judge_right": False}],
                "bool-index": [{"index": True, "judge_right": True}],
                "float-index": [{"index": 0.0, "judge_right": True}],
                "huge-index": [{"index": 10**30, "judge_right": True}],
            }[kind]
            _row(rows, "first", ident)["claims"] = given

        return edit

    for kind, words, what in (
        ("out-of-range", ("claim 99",), "a claim mark of claim 99 (the answer has 1)"),
        ("negative", ("index",), "a claim mark of claim -1"),
        ("both", ("both",), "claim 0 marked judge right and judge wrong"),
        ("bool-index", ("index",), "a claim mark with index true"),
        ("float-index", ("index",), "a claim mark with index 0.0"),
        ("huge-index", ("claim",), "a claim mark of claim 10**30"),
        (
            "contradict-clean",
            ("marked hallucinated",),
            "not hallucinated, its claim marked hallucinated",
        ),
        ("contradict-hallucinated", ("every claim",), "hallucinated, every claim marked fine"),
    ):
        _refused_report(f"lb-claims-{kind}", cls, words, what, b_rows(marks(kind)))

    def no_check(ws: Workspace, rows: list[dict[str, Any]]) -> None:
        row = _row(rows, "first", _pick(ws, second=False))
        row["claims"] = [{"index": 0, "judge_right": True}]
        del row["check_fingerprint"]

    _refused_report(
        "lb-claims-without-check",
        cls,
        ("check_fingerprint",),
        "claim marks without check_fingerprint",
        b_rows(no_check),
    )

    def when(value: Any) -> Callable[[Workspace, list[dict[str, Any]]], None]:
        def edit(ws: Workspace, rows: list[dict[str, Any]]) -> None:
            row = _row(rows, "first", _pick(ws, second=False))
            row["labelled_at"] = value(ws) if callable(value) else value

        return edit

    def before_run(ws: Workspace) -> str:
        started = datetime.fromisoformat(ws.base.started["first"])
        return (started - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    future = (datetime.now(UTC) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for id, value, words, what in (
        ("future", future, ("future",), "labelled_at three days ahead"),
        ("before-run", before_run, ("before",), "labelled_at an hour before the run started"),
        ("year-2001", "2001-01-01T00:00:00Z", ("before",), "labelled_at 2001-01-01"),
        ("no-zone", "2026-12-07T10:00:00", ("zone",), "labelled_at without a zone"),
        ("words", "yesterday", ("not a time",), 'labelled_at "yesterday"'),
        (
            "offset-25h",
            "2026-12-07T10:00:00+25:00",
            ("labelled_at",),
            "labelled_at with a +25:00 offset",
        ),
        ("number", 1765100000, ("labelled_at",), "labelled_at as a number"),
        ("date-only", "2026-12-07", ("zone",), "labelled_at a date without time or zone"),
    ):
        _refused_report(f"lb-labelled-at-{id}", cls, words, what, b_rows(when(value)))

    def role(value: Any) -> Callable[[Workspace, list[dict[str, Any]]], None]:
        return lambda ws, rows: _row(rows, "first", _pick(ws, second=False)).update(role=value)

    for value, id in (
        ("boss", "unknown"),
        ("First", "capitalised"),
        ("reviewer", "reviewer"),
        (" first", "space"),
    ):
        _refused_report(f"lb-role-{id}", cls, ("role",), f"role {value!r}", b_rows(role(value)))


WRONG_TYPES: list[tuple[str, Any, str]] = [
    ("id", [], "id"), ("id", {}, "id"), ("id", 1.5, "id"), ("id", True, "id"), ("id", None, "id"),
    ("id", "", "id"), ("hallucinated", "true", "hallucinated"), ("hallucinated", 1, "hallucinated"),
    ("hallucinated", None, "hallucinated"), ("hallucinated", [], "hallucinated"),
    ("pipeline", 1, "pipeline"), ("pipeline", "", "pipeline"), ("pipeline", ["first"], "pipeline"),
    ("claims", "0", "claims"), ("claims", [1], "claims"), ("claims", {}, "claims"),
    ("claims", [{"index": "0", "judge_right": True}], "claims"),
    ("claims", [{"index": 0, "judge_right": "yes"}], "judge_right"),
    ("note", 1, "note"), ("note", [], "note"), ("note", {"x": 1}, "note"),
    ("fingerprint", 1, "fingerprint"), ("fingerprint", "", "fingerprint"),
    ("check_fingerprint", [], "check_fingerprint"), ("check_fingerprint", 1, "check_fingerprint"),
    ("reviewer", 1, "reviewer"), ("reviewer", "", "reviewer"), ("reviewer", ["Ana"], "reviewer"),
    ("role", 1, "role"), ("role", None, "role"), ("contexts", "x", "contexts"),
    ("contexts", [1], "contexts"), ("spans", "x", "spans"), ("spans", [[5, 1]], "spans"),
    ("question", 1, "question"), ("answer", 1, "answer"), ("source_id", {}, "source_id"),
    ("labelled_at", [], "labelled_at"),
]  # fmt: skip


def _type_cases() -> None:
    cls = "label types"
    for n, (name, value, word) in enumerate(WRONG_TYPES):

        def edit(
            ws: Workspace, rows: list[dict[str, Any]], name: str = name, value: Any = value
        ) -> None:
            _row(rows, "first", _pick(ws, second=False))[name] = value

        shown = json.dumps(value)
        _refused_report(f"ty-{name}-{n}", cls, (f'"{word}"',), f"{name}: {shown}", _with_rows(edit))


def _huge_and_hidden_cases() -> None:
    cls = "label text"

    def set_field(
        name: str, value: Any, role: str = "first"
    ) -> Callable[[Workspace, list[dict[str, Any]]], None]:
        return lambda ws, rows: _row(rows, "first", _pick(ws, second=False)).update({name: value})

    big = "x" * (10 << 20)
    add("tx-note-10mb", cls, "report --labels", "honest",
        lambda ws: report_call(ws, _with_rows(set_field("note", big))(ws)), what="a 10 MB note")  # fmt: skip
    _refused_report(
        "tx-id-1mb", cls, ("not among",), "a 1 MB id", _with_rows(set_field("id", "a" * (1 << 20)))
    )
    _refused_report(
        "tx-reviewer-1mb",
        cls,
        ("reviewer",),
        "a 1 MB reviewer name",
        _with_rows(set_field("reviewer", "A" * (1 << 20))),
    )
    _refused_report(
        "tx-pipeline-1mb",
        cls,
        ("pipeline",),
        "a 1 MB pipeline name",
        _with_rows(set_field("pipeline", "p" * (1 << 20))),
    )
    for id, name in (
        ("zero-width-space", "A\u200bna"),
        ("rtl-override", "Ana\u202eoB"),
        ("bom", "\ufeffAna"),
        ("nul", "Ana\u0000"),
        ("line-separator", "Ana\u2028Bo"),
        ("private-use", "Ana\ue000"),
    ):
        _refused_report(f"tx-reviewer-{id}", cls, ("invisible|control",), f"reviewer name with {id}",
                        _with_rows(set_field("reviewer", name)))  # fmt: skip
    script = "<script>alert('hostile-note')</script>"

    def note(ws: Workspace) -> Call:
        path = _with_rows(set_field("note", script))(ws)
        return report_call(ws, path, honest=all_of(same_review(), html_free_of(script)))

    add("tx-note-script", cls, "report --labels", "honest", note, what="a <script> in a note")
    img = "<img src=x onerror=alert('hostile-name')>"

    def name(ws: Workspace) -> Call:
        rows = ws.rows()
        for r in rows:
            if r["reviewer"] == "Bo":
                r["reviewer"] = img
        honest = all_of(same_review(ignore=("reviewers", "agreement")), html_free_of(img))
        return report_call(ws, ws.labels(rows), honest=honest)

    add(
        "tx-reviewer-html",
        cls,
        "report --labels",
        "honest",
        name,
        what="an <img onerror> as the second reviewer's name",
    )
    _refused_report(
        "tx-id-script",
        cls,
        ("not among",),
        "an id of <script>",
        _with_rows(set_field("id", script)),
    )


def _file_cases() -> None:
    cls = "labels file"

    def text(ws: Workspace) -> str:
        return "".join(json.dumps(r) + "\n" for r in ws.rows())

    encodings: list[tuple[str, Callable[[Workspace], bytes], tuple[str, ...], str]] = [
        ("empty", lambda ws: b"", ("no labels",), "an empty file"),
        ("blank-lines", lambda ws: b"\n \n\t\n", ("no labels",), "blank lines only"),
        ("utf16le-bom", lambda ws: codecs.BOM_UTF16_LE + text(ws).encode("utf-16-le"), ("utf-16",), "UTF-16LE with BOM"),
        ("utf16le-nobom", lambda ws: text(ws).encode("utf-16-le"), ("utf-16",), "UTF-16LE without BOM"),
        ("utf16be-bom", lambda ws: codecs.BOM_UTF16_BE + text(ws).encode("utf-16-be"), ("utf-16",), "UTF-16BE with BOM"),
        ("utf32le-bom", lambda ws: codecs.BOM_UTF32_LE + text(ws).encode("utf-32-le"), ("utf-32",), "UTF-32LE with BOM"),
        ("utf32be-nobom", lambda ws: text(ws).encode("utf-32-be"), ("utf-32",), "UTF-32BE without BOM"),
        ("latin1", lambda ws: text(ws).replace('"reviewer": "Ana"', '"reviewer": "Anaïs"', 1).encode("latin-1"),
         ("latin", "not UTF-8"), "latin1 (a reviewer Anaïs)"),
        ("nul-between-lines", lambda ws: text(ws).replace("\n", "\n\x00", 1).encode(), ("jsonl:2",), "a NUL byte starting line 2"),
        ("nul-in-string", lambda ws: text(ws).replace('"Ana"', '"A\x00na"', 1).encode(), ("jsonl:1",), "a raw NUL inside a string"),
        ("nested-100k", lambda ws: b'{"id": "a0", "hallucinated": true, "note": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
         ("jsonl:1",), "a JSON line nested 100,000 deep"),
        ("nested-100k-bare", lambda ws: b"[" * 100_000 + b"]" * 100_000 + b"\n", ("jsonl:1",), "a bare array nested 100,000 deep"),
        ("torn-last-line", lambda ws: text(ws).encode()[:-30], ("jsonl:",), "the last line cut short"),
        ("json-array", lambda ws: json.dumps(ws.rows()).encode(), ("object",), "one JSON array of the labels"),
        ("gzip", lambda ws: gzip.compress(text(ws).encode(), mtime=0), ("gzip|compressed",), "the labels gzipped"),
        ("nan-hallucinated", lambda ws: text(ws).replace('"hallucinated": true', '"hallucinated": NaN', 1).encode(),
         ("hallucinated",), "hallucinated: NaN"),
    ]  # fmt: skip
    for id, data, words, what in encodings:
        _refused_report(f"fl-{id}", cls, words, what, lambda ws, d=data: ws.raw(d(ws)))

    def duplicate_key(ws: Workspace) -> Path:
        rows = ws.rows()
        lines = [json.dumps(r) for r in rows]
        ident = _pick(ws, second=False)
        k = next(
            n
            for n, r in enumerate(rows)
            if r["pipeline"] == "first" and r["id"] == ident and r["role"] == "first"
        )
        truth = json.dumps(rows[k]["hallucinated"])
        lines[k] = lines[k][:-1] + f', "hallucinated": {json.dumps(not rows[k]["hallucinated"])}}}'
        assert truth in lines[k]
        return ws.raw("".join(line + "\n" for line in lines))

    _refused_report(
        "fl-duplicate-key",
        cls,
        ("duplicate|twice",),
        'a line with "hallucinated" twice (the truth first)',
        duplicate_key,
    )

    def duplicate_id_key(ws: Workspace) -> Path:
        rows = ws.rows()
        lines = [json.dumps(r) for r in rows]
        lines[1] = lines[1][:-1] + ', "id": "a999"}'
        return ws.raw("".join(line + "\n" for line in lines))

    _refused_report(
        "fl-duplicate-id-key", cls, ("duplicate|twice",), 'a line with "id" twice', duplicate_id_key
    )
    honest_bytes: list[tuple[str, Callable[[Workspace], bytes], str]] = [
        ("crlf", lambda ws: text(ws).replace("\n", "\r\n").encode(), "CRLF line ends"),
        ("utf8-bom", lambda ws: codecs.BOM_UTF8 + text(ws).encode(), "UTF-8 with a BOM"),
        ("no-final-newline", lambda ws: text(ws).rstrip("\n").encode(), "no newline after the last line"),
        ("20mb-blank", lambda ws: text(ws).encode() + b" " * (20 << 20) + b"\n", "20 MB: the labels, then 20 MB of spaces"),
    ]  # fmt: skip
    for id, data, what in honest_bytes:
        add(
            f"fl-{id}",
            cls,
            "report --labels",
            "honest",
            lambda ws, d=data: report_call(ws, ws.raw(d(ws))),
            what=what,
        )

    def directory(ws: Workspace) -> Path:
        ws.p("dir.jsonl").mkdir()
        return ws.p("dir.jsonl")

    def loop(ws: Workspace) -> Path:
        ws.p("loop.jsonl").symlink_to(ws.p("loop.jsonl"))
        return ws.p("loop.jsonl")

    def dangling(ws: Workspace) -> Path:
        ws.p("gone.jsonl").symlink_to(ws.p("nowhere.jsonl"))
        return ws.p("gone.jsonl")

    _refused_report("fl-directory", cls, ("directory",), "a directory", directory)
    _refused_report("fl-symlink-loop", cls, ("link|loop",), "a symlink to itself", loop)
    _refused_report(
        "fl-dangling-symlink", cls, ("no such file|gone.jsonl",), "a dangling symlink", dangling
    )
    _refused_report(
        "fl-missing", cls, ("no such file",), "no such file", lambda ws: ws.p("missing.jsonl")
    )
    _refused_report(
        "fl-checks-jsonl",
        cls,
        ("jsonl:1",),
        "the run's checks.jsonl as labels",
        lambda ws: ws.p("first/checks.jsonl"),
    )

    def fifo(ws: Workspace) -> Call:
        os.mkfifo(ws.p("fifo.jsonl"))
        return Call(ws.report(ws.p("fifo.jsonl")), same_review(), REPORT_WRITES, subprocess=True)

    def zero(ws: Workspace) -> Call:
        return Call(ws.report(Path("/dev/zero")), same_review(), REPORT_WRITES, subprocess=True)

    add(
        "fl-fifo",
        cls,
        "report --labels",
        "refused",
        fifo,
        ("fifo|not a regular file|pipe",),
        "a FIFO nobody writes",
    )
    add("fl-dev-zero", cls, "report --labels", "refused", zero, ("/dev/zero",), "/dev/zero")

    def bundle_fifo(ws: Workspace) -> Call:
        os.mkfifo(ws.p("fifo.jsonl"))
        return Call(
            ws.bundle(ws.p("fifo.jsonl")), bundle_verifies("new.tar"), ("new.tar",), subprocess=True
        )

    add(
        "fl-bundle-fifo",
        cls,
        "bundle --labels",
        "refused",
        bundle_fifo,
        ("fifo|not a regular file|pipe",),
        "a FIFO as bundle --labels",
    )
    add("fl-bundle-dev-zero", cls, "bundle --labels", "refused",
        lambda ws: Call(ws.bundle(Path("/dev/zero")), bundle_verifies("new.tar"), ("new.tar",), subprocess=True),
        ("/dev/zero",), "/dev/zero as bundle --labels")  # fmt: skip


def _run_dir_cases() -> None:
    cls = "run dir"

    def append(name: str, both: bool) -> Callable[[Workspace], None]:
        def edit(ws: Workspace) -> None:
            for file in ("records.jsonl", "checks.jsonl") if both else ("checks.jsonl",):
                rows = _rows(ws.p(f"first/{file}"))
                rows.append(dict(rows[0], id="a999"))
                _jsonl(ws.p(f"first/{file}"), rows)

        return edit

    def delete(file: str, which: Callable[[Workspace], str]) -> Callable[[Workspace], None]:
        def edit(ws: Workspace) -> None:
            gone = which(ws)
            _jsonl(
                ws.p(f"first/{file}"), [r for r in _rows(ws.p(f"first/{file}")) if r["id"] != gone]
            )

        return edit

    def undrawn(ws: Workspace) -> str:
        return next(i for i in sorted(ws.base.truth["first"]) if i not in ws.base.drawn["first"])

    def labelled(ws: Workspace) -> str:
        return ws.base.prefix("first")[2]

    def manifest(edit: Callable[[dict[str, Any]], Any]) -> Callable[[Workspace], None]:
        return lambda ws: ws.edit_json("first/manifest.json", edit)

    def replaced(ws: Workspace) -> None:
        shutil.rmtree(ws.p("first"))
        shutil.copytree(ws.p("second"), ws.p("first"))

    def torn(file: str) -> Callable[[Workspace], None]:
        def edit(ws: Workspace) -> None:
            path = ws.p(f"first/{file}")
            path.write_bytes(path.read_bytes()[:-40])

        return edit

    cases: list[tuple[str, tuple[str, ...], str, Callable[[Workspace], Any]]] = [
        ("rd-check-row-appended", ("checks.jsonl",), "a checks row of no record appended", append("checks.jsonl", False)),
        ("rd-answer-appended", ("31",), "a record and its check appended past the manifest's 30", append("both", True)),
        ("rd-check-row-deleted", ("29",), "the check row of an undrawn answer deleted", delete("checks.jsonl", undrawn)),
        ("rd-labelled-check-deleted", ("no longer among|checks.jsonl",), "the check row of a labelled answer deleted",
         delete("checks.jsonl", labelled)),
        ("rd-record-deleted", ("records.jsonl",), "the record of an undrawn answer deleted (its check kept)",
         delete("records.jsonl", undrawn)),
        ("rd-manifest-count", ("manifest",), "manifest source.count 30 -> 40", manifest(lambda d: d["source"].update(count=40))),
        ("rd-manifest-run-id", ("another run",), "manifest run_id edited", manifest(lambda d: d.update(run_id="other"))),
        ("rd-other-run", ("another run",), "the run dir replaced by the other run's", replaced),
        ("rd-review-of-other-run", ("another run",), "the other run's review.json copied in",
         lambda ws: shutil.copy(ws.p("second/review.json"), ws.p("first/review.json"))),
        ("rd-torn-checks", ("checks.jsonl|no longer among|drawn from",), "checks.jsonl's last line torn", torn("checks.jsonl")),
        ("rd-torn-records", ("records.jsonl",), "records.jsonl's last line torn", torn("records.jsonl")),
        ("rd-check-row-twice", ("twice",), "a check row duplicated",
         lambda ws: _jsonl(ws.p("first/checks.jsonl"), [*_rows(ws.p("first/checks.jsonl")), _rows(ws.p("first/checks.jsonl"))[0]])),
        ("rd-threshold-edited", ("check.json",), "check.json's support_threshold edited (sha kept)",
         lambda ws: ws.edit_json("first/check.json", lambda d: d["judge"]["config"].update(support_threshold=0.99))),
    ]  # fmt: skip
    for id, words, what, edit in cases:
        _refused_report(id, cls, words, what, lambda ws, e=edit: e(ws) and None)


def _output_cases() -> None:
    cls = "outputs"

    def report_out(out: Callable[[Workspace], Path], *extra: Any, honest: Honest | None = None,
                   history: str = "h.db") -> Callable[[Workspace], Call]:  # fmt: skip
        def make(ws: Workspace) -> Call:
            target = out(ws)
            argv = ["report", *(ws.p(r) for r in RUNS), "--labels", ws.p("labels.jsonl"), "--out", target,
                    "--history", ws.p(history), *extra]  # fmt: skip
            writes = (
                *REPORT_WRITES,
                str(target.relative_to(ws.root)) if target.is_relative_to(ws.root) else "",
            )
            return Call(argv, honest or same_review(), writes)

        return make

    def link(to: str, hard: bool = False) -> Callable[[Workspace], Path]:
        def make(ws: Workspace) -> Path:
            path = ws.p("out.html")
            if hard:
                os.link(ws.p(to), path)
            else:
                path.symlink_to(ws.p(to))
            return path

        return make

    def made_db(ws: Workspace) -> Path:
        _invoke(
            [
                "report",
                *(ws.p(r) for r in RUNS),
                "--out",
                ws.p("scratch.html"),
                "--history",
                ws.p("h.db"),
                "--record",
            ]
        )
        ws.p("scratch.html").unlink()
        for name in RUNS:
            ws.p(f"{name}/summary.json").unlink()
        return ws.p("h.db")

    def history_kept(ws: Workspace, ran: Ran) -> str | None:
        import sqlite3

        try:
            with contextlib.closing(sqlite3.connect(ws.p("new.db"))) as db:
                count = db.execute("SELECT COUNT(*) FROM audits").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            return f"the history database is gone ({exc}): the report was written over it"
        return None if count == 2 else f"{count} audits recorded (honest: 2)"

    cases: list[tuple[str, tuple[str, ...], str, Callable[[Workspace], Call]]] = [
        ("out-labels", ("--labels",), "report --out the labels file", report_out(lambda ws: ws.p("labels.jsonl"))),
        ("out-history", ("--history",), "report --out the (existing) history db", report_out(made_db)),
        ("out-new-history", ("--history",), "report --record --history H --out H, H new",
         report_out(lambda ws: ws.p("new.db"), "--record", honest=history_kept, history="new.db")),
        ("out-symlink-labels", ("--labels",), "report --out a symlink to the labels", report_out(link("labels.jsonl"))),
        ("out-hardlink-labels", ("--labels",), "report --out a hard link of the labels", report_out(link("labels.jsonl", True))),
        ("out-records", ("RUN_DIR",), "report --out a run's records.jsonl", report_out(lambda ws: ws.p("first/records.jsonl"))),
        ("out-review-json", ("RUN_DIR",), "report --out a run's review.json", report_out(lambda ws: ws.p("first/review.json"))),
        ("out-run-dir", ("directory",), "report --out a run dir", report_out(lambda ws: ws.p("first"))),
        ("out-symlink-history", ("--history",), "report --out a symlink to the history db",
         report_out(lambda ws: (made_db(ws), link("h.db")(ws))[1])),
        ("out-in-run-dir", ("RUN_DIR",), "report --out a new file inside a run dir", report_out(lambda ws: ws.p("first/notes.html"))),
        ("out-parent-is-file", ("not a directory",), "report --out under a file", report_out(lambda ws: ws.p("labels.jsonl/r.html"))),
        ("out-history-is-labels", ("--labels|history",), "report --record --history the labels file",
         report_out(lambda ws: ws.p("r.html"), "--record", history="labels.jsonl")),
    ]  # fmt: skip
    for id, words, what, make in cases:
        add(id, cls, "report --out", "refused", make, words, what)

    def records_link(ws: Workspace) -> Path:
        os.link(ws.p("first/records.jsonl"), ws.p("rec.html"))
        return ws.p("rec.html")

    add(
        "out-hardlink-records",
        cls,
        "report --out",
        "honest",
        report_out(records_link),
        what="report --out a hard link (outside the run dir) of a run's records.jsonl: the records must stay",
    )

    def default_out_link(ws: Workspace) -> Call:
        ws.p("first/report.html").symlink_to(ws.p("labels.jsonl"))
        argv = [
            "report",
            *(ws.p(r) for r in RUNS),
            "--labels",
            ws.p("labels.jsonl"),
            "--history",
            ws.p("h.db"),
        ]
        return Call(argv, same_review(), (*REPORT_WRITES, "first/report.html"))

    add(
        "out-default-is-link",
        cls,
        "report",
        "honest",
        default_out_link,
        what="the run dir's report.html a symlink to the labels (the default --out)",
    )

    def bundle_out(out: Callable[[Workspace], Path], *extra: Any) -> Callable[[Workspace], Call]:
        def make(ws: Workspace) -> Call:
            argv = ws.bundle()
            argv[argv.index("--out") + 1] = out(ws)
            return Call([*argv, *extra], bundle_verifies("new.tar"), ("new.tar",))

        return make

    for id, words, what, make in (
        ("bundle-out-labels", ("--labels",), "bundle --out the labels --force", bundle_out(lambda ws: ws.p("labels.jsonl"), "--force")),
        ("bundle-out-key", ("--key",), "bundle --out its own --key --force", bundle_out(lambda ws: ws.p("keys/auditor.key"), "--force")),
        ("bundle-out-symlink", ("--labels",), "bundle --out a symlink to the labels --force",
         bundle_out(lambda ws: link("labels.jsonl")(ws), "--force")),
        ("bundle-out-run-dir", ("RUN_DIR",), "bundle --out inside a run dir", bundle_out(lambda ws: ws.p("first/a.tar"))),
        ("bundle-out-existing", ("exists",), "bundle --out an existing bundle without --force", bundle_out(lambda ws: ws.p("bundle.tar"))),
    ):  # fmt: skip
        add(id, cls, "bundle --out", "refused", make, words, what)


def _gate_cases() -> None:
    cls = "gates"
    metric = "reviewed_hallucination_rate"

    def zero_counted(ws: Workspace) -> Path:
        b = ws.base
        outside = [i for i in sorted(b.truth["first"]) if i not in b.drawn["first"]][:3]
        rows = [
            label(b, p, i) for p in RUNS for i in outside if i in b.truth[p] and i not in b.drawn[p]
        ]
        return ws.labels(rows)

    def report_gate(labels: Callable[[Workspace], Any], gate: str, *extra: Any, honest: Honest | None = None,
                    failure: bool = True) -> Callable[[Workspace], Call]:  # fmt: skip
        def make(ws: Workspace) -> Call:
            given = labels(ws)
            argv = (
                ws.report(given, "--gate", gate, *extra)
                if given
                else ws.report(None, "--gate", gate, *extra)
            )
            return Call(
                argv, honest or gate_not_passed(metric), REPORT_WRITES, writes_on_failure=failure
            )

        return make

    add("gt-report-zero-counted", cls, "report --gate", "refused",
        report_gate(zero_counted, f"{metric}<=0.5", "--labels-outside-sample", "keep"), (metric,),
        "gate reviewed_hallucination_rate<=0.5 with labels outside the sample only (kept): 0 counted")  # fmt: skip
    add("gt-report-no-labels", cls, "report --gate", "refused", report_gate(lambda ws: None, f"{metric}<=0.5"), (metric,),
        "gate reviewed_hallucination_rate<=0.5 without labels")  # fmt: skip
    add("gt-report-fails", cls, "report --gate", "refused", report_gate(lambda ws: "labels.jsonl", f"{metric}<=0.01"),
        (metric,), "gate reviewed_hallucination_rate<=0.01 with the clean labels (fails)")  # fmt: skip
    add("gt-report-goodput-unmeasured", cls, "report --gate", "refused",
        report_gate(lambda ws: "labels.jsonl", "goodput_tps_reviewed>=0"), ("goodput_tps_reviewed",),
        "gate goodput_tps_reviewed>=0 where throughput was not measured")  # fmt: skip

    def passes(ws: Workspace, ran: Ran) -> str | None:
        lines = [line for line in ran.stdout.splitlines() if line.startswith(f"PASS {metric}<=0.9")]
        return None if len(lines) == 2 else f"{len(lines)} PASS lines (honest: 2)"

    add("gt-report-passes", cls, "report --gate", "honest",
        report_gate(lambda ws: "labels.jsonl", f"{metric}<=0.9", honest=all_of(passes, same_review()), failure=False),
        what="gate reviewed_hallucination_rate<=0.9 with the clean labels (passes)")  # fmt: skip

    def bundle_zero(ws: Workspace) -> Call:
        argv = ws.bundle(
            zero_counted(ws), "--labels-outside-sample", "keep", "--gate", f"{metric}<=0.5"
        )

        def check(ws: Workspace, ran: Ran) -> str | None:
            _, _, statement = open_bundle(ws.p("new.tar"))
            passed = [
                g
                for g in statement["predicate"]["gates"]
                if g["gate"].startswith(metric) and g["passed"]
            ]
            return (
                f"the signed statement records {passed[0]}: a gate passed on no counted label"
                if passed
                else None
            )

        # the gate fails, and the bundle is written all the same (the signed evidence of a
        # failed audit), its statement recording the gate as not passed
        return Call(argv, check, ("new.tar",), writes_on_failure=True)

    add(
        "gt-bundle-zero-counted",
        cls,
        "bundle --gate",
        "refused",
        bundle_zero,
        ("gate failed",),
        what="bundle --gate reviewed_hallucination_rate<=0.5 with 0 counted labels: the statement must not record a pass",
    )
    for id, gate, words in (
        ("syntax", f"{metric}=<0.1", ("METRIC OP NUMBER",)),
        ("nan", f"{metric}<=nan", ("METRIC OP NUMBER",)),
        ("unknown", "reviewed_rate<=0.1", ("unknown figure",)),
        ("empty", "", ("METRIC OP NUMBER",)),
        ("unicode-le", f"{metric}\u22640.1", ("METRIC OP NUMBER",)),
        ("two-ops", f"{metric}<=0.1<=0.2", ("METRIC OP NUMBER",)),
    ):
        add(f"gt-report-{id}", cls, "report --gate", "refused", report_gate(lambda ws: "labels.jsonl", gate, failure=False),
            words, f"--gate {gate!r}")  # fmt: skip
    add("gt-bundle-syntax", cls, "bundle --gate", "refused",
        lambda ws: Call(ws.bundle("labels.jsonl", "--gate", f"{metric}=<0.1"), bundle_verifies("new.tar"), ("new.tar",)),
        ("METRIC OP NUMBER",), "bundle --gate with bad syntax")  # fmt: skip


def _verify_cases() -> None:
    cls = "bundle"

    def verify(ws: Workspace, bundle: str = "bundle.tar", *keys: str, honest: Honest | None = None,
               json_out: bool = False, sub: bool = False) -> Call:  # fmt: skip
        argv = ws.verify(bundle, *keys) + (["--json"] if json_out else [])
        return Call(
            argv,
            honest or never_verified("a damaged bundle"),
            (),
            subprocess=sub,
            json_stdout=json_out,
        )

    add(
        "bn-clean",
        cls,
        "verify",
        "honest",
        lambda ws: verify(ws, honest=verified_as("bundle.tar", ("auditor",))),
        what="the clean bundle",
    )
    add("bn-countersigned", cls, "verify", "honest",
        lambda ws: verify(ws, "signed.tar", "auditor", "reviewer", honest=verified_as("signed.tar", ("auditor", "reviewer"))),
        what="the countersigned bundle, both keys")  # fmt: skip

    def edited(
        edit: Callable[[dict[str, bytes], dict[str, Any]], None], bundle: str = "bundle.tar"
    ) -> Callable[[Workspace], Call]:
        def make(ws: Workspace) -> Call:
            edit_bundle(ws.p(bundle), edit)
            return verify(ws, bundle, honest=never_verified("a bundle edited and re-signed"))

        return make

    def replace_text(
        name: str, old: str, new: str
    ) -> Callable[[dict[str, bytes], dict[str, Any]], None]:
        def edit(files: dict[str, bytes], statement: dict[str, Any]) -> None:
            text = files[name].decode("utf-8")
            if old not in text:
                raise LookupError(f"{old!r} not in {name}")
            files[name] = text.replace(old, new).encode("utf-8")

        return edit

    def summary_edit(files: dict[str, bytes], statement: dict[str, Any]) -> None:
        name = "data/runs/first/summary.json"
        if name not in files:  # bags hold records only: a summary is added, with a false rate
            files[name] = b'{"reviewed": {"answer_rate": {"value": 0.01}}}\n'
            return
        data = json.loads(files[name])
        data["reviewed"]["answer_rate"]["value"] = 0.01
        data["metrics"]["reviewed_hallucination_rate"]["value"] = 0.01
        files[name] = (json.dumps(data, indent=2) + "\n").encode()

    def predicate(
        edit: Callable[[dict[str, Any]], Any],
    ) -> Callable[[dict[str, bytes], dict[str, Any]], None]:
        return lambda files, statement: edit(statement["predicate"])

    def omit_run(drop_labels: bool) -> Callable[[dict[str, bytes], dict[str, Any]], None]:
        def edit(files: dict[str, bytes], statement: dict[str, Any]) -> None:
            p = statement["predicate"]
            p["runs"] = [r for r in p["runs"] if r["pipeline"] != "second"]
            p["gates"] = [g for g in p["gates"] if g["pipeline"] != "second"]
            if drop_labels:
                name = p["labels"]["file"]
                kept = [
                    line
                    for line in files[name].decode().splitlines()
                    if json.loads(line)["pipeline"] != "second"
                ]
                files[name] = ("\n".join(kept) + "\n").encode()
                p["labels"].update(sha256=hashlib.sha256(files[name]).hexdigest(), count=len(kept))

        return edit

    def review_swap(files: dict[str, bytes], statement: dict[str, Any]) -> None:
        name = "data/runs/first/review.json"
        data = json.loads(files[name])
        data["sample"] = data["sample"][::-1]
        files[name] = (json.dumps(data, indent=2) + "\n").encode()

    def report_rate(ws_rate: str) -> Callable[[dict[str, bytes], dict[str, Any]], None]:
        def edit(files: dict[str, bytes], statement: dict[str, Any]) -> None:
            if "data/report.html" not in files:  # bags hold records only: a report is added
                files["data/report.html"] = f"<p>hallucinated claims: {ws_rate}</p>\n".encode()
                return
            text = files["data/report.html"].decode()
            found = re.search(r"\d+\.\d%", text)
            if not found:
                raise LookupError("no percentage in report.html")
            files["data/report.html"] = text.replace(found.group(0), ws_rate).encode()

        return edit

    def labels_replaced(files: dict[str, bytes], statement: dict[str, Any]) -> None:
        p = statement["predicate"]
        name = p["labels"]["file"]
        rows = [json.loads(line) for line in files[name].decode().splitlines()]
        for r in rows:
            r["hallucinated"] = False
            r.pop("claims", None)
        for r in rows:
            if r["role"] == "second":
                r["hallucinated"] = False
        files[name] = "".join(json.dumps(r) + "\n" for r in rows).encode()
        p["labels"]["sha256"] = hashlib.sha256(files[name]).hexdigest()

    tampers: list[tuple[str, tuple[str, ...], str, Callable[[Workspace], Call]]] = [
        ("bn-report-edited", ("report.html",), "report.html's first rate edited, re-signed with its own key",
         edited(report_rate("0.1%"))),
        ("bn-summary-edited", ("summary.json",), "a summary.json's reviewed rate edited, re-signed", edited(summary_edit)),
        ("bn-reviewers-edited", ("reviewers",), "the predicate's reviewers renamed, re-signed",
         edited(predicate(lambda p: p["runs"][0]["reviewers"][0].update(name="Chief Auditor")))),
        ("bn-judge-identity", ("judge",), "the predicate's judge identity edited, re-signed",
         edited(predicate(lambda p: p["runs"][0]["judge"].update(identity={"model": "gpt-4o", "kind": "openai"})))),
        ("bn-run-omitted", ("second",), "a run omitted from the predicate, its files kept, re-signed", edited(omit_run(False))),
        ("bn-run-and-labels-omitted", ("second",), "a run omitted from the predicate and its labels dropped, re-signed",
         edited(omit_run(True))),
        ("bn-figure-edited", ("figures",), "a predicate figure edited, re-signed",
         edited(predicate(lambda p: p["runs"][0]["figures"]["metrics"]["reviewed_hallucination_rate"].update(value=0.01)))),
        ("bn-review-design-edited", ("review",), "the predicate's review design (size) edited, re-signed",
         edited(predicate(lambda p: p["runs"][0]["review"].update(size=30)))),
        ("bn-labels-count-edited", ("labels",), "the predicate's labels count edited, re-signed",
         edited(predicate(lambda p: p["labels"].update(count=999)))),
        ("bn-review-json-edited", ("review.json",), "a bundled review.json's order reversed, re-signed", edited(review_swap)),
        ("bn-labels-replaced", ("figures|cannot be computed again",), "the bundled labels all set not hallucinated, re-signed", edited(labels_replaced)),
    ]  # fmt: skip
    for id, words, what, make in tampers:
        add(id, cls, "verify", "refused", make, words, what)

    def gates_dropped(ws: Workspace) -> Call:
        """Which gates a team meant to apply is policy, not a record: a key holder who signs a
        statement of no gate states a truth of the records, and verify shows no gate."""
        edit_bundle(ws.p("bundle.tar"), predicate(lambda p: p.update(gates=[])))

        def check(ws: Workspace, ran: Ran) -> str | None:
            said = [line for line in ran.stdout.splitlines() if re.match(r"(PASS|FAIL) ", line)]
            return f"verify shows a gate of a statement without one: {said[0]}" if said else None

        return verify(ws, "bundle.tar", honest=check)

    add("bn-gates-dropped", cls, "verify", "honest", gates_dropped,
        what="the predicate's gate results dropped, re-signed: verified, and no gate shown")  # fmt: skip

    def documents(ws: Workspace) -> Call:
        def edit(files: dict[str, bytes], statement: dict[str, Any]) -> None:
            name = next(n for n in files if "/documents/" in n and n.endswith("warranty.txt"))
            files[name] = files[name].replace(b"2 years", b"9 years")

        edit_bundle(ws.p("docs.tar"), edit)
        return verify(
            ws,
            "docs.tar",
            honest=never_verified("a bundle whose document differs from its index manifest"),
        )

    add(
        "bn-document-edited",
        cls,
        "verify",
        "refused",
        documents,
        ("warranty.txt|documents|index",),
        "an indexed document edited against the index manifest, re-signed",
        audit=True,
    )

    def members(kind: str) -> Callable[[Workspace], Call]:
        def make(ws: Workspace) -> Call:
            files, _, _ = open_bundle(ws.p("bundle.tar"))
            if kind == "added":
                files["data/extra.txt"] = b"added\n"
            elif kind == "removed":
                del files["data/runs/second/records.jsonl"]
            elif kind == "renamed":
                files["data/runs/second/records2.jsonl"] = files.pop(
                    "data/runs/second/records.jsonl"
                )
            rewrite_tar(ws.p("bundle.tar"), files)
            return verify(ws)

        return make

    for kind, words in (
        ("added", ("added",)),
        ("removed", ("missing",)),
        ("renamed", ("records",)),
    ):
        add(f"bn-member-{kind}", cls, "verify", "refused", members(kind), words, f"a member {kind}")

    def sparse(ws: Workspace) -> Call:
        with_sparse(ws.p("bundle.tar"))
        return verify(ws, sub=True)

    add(
        "bn-sparse-20gib",
        cls,
        "verify",
        "refused",
        sparse,
        ("sparse|zeros.bin",),
        "a GNU sparse member declaring 20 GiB",
    )

    def packed(kind: str) -> Callable[[Workspace], Call]:
        def make(ws: Workspace) -> Call:
            data = ws.p("bundle.tar").read_bytes()
            if kind == "gz":
                ws.p("bundle.tar").write_bytes(gzip.compress(data, mtime=0))
            else:
                files, _, _ = open_bundle(ws.p("bundle.tar"))
                buffer = io.BytesIO()
                with zipfile.ZipFile(buffer, "w") as archive:
                    for name, content in sorted(files.items()):
                        archive.writestr(name, content)
                ws.p("bundle.tar").write_bytes(buffer.getvalue())
            return verify(ws)

        return make

    add(
        "bn-tar-gz",
        cls,
        "verify",
        "refused",
        packed("gz"),
        ("gzip|compressed",),
        "the bundle gzipped (.tar.gz)",
    )
    add("bn-zip", cls, "verify", "refused", packed("zip"), ("zip",), "the bundle's files as a .zip")

    def truncated(ws: Workspace) -> Call:
        data = ws.p("bundle.tar").read_bytes()
        ws.p("bundle.tar").write_bytes(data[: len(data) // 2])
        return verify(ws)

    add("bn-truncated", cls, "verify", "refused", truncated, ("truncated",), "the tar cut in half")

    def envelope(kind: str) -> Callable[[Workspace], Call]:
        def make(ws: Workspace) -> Call:
            from auditor.evidence.bag import ENVELOPE
            from auditor.evidence.dsse import PAYLOAD_TYPE, Envelope, sign_payload

            files, env, _ = open_bundle(ws.p("bundle.tar"))
            stranger = sign_payload(private_key(ws.p("keys/stranger.key")), PAYLOAD_TYPE, env.payload,
                                    "reviewer", env.signatures[0].signed_at)  # fmt: skip
            signatures = {
                "duplicated": (*env.signatures, env.signatures[0]),
                "stranger-only": (stranger,),
                "stranger-beside": (*env.signatures, stranger),
            }[kind]
            files[ENVELOPE] = Envelope(env.payload_type, env.payload, signatures).to_bytes()
            rewrite_tar(ws.p("bundle.tar"), files)
            if kind == "duplicated":
                return verify(ws, honest=verified_as("bundle.tar", ("auditor",)))
            return verify(ws)

        return make

    add(
        "bn-signature-duplicated",
        cls,
        "verify",
        "refused",
        envelope("duplicated"),
        ("twice|duplicate",),
        "the auditor's signature entry twice in the envelope",
    )
    add(
        "bn-signature-unknown-key",
        cls,
        "verify",
        "refused",
        envelope("stranger-only"),
        ("no key given",),
        "signed by a key nobody gave, alone",
    )
    add(
        "bn-signature-unknown-beside",
        cls,
        "verify",
        "refused",
        envelope("stranger-beside"),
        ("no key given",),
        "a stranger's signature beside the auditor's",
    )
    add("bn-key-signed-nothing", cls, "verify", "refused", lambda ws: verify(ws, "bundle.tar", "auditor", "reviewer"),
        ("signed nothing",), "verify with a key that signed nothing")  # fmt: skip
    add("bn-private-key", cls, "verify", "refused",
        lambda ws: Call(["verify", ws.p("bundle.tar"), "--key", ws.p("keys/auditor.key")], never_verified("with a private key")),
        ("private key",), "verify --key the private key")  # fmt: skip
    add("bn-directory", cls, "verify", "refused",
        lambda ws: Call(["verify", ws.p("first"), "--key", ws.p("keys/auditor.key.pub")], never_verified("a directory")),
        ("first",), "verify a directory")  # fmt: skip

    def special(kind: str) -> Callable[[Workspace], Call]:
        def make(ws: Workspace) -> Call:
            path = Path("/dev/zero")
            if kind == "fifo":
                path = ws.p("fifo.tar")
                os.mkfifo(path)
            return Call(
                ["verify", path, "--key", ws.p("keys/auditor.key.pub")],
                never_verified(kind),
                (),
                subprocess=True,
            )

        return make

    add(
        "bn-dev-zero", cls, "verify", "refused", special("zero"), ("/dev/zero",), "verify /dev/zero"
    )
    add("bn-fifo", cls, "verify", "refused", special("fifo"), ("fifo.tar",), "verify a FIFO")

    def member_path(kind: str) -> Callable[[Workspace], Call]:
        def make(ws: Workspace) -> Call:
            data = ws.p("bundle.tar").read_bytes()
            buffer = io.BytesIO(data)
            out = io.BytesIO()
            with (
                tarfile.open(fileobj=buffer, mode="r:") as src,
                tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst,
            ):
                for member in src.getmembers():
                    dst.addfile(member, src.extractfile(member))
                if kind == "traversal":
                    info = tarfile.TarInfo("../escaped.txt")
                    info.size = 3
                    dst.addfile(info, io.BytesIO(b"bad"))
                elif kind == "symlink":
                    info = tarfile.TarInfo("data/link")
                    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                    dst.addfile(info)
                else:
                    member = next(m for m in src.getmembers() if m.name == "audit.dsse.json")
                    dst.addfile(member, src.extractfile(member))
            ws.p("bundle.tar").write_bytes(out.getvalue())
            return verify(ws)

        return make

    add(
        "bn-member-traversal",
        cls,
        "verify",
        "refused",
        member_path("traversal"),
        ("outside",),
        "a member ../escaped.txt",
    )
    add(
        "bn-member-symlink",
        cls,
        "verify",
        "refused",
        member_path("symlink"),
        ("link",),
        "a symlink member to /etc/passwd",
    )
    add(
        "bn-envelope-twice",
        cls,
        "verify",
        "refused",
        member_path("twice"),
        ("twice",),
        "the envelope member twice",
    )

    def bad_base64(ws: Workspace) -> Call:
        from auditor.evidence.bag import ENVELOPE

        files, _, _ = open_bundle(ws.p("bundle.tar"))
        data = json.loads(files[ENVELOPE])
        data["signatures"][0]["sig"] = "!!!not base64!!!"
        files[ENVELOPE] = json.dumps(data).encode()
        rewrite_tar(ws.p("bundle.tar"), files)
        return verify(ws)

    add(
        "bn-signature-not-base64",
        cls,
        "verify",
        "refused",
        bad_base64,
        ("base64",),
        "a signature that is not base64",
    )

    # verify --json on each exit code
    add("bn-json-verified", cls, "verify --json", "honest",
        lambda ws: verify(ws, json_out=True, honest=lambda ws, ran: None if json.loads(ran.stdout)["verified"] is True else "not verified"),
        what="verify --json, exit 0")  # fmt: skip
    add("bn-json-failed", cls, "verify --json", "refused", lambda ws: (members("removed")(ws), verify(ws, json_out=True))[1],
        ("missing",), "verify --json, exit 1 (a member removed)")  # fmt: skip
    add("bn-json-no-key-file", cls, "verify --json", "refused",
        lambda ws: Call(["verify", ws.p("bundle.tar"), "--key", ws.p("keys/none.pub"), "--json"], never_verified("without a key"),
                        (), json_stdout=True),
        ("no such key file",), "verify --json, exit 2 (no such key file)")  # fmt: skip

    def newer(ws: Workspace) -> Call:
        edit_bundle(
            ws.p("bundle.tar"),
            lambda files, s: s.update(predicateType=s["predicateType"][:-1] + "9"),
        )
        return verify(ws, json_out=True)

    add(
        "bn-json-newer-predicate",
        cls,
        "verify --json",
        "refused",
        newer,
        ("newer auditor",),
        "verify --json, exit 2 (a predicate of a newer auditor)",
    )


def _sign_cases() -> None:
    cls = "sign"

    def signed(path: str = "bundle.tar") -> Honest:
        return bundle_verifies(path, ("auditor", "reviewer"))

    add(
        "sg-clean",
        cls,
        "sign",
        "honest",
        lambda ws: Call(ws.sign(), signed(), ("bundle.tar",)),
        what="countersign the clean bundle",
    )

    def through_link(ws: Workspace) -> Call:
        ws.p("link.tar").symlink_to(ws.p("bundle.tar"))

        def check(ws: Workspace, ran: Ran) -> str | None:
            if not ws.p("link.tar").is_symlink():
                return (
                    "link.tar is no longer a link: a signed copy replaced it, bundle.tar unsigned"
                )
            return signed()(ws, ran)

        return Call(ws.sign("link.tar"), check, ("bundle.tar", "link.tar"))

    add(
        "sg-symlink",
        cls,
        "sign",
        "honest",
        through_link,
        what="sign through a symlink to the bundle",
    )

    def read_only(ws: Workspace) -> Call:
        os.chmod(ws.p("bundle.tar"), 0o444)

        def check(ws: Workspace, ran: Ran) -> str | None:
            mode = stat.S_IMODE(os.stat(ws.p("bundle.tar")).st_mode)
            if mode != 0o444:
                return f"a read-only (0444) bundle replaced, now {mode:o}"
            return signed()(ws, ran)

        return Call(ws.sign(), check, ("bundle.tar",))

    # issue 48: the signed bundle keeps its mode (replaced by a rename in its directory)
    add(
        "sg-read-only",
        cls,
        "sign",
        "honest",
        read_only,
        what="sign a 0444 bundle: signed, still 0444",
    )

    def hard_linked(ws: Workspace) -> Call:
        os.link(ws.p("bundle.tar"), ws.p("copy.tar"))

        def check(ws: Workspace, ran: Ran) -> str | None:
            if ws.p("copy.tar").read_bytes() != ws.p("bundle.tar").read_bytes():
                return (
                    "the hard link copy.tar still holds the unsigned bundle (the link was broken)"
                )
            return signed()(ws, ran)

        return Call(ws.sign(), check, ("bundle.tar", "copy.tar"))

    # issue 48 chose refusal: a rename necessarily breaks the link, and an in-place rewrite
    # could leave a torn bundle at every link
    add(
        "sg-hard-link",
        cls,
        "sign",
        "refused",
        hard_linked,
        ("hard link",),
        "sign a bundle with a second hard link",
    )

    def not_recomputing(ws: Workspace) -> Call:
        edit_bundle(ws.p("bundle.tar"), lambda files, s: s["predicate"]["runs"][0]["figures"]["metrics"]
                    ["reviewed_hallucination_rate"].update(value=0.01))  # fmt: skip
        return Call(
            ws.sign(),
            lambda ws, ran: "countersigned a bundle whose figures do not recompute",
            ("bundle.tar",),
        )

    add(
        "sg-figures-do-not-recompute",
        cls,
        "sign",
        "refused",
        not_recomputing,
        ("figures",),
        "sign a bundle whose predicate figure was edited and re-signed",
    )

    def report_edited(ws: Workspace) -> Call:
        files, _, _ = open_bundle(ws.p("bundle.tar"))
        records = next(name for name in files if name.endswith("/records.jsonl"))
        files[records] += b"\n"  # a record file changed after signing
        rewrite_tar(ws.p("bundle.tar"), files)
        return Call(ws.sign(), lambda ws, ran: "countersigned a changed bundle", ("bundle.tar",))

    add(
        "sg-changed",
        cls,
        "sign",
        "refused",
        report_edited,
        ("changed",),
        "sign a bundle whose records.jsonl was changed",
    )
    add("sg-twice", cls, "sign", "refused",
        lambda ws: Call(ws.sign("signed.tar"), lambda ws, ran: "signed twice in one role", ("signed.tar",)),
        ("already signed",), "countersign again in the same role")  # fmt: skip
    add("sg-public-key", cls, "sign", "refused",
        lambda ws: Call(["sign", ws.p("bundle.tar"), "--key", ws.p("keys/reviewer.key.pub"), "--role", "reviewer",
                         "--passphrase-env", PASS_ENV], lambda ws, ran: "signed with a public key", ("bundle.tar",)),
        ("not a private key",), "sign --key a public key")  # fmt: skip
    add("sg-wrong-passphrase", cls, "sign", "refused",
        lambda ws: Call(ws.sign(), lambda ws, ran: "signed with a wrong passphrase", ("bundle.tar",), env={PASS_ENV: "wrong"}),
        ("passphrase",), "sign with a wrong passphrase")  # fmt: skip
    add("sg-truncated", cls, "sign", "refused",
        lambda ws: (ws.p("bundle.tar").write_bytes(ws.p("bundle.tar").read_bytes()[:5000]),
                    Call(ws.sign(), lambda ws, ran: "signed a cut tar", ("bundle.tar",)))[1],
        ("truncated",), "sign a truncated tar")  # fmt: skip

    def sparse(ws: Workspace) -> Call:
        with_sparse(ws.p("bundle.tar"))
        return Call(
            ws.sign(),
            lambda ws, ran: "signed a bundle with a 20 GiB sparse member",
            ("bundle.tar",),
            subprocess=True,
        )

    add(
        "sg-sparse-20gib",
        cls,
        "sign",
        "refused",
        sparse,
        ("sparse|zeros.bin",),
        "sign a bundle with a 20 GiB sparse member",
    )

    def fifo(ws: Workspace) -> Call:
        os.mkfifo(ws.p("fifo.tar"))
        return Call(ws.sign("fifo.tar"), lambda ws, ran: "signed a FIFO", (), subprocess=True)

    add("sg-fifo", cls, "sign", "refused", fifo, ("fifo.tar",), "sign a FIFO")

    def gz(ws: Workspace) -> Call:
        ws.p("bundle.tar").write_bytes(gzip.compress(ws.p("bundle.tar").read_bytes(), mtime=0))
        return Call(ws.sign(), lambda ws, ran: "signed a .tar.gz", ("bundle.tar",))

    add("sg-tar-gz", cls, "sign", "refused", gz, ("gzip|compressed",), "sign a .tar.gz")
    add("sg-role-auditor", cls, "sign", "refused",
        lambda ws: Call([*ws.sign()[:-4], "--role", "auditor", "--passphrase-env", PASS_ENV], lambda ws, ran: "signed as auditor",
                        ("bundle.tar",)),
        ("role",), "sign --role auditor")  # fmt: skip


def _keygen_cases() -> None:
    cls = "keygen"

    def keygen(ws: Workspace, out: str, passphrase: str | None = "long", *extra: Any,
               honest: Honest | None = None) -> Call:  # fmt: skip
        env = {} if passphrase is None else {PASS_ENV: passphrase}
        argv = ["keygen", "--out", ws.p(out), "--passphrase-env", PASS_ENV, *extra]
        return Call(argv, honest or (lambda ws, ran: None), (out, out + ".pub"), env=env)

    for size in (1023, 1024, 4096):
        secret = ("k" * size)[:size]
        # over 1,023 bytes no key can be encrypted with it: keygen refuses (issue 48)
        add(f"kg-passphrase-{size}", cls, "keygen", "honest" if size <= 1023 else "refused",
            lambda ws, s=secret: keygen(ws, "keys/new.key", s, honest=key_usable("keys/new.key", s)),
            () if size <= 1023 else ("1,023",),
            what=f"a passphrase of {size:,} bytes (the key must load with it, or keygen refuse)")  # fmt: skip
    add("kg-passphrase-unicode", cls, "keygen", "honest",
        lambda ws: keygen(ws, "keys/new.key", "pässwörd ✓", honest=key_usable("keys/new.key", "pässwörd ✓")),
        what="a non-ASCII passphrase")  # fmt: skip
    add("kg-passphrase-nfd", cls, "keygen", "honest",
        lambda ws: keygen(ws, "keys/new.key", unicodedata.normalize("NFD", "pässwörd"),
                          honest=key_usable("keys/new.key", unicodedata.normalize("NFD", "pässwörd"))),
        what="a passphrase in NFD")  # fmt: skip
    add(
        "kg-out-existing-bundle",
        cls,
        "keygen",
        "refused",
        lambda ws: keygen(ws, "bundle.tar", "pw"),
        ("exists",),
        "keygen --out an existing bundle",
    )
    add(
        "kg-out-no-parent",
        cls,
        "keygen",
        "refused",
        lambda ws: keygen(ws, "nowhere/k.key", "pw"),
        ("not a directory",),
        "keygen --out in a missing folder",
    )

    def pub_dir(ws: Workspace) -> Call:
        ws.p("keys/x.key.pub").mkdir()
        return keygen(ws, "keys/x.key", "pw", "--force")

    add(
        "kg-pub-is-dir",
        cls,
        "keygen",
        "refused",
        pub_dir,
        ("directory",),
        "keygen --force where KEY.pub is a directory",
    )

    def dangling(ws: Workspace) -> Call:
        ws.p("keys/d.key").symlink_to(ws.p("keys/none"))
        return keygen(ws, "keys/d.key", "pw")

    add(
        "kg-dangling-symlink",
        cls,
        "keygen",
        "refused",
        dangling,
        ("exists",),
        "keygen --out a dangling symlink",
    )
    add(
        "kg-passphrase-empty",
        cls,
        "keygen",
        "refused",
        lambda ws: keygen(ws, "keys/new.key", ""),
        ("passphrase",),
        "an empty passphrase variable",
    )

    def key_over_labels(ws: Workspace) -> Call:
        return keygen(ws, "labels.jsonl", "pw", "--force", honest=key_usable("labels.jsonl", "pw"))

    add(
        "kg-force-over-input",
        cls,
        "keygen",
        "honest",
        key_over_labels,
        what="keygen --out labels.jsonl --force (an explicit replace: honest if the key works)",
    )


def _bundle_label_cases() -> None:
    cls = "bundle labels"

    def bundle_with(edit: Callable[[Workspace], Path | None], *extra: Any, honest: Honest | None = None
                    ) -> Callable[[Workspace], Call]:  # fmt: skip
        def make(ws: Workspace) -> Call:
            given = edit(ws)
            return Call(ws.bundle(given or "labels.jsonl", "--gate", "hallucination_rate<=0.5", "--gate",
                                  "reviewed_hallucination_rate<=0.9", *extra),
                        honest or bundle_verifies("new.tar"), ("new.tar",))  # fmt: skip

        return make

    def same_labels(ws: Workspace, ran: Ran) -> str | None:
        found = bundle_verifies("new.tar")(ws, ran)
        if found:
            return found
        files, _, _ = open_bundle(ws.p("new.tar"))
        clean, _, _ = open_bundle(ws.p("bundle.tar"))
        differ = [n for n in clean if n.startswith("data/runs/") and files.get(n) != clean[n]]
        return f"{differ[0]} differs from the clean bundle's" if differ else None

    add(
        "bl-clean",
        cls,
        "bundle --labels",
        "honest",
        bundle_with(lambda ws: None, honest=same_labels),
        what="the clean labels again: the clean bundle's figures and run files",
    )

    def rows_of(
        edit: Callable[[Workspace, list[dict[str, Any]]], Any],
    ) -> Callable[[Workspace], Path]:
        return _with_rows(edit)

    def adjudicate_agreed(ws: Workspace, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        b = ws.base
        ident = next(
            i for i in b.prefix("first") if i in b.second["first"] and i != b.disputed["first"]
        )
        return [
            *rows,
            label(
                b,
                "first",
                ident,
                reviewer="Cy",
                role="adjudicator",
                hallucinated=not b.truth["first"][ident],
            ),
        ]

    def second_case(ws: Workspace, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            if r["role"] == "second":
                r["reviewer"] = "ana"

    def before(ws: Workspace, rows: list[dict[str, Any]]) -> None:
        rows[1]["labelled_at"] = "2001-01-01T00:00:00Z"

    for id, edit, words, what in (
        (
            "adjudicator-agreed",
            adjudicate_agreed,
            ("adjudicat",),
            "an adjudicator overruling two agreeing reviews",
        ),
        (
            "second-case",
            second_case,
            ("another person|invisible",),
            'second reviews by "ana" (first by "Ana")',
        ),
        ("year-2001", before, ("before",), "a label made in 2001"),
    ):
        add(f"bl-{id}", cls, "bundle --labels", "refused", bundle_with(rows_of(edit)), words, what)

    def swapped(ws: Workspace) -> None:
        ws.edit_json("first/review.json", lambda d: d.update(seed=d["seed"] + 1))

    add(
        "bl-review-seed",
        cls,
        "bundle --labels",
        "refused",
        bundle_with(lambda ws: swapped(ws)),
        ("seed",),
        "review.json's seed edited",
    )

    def keep(ws: Workspace) -> Path:
        b = ws.base
        extra_id = next(i for i in sorted(b.truth["first"]) if i not in b.drawn["first"])
        return ws.labels([*ws.rows(), label(b, "first", extra_id)])

    def kept(ws: Workspace, ran: Ran) -> str | None:
        found = bundle_verifies("new.tar", keys=("figures", "review"))(ws, ran)
        if found:
            return found
        _, _, statement = open_bundle(ws.p("new.tar"))
        ana = next(r for r in statement["predicate"]["runs"][0]["reviewers"] if r["name"] == "Ana")
        return (
            None
            if ana["labels"] == LABELLED + 1
            else f"Ana's labels {ana['labels']} (honest: {LABELLED + 1})"
        )

    add(
        "bl-outside-keep",
        cls,
        "bundle --labels --labels-outside-sample keep",
        "honest",
        bundle_with(keep, "--labels-outside-sample", "keep", honest=kept),
        what="a label outside the sample, kept",
    )
    add("bl-utf16", cls, "bundle --labels", "refused",
        bundle_with(lambda ws: ws.raw(codecs.BOM_UTF16_LE + "".join(json.dumps(r) + "\n" for r in ws.rows()).encode("utf-16-le"))),
        ("utf-16",), "UTF-16 labels")  # fmt: skip


def _audit_cases() -> None:
    cls = "audit"

    def audit(labels: Callable[[Workspace], Path | None], *extra: Any, honest: Honest | None = None
              ) -> Callable[[Workspace], Call]:  # fmt: skip
        def make(ws: Workspace) -> Call:
            given = labels(ws)
            argv = audit_argv(ws.root, *(("--labels", given) if given else ()), *extra)
            writes = ("audit/*", "audit/*/*", "audit-h.sqlite")
            return Call(
                argv,
                honest or same_review("p1", "p2", audit=True),
                writes,
                writes_on_failure=bool(extra),
            )

        return make

    def rows(edit: Callable[[Workspace, list[dict[str, Any]]], Any]) -> Callable[[Workspace], Path]:
        def make(ws: Workspace) -> Path:
            given = copy.deepcopy(ws.base.audit_labels)
            return _jsonl(ws.p("al.jsonl"), edit(ws, given) or given)

        return make

    add(
        "au-clean",
        cls,
        "audit --labels",
        "honest",
        audit(lambda ws: ws.p("audit-labels.jsonl")),
        what="audit (resumed) with the clean labels: the report's figures",
        audit=True,
    )

    def other_question(ws: Workspace, given: list[dict[str, Any]]) -> None:
        given[0]["id"] = "q9"

    def other_run(ws: Workspace, given: list[dict[str, Any]]) -> None:
        given[0]["fingerprint"] = "0" * 16

    def outside(ws: Workspace, given: list[dict[str, Any]]) -> list[dict[str, Any]]:
        other = next(q for q in ("q1", "q2") if q not in ws.base.audit_drawn["p1"])
        return [*given, dict(given[0], id=other)]

    def second_role(ws: Workspace, given: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*given, dict(given[0], role="second", reviewer="Bo")]

    def adjudicator_alone(ws: Workspace, given: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            *given,
            dict(
                given[0],
                role="adjudicator",
                reviewer="Cy",
                hallucinated=not given[0]["hallucinated"],
            ),
        ]

    for id, edit, words, what in (
        (
            "unknown-question",
            other_question,
            ("not among the questions",),
            "a label of a question not asked",
        ),
        ("other-run", other_run, ("another run",), "a label made on another run's page"),
        (
            "outside-sample",
            outside,
            ("outside its drawn review sample",),
            "a label of an undrawn answer",
        ),
        ("second-not-drawn", second_role, ("second review",), "a second review nobody drew"),
        (
            "adjudicator-alone",
            adjudicator_alone,
            ("adjudicat",),
            "an adjudicator overruling a lone first review",
        ),
    ):
        add(
            f"au-{id}", cls, "audit --labels", "refused", audit(rows(edit)), words, what, audit=True
        )
    add("au-utf16", cls, "audit --labels", "refused",
        audit(lambda ws: ws.raw(ws.p("audit-labels.jsonl").read_text().encode("utf-16"), "al.jsonl")), ("utf-16",),
        "UTF-16 labels", audit=True)  # fmt: skip

    def zero_counted(ws: Workspace) -> Path:
        given = copy.deepcopy(ws.base.audit_labels)
        for r in given:
            r["id"] = next(q for q in ("q1", "q2") if q not in ws.base.audit_drawn[r["pipeline"]])
        return _jsonl(ws.p("al.jsonl"), given)

    add("au-gate-zero-counted", cls, "audit --gate", "refused",
        audit(zero_counted, "--labels-outside-sample", "keep", "--gate", "reviewed_hallucination_rate<=0.5",
              honest=gate_not_passed("reviewed_hallucination_rate")),
        ("reviewed_hallucination_rate",), "audit --gate reviewed_hallucination_rate<=0.5 with 0 counted labels",
        audit=True)  # fmt: skip


def _all_cases() -> None:
    _review_cases()
    _review_command_cases()
    _labels_cases()
    _type_cases()
    _huge_and_hidden_cases()
    _file_cases()
    _run_dir_cases()
    _output_cases()
    _gate_cases()
    _verify_cases()
    _sign_cases()
    _keygen_cases()
    _bundle_label_cases()
    _audit_cases()


_all_cases()


@contextlib.contextmanager
def hostile_base(work: Path, answers: int = 30, audit: bool = True) -> Iterator[Base]:
    """The fakes installed, AUDITOR_HOME and the cwd in `work`, the base built."""
    undo = install_fakes()
    home, cwd = os.environ.get("AUDITOR_HOME"), os.getcwd()
    os.environ["AUDITOR_HOME"] = str(work / "home")
    os.chdir(work)
    try:
        yield build(work / "base", answers, audit)
    finally:
        os.chdir(cwd)
        if home is None:
            os.environ.pop("AUDITOR_HOME", None)
        else:
            os.environ["AUDITOR_HOME"] = home
        undo()
