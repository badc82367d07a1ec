"""`check --ray` on a real two-node Ray cluster on this machine (`ray start --head` and a second
`ray start --address` node, 1 CPU each, on 127.0.0.1), real vLLM judges in the actors: the
same verdicts as the single-process check, every answer committed once (also after the driver
or an actor is killed: make test-extended), and no engine, nor any /dev/shm segment its
engines made, left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.config import IngestConfig
from auditor.generate import reaper
from auditor.ingest import ingest_corpus
from auditor.store import read_jsonl
from auditor.testing import ray_cluster_processes
from auditor.verdict_cases import negation_cases, smoke_cases, write_answers
from tests.conftest import KESTREL, ONE_CORE, REPO
from tests.e2e.conftest import EnginePool, light_judge_toml, ray_nodes_leaving_no_file

pytestmark = pytest.mark.e2e

# one answer a batch: a kill lands mid-batch with answers committed before it
SMALL_JUDGE = light_judge_toml(answers_per_batch=1, all_cores=False)
ANSWERS = 5
# the verdict cases the light judge lists claims for within its token limit ("no-fee" makes
# SmolLM2 repeat itself to the limit, three times: minutes of judge time for nothing tested here)
LIGHT_JUDGED = ("right", "wrong", "abstains", "not-eu", "no-data")


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, dict[str, str]]]:
    """A head and a worker node, 1 CPU each; (address, environment to reach it). No
    /tmp/ray/ray_current_cluster naming it is left after."""
    with ray_nodes_leaving_no_file(2) as found:
        yield found


def _is_engine(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        name = Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return False
    return "VLLM" in name or "VLLM" in command or "EngineCore" in command


def _alive(pid: int, started: str) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] != "Z"


class _Cluster:
    """What the test cluster's processes (workers, actors, the engines they start) are seen
    running and holding, sampled every 0.5 s while a command runs: its engine processes, and
    the /dev/shm files (name, inode) they hold. Only this cluster's: another program's engine
    or file on this machine is never counted (an engine adopted by init once its actor died
    was recorded while it was the actor's)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.engines: dict[int, str] = {}  # pid -> start time
        self.segments: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _Cluster:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _sample(self) -> None:
        while not self._stop.is_set():
            linked = reaper._linked_shm()
            for pid, started in ray_cluster_processes(self.address).items():
                held = reaper._held_shm(pid, linked)
                engine = _is_engine(pid)
                with self._lock:
                    self.segments |= held
                    if engine:
                        self.engines[pid] = started
            self._stop.wait(0.5)

    def engines_alive(self) -> list[int]:
        with self._lock:
            engines = dict(self.engines)
        return [pid for pid, started in engines.items() if _alive(pid, started)]

    def segments_left(self) -> dict[str, int]:
        """{name: bytes} of the files seen that are still there (the same file) and that no
        live process holds: segments whose engine is gone."""
        held = reaper._open_shm_files()
        with self._lock:
            seen = set(self.segments)
        found = {}
        for name, inode in seen:
            try:
                info = (reaper.SHM / name).stat()
            except OSError:
                continue
            if info.st_ino == inode and name not in held:
                found[name] = info.st_size
        return found


def _nothing_left(cluster: _Cluster, within_s: float = 30) -> None:
    """No engine of the cluster's alive, none of their /dev/shm segments left."""
    assert cluster.engines, "no engine was seen: nothing here shows one ends"
    assert cluster.segments, "the engines held no /dev/shm segment: nothing shows one is freed"
    deadline = time.monotonic() + within_s
    while (cluster.engines_alive() or cluster.segments_left()) and time.monotonic() < deadline:
        time.sleep(1)
    assert not cluster.engines_alive(), "an engine outlived its Ray command"
    assert not cluster.segments_left(), f"left in /dev/shm: {cluster.segments_left()}"


def _answers(path: Path) -> list[str]:
    """Short answers with their one passage each (auditor.verdict_cases): the judge's work
    stays small; what is tested is where it runs and how a kill ends. Returns their ids."""
    cases = [c for c in smoke_cases() + negation_cases() if c.item.id in LIGHT_JUDGED][:ANSWERS]
    return write_answers(cases, path)


def _check(answers: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "auditor", "check", "--answers", str(answers), "--out", str(out),
        "-q", *extra,
    ]  # fmt: skip


def _ids(out: Path) -> list[str]:
    return [row["id"] for row in read_jsonl(out / "checks.jsonl", repair=True)]


def _wait_for_commits(
    out: Path, process: subprocess.Popen[Any], count: int, stderr: Path | None = None
) -> None:
    """Until `count` answers are committed; fails with the command's last words (`stderr`)
    if it ends or 15 min pass first (a driver, an actor and its engine start on a busy core)."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and process.poll() is None:
        if (out / "checks.jsonl").exists() and len(_ids(out)) >= count:
            return
        time.sleep(0.5)
    ended = "ended" if process.poll() is not None else "timed out"
    said = stderr.read_text(errors="replace")[-2000:] if stderr is not None else ""
    raise AssertionError(f"no {count} committed answers before the command {ended}: {said}")


def _same_verdicts(single: Path, spread: Path) -> None:
    """The Ray check's rows against the single-process check's: each answer's outcome and
    verdict, and (nearly) every claim's. One core an engine on either side; an actor killed
    mid-batch and retried changes nothing."""
    by_id = {r["id"]: r for r in read_jsonl(single / "checks.jsonl")}
    spread_rows = {r["id"]: r for r in read_jsonl(spread / "checks.jsonl")}
    assert sorted(spread_rows) == sorted(by_id)
    same = total = 0
    gaps = []
    for ident, row in by_id.items():
        assert spread_rows[ident]["outcome"] == row["outcome"], ident
        assert spread_rows[ident]["hallucinated"] == row["hallucinated"], ident
        theirs = {c["text"]: c for c in spread_rows[ident]["claims"]}
        for claim in row["claims"]:
            total += 1
            if (other := theirs.get(claim["text"])) is not None:
                same += other["verdict"] == claim["verdict"]
                if claim.get("p_supported") is not None and other.get("p_supported") is not None:
                    gaps.append(abs(claim["p_supported"] - other["p_supported"]))
    # sums in another order (another process, batch or retry) move probabilities a little,
    # so verdicts are compared, not probabilities
    assert total and same / total >= 0.95, (same, total, max(gaps, default=0))
    first = next(iter(by_id))
    assert set(spread_rows[first]) == set(by_id[first]), "same schema"


def _actor_processes(address: str) -> list[int]:
    """The cluster's Ray Data map workers (our JudgeActor inside), by their process title."""
    found = []
    for pid in ray_cluster_processes(address):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if command.startswith("ray::") and "MapWorker" in command:
            found.append(pid)
    return found


# the single-process check's engine (the session pool's: in make test the fault test's check
# started it), then the two actors' engines, one on each node, starting side by side
@pytest.mark.timeout(2400)
@pytest.mark.parametrize(
    "kill",
    [
        None,
        # the driver killed first is one more engine start (its actor's), the actor's restart
        # another: variants (make test-extended)
        pytest.param("driver", marks=pytest.mark.extended),
        pytest.param("driver-then-actor", marks=pytest.mark.extended),
    ],
    ids=["two-actors", "driver", "driver-then-actor"],
)
def test_a_check_on_two_actors_ends_with_the_single_process_verdicts(
    cluster: tuple[str, dict[str, str]],
    smollm2_dir: Path,
    tmp_path: Path,
    engine_pool: EnginePool,
    monkeypatch: pytest.MonkeyPatch,
    kill: str | None,
) -> None:
    """`check --ray` on two actors on two nodes: every answer committed once, none given up,
    no engine left, no /dev/shm segment of the engines; the verdicts are the single-process
    check's on the same answers and batches (run in this process, on the session pool's
    engine of the judge's settings, one core as an actor has). Variants (make test-extended):
    the command SIGKILLed after its first commit first (its actor and engine die with it, no
    segment of the engine left, a file another program made meanwhile kept; the rerun keeps
    what was committed), and then one actor SIGKILLed mid-batch as well (Ray restarts it and
    retries the batch). What the driver's kill proves, `make test` proves in two tests: a
    driver SIGKILLed on a real Ray cluster leaves nothing of its actor's engine in /dev/shm
    (tests/scale/test_actor_shm.py, an engine stand-in making vLLM's segments), and a command
    SIGKILLed on a real engine resumes exactly on the commit log the Ray driver writes too
    (test_faults_engines.py). The light SmolLM2 judge: two float32 1.5B engines (~12 GB each)
    do not fit beside the driver on a 24 GB machine without bfloat16, and the verdicts'
    agreement with people is not what is tested here."""
    address, env = cluster
    env = env | {"AUDITOR_MODELS_DIR": str(smollm2_dir.parent)}
    monkeypatch.setenv("AUDITOR_MODELS_DIR", str(smollm2_dir.parent))
    answers = tmp_path / "answers.jsonl"
    ids = _answers(answers)
    judge = tmp_path / "judge.toml"
    judge.write_text(SMALL_JUDGE)
    single = CliRunner().invoke(
        cli, ["check", "--answers", str(answers), "--out", str(tmp_path / "single"),
              "--judge", str(judge), "-q"],
    )  # fmt: skip
    assert single.exit_code == 0, single.output
    # its engine's memory to the actors' engines: Ray's monitor kills a worker past 95 % of the
    # node's memory (seen on 24 GB with a float32 1.5B engine beside: the actor restarted)
    engine_pool.close()

    out = tmp_path / "out"
    # --ray-actors 2: an engine on each node
    command = _check(answers, out, "--judge", str(judge), "--ray", address, "--ray-actors", "2")
    first: list[str] = []
    if kill is not None:
        first = _killed_driver([*command[:-1], "1"], address, env, out, tmp_path)
    with _Cluster(address) as seen:
        run = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            if kill == "driver-then-actor":
                _wait_for_commits(out, run, len(first) + 1)
                actors = _actor_processes(address)
                assert actors, "no actor runs the check"
                os.kill(actors[0], signal.SIGKILL)  # mid-batch: the next batch was handed to it
            _, stderr = run.communicate(timeout=1200)
        finally:
            run.kill()
        assert run.returncode == 0, stderr[-2000:]
        found = _ids(out)
        assert sorted(found) == sorted(ids), "lost or duplicated"
        assert found[: len(first)] == first, "committed rows are never rewritten"
        outcomes = {row["id"]: row["outcome"] for row in read_jsonl(out / "checks.jsonl")}
        assert "judge_failed" not in outcomes.values(), "no batch given up"
        _nothing_left(seen)  # the actors' engines (a killed one's and its restarted one's)
    manifest = json.loads((out / "check.json").read_text())
    assert manifest["scale"]["backend"] == "ray" and manifest["scale"]["nodes"] == 2
    # which actors get batches is Ray's call (one that starts first may take both)
    assert manifest["scale"]["actors"] == 2 and manifest["scale"]["num_cpus"] == 1
    single_manifest = json.loads((tmp_path / "single" / "check.json").read_text())
    assert manifest["judge"]["identity"]["name"] == single_manifest["judge"]["identity"]["name"]
    _same_verdicts(tmp_path / "single", out)


def _killed_driver(
    command: list[str], address: str, env: dict[str, str], out: Path, tmp_path: Path
) -> list[str]:
    """Run `command` (check --ray), SIGKILL it after its first commit, while another program
    has made a /dev/shm file of its own: its actors and their engines die with it, nothing of
    theirs is left in /dev/shm, the other program's file is kept. Returns the ids committed."""
    other = Path("/dev/shm") / f"auditor-e2e-other-{uuid.uuid4().hex}"
    with _Cluster(address) as seen:
        driver_err = tmp_path / "driver.err"
        with driver_err.open("wb") as err:
            driver = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err
            )
        try:
            _wait_for_commits(out, driver, 1, driver_err)
            # another program makes a file of its own there while the engine runs, closes it
            script = f"open({str(other)!r}, 'wb').write(b'y' * 4096)"
            subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
            time.sleep(1)  # the engine's watcher has polled while the file is there, unheld
            driver.send_signal(signal.SIGKILL)
            driver.wait(timeout=30)
        finally:
            driver.kill()
        try:
            first = _ids(out)
            assert first and len(first) < ANSWERS, "killed after its first commit, before its last"
            _nothing_left(seen, within_s=60)  # the driver's actors die with it, engines too
            assert other.read_bytes() == b"y" * 4096, "another program's /dev/shm file was freed"
        finally:
            other.unlink(missing_ok=True)
    return first


