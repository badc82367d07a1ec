"""Fault suite, real engines: ingest, run, check and audit killed mid-run (kill -9, Ctrl-C,
SIGTERM) leave no engine process and no /dev/shm segment behind, and a resumed run loses and
repeats nothing.

Every path runs in `make test` once, each command on its own engine in a subprocess (the kill
is what is tested): an audit stopped with Ctrl-C while it generates, killed with SIGKILL
after its first checked answer on the engine it shares with its judge, resumed to the end and
compared with a check on another engine (in the test process, the session pool's: the Ray
test's single-process check borrows it after; an ingest killed: test_faults_ingest.py). Each
command alone with every signal and its resume (SIGTERM: no handler of ours, its default
action ends the process as SIGKILL does) is `extended` (`make test-extended`): variants of
those paths, through the same generator loop, reaper and commits.
Run alone with `pytest -m faults --run-extended`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.generate import reaper
from auditor.store import read_jsonl, read_records
from auditor.verdict_cases import smoke_cases, write_answers
from tests.conftest import KESTREL, ONE_CORE, REPO
from tests.e2e.conftest import EnginePool, light_judge_toml

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

# short answers (16 tokens) from two chunks each: the judge's work stays small
PIPELINE = (
    'name = "faults-e2e"\n[retrieval]\ntop_k = 2\n[generator]\nkind = "vllm"\n'
    f'model = "smollm2-135m-instruct"\nmax_model_len = 2048\ncpu_threads = "{ONE_CORE}"\n'
    "[generator.sampling]\nmax_tokens = 16\n"
)
LIMIT = 4
# the light judge (these tests are about processes, not verdicts), one answer a batch: a kill
# after the first checked answer lands before the last
SMALL_JUDGE = light_judge_toml(answers_per_batch=1, all_cores=False)


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _descendants(root: int) -> dict[int, str]:
    """{pid: start time} of the processes below `root`."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = int(fields[1])
    found: dict[int, str] = {}
    todo = [pid for pid, parent in parents.items() if parent == root]
    while todo:
        pid = todo.pop()
        fields = _stat(pid)
        if fields is not None and pid not in found:
            found[pid] = fields[19]
            todo.extend(p for p, parent in parents.items() if parent == pid)
    return found


def _alive(pid: int, started: str) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[19] == started and fields[0] != "Z"


def _shm_held_by(pids: dict[int, str]) -> set[str]:
    """The /dev/shm files the processes have open or mapped (vLLM maps its segments and
    closes their descriptors)."""
    held = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("/dev/shm/"):
                    held.add(target)
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/dev/shm/"):
                    held.add(fields[5])
        except OSError:
            continue
    return {path for path in held if not path.endswith(" (deleted)")}


