"""Fault suite, bad inputs: every case is one line on stderr naming the file (and line where
there is one) with the fix, the right exit code, and no traceback. The README's fault table
lists the same cases. Fake embedder and judge: no engine needed; run alone with -m faults.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.evidence.build import plan_bundle, write_bundle
from auditor.evidence.keys import generate_key, load_private_key
from auditor.files import utc_now
from auditor.review import check_fingerprint, read_review_labels, run_fingerprint
from auditor.testing import FakeEmbedder, FakeJudge
from tests.conftest import REPO
from tests.evidence.conftest import PASSPHRASE
from tests.evidence.test_verify_resigned import resign

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


def _edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _stale_pipeline(run: Path) -> None:
    """A manifest whose pipeline config an older auditor wrote with a key this one lacks."""

    def change(manifest: dict) -> None:
        manifest["pipeline"] = {
            "name": "old",
            "config": {"name": "old", "retrieval": {"top_kk": 3}},
        }
        manifest["packages"] = {"auditor": "0.0.1"}

    _edit_json(run / "manifest.json", change)


def _record_without_question(run: Path) -> None:
    row = json.loads((run / "records.jsonl").read_text())
    del row["question"]
    (run / "records.jsonl").write_text(json.dumps(row) + "\n")
    (run / "checks.jsonl").unlink()


def _chunks_as_strings(run: Path) -> None:
    """A record whose retrieved chunks were replaced by their texts."""
    row = json.loads((run / "records.jsonl").read_text())
    row["retrieved"] = [chunk["text"] for chunk in row["retrieved"]]
    (run / "records.jsonl").write_text(json.dumps(row) + "\n")
    (run / "checks.jsonl").unlink()


def _corrupt_history_summary(tmp: Path) -> list[str]:
    db = tmp / "h.sqlite"
    assert (
        CliRunner()
        .invoke(cli, ["report", str(_good_run(tmp)), "--history", str(db), "--record"])
        .exit_code
        == 0
    )
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE audits SET summary = '{torn'")
    return ["history", "--history", str(db)]


def _other_kb(tmp: Path) -> list[str]:
    """A check against one knowledge base, resumed against another."""
    answers = _write(tmp / "answers.jsonl", json.dumps(ANSWER) + "\n")
    first = _index(tmp)
    second = tmp / "index2"
    made = CliRunner().invoke(
        cli,
        [
            "ingest",
            str(_corpus(tmp, {"b.md": GOOD_DOC + " Or 60 days."})),
            "--index",
            str(second),
            "-q",
        ],
    )
    assert made.exit_code == 0, made.output
    out = tmp / "o"
    done = CliRunner().invoke(
        cli,
        [
            "check",
            "--answers",
            str(answers),
            "--out",
            str(out),
            "--sources",
            "kb",
            "--index",
            str(first),
            "-q",
        ],
    )
    assert done.exit_code == 0, done.output
    return ["check", str(out), "--sources", "kb", "--index", str(second)]


def _same_pipeline_twice(tmp: Path) -> list[str]:
    runs = []
    for where in ("a", "b"):
        answers = _write(tmp / f"{where}.jsonl", json.dumps(ANSWER) + "\n")
        runs.append(str(tmp / where / "run"))
        assert (
            CliRunner()
            .invoke(cli, ["check", "--answers", str(answers), "--out", runs[-1], "-q"])
            .exit_code
            == 0
        )
    return ["report", *runs, "--history", str(tmp / "h.sqlite"), "--record"]


def _audit(tmp: Path, *extra: str, questions: Path | None = None) -> list[str]:
    """An audit whose inputs are good but for `extra` (a pipeline on the fake embedder)."""
    pipeline = (REPO / "pipelines" / "smollm2-135m-cpu.toml").read_text()
    pipeline = pipeline.replace('model = "all-MiniLM-L6-v2"', 'model = "fake-words"', 1)
    questions = questions or _write(tmp / "q.jsonl", json.dumps(QUESTION) + "\n")
    return [
        "audit", "--pipeline", str(_write(tmp / "tiny.toml", pipeline)),
        "--questions", str(questions), "--index", str(_index(tmp)), "--out", str(tmp / "audit"),
        *extra,
    ]  # fmt: skip


def _out(args: list[str], path: Path) -> list[str]:
    """`args` with `path` as their --out (an option is given once)."""
    at = args.index("--out") + 1
    return [*args[:at], str(path), *args[at + 1 :]]


def _jsonl_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _first_row(name: str, change: Callable[[dict], object]) -> Callable[[Path], None]:
    """Damage: the first row of a run dir's JSONL file, changed in place."""

    def damage(run: Path) -> None:
        lines = _jsonl_lines(run / name)
        row = json.loads(lines[0])
        change(row)
        _write_lines(run / name, [json.dumps(row), *lines[1:]])

    return damage


def _set_key(name: str, **changes: object) -> Callable[[Path], None]:
    return lambda run: _edit_json(run / name, lambda data: data.update(changes))


def _calibration(change: Callable[[dict], None]) -> Callable[[Path], list[str]]:
    """`report --calibration` with the shipped calibration, damaged by `change`."""

    def make(tmp: Path) -> list[str]:
        from auditor.calibrate import shipped_calibrations

        data = json.loads(next(iter(shipped_calibrations().values())).read_text())
        change(data)
        cal = _write(tmp / "cal" / "calibration.json", json.dumps(data))
        return ["report", str(_good_run(tmp)), "--calibration", str(cal.parent)]

    return make