@pytest.mark.extended  # its actors start engines as the judge's do, tested above
def test_offline_generation_over_two_engines_records_every_question_once(
    cluster: tuple[str, dict[str, str]],
    smollm2_dir: Path,
    real_embedder: Any,
    tmp_path: Path,
) -> None:
    """`auditor run --ray`: a pipeline's questions spread over an engine per node, each
    request timed by its engine, the regime saying how many engines."""
    address, env = cluster
    env = env | {"AUDITOR_MODELS_DIR": str(smollm2_dir.parent)}
    index = tmp_path / "index"
    ingest_corpus(KESTREL / "docs", index, IngestConfig(), real_embedder)
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        'name = "ray-e2e"\n[generator]\nkind = "vllm"\nmodel = "smollm2-135m-instruct"\n'
        f'max_model_len = 2048\ncpu_threads = "{ONE_CORE}"\n[generator.sampling]\nmax_tokens = 16\n'
    )
    with _Cluster(address) as seen:
        done = subprocess.run(
            [
                sys.executable, "-m", "auditor", "run", "--pipeline", str(pipeline),
                "--questions", str(KESTREL / "questions.jsonl"), "--index", str(index),
                "--out", str(tmp_path / "run"), "--limit", "4", "--ray", address, "--json",
            ],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        _nothing_left(seen)
    records = list(read_jsonl(tmp_path / "run" / "records.jsonl"))
    assert sorted(r["id"] for r in records) == sorted({r["id"] for r in records})
    assert len(records) == 4 and all(r["answer"] and r["error"] is None for r in records)
    assert all(r["ttft_s"] is not None and r["e2e_s"] >= r["ttft_s"] for r in records)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["load_regime"]["engines"] == 2 and manifest["load_regime"]["scale"] == "ray"
    assert manifest["model"]["name"] == "smollm2-135m-instruct"