def _is_engine(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        name = Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return False
    return "VLLM" in name or "VLLM" in command or "EngineCore" in command


@pytest.fixture
def run_command(kestrel_index: Path, tmp_path: Path, smollm2_dir: Path) -> Iterator[list[str]]:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(PIPELINE)
    yield [
        sys.executable, "-m", "auditor", "run", "--pipeline", str(pipeline),
        "--questions", str(KESTREL / "questions.jsonl"), "--index", str(kestrel_index),
        "--out", str(tmp_path / "run"), "--limit", str(LIMIT), "-q",
    ]  # fmt: skip


def _audit_command(kestrel_index: Path, tmp_path: Path) -> list[str]:
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(PIPELINE)
    judge = tmp_path / "judge.toml"
    judge.write_text(SMALL_JUDGE)
    return [
        sys.executable, "-m", "auditor", "audit", "--pipeline", str(pipeline),
        "--questions", str(KESTREL / "questions.jsonl"), "--index", str(kestrel_index),
        "--out", str(tmp_path / "audit"), "--limit", str(LIMIT), "--judge", str(judge),
        "--history", str(tmp_path / "history.sqlite"), "-q",
    ]  # fmt: skip


def _as_from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _kill_mid_engine(
    command: list[str],
    env: dict[str, str],
    how: signal.Signals,
    meanwhile: Callable[[], None] = lambda: None,
    when: Callable[[], bool] | None = None,
    stderr: Path | None = None,
) -> tuple[set[str], dict[int, str]]:
    """Start `command` (its stderr into `stderr` if given); once its engine runs (3 s after
    its process appears, or once `when` holds), call `meanwhile` and send `how`; assert that
    within 10 s none of its processes is alive and the /dev/shm segments they held are gone.
    Returns those segments and the engine core processes seen while it ran ({pid: start
    time}: one per engine the command started)."""
    err = stderr.open("wb") if stderr is not None else subprocess.DEVNULL
    auditor = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err,
        # as from a terminal: a test session run in the background inherits SIGINT ignored
        preexec_fn=_as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 420
        processes: dict[int, str] = {}
        cores: dict[int, str] = {}
        while time.monotonic() < deadline and auditor.poll() is None:
            processes = _descendants(auditor.pid)
            cores |= _engine_cores(processes)
            if any(_is_engine(pid) for pid in processes) and (when is None or when()):
                break
            time.sleep(0.5)
        assert any(_is_engine(pid) for pid in processes), "no engine process ever started"
        assert auditor.poll() is None, "the command ended before it could be killed"
        if when is None:
            time.sleep(3)  # mid-run: the engine is working
        meanwhile()
        processes = _descendants(auditor.pid)
        cores |= _engine_cores(processes)
        segments = _shm_held_by(processes)
        auditor.send_signal(how)
        auditor.wait(timeout=60)
        assert auditor.returncode != 0, f"ran to the end: {how.name} did not stop it"
        gone_by = time.monotonic() + 10
        while time.monotonic() < gone_by:
            survivors = [pid for pid, started in processes.items() if _alive(pid, started)]
            left = [s for s in segments if Path(s).exists()]
            if not survivors and not left:
                break
            time.sleep(0.5)
        # the watcher itself exits once it has reaped
        assert survivors == [], f"alive 10 s after {how.name}: {survivors}"
        assert left == [], "shared memory left behind"
    finally:
        auditor.kill()
        if stderr is not None:
            err.close()  # type: ignore[union-attr]
    return segments, cores


def _engine_cores(processes: dict[int, str]) -> dict[int, str]:
    """The engine core processes among `processes` (vLLM titles an engine's core process
    "VLLM::EngineCore", its workers otherwise): one per engine."""
    found = {}
    for pid, since in processes.items():
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if title.startswith(b"VLLM::EngineCore"):
            found[pid] = since
    return found


def _env(smollm2_dir: Path, tmp: Path | None = None) -> dict[str, str]:
    """The commands' environment: the prepared models, and (`tmp`) a temporary dir of their
    own, so that what they leave there is theirs alone (another program's engines make their
    runtime dirs in /tmp meanwhile: the other e2e shard's, a user's). An engine of this test
    process set VLLM_RPC_BASE_PATH to its own runtime dir: a command of the user's does not
    inherit one, and makes its own."""
    env = os.environ | {"AUDITOR_MODELS_DIR": str(smollm2_dir.parent)}
    if Path(env.get("VLLM_RPC_BASE_PATH", "/")).name.startswith(reaper.RUNTIME_PREFIX):
        del env["VLLM_RPC_BASE_PATH"]
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return env


def _intact(path: Path) -> list[str]:
    """The ids of a JSONL artifact that a killed command left: each once (a torn last line,
    repaired on resume, is allowed)."""
    ids = [row["id"] for row in read_jsonl(path, repair=True)] if path.exists() else []
    assert len(ids) == len(set(ids)), f"{path.name}: duplicated"
    return ids


class _OtherProgram:
    """Another program's /dev/shm file, made and closed while an engine runs: never ours to
    free."""

    def __init__(self) -> None:
        self.path = Path("/dev/shm") / f"auditor-e2e-other-{uuid.uuid4().hex}"

    def __call__(self) -> None:
        script = f"open({str(self.path)!r}, 'wb').write(b'y' * 4096)"
        subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
        time.sleep(2)  # the watcher has polled while the file is there, closed and unheld

    def kept(self) -> bool:
        return self.path.read_bytes() == b"y" * 4096


# three commands, each starting its engine in a fresh process (~100 s each on a busy core; the
# first stopped while it starts), and a check in this process on the session pool's engine
@pytest.mark.timeout(1800)
def test_an_audit_interrupted_then_killed_resumes_exactly_on_one_engine(
    kestrel_index: Path,
    tmp_path: Path,
    smollm2_dir: Path,
    engine_pool: EnginePool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The paths of a stopped audit, each command on its own engine in a subprocess:
    1. Ctrl-C while its engine starts and generates: no engine process or /dev/shm segment
       outlives it, what it wrote holds each answer once;
    2. the command again: it generates what is left and its judge checks on the engine that
       generated (the pipeline has the judge's engine settings: one engine core in the
       command's life); kill -9 after its first checked answer, while another program makes a
       /dev/shm file of its own: nothing of the engine outlives it, the other program's file
       is kept;
    3. once more, to the end: every answer generated and checked once on one engine, no
       committed row moved or rewritten, a quiet terminal (the engine's output is in the
       audit's log), no engine left after it;
    4. the same answers checked by the judge on another engine (in this process, on the
       session pool's engine of the judge's settings, which the Ray test's single-process
       check borrows after): the same claims and verdicts.
    The engines' IPC sockets lived in each command's private runtime dir, gone with it (the
    kills too): the commands get a temporary dir of their own, where nothing of theirs is
    left."""
    import shutil

    # short: the engines' socket paths in it stay under the 107-byte limit
    private_tmp = Path(tempfile.mkdtemp(prefix="e2e-"))
    try:
        _stop_kill_resume(kestrel_index, tmp_path, smollm2_dir, private_tmp)
        assert not _runtime_dirs(private_tmp), "a private runtime dir left behind"
        assert not _tmp_sockets(private_tmp), "an engine's socket left in the temporary dir"
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)

    run = tmp_path / "audit" / "faults-e2e"
    apart = tmp_path / "apart"
    shutil.copytree(run, apart, ignore=shutil.ignore_patterns("check*", "summary.json"))
    monkeypatch.setenv("AUDITOR_MODELS_DIR", str(smollm2_dir.parent))
    checked = CliRunner().invoke(
        cli, ["check", str(apart), "--judge", str(tmp_path / "judge.toml"), "-q"]
    )
    assert checked.exit_code == 0, checked.output
    assert "the judge checks on the engine that generated" not in checked.output

    def verdicts(path: Path) -> list[tuple[str, list[tuple[str, str, float]]]]:
        return sorted(
            (row["id"], [(c["text"], c["verdict"], c["p_supported"]) for c in row["claims"]])
            for row in read_jsonl(path / "checks.jsonl")
        )

    assert verdicts(run) == verdicts(apart)


def _stop_kill_resume(kestrel_index: Path, tmp_path: Path, smollm2_dir: Path, tmp: Path) -> None:
    """Steps 1-3 of the test above, the commands' temporary dir `tmp`."""
    command = [c for c in _audit_command(kestrel_index, tmp_path) if c != "-q"]
    env = _env(smollm2_dir, tmp)
    run = tmp_path / "audit" / "faults-e2e"
    _kill_mid_engine(command, env, signal.SIGINT)
    _intact(run / "records.jsonl")
    _intact(run / "checks.jsonl")

    def checking() -> bool:
        return len(_intact(run / "checks.jsonl")) >= 1

    other = _OtherProgram()
    try:
        segments, cores = _kill_mid_engine(
            command, env, signal.SIGKILL, other, when=checking, stderr=tmp_path / "shared.err"
        )
        assert segments, "the engine held no /dev/shm segment: nothing shows one is freed"
        assert other.kept(), "another program's /dev/shm file was freed"
    finally:
        other.path.unlink(missing_ok=True)
    shared_err = (tmp_path / "shared.err").read_text(errors="replace")
    assert "the judge checks on the engine that generated" in shared_err, shared_err[-2000:]
    # one engine: an audit that started a second one for its judge would show two cores
    assert len(cores) == 1, cores
    assert len(_intact(run / "records.jsonl")) == LIMIT, "every answer before the first check"
    first = _intact(run / "checks.jsonl")
    assert 0 < len(first) < LIMIT, "killed after its first checked answer, before its last"
    kept = {row["id"]: row for row in read_jsonl(run / "checks.jsonl", repair=True)}

    err, cores = _engine_processes([*command, "-q"], env)
    assert len(cores) == 1, cores
    for artifact in ("records.jsonl", "checks.jsonl"):
        ids = [row["id"] for row in read_jsonl(run / artifact)]
        assert len(ids) == len(set(ids)) == LIMIT, f"{artifact}: lost or duplicated on resume"
    rows = read_jsonl(run / "checks.jsonl")
    assert [row["id"] for row in rows[: len(first)]] == first, "committed rows are never moved"
    assert all(row == kept[row["id"]] for row in rows if row["id"] in kept), "nor rewritten"
    assert (tmp_path / "audit" / "report.html").is_file()
    log = tmp_path / "audit" / "engine.log"
    assert f"engine and library logs: {log}" in err
    assert "EngineCore" not in err and "Loading safetensors" not in err
    assert "EngineCore" in log.read_text()


def _tmp_sockets(tmp: Path) -> set[str]:
    """The socket files directly in `tmp` named as vLLM names its ZMQ ipc:// paths (a UUID)."""
    found = set()
    for path in tmp.iterdir():
        with contextlib.suppress(OSError):
            if len(path.name) == 36 and path.name.count("-") == 4 and path.is_socket():
                found.add(path.name)
    return found


def _runtime_dirs(tmp: Path) -> set[str]:
    return {p.name for p in tmp.glob(f"{reaper.RUNTIME_PREFIX}*")}


SIGNALS = pytest.mark.parametrize(
    "how", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name
)


# The matrix: each command alone, each signal; the resume after SIGKILL (the harshest: torn
# lines, no clean-up). Variants of the paths above (`make test-extended`).


@pytest.mark.extended
@SIGNALS
def test_a_killed_run_leaves_no_engine_and_resumes_exactly(
    run_command: list[str], tmp_path: Path, smollm2_dir: Path, how: signal.Signals
) -> None:
    env = _env(smollm2_dir)
    _kill_mid_engine(run_command, env, how)
    _intact(tmp_path / "run" / "records.jsonl")
    if how != signal.SIGKILL:
        return
    before = read_records(tmp_path / "run")
    done = subprocess.run(
        [*run_command, "--json"], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    records = read_records(tmp_path / "run")
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == LIMIT, "lost or duplicated on resume"
    kept = {r["id"]: r["answer"] for r in before}
    assert all(r["answer"] == kept[r["id"]] for r in records if r["id"] in kept)
    summary = json.loads(done.stdout)
    assert summary["completed"] == LIMIT and summary["skipped"] == len(before)


@pytest.mark.extended
@SIGNALS
def test_a_killed_check_leaves_no_engine_and_resumes_exactly(
    tmp_path: Path, smollm2_dir: Path, how: signal.Signals
) -> None:
    cases = [c for c in smoke_cases() if c.item.id != "no-fee"]  # SmolLM2 loops on that one
    answers = tmp_path / "answers.jsonl"
    write_answers(cases, answers)
    judge = tmp_path / "judge.toml"
    judge.write_text(SMALL_JUDGE)
    command = [
        sys.executable, "-m", "auditor", "check", "--answers", str(answers),
        "--out", str(tmp_path / "out"), "--judge", str(judge), "-q",
    ]  # fmt: skip
    env = _env(smollm2_dir)
    _kill_mid_engine(command, env, how)
    _intact(tmp_path / "out" / "checks.jsonl")
    if how != signal.SIGKILL:
        return
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a weak judge failed throughout
    ids = [row["id"] for row in read_jsonl(tmp_path / "out" / "checks.jsonl")]
    assert sorted(ids) == sorted(case.item.id for case in cases), "lost or duplicated on resume"


@pytest.mark.extended
@SIGNALS
def test_a_killed_audit_leaves_no_engine_and_resumes_exactly(
    kestrel_index: Path, tmp_path: Path, smollm2_dir: Path, how: signal.Signals
) -> None:
    command = _audit_command(kestrel_index, tmp_path)
    env = _env(smollm2_dir)
    _kill_mid_engine(command, env, how)
    run = tmp_path / "audit" / "faults-e2e"
    for artifact in ("records.jsonl", "checks.jsonl"):
        _intact(run / artifact)
    if how != signal.SIGKILL:
        return
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for artifact in ("records.jsonl", "checks.jsonl"):
        ids = [row["id"] for row in read_jsonl(run / artifact)]
        assert len(ids) == len(set(ids)) == LIMIT, f"{artifact}: lost or duplicated on resume"
    assert (tmp_path / "audit" / "report.html").is_file()


def _engine_processes(command: list[str], env: dict[str, str]) -> tuple[str, dict[int, str]]:
    """Run `command` to its end; its stderr and the engine core processes seen while it ran
    (one per engine it started); none of its engine processes is alive after it.
    Its output goes to files, not pipes: a pipe read only at the end fills up (64 KiB) with a
    slow run's progress lines and the command blocks on its next write."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errors:
        auditor = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=errors)
        engines: dict[int, str] = {}
        cores: dict[int, str] = {}
        deadline = time.monotonic() + 1200
        while auditor.poll() is None and time.monotonic() < deadline:
            below = _descendants(auditor.pid)
            engines |= {p: s for p, s in below.items() if _is_engine(p)}
            cores |= _engine_cores(below)
            time.sleep(0.5)
        if auditor.poll() is None:
            auditor.kill()
        errors.seek(0)
        err = errors.read().decode(errors="replace")
    assert auditor.wait() == 0, err[-2000:]
    assert not [pid for pid, since in engines.items() if _alive(pid, since)]
    return err, cores