def _gate(expression: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["report", str(_good_run(tmp)), "--gate", expression]


def _with_good_run(
    make: Callable[[Path], list[str]], reviewed: bool = False
) -> Callable[[Path], list[str]]:
    """A command on a good run dir (with review.json where `reviewed`), as `make` says."""

    def made(tmp: Path) -> list[str]:
        run = _good_run(tmp)
        if reviewed:
            drawn = CliRunner().invoke(cli, ["review", str(run), "--sample", "1"])
            assert drawn.exit_code == 0, drawn.output
        return make(run)

    return made


def _labels(run: Path, name: str = "l.jsonl") -> str:
    """A labels file beside the run dir, of its one answer."""
    return str(_write(run.parent / name, '{"id": "a1", "hallucinated": false}\n'))


def _link(link: Path, target: Path) -> Path:
    link.symlink_to(target)
    return link


def _reviewed_run(tmp: Path, count: int = 3, second: float | None = None) -> Path:
    """A checked run dir of `count` answers (a1, a2, ...; fake judge) with all drawn for review."""
    # one answer more than checked: `check RUN` later checks it (the run grows)
    rows = [ANSWER | {"id": f"a{k}"} for k in range(1, count + 2)]
    answers = _write(tmp / "answers.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    run = tmp / "run"
    checking = ["check", "--answers", str(answers), "--out", str(run), "-q", "--limit", str(count)]
    done = CliRunner().invoke(cli, checking)
    assert done.exit_code == 0, done.output
    extra = [] if second is None else ["--second-review", str(second)]
    drawn = CliRunner().invoke(cli, ["review", str(run), "--sample", str(count), *extra])
    assert drawn.exit_code == 0, drawn.output
    return run


def _page_line(run: Path, ident: str, **extra: object) -> str:
    """A label line as the review page writes it."""
    manifest = json.loads((run / "manifest.json").read_text())
    check = json.loads((run / "check.json").read_text())
    line = {
        "id": ident,
        "fingerprint": run_fingerprint(manifest),
        "check_fingerprint": check_fingerprint(check),
        "hallucinated": False,
        "reviewer": "Ana",
        "labelled_at": utc_now(),  # after the run began
    }
    return json.dumps(line | extra) + "\n"


def _drawn_ids(run: Path) -> list[str]:
    return [e["id"] for e in json.loads((run / "review.json").read_text())["sample"]]


def _review_labels(
    lines: Callable[[Path, list[str]], str],
    count: int = 3,
    second: float | None = None,
    encoding: str = "utf-8",
    prepare: Callable[[Path], None] | None = None,
) -> Callable[[Path], list[str]]:
    """`report RUN --labels FILE` on a reviewed run, FILE written by `lines(run, drawn ids)`."""

    def make(tmp: Path) -> list[str]:
        run = _reviewed_run(tmp, count, second)
        if prepare is not None:  # the run changes after its sample was drawn
            prepare(run)
        labels = tmp / "l.jsonl"
        labels.write_bytes(lines(run, _drawn_ids(run)).encode(encoding))
        return ["report", str(run), "--labels", str(labels)]

    return make


def _grow(run: Path) -> None:
    """The run grows: its last answer checked too (the sample is stale)."""
    done = CliRunner().invoke(cli, ["check", str(run), "-q"])
    assert done.exit_code == 0, done.output


def _lose_last_check(run: Path) -> None:
    """The last check row lost, in a run checked by an auditor that wrote no totals in
    check.json (with them, the row count alone is refused: `check totals`)."""
    rows = (run / "checks.jsonl").read_text().splitlines()
    (run / "checks.jsonl").write_text("\n".join(rows[:-1]) + "\n")
    _edit_json(run / "check.json", lambda data: data.pop("totals"))


def _recheck(run: Path) -> None:
    (run / "checks.jsonl").unlink()
    done = CliRunner().invoke(cli, ["check", str(run), "-q"])
    assert done.exit_code == 0, done.output


def _resigned(
    change: Callable[[dict[str, bytes], dict[str, Any]], None], labelled: bool = False
) -> Callable[[Path], list[str]]:
    """`verify` of a bundle of a reviewed run (with its labels, `labelled`) that its own key
    signed again after `change(payload, predicate)` (tests/evidence/test_verify_resigned.py)."""

    def make(tmp: Path) -> list[str]:
        run = _reviewed_run(tmp)
        labels = None
        if labelled:
            labels = _write(tmp / "l.jsonl", "".join(_page_line(run, i) for i in _drawn_ids(run)))
        key = tmp / "k"
        generate_key(key, PASSPHRASE.encode())
        plan = plan_bundle(
            [run], labels=None if labels is None else read_review_labels(labels), labels_path=labels
        )
        write_bundle(plan, load_private_key(key, PASSPHRASE.encode()), tmp / "a.tar")
        resign(tmp / "a.tar", key, tmp / "a.tar", change)
        return ["verify", str(tmp / "a.tar"), "--key", f"{key}.pub"]

    return make


def _edit_review(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """review.json edited after it was drawn."""
    return lambda run: _edit_json(run / "review.json", change)


def _redrawn(*args: str) -> Callable[[Path], None]:
    """review.json drawn again with `args` (say a smaller sample of a larger run)."""

    def prepare(run: Path) -> None:
        (run / "review.json").unlink()
        done = CliRunner().invoke(cli, ["review", str(run), *args])
        assert done.exit_code == 0, done.output

    return prepare


def _review_again(prepare: Callable[[Path], None], *args: str) -> Callable[[Path], list[str]]:
    """`auditor review RUN ARGS` on a reviewed run that `prepare` changed."""

    def make(tmp: Path) -> list[str]:
        run = _reviewed_run(tmp, 6)
        prepare(run)
        return ["review", str(run), *args]

    return make


def _report_added(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    payload["data/report.html"] = b"<p>hallucinated claims: 3.9 %</p>\n"


def _judge_renamed(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    predicate["runs"][0]["judge"]["identity"]["name"] = "gpt-4o"


def _labels_after_the_end(payload: dict[str, bytes], predicate: dict[str, Any]) -> None:
    """Labels dated 2099: after the statement's audit end, whatever this machine's clock."""
    rows = [json.loads(line) for line in payload["data/labels/labels.jsonl"].splitlines()]
    stamp = "2099-01-01T00:00:00Z"
    lines = "".join(json.dumps(row | {"labelled_at": stamp}) + "\n" for row in rows)
    payload["data/labels/labels.jsonl"] = lines.encode()


def _began_on_the_first(run: Path) -> None:
    """The run began on 1 December (a fixed time, for the message), its sample drawn again."""
    _edit_json(run / "manifest.json", lambda d: d.update(started_at="2026-12-01T08:00:00+00:00"))
    _redrawn("--sample", "3")(run)


def _cherry_picked(run: Path) -> None:
    """review.json's sample swapped for answers of the run it did not draw."""
    _redrawn("--sample", "2", "--seed", "7")(run)
    drawn = set(_drawn_ids(run))
    others = [f"a{k}" for k in range(1, 7) if f"a{k}" not in drawn][:2]
    _edit_json(run / "review.json", lambda d: d.update(sample=[{"id": i} for i in others]))


def _examples_on_checked(tmp: Path) -> list[str]:
    run = _good_run(tmp)
    examples = _write(
        tmp / "ex.jsonl", json.dumps(ANSWER | {"id": "b1", "hallucinated": False}) + "\n"
    )
    return ["check", str(run), "--examples", str(examples)]


# bundle, sign, keygen (issue 48): keys and bundles made by the case, a passphrase from an
# environment variable of the suite's own (set by the case: the command reads it)
FAULT_PASSPHRASE_ENV = "AUDITOR_FAULTS_PASSPHRASE"


def _keys(tmp: Path, *names: str) -> list[Path]:
    """Key pairs (KEY, KEY.pub) under tmp/keys, with the suite's passphrase."""
    from auditor.evidence.keys import generate_key

    os.environ.setdefault(FAULT_PASSPHRASE_ENV, "fault suite")
    (tmp / "keys").mkdir(exist_ok=True)
    made = [tmp / "keys" / name for name in names]
    for key in made:
        generate_key(key, os.environ[FAULT_PASSPHRASE_ENV].encode())
    return made


def _bundled(tmp: Path, run: Path | None = None, key: Path | None = None) -> tuple[Path, Path]:
    """A bundle of a good run signed by the bundler's key: (bundle, key)."""
    run = run or _good_run(tmp)
    key = key or _keys(tmp, "auditor.key")[0]
    out = tmp / "a.tar"
    signing = ["--key", str(key), "--out", str(out), "--passphrase-env", FAULT_PASSPHRASE_ENV]
    done = CliRunner().invoke(cli, ["bundle", str(run), *signing])
    assert done.exit_code == 0, done.output
    return out, key


def _audited(tmp: Path) -> Path:
    """A run dir audited with the fakes, with an index and a question set (tmp/index,
    tmp/q.jsonl)."""
    from tests.test_audit import GOOD
    from tests.test_audit import _audit as _audit_with_fakes

    index = _index(tmp)
    questions = _write(
        tmp / "q.jsonl", json.dumps(QUESTION) + "\n" + json.dumps(QUESTION | {"id": "q2"}) + "\n"
    )
    _audit_with_fakes((index, questions), tmp / "audit", {"good": GOOD})
    return tmp / "audit" / "good"


def _bundle_after(move: Callable[[Path], None], *extra: str) -> Callable[[Path], list[str]]:
    """`bundle` of an audited run after `move(tmp)` took one of its inputs away."""

    def make(tmp: Path) -> list[str]:
        run = _audited(tmp)
        (key,) = _keys(tmp, "auditor.key")
        move(tmp)
        return [
            "bundle", str(run), "--key", str(key), "--out", str(tmp / "a.tar"),
            "--passphrase-env", FAULT_PASSPHRASE_ENV, *extra,
        ]  # fmt: skip

    return make


# files and run dirs (issue 48)


def _labels_file(content: bytes | Callable[[Path], None]) -> Callable[[Path], list[str]]:
    """`report RUN --labels l.jsonl` on a good run, l.jsonl written as `content` (bytes, or
    made at its path by a function: a FIFO, a sparse file)."""

    def make(tmp: Path) -> list[str]:
        run = _good_run(tmp)
        labels = tmp / "l.jsonl"
        if isinstance(content, bytes):
            labels.write_bytes(content)
        else:
            content(labels)
        return ["report", str(run), "--labels", str(labels)]

    return make


def _sparse(size: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with path.open("wb") as handle:  # no disk used, never read
            handle.truncate(size)

    return make


LABEL_LINE = '{"id": "a1", "hallucinated": false}\n'


def _fake_pipeline_run(tmp: Path, questions: int = 8) -> Path:
    """A run dir of a pipeline (fake embedder and generator), as `auditor run` writes it."""
    from auditor.config import PipelineConfig
    from auditor.run import run_pipeline
    from auditor.testing import FakeGenerator

    rows = [{"id": f"q{k}", "question": f"How long can I return a T{k}?"} for k in range(questions)]
    asked = _write(tmp / "q.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    config = PipelineConfig.model_validate(
        {
            "name": "fake",
            "ingest": {"embedder": {"model": "fake-words"}},
            "retrieval": {"top_k": 1},
            "generator": {"kind": "vllm", "model": "smollm2-135m-instruct"},
        }
    )
    fake = FakeGenerator()
    run_pipeline(config, asked, _index(tmp), tmp / "run", generator_factory=lambda *a, **k: fake)
    return tmp / "run"


def _pipeline_run_damaged(damage: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        run = _fake_pipeline_run(tmp)
        damage(run)
        return ["report", str(run)]

    return make


def _verify_packed(pack: Callable[[bytes], bytes], name: str) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        bundle, key = _bundled(tmp)
        packed = _write(tmp / name, pack(bundle.read_bytes()))
        return ["verify", str(packed), "--key", f"{key}.pub"]

    return make


def _zipped(data: bytes) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.tar", data)
    return buffer.getvalue()


def _gzipped(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, mtime=0)


def _verify_sparse(tmp: Path) -> list[str]:
    from tests.evidence.test_bundle_hostile import _sparse_header, _with_raw_member

    bundle, key = _bundled(tmp)
    header = _sparse_header("data/big.bin", 512, 64 * 1024**2)  # 20 GiB: refused the same
    _with_raw_member(bundle, bundle, header, b"x" * 512)
    return ["verify", str(bundle), "--key", f"{key}.pub"]


def _envelope_edited(change: Callable[[dict], None]) -> Callable[[Path], tuple[Path, Path]]:
    def make(tmp: Path) -> tuple[Path, Path]:
        from auditor.evidence.bag import ENVELOPE, read_tar, tar_bytes

        bundle, key = _bundled(tmp)
        files = read_tar(bundle)
        envelope = json.loads(files[ENVELOPE])
        change(envelope)
        bundle.write_bytes(tar_bytes(files | {ENVELOPE: json.dumps(envelope).encode()}, 0))
        return bundle, key

    return make


def _sign(
    prepare: Callable[[Path], tuple[Path, Path]], *, trust: bool = True
) -> Callable[[Path], list[str]]:
    """`sign` by a reviewer of the bundle `prepare` makes (trusting the bundler's key)."""

    def make(tmp: Path) -> list[str]:
        bundle, key = prepare(tmp)
        (reviewer,) = _keys(tmp, "reviewer.key")
        return [
            "sign", str(bundle), "--key", str(reviewer), "--role", "reviewer",
            "--passphrase-env", FAULT_PASSPHRASE_ENV, *(["--trust", f"{key}.pub"] if trust else []),
        ]  # fmt: skip

    return make


def _hard_linked(tmp: Path) -> tuple[Path, Path]:
    bundle, key = _bundled(tmp)
    os.link(bundle, tmp / "kept.tar")
    return bundle, key


def _inflated(tmp: Path) -> tuple[Path, Path]:
    """A bundle whose statement says a hallucination rate its records do not give."""
    from auditor.evidence import statement as build  # computes the predicate

    real = build.headline_figures

    def inflated(run: object) -> dict:
        figures = real(run)  # type: ignore[arg-type]
        figures["metrics"]["hallucination_rate"]["value"] = 0.5
        return figures

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "headline_figures", inflated)
        return _bundled(tmp)


def _keygen_long_passphrase(tmp: Path) -> list[str]:
    os.environ.setdefault("AUDITOR_FAULTS_LONG_PASSPHRASE", "x" * 1024)
    return ["keygen", "--out", str(tmp / "k"), "--passphrase-env", "AUDITOR_FAULTS_LONG_PASSPHRASE"]


def _verify_declared_beyond(tmp: Path) -> list[str]:
    import io
    import tarfile

    from auditor.evidence.bag import read_tar, tar_bytes

    bundle, key = _bundled(tmp)
    data = tar_bytes(read_tar(bundle), 0)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        end = max(m.offset_data + m.size for m in tar.getmembers())
    end += -end % tarfile.BLOCKSIZE
    info = tarfile.TarInfo("data/huge.bin")
    info.size = 64 * 1024**2
    bundle.write_bytes(data[:end] + info.tobuf(format=tarfile.GNU_FORMAT) + b"x" * 1024)
    return ["verify", str(bundle), "--key", f"{key}.pub"]


def _append_copies(times: int) -> Callable[[Path], None]:
    """records.jsonl grown `times` over with copies of its rows under new ids."""

    def damage(run: Path) -> None:
        rows = [json.loads(line) for line in _jsonl_lines(run / "records.jsonl")]
        more = [row | {"id": f"{row['id']}-{k}"} for k in range(times) for row in rows]
        _write_lines(run / "records.jsonl", [json.dumps(row) for row in rows + more])

    return damage


def _check_one_of_two(tmp: Path) -> Path:
    """Two answers, the first checked (--limit 1)."""
    answers = _write(
        tmp / "answers.jsonl", "".join(json.dumps(ANSWER | {"id": i}) + "\n" for i in ("a1", "a2"))
    )
    args = ["check", "--answers", str(answers), "--out", str(tmp / "good"), "-q", "--limit", "1"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    return tmp / "good"


def _check_row_appended(tmp: Path) -> list[str]:
    run = _check_one_of_two(tmp)
    (row,) = _jsonl_lines(run / "checks.jsonl")
    _write_lines(run / "checks.jsonl", [row, json.dumps(json.loads(row) | {"id": "a2"})])
    return ["report", str(run)]


def _cut_checked_record(run: Path) -> None:
    """records.jsonl's last line cut (a copy cut short) while checks.jsonl checked it."""
    (line,) = _jsonl_lines(run / "records.jsonl")
    (run / "records.jsonl").write_text(line[:30])


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
    Case("pipeline: KV cache in fractions of a GiB", _pipeline('[generator]\nkind = "vllm"\nmodel = "smollm2-135m-instruct"\nkv_cache_gib = 1.5\n'), 2, "generator.kv_cache_gib"),
    Case("http target: mapping not JMESPath", _pipeline('[generator]\nkind = "http"\nendpoints = ["http://127.0.0.1:9/ask"]\nanswer = "data.[answer"\n'), 2, "p.toml: generator: answer: not a JMESPath expression"),
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
    Case("--out is a folder of other files", lambda tmp: _out(_run_with_index(_index)(tmp), _corpus(tmp, {"x.md": "x"})), 2, "not empty and not a run dir"),
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
    # damaged run dirs
    Case("check manifest corrupt (report)", _damaged_run(lambda run: (run / "check.json").write_text("{broken")), 2, "check.json: corrupt check manifest"),
    Case("check manifest truncated (check)", _damaged_run(lambda run: (run / "check.json").write_text((run / "check.json").read_text()[:40]), ["check"]), 2, "check.json: corrupt check manifest"),
    Case("check manifest not an object", _damaged_run(lambda run: (run / "check.json").write_text("[1]"), ["check"]), 2, "check.json: corrupt check manifest (not a JSON object)"),
    Case("manifest truncated (report)", _damaged_run(lambda run: (run / "manifest.json").write_text((run / "manifest.json").read_text()[:30])), 2, "manifest.json: corrupt run manifest"),
    Case("pipeline config of an older auditor", _damaged_run(_stale_pipeline), 2, "manifest.json: retrieval.top_kk: unknown key; did you mean top_k? (this run was written by auditor 0.0.1"),
    Case("record without its question (check)", _damaged_run(_record_without_question, ["check"]), 2, 'records.jsonl:1: "question" is required, missing'),
    Case("history: corrupt summary", _corrupt_history_summary, 2, "holds a corrupt summary"),
    Case("baseline: no such history", lambda tmp: ["baseline", "accept", str(_good_run(tmp)), "--history", str(tmp / "typo.sqlite")], 2, "typo.sqlite: no such audit history database"),
    # validated before any work
    Case("check: another knowledge base on resume", _other_kb, 2, "checks here were made against the knowledge base"),
    Case("check --answers --ray unreachable", lambda tmp: [*_answers(json.dumps(ANSWER) + "\n")(tmp), "--ray", "127.0.0.1:9"], 2, "--ray 127.0.0.1:9: no Ray head answers there"),
    Case("check --answers --sources kb without --index", lambda tmp: [*_answers(json.dumps(ANSWER) + "\n")(tmp), "--sources", "kb"], 2, "--sources kb needs --index"),
    Case("check --answers --index not an index", lambda tmp: [*_answers(json.dumps(ANSWER) + "\n")(tmp), "--index", str(_corpus(tmp, {"x.md": "x"}))], 2, "corpus"),
    Case("run --ray: bad questions first", lambda tmp: [*_questions("{nope\n")(tmp), "--ray", "127.0.0.1:9"], 2, "q.jsonl:1: not valid JSON"),
    Case("audit: history not a database", lambda tmp: _audit(tmp, "--history", str(_write(tmp / "h.sqlite", b"not sqlite" * 100))), 2, "h.sqlite: not an audit history database"),
    Case("audit: history under a file", lambda tmp: _audit(tmp, "--history", str(_write(tmp / "file", "x") / "h.sqlite")), 2, "cannot create the history database"),
    Case("audit: --out is a file", lambda tmp: _out(_audit(tmp), _write(tmp / "out.txt", "x")), 2, "out.txt: not a directory"),
    Case("audit --ray: bad questions first", lambda tmp: _audit(tmp, "--ray", "127.0.0.1:9", questions=_write(tmp / "bad.jsonl", "{nope\n")), 2, "bad.jsonl:1: not valid JSON"),
    Case("report: two runs of one pipeline", _same_pipeline_twice, 2, "hold the same pipeline name 'run'"),
    Case("audit --labels of another pipeline", lambda tmp: _audit(tmp, "--labels", str(_write(tmp / "l.jsonl", '{"id": "q1", "hallucinated": true, "pipeline": "nope"}\n'))), 2, "l.jsonl:1: pipeline 'nope' is not in this report"),
    Case("audit --labels not a boolean", lambda tmp: _audit(tmp, "--labels", str(_write(tmp / "l.jsonl", '{"id": "q1", "hallucinated": "yes"}\n'))), 2, 'l.jsonl:1: "hallucinated" must be true or false'),
    # ids and config keys
    Case("answers: boolean id", _answers('{"id": true, "question": "q", "contexts": ["c"], "answer": "a"}\n'), 2, 'answers.jsonl:1: missing or empty "id"'),
    Case("answers: empty id", _answers('{"id": " ", "question": "q", "contexts": ["c"], "answer": "a"}\n'), 2, 'answers.jsonl:1: missing or empty "id"'),
    Case("answers: duplicate id names both lines", _answers(json.dumps(ANSWER) + "\n" + json.dumps(ANSWER) + "\n"), 2, "answers.jsonl:2: duplicate id 'a1' (first on line 1)"),
    Case("pipeline: misspelt key", _pipeline('[generator]\nkind = "vllm"\nmodle = "smollm2-135m-instruct"\n'), 2, "generator.modle: unknown key; did you mean model?"),
    # outputs, checked before anything is written, and options named as typed
    Case("report --out is a dir", lambda tmp: ["report", str(_good_run(tmp)), "--out", str(tmp / "good")], 2, "good: is a directory; give --out a file path"),
    Case("report --out under a file", lambda tmp: ["report", str(_good_run(tmp)), "--out", str(_write(tmp / "afile", "x") / "x.html")], 2, "afile is not a directory; give --out a path in a writable directory"),
    Case("report --out where no file can be made", lambda tmp: ["report", str(_good_run(tmp)), "--out", "/proc/x.html"], 2, "--out /proc/x.html: cannot create files in /proc"),
    Case("check --answers --out under a file", lambda tmp: _out(_answers(json.dumps(ANSWER) + "\n")(tmp), _write(tmp / "afile", "x") / "o"), 2, "afile is not a directory; give --out a path"),
    Case("calibrate --out under a file", lambda tmp: ["calibrate", "--labels", str(_write(tmp / "l.jsonl", json.dumps(ANSWER | {"hallucinated": False}) + "\n")), "--out", str(_write(tmp / "afile", "x") / "c")], 2, "afile is not a directory; give --out a path"),
    Case("run --out under a file", lambda tmp: _out(_questions(json.dumps(QUESTION) + "\n")(tmp), _write(tmp / "afile", "x") / "r"), 2, "afile is not a directory; give --out a path"),
    Case("ingest --index under a file", lambda tmp: ["ingest", str(_corpus(tmp, {"a.md": GOOD_DOC})), "--index", str(_write(tmp / "afile", "x") / "i")], 2, "afile is not a directory; give --index a path"),
    Case("audit --judge-set without =", lambda tmp: _audit(tmp, "--judge-set", "claims"), 2, "Error: --judge-set 'claims': expected KEY=VALUE, e.g. --judge-set claims=sentences"),
    Case("--set of an unknown key", lambda tmp: [*_pipeline('name = "ok"\n')(tmp), "--set", "retrieval.topk=3"], 2, "Error: --set retrieval.topk: unknown key; did you mean top_k?"),
    Case("pipeline: two problems", _pipeline("[retrieval]\ntop_k = 0\ntop_kk = 3\n"), 2, "p.toml: 2 problems: retrieval.top_k: Input should be greater than or equal to 1; retrieval.top_kk: unknown key"),
    Case("review: seed below 0", lambda tmp: ["review", str(_good_run(tmp)), "--sample", "3", "--seed", "-1"], 2, "Error: Invalid value for '--seed': -1 is not in the range x>=0."),
    Case("record with its chunks as strings (check)", _damaged_run(_chunks_as_strings, ["check"]), 2, 'records.jsonl:1: "retrieved.0" must be an object, not str'),
    # run dirs of the right JSON and the wrong shape (auditor/run_shapes.py)
    Case("check row a list", _damaged_run(lambda run: _write_lines(run / "checks.jsonl", ["[1, 2]"])), 2, "checks.jsonl:1: a check row must be a JSON object, not list"),
    Case("check row without id", _damaged_run(_first_row("checks.jsonl", lambda row: row.pop("id"))), 2, 'checks.jsonl:1: a check row without "id"'),
    Case("check row: claims null", _damaged_run(_first_row("checks.jsonl", lambda row: row.update(claims=None))), 2, 'checks.jsonl:1: "claims" must be a list'),
    Case("check row: a verdict nobody knows", _damaged_run(_first_row("checks.jsonl", lambda row: row["claims"][0].update(verdict="maybe"))), 2, "checks.jsonl:1: claim 0 has verdict 'maybe'"),
    Case("record a string", _damaged_run(lambda run: _write_lines(run / "records.jsonl", ['"hello"', *_jsonl_lines(run / "records.jsonl")])), 2, "records.jsonl:1: a record must be a JSON object, not str"),
    Case("records empty, checks not", _damaged_run(lambda run: _write_lines(run / "records.jsonl", [])), 2, "checks.jsonl: 1 checked answer(s) not in records.jsonl"),
    Case("a check row twice", _damaged_run(lambda run: _write_lines(run / "checks.jsonl", _jsonl_lines(run / "checks.jsonl") * 2)), 2, "checks.jsonl: answer 'a1' is in it twice"),
    Case("check.json: judge null", _damaged_run(_set_key("check.json", judge=None)), 2, 'check.json: "judge" must be an object'),
    Case("manifest: sessions a string", _damaged_run(_set_key("manifest.json", sessions="x")), 2, 'manifest.json: "sessions" must be a list, not str'),
    Case("manifest: host a string", _damaged_run(_set_key("manifest.json", host="x")), 2, 'manifest.json: "host" must be an object, not str'),
    Case("check.json: threshold null", _damaged_run(lambda run: _edit_json(run / "check.json", lambda data: data["judge"]["config"].update(support_threshold=None))), 2, 'check.json: "judge.config.support_threshold" must be a number, not null'),
    Case("record: latency a string", _damaged_run(_first_row("records.jsonl", lambda row: row.update(e2e_s="fast"))), 2, 'records.jsonl:1: "e2e_s" must be a number, not str'),
    Case("record: no answer and no error", _damaged_run(_first_row("records.jsonl", lambda row: row.pop("answer"))), 2, 'records.jsonl:1: "answer" is missing and no "error" says why'),
    Case("check row: an outcome nobody knows", _damaged_run(_first_row("checks.jsonl", lambda row: row.update(outcome="fine"))), 2, "checks.jsonl:1: \"outcome\": Input should be 'checked'"),
    Case("check row: a claim's span one number", _damaged_run(_first_row("checks.jsonl", lambda row: row["claims"][0].update(span=[3]))), 2, 'checks.jsonl:1: "claims.0.span": List should have at least 2 items'),
    Case("check row: verdict counts missing", _damaged_run(_first_row("checks.jsonl", lambda row: row.pop("claim_counts"))), 2, 'checks.jsonl:1: "claim_counts" is required, missing'),
    # calibrations (auditor.calibrate.CalibrationFile)
    Case("calibration: threshold a string", _calibration(lambda cal: cal.update(threshold="0.3")), 2, "calibration.json: threshold: Input should be a valid number"),
    Case("calibration: answer level missing", _calibration(lambda cal: cal.pop("answer_level")), 2, "calibration.json: answer_level: Field required"),
    Case("calibration: negative count", _calibration(lambda cal: cal["answer_level"].update(positives=-1)), 2, "calibration.json: answer_level.positives: Input should be greater than or equal to 0"),
    Case("calibration: fingerprint without its hash", _calibration(lambda cal: cal["judge"]["fingerprint"].pop("verdict_sha256")), 2, "calibration.json: judge.fingerprint.verdict_sha256: Field required"),
    # outputs that would land on an input, and options of one value given twice
    Case("report --out onto checks.jsonl", _with_good_run(lambda run: ["report", str(run), "--out", str(run / "checks.jsonl")]), 2, "would overwrite checks.jsonl of RUN_DIR"),
    Case("report --out onto records.jsonl", _with_good_run(lambda run: ["report", str(run), "--out", str(run / "records.jsonl")]), 2, "would overwrite records.jsonl of RUN_DIR"),
    Case("report --out onto manifest.json", _with_good_run(lambda run: ["report", str(run), "--out", str(run / "manifest.json")]), 2, "would overwrite manifest.json of RUN_DIR"),
    Case("report --out onto review.json", _with_good_run(lambda run: ["report", str(run), "--out", str(run / "review.json")], reviewed=True), 2, "would overwrite review.json of RUN_DIR"),
    Case("report --out onto its --labels", _with_good_run(lambda run: ["report", str(run), "--labels", _labels(run), "--out", _labels(run)], reviewed=True), 2, "would overwrite --labels"),
    Case("report --out into the run dir", _with_good_run(lambda run: ["report", str(run), "--out", str(run / "copy.html")]), 2, "would write into RUN_DIR"),
    Case("report --out a link to an input", _with_good_run(lambda run: ["report", str(run), "--out", str(_link(run.parent / "link.html", run / "checks.jsonl"))]), 2, "link.html: would overwrite checks.jsonl of RUN_DIR"),
    Case("report --record --history in the run dir", _with_good_run(lambda run: ["report", str(run), "--record", "--history", str(run / "h.sqlite")]), 2, "h.sqlite: would write into RUN_DIR"),
    Case("check --answers --out onto its answers", lambda tmp: ["check", "--answers", str(_write(tmp / "o" / "records.jsonl", json.dumps(ANSWER) + "\n")), "--out", str(tmp / "o")], 2, "records.jsonl would overwrite --answers"),
    Case("calibrate --out onto its labels", lambda tmp: ["calibrate", "--labels", str(_write(tmp / "c" / "checks.jsonl", json.dumps(ANSWER | {"hallucinated": False}) + "\n")), "--out", str(tmp / "c")], 2, "checks.jsonl would overwrite --labels"),
    Case("check RUN_DIR --examples its checks.jsonl", _with_good_run(lambda run: ["check", str(run), "--examples", str(run / "checks.jsonl")]), 2, "checks.jsonl would overwrite --examples"),
    Case("run --out onto its index", lambda tmp: _out(_run_with_index(_index)(tmp), tmp / "index"), 2, "manifest.json would overwrite manifest.json of --index"),
    Case("audit --out where its questions are", lambda tmp: _audit(tmp, questions=_write(tmp / "audit" / "smollm2-135m-cpu" / "records.jsonl", json.dumps(QUESTION) + "\n")), 2, "records.jsonl would overwrite --questions"),
    Case("audit --history onto its questions", lambda tmp: _audit(tmp, "--history", str(tmp / "q.jsonl")), 2, "q.jsonl: would overwrite --questions"),
    Case("ingest --index holding its corpus", lambda tmp: ["ingest", str(_write(tmp / "kb" / "docs" / "a.md", GOOD_DOC).parent), "--index", str(tmp / "kb")], 2, "would hold CORPUS_DIR"),
    Case("report --labels given twice", _with_good_run(lambda run: ["report", str(run), "--labels", _labels(run, "a.jsonl"), "--labels", _labels(run, "b.jsonl")]), 2, "--labels given twice"),
    Case("check --out given twice", lambda tmp: [*_answers(json.dumps(ANSWER) + "\n")(tmp), "--out", str(tmp / "o2")], 2, "--out given twice"),
    Case("report --record given twice", _with_good_run(lambda run: ["report", str(run), "--record", "--record"]), 2, "Error: --record given twice; give it once"),
    Case("baseline accept --history given twice", lambda tmp: ["baseline", "accept", str(tmp / "run"), "--history", "a.sqlite", "--history", "b.sqlite"], 2, "Error: --history given twice (a.sqlite, b.sqlite); give it once"),
    # the review loop: a reviewed rate is right or refused
    Case("labels: a copy by another reviewer, differing", _review_labels(lambda run, ids: "".join(_page_line(run, i) for i in ids) + _page_line(run, ids[1], hallucinated=True, reviewer="Bo")), 2, "l.jsonl:4: answer 'a"),
    Case("labels: a claim marked right and wrong", _review_labels(lambda run, ids: _page_line(run, ids[0], claims=[{"index": 0, "judge_right": True}, {"index": 0, "judge_right": False}])), 2, "l.jsonl:1: claim 0 is marked both judge right and judge wrong"),
    Case("labels: hallucinated, every claim marked fine", _review_labels(lambda run, ids: _page_line(run, ids[0], hallucinated=True, claims=[{"index": 0, "judge_right": True}])), 2, "is labelled hallucinated, but every claim is marked as not hallucinated"),
    Case("labels: the first drawn answer unlabelled", _review_labels(lambda run, ids: _page_line(run, ids[2])), 2, "has no label: only the drawn order's labelled prefix makes a rate"),
    Case("labels: claim marks of another check", _review_labels(lambda run, ids: _page_line(run, ids[0], check_fingerprint="0000000000000000", claims=[{"index": 0, "judge_right": True}])), 2, "l.jsonl:1: labelled on check 0000000000000000"),
    Case("labels: claim marks without their check", _review_labels(lambda run, ids: _page_line(run, ids[0], check_fingerprint=None, claims=[{"index": 0, "judge_right": True}])), 2, "l.jsonl:1: claim marks without the check they were made on"),
    Case("labels: a second review not drawn for one", _review_labels(lambda run, ids: _page_line(run, ids[0]) + _page_line(run, ids[0], role="second", reviewer="Bo")), 2, "l.jsonl:2: a second review of 'a"),
    Case("labels: reviewers disagree, nobody settled", _review_labels(lambda run, ids: "".join(_page_line(run, i) for i in ids) + _page_line(run, ids[0], role="second", reviewer="Bo", hallucinated=True), second=1.0), 2, "reviews of 'a"),
    Case("labels: a second review by the first reviewer", _review_labels(lambda run, ids: _page_line(run, ids[0]) + _page_line(run, ids[0], role="second"), second=1.0), 2, "who made the first (line 1); a second review is by another person"),
    Case("labels: labelled_at in words", _review_labels(lambda run, ids: _page_line(run, ids[0], labelled_at="yesterday")), 2, "l.jsonl:1: \"labelled_at\" 'yesterday' is not a time"),
    Case("labels: labelled_at in 2099", _review_labels(lambda run, ids: _page_line(run, ids[0], labelled_at="2099-01-01T00:00:00Z")), 2, "is in the future on this machine"),
    Case("labels: a right-to-left override in a name", _review_labels(lambda run, ids: _page_line(run, ids[0], reviewer="Ana\u202eoB")), 2, "invisible or control character (U+202E)"),
    Case("labels: UTF-16", _review_labels(lambda run, ids: _page_line(run, ids[0]), encoding="utf-16"), 2, "iconv -f utf-16 -t utf-8"),
    Case("review.json of a run that grew", _review_labels(lambda run, ids: _page_line(run, ids[0]), prepare=_grow), 2, "review.json: drawn from 3 answers, the run has 4 checked now"),
    Case("review.json after a lost check row", _review_labels(lambda run, ids: _page_line(run, ids[0]), prepare=_lose_last_check), 2, "is no longer among"),
    Case("review.json of an earlier check", _review_labels(lambda run, ids: _page_line(run, ids[0]), prepare=_recheck), 2, "(checked again)"),
    Case("check a checked run with other examples", _examples_on_checked, 2, "re-check into a new run dir that shares its records: add --out NEW_DIR"),
    # verify (issue 48)
    Case("verify: a report its own key added and signed again", _resigned(_report_added), 1, "data/report.html: in the bundle, but no field of the statement is computed from it"),
    Case("verify: another judge, signed again by its own key", _resigned(_judge_renamed), 1, "runs[run].judge.identity.name: 'gpt-4o' in the statement, 'fake-judge' recomputed"),
    Case("verify: labels dated after the statement's signing", _resigned(_labels_after_the_end, labelled=True), 1, "the time the labels are read as of"),
    # review loop (issue 48)
    Case("review.json: a sample not of its seed", _review_labels(lambda run, ids: _page_line(run, ids[0]), count=6, prepare=_cherry_picked), 2, '"sample" is not the draw of seed 7 over the run\'s 6 checked answers (answer'),
    Case("review.json: the seed edited, then review", _review_again(_edit_review(lambda d: d.update(seed=8)), "--sample", "6"), 2, '"sample" is not the draw of seed 8'),
    Case("review.json: method edited", _review_labels(lambda run, ids: _page_line(run, ids[0]), prepare=_edit_review(lambda d: d.update(method="stratified"))), 2, '"method" is \'stratified\', but auditor review draws \'uniform\''),
    Case("review.json: population edited", _review_labels(lambda run, ids: _page_line(run, ids[0]), prepare=_edit_review(lambda d: d.update(population=30))), 2, '"population" is 30, but the answers it was drawn from'),
    Case("review.json: an id the run does not have", _review_labels(lambda run, ids: _page_line(run, ids[1]), prepare=_edit_review(lambda d: d["sample"][0].update(id="zz"))), 2, "\"sample\" names answer 'zz', which is not among"),
    Case("review.json: second review of the wrong count", _review_labels(lambda run, ids: _page_line(run, ids[0]), count=6, second=0.5, prepare=_edit_review(lambda d: d["second_review"].update(ids=[]))), 2, '"second_review" names 0 answers, but a share of 0.5 of the 6 drawn is 3'),
    Case("review.json: second-review share nan", _review_labels(lambda run, ids: _page_line(run, ids[0]), prepare=_edit_review(lambda d: d.update(second_review={"share": float("nan"), "ids": []}))), 2, '"second_review" must have a "share" above 0 and at most 1 (not nan)'),
    Case("review: --second-review nan", _review_again(lambda run: None, "--sample", "6", "--second-review", "nan"), 2, "Error: Invalid value for '--second-review': nan is not a share above 0 and at most 1"),
    Case("labels: an adjudicator where the reviews agree", _review_labels(lambda run, ids: _page_line(run, ids[0]) + _page_line(run, ids[0], role="second", reviewer="Bo") + _page_line(run, ids[0], role="adjudicator", reviewer="Cy", hallucinated=True), second=1.0), 2, "l.jsonl:3: an adjudicator's label of 'a"),
    Case("labels: an adjudicator with no second review", _review_labels(lambda run, ids: _page_line(run, ids[0]) + _page_line(run, ids[0], role="adjudicator", reviewer="Cy", hallucinated=True), second=1.0), 2, "without a second review of it in these labels"),
    Case("labels: an adjudicator of their own review", _review_labels(lambda run, ids: _page_line(run, ids[0]) + _page_line(run, ids[0], role="second", reviewer="Bo", hallucinated=True) + _page_line(run, ids[0], role="adjudicator", reviewer="ANA"), second=1.0), 2, "is adjudicated by 'ANA', who made the first review (line 1); nobody adjudicates their own disagreement"),
    Case("labels: a second review by the first reviewer, in capitals", _review_labels(lambda run, ids: _page_line(run, ids[0]) + _page_line(run, ids[0], role="second", reviewer="ANA"), second=1.0), 2, "is by 'ANA', who made the first (line 1, as 'Ana')"),
    Case("labels: labelled before the run began", _review_labels(lambda run, ids: _page_line(run, ids[0], labelled_at="2026-11-30T09:00:00Z"), prepare=_began_on_the_first), 2, 'l.jsonl:1: "labelled_at" 2026-11-30T09:00:00Z is before '),
    # bundle, sign, keygen (issue 48)
    Case("keygen: a passphrase over 1,023 bytes", _keygen_long_passphrase, 2, "the passphrase is 1,024 bytes, longer than the 1,023 a key can be encrypted with"),
    Case("bundle: the question set moved", _bundle_after(lambda tmp: (tmp / "q.jsonl").rename(tmp / "moved.jsonl")), 2, "question set is not here"),
    Case("bundle: the question set changed", _bundle_after(lambda tmp: _write(tmp / "q.jsonl", json.dumps(QUESTION) + "\n")), 2, "not the question set"),
    Case("bundle --with-documents: a document moved", _bundle_after(lambda tmp: (tmp / "corpus").rename(tmp / "moved"), "--with-documents"), 2, "an indexed document is not here"),
    Case("bundle --with-documents DIR: a run dir", lambda tmp: ["bundle", "--with-documents", str(_good_run(tmp)), str(tmp / "good"), "--key", "k", "--out", str(tmp / "a.tar")], 2, "a run dir, not the corpus"),
    Case("sign: a bundle with another hard link", _sign(_hard_linked), 2, "the bundle has 2 hard links"),
    Case("sign: the earlier signer's key not given", _sign(_bundled, trust=False), 2, "give the earlier signers' public keys with --trust KEY.pub"),
    Case("sign: figures that do not recompute", _sign(_inflated), 1, "runs[good].figures.metrics.hallucination_rate.value: 0.5 in the statement"),
    Case("sign: a signature repeated", _sign(_envelope_edited(lambda e: e.update(signatures=e["signatures"] * 2))), 1, "signature 2 duplicates signature 1"),
    Case("verify: a signature repeated", lambda tmp: ["verify", str((b := _envelope_edited(lambda e: e.update(signatures=e["signatures"] * 2))(tmp))[0]), "--key", f"{b[1]}.pub"], 1, "signature 2 duplicates signature 1"),
    Case("verify: a sparse member", _verify_sparse, 1, "a sparse file (declares 67,108,864 bytes)"),
    Case("verify: a member larger than the tar", _verify_declared_beyond, 1, "declares 67,108,864 bytes, the tar holds 1,024"),
    Case("verify: a gzipped bundle", _verify_packed(_gzipped, "a.tar.gz"), 2, "a gzip file, not a bundle"),
    Case("verify: a zipped bundle", _verify_packed(_zipped, "a.zip"), 2, "a zip archive, not a bundle"),
    # files and run dirs (issue 48)
    Case("labels: a character device", _with_good_run(lambda run: ["report", str(run), "--labels", "/dev/zero"]), 2, "/dev/zero: a character device, not a regular file"),
    Case("labels: a FIFO", _labels_file(os.mkfifo), 2, "l.jsonl: a FIFO (named pipe), not a regular file"),
    Case("labels: past the size bound", _labels_file(_sparse(257 * 2**20)), 2, "l.jsonl: 257 MiB, larger than the 256 MiB an input file may be"),
    Case("labels: nested 100,000 deep", _labels_file(b'{"id": "a1", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"), 2, "l.jsonl:1: nested deeper than 64 levels"),
    Case("labels: a key twice in one object", _labels_file(b'{"id": "a1", "hallucinated": true, "hallucinated": false}\n'), 2, "l.jsonl:1: key 'hallucinated' given twice in one object"),
    Case("labels: UTF-16LE without a byte-order mark", _labels_file(LABEL_LINE.encode("utf-16-le")), 2, "l.jsonl: UTF-16LE (without a byte-order mark: NUL bytes at odd positions), not UTF-8; convert it, e.g. iconv -f UTF-16LE -t UTF-8"),
    Case("labels: UTF-32 with a byte-order mark", _labels_file(LABEL_LINE.encode("utf-32")), 2, "l.jsonl: UTF-32LE (with a byte-order mark), not UTF-8; convert it, e.g. iconv -f UTF-32LE -t UTF-8"),
    Case("report --record --history and --out one new file", _with_good_run(lambda run: ["report", str(run), "--record", "--history", str(run.parent / "h.sqlite"), "--out", str(run.parent / "h.sqlite")]), 2, "h.sqlite: would overwrite --history"),
    Case("report --history onto its report", _with_good_run(lambda run: ["report", str(run), "--history", str(run / "report.html")]), 2, "report.html: would overwrite --out"),
    Case("report --labels a hard link of a summary.json", _with_good_run(lambda run: (os.link(_labels(run), run / "summary.json"), ["report", str(run), "--labels", _labels(run)])[1]), 2, "summary.json would overwrite --labels"),
    Case("audit --history onto its report", lambda tmp: _audit(tmp, "--history", str(tmp / "audit" / "report.html")), 2, "report.html: would overwrite --out"),
    Case("review a run dir twice, once through a link", _with_good_run(lambda run: ["review", str(run), str(_link(run.parent / "again", run)), "--sample", "1"]), 2, "the same as RUN_DIR"),
    Case("keygen --out a link to its KEY.pub", lambda tmp: ["keygen", "--out", str(_link(tmp / "k", _write(tmp / "k.pub", "x"))), "--force"], 2, "would overwrite KEY.pub"),
    Case("records appended past the manifest's totals", _pipeline_run_damaged(_append_copies(5)), 2, "records.jsonl: 48 rows, but manifest.json says 8 requests (totals.requests); the records were appended to"),
    Case("records: output tokens edited", _pipeline_run_damaged(_first_row("records.jsonl", lambda row: row.update(output_tokens=row["output_tokens"] * 10))), 2, "output tokens, but manifest.json says"),
    Case("imported answers appended to", _damaged_run(_append_copies(1)), 2, "records.jsonl: 2 rows, but manifest.json says it imported 1 answer (source.count)"),
    Case("checks appended past check.json's totals", _check_row_appended, 2, "checks.jsonl: 2 rows, but check.json says it checked 1 answer (totals.answers)"),
    Case("records: last line cut, its answer checked", _damaged_run(_cut_checked_record), 2, "records.jsonl:1: the last line is cut off (an interrupted write, or a copy cut short)"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_one_line_with_exit_code_and_no_traceback(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: FakeEmbedder())
    monkeypatch.setattr("auditor.verify.judges.make_judge", lambda config: FakeJudge())
    monkeypatch.setenv("AUDITOR_HISTORY", str(tmp_path / "history.sqlite"))
    args = case.make(tmp_path)
    before = _tree(tmp_path)
    result = CliRunner().invoke(cli, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == case.code, (args, result.output)
    assert len(errors) == 1 and case.names in errors[0], lines
    assert _tree(tmp_path) == before, "a refused command wrote or changed files"
    message = shown(errors[0], tmp_path)
    if table := os.environ.get("AUDITOR_FAULT_TABLE"):  # scripts/fault_table.py collects them
        with open(table, "a", encoding="utf-8") as out:
            out.write(json.dumps({"case": case.name, "message": message, "exit": case.code}) + "\n")
        return
    row = documented_rows().get(case.name)
    assert row is not None and _masked(row) == _masked((message, case.code)), (
        f"docs/faults.md says {row}, the command says {(message, case.code)}; regenerate the "
        "table: .venv/bin/python scripts/fault_table.py"
    )


def shown(line: str, tmp: Path) -> str:
    """A refusal as docs/faults.md shows it: paths relative to the case's folder, a long line
    cut (scripts/fault_table.py writes the table from these)."""
    text = line.replace(f"{tmp}/", "").replace(str(tmp), ".")
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 10] + "..."


SHOWN_CHARS = 160
FAULTS_DOC = REPO / "docs" / "faults.md"
ROW = re.compile(r"^\| (?P<case>[^|]+?) \| `(?P<message>.*)` \| (?P<exit>\d+) \|$")


def documented_rows() -> dict[str, tuple[str, int]]:
    """docs/faults.md's bad-input table: case name -> (message, exit code)."""
    rows = {}
    for line in FAULTS_DOC.read_text(encoding="utf-8").splitlines():
        if match := ROW.match(line):
            rows[match["case"]] = (match["message"], int(match["exit"]))
    return rows


def _masked(row: tuple[str, int]) -> tuple[str, int]:
    """Without what differs from run to run: a manifest's hash, a Ray error's address."""
    return re.sub(r"\b[0-9a-f]{12}(?:[0-9a-f]{4})?\b", "<sha>", row[0]), row[1]


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and dir under root with its size and modification time: what a refused
    command must leave as it was."""
    return {
        str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if not p.name.endswith("-journal")
    }


def test_the_suite_has_at_least_forty_cases() -> None:
    assert len(CASES) >= 40
