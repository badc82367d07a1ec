"""Deterministic fakes for fast tests of our own logic (cf. structlog.testing).

`FakeEmbedder` hashes words into a small vector: texts that share words are similar, so
retrieval behaves sensibly, and no model weights are loaded. It plugs into the real
LlamaIndex + FAISS path like the real embedder does.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from auditor.generate.base import GenerationStats, Generator, GenRequest, GenResult, OnResult
from auditor.generate.reaper import _descendants, _start_time
from auditor.ingest.embed import EmbedderIdentity
from auditor.scale.cluster import ray_address_file
from auditor.verify.base import JudgeReply

__all__ = [
    "FakeEmbedder",
    "FakeGenerator",
    "FakeJudge",
    "SharedGenerator",
    "put_back_cluster_file",
    "ray_cluster_processes",
    "ray_nodes_here",
]

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """Bag-of-hashed-words embedder; `tokenize` counts words as word pieces."""

    def __init__(
        self, dimension: int = 64, max_tokens: int = 254, name: str = "fake-words"
    ) -> None:
        self.identity = EmbedderIdentity(
            name=name,
            source=name,
            sha256=hashlib.sha256(f"{name}:{dimension}".encode()).hexdigest(),
            dimension=dimension,
            max_tokens=max_tokens,
        )
        self.embedded_texts: list[str] = []  # every text embedded, for assertions

    def tokenize(self, text: str) -> Sequence[int]:
        return [self._bucket(word) for word in _WORD.findall(text.lower())]

    def _bucket(self, word: str) -> int:
        digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
        return int.from_bytes(digest, "little") % self.identity.dimension

    def vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.identity.dimension, dtype=np.float32)
        for bucket in self.tokenize(text):
            vec[bucket] += 1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return vec / norm

    def embed(
        self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None
    ) -> np.ndarray:
        self.embedded_texts.extend(texts)
        out = (
            np.stack([self.vector(t) for t in texts])
            if texts
            else np.zeros((0, self.identity.dimension), dtype=np.float32)
        )
        if on_batch and texts:
            on_batch(len(texts))
        return out.astype(np.float32)

    def llama_embedding(self) -> Any:
        return _llama_adapter(self)


def _llama_adapter(fake: FakeEmbedder) -> Any:
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class _FakeLlamaEmbedding(BaseEmbedding):
        _fake: FakeEmbedder = PrivateAttr()

        def __init__(self, fake: FakeEmbedder) -> None:
            super().__init__(model_name=fake.identity.name)
            self._fake = fake

        def _get_query_embedding(self, query: str) -> list[float]:
            return [float(x) for x in self._fake.vector(query)]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return [float(x) for x in self._fake.vector(text)]

    return _FakeLlamaEmbedding(fake)


class FakeGenerator:
    """Answers from a queue (or echoes), with made-up but consistent timings.

    `enqueue(text)` sets the next answers; `fail(request_id, error)` makes one request fail;
    `history` keeps every request seen; `stop_after` raises KeyboardInterrupt after that many
    results (a Ctrl-C mid-run).
    """

    def __init__(self) -> None:
        self.queue: list[str] = []
        self.failures: dict[str, str] = {}
        self.history: list[GenRequest] = []
        self.stop_after: int | None = None
        self.closed = False

    @classmethod
    def from_config(cls, cfg: Any, **_: Any) -> FakeGenerator:
        return cls()

    def enqueue(self, *texts: str) -> FakeGenerator:
        self.queue.extend(texts)
        return self

    def fail(self, request_id: str, error: str) -> FakeGenerator:
        self.failures[request_id] = error
        return self

    def identity(self) -> dict[str, Any]:
        return {"name": "fake", "backend": "fake", "weights_sha256": None}

    def generate(self, requests: Sequence[GenRequest], on_result: OnResult) -> GenerationStats:
        start = 1_000_000.0
        for number, request in enumerate(requests):
            if self.stop_after is not None and number >= self.stop_after:
                raise KeyboardInterrupt
            self.history.append(request)
            if request.request_id in self.failures:
                on_result(
                    GenResult(
                        request.request_id, error=self.failures[request.request_id], attempts=3
                    )
                )
                continue
            text = self.queue.pop(0) if self.queue else f"Answer to {request.request_id}."
            tokens = max(1, len(text.split()))
            arrival = start + number
            result = GenResult(
                request_id=request.request_id,
                text=text,
                prompt_text=str(request.messages),
                prompt_tokens=10,
                output_tokens=tokens,
                finish_reason="stop",
                arrival_time=arrival,
                first_token_time=arrival + 0.1,
                last_token_time=arrival + 0.1 + 0.01 * (tokens - 1),
                ttft_s=0.1,
                tpot_s=0.01 if tokens > 1 else None,
                e2e_s=0.1 + 0.01 * (tokens - 1),
            )
            on_result(result)
        return GenerationStats(
            wall_s=float(len(requests)),
            regime={"mode": "offline-batch", "batch_size": len(requests)},
        )

    def close(self) -> None:
        self.closed = True


class SharedGenerator:
    """Hands one started engine to several runs: `run_pipeline` closes what it is given."""

    def __init__(self, inner: Generator) -> None:
        self.inner = inner

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def generate(self, requests: Sequence[GenRequest], on_result: OnResult) -> GenerationStats:
        return self.inner.generate(requests, on_result)

    def close(self) -> None:
        """Left open on purpose; the owner closes `inner`."""


class FakeJudge:
    """A deterministic judge that reads the prompts it gets (word overlap decides).

    Claims are the answer's sentences; a claim is "true" for a passage holding 80 % of its
    words, "false" when the passage holds its words but not its numbers, else "unknown" -- the
    label comes with log-probabilities (0.9 on it) unless `logprobs` is False, as from a
    server that returns none. Context precision's verdict (JSON, or "1" / "0" with
    log-probabilities 0.8 on it) is 1 for a chunk sharing three words with the answer.
    `garbage_for` makes calls of those stages return invalid output
    (`garbage_times` times each), to exercise retries and unverifiable verdicts.
    """

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.garbage_for: tuple[str, ...] = ()  # call stages: "claims", "entailment", ...
        self.garbage_times = 10**6
        self.logprobs = True
        self.claims_listed: int | None = None  # list only the first N sentences as claims
        self._garbage_sent: dict[Any, int] = {}

    def identity(self) -> dict[str, Any]:
        return {"name": "fake-judge", "backend": "fake"}

    def close(self) -> None:
        """Nothing to free."""

    def complete(self, calls: Sequence[Any], on_reply: Any = None) -> list[Any]:
        import json

        replies = []
        for call in calls:
            self.calls.append(call)
            reply = JudgeReply(key=call.key, prompt_tokens=len(call.prompt) // 4)
            if call.key.stage in self.garbage_for:
                sent = self._garbage_sent.get(call.key, 0)
                if sent < self.garbage_times:
                    self._garbage_sent[call.key] = sent + 1
                    reply.text, reply.completion_tokens = (
                        ('{"claims": [', 5) if call.schema else ("", 1)
                    )
                    replies.append(reply)
                    continue
            if call.schema is None and call.key.stage.startswith("cp-"):
                # context precision's verdict alone: "1" or "0", read from log-probabilities
                reply.text = str(self._useful(call.prompt))
                reply.completion_tokens = 1
                if self.logprobs and call.logprobs:
                    reply.top_logprobs = {
                        digit: math.log(0.8 if digit == reply.text else 0.2) for digit in "10"
                    }
                replies.append(reply)
                continue
            if call.schema is None:  # a label read from log-probabilities
                reply.text = self._label(call.prompt)
                reply.completion_tokens = 1
                if self.logprobs and call.logprobs:
                    reply.top_logprobs = {
                        label: math.log(0.9 if label == reply.text else 0.05)
                        for label in ("true", "false", "unknown")
                    }
                replies.append(reply)
                continue
            reply.text = json.dumps(self._answer(call))
            reply.completion_tokens = len(reply.text) // 4
            replies.append(reply)
        for _ in replies if on_reply is not None else ():
            on_reply()
        return replies

    def _answer(self, call: Any) -> dict[str, Any]:
        import json

        title = call.schema.get("title", "")
        if "claims" in call.schema.get("properties", {}):
            answer = call.prompt.rsplit("\nAnswer: ", 1)[1].rsplit("\nClaims:", 1)[0]
            claims = [s.strip() for s in re.split(r"(?<=[.!?])\s+", answer) if s.strip()]
            return {"claims": claims[: self.claims_listed]}
        data = json.loads(call.prompt.rsplit("input: ", 1)[1].rsplit("Output:", 1)[0])
        if title == "StatementGeneratorOutput":
            return {
                "statements": [
                    s.strip() for s in re.split(r"(?<=[.!?])\s+", data["answer"]) if s.strip()
                ]
            }
        if title == "ContextPrecisionOutput":
            return {"reason": "word overlap", "verdict": self._useful(call.prompt)}
        if title == "AnswerRelevanceOutput":
            return {"question": data["response"], "noncommittal": 0}
        if title == "ContextRecallOutput":
            sentences = [s for s in re.split(r"(?<=[.!?])\s+", data["answer"]) if s.strip()]
            context = _words(data["context"])
            return {
                "classifications": [
                    {"statement": s, "reason": "overlap", "attributed": int(_words(s) <= context)}
                    for s in sentences
                ]
            }
        if title == "ClassificationWithReason":
            truth = data["ground_truth"]

            def matches(statement: str, others: list[str]) -> bool:
                words = _words(statement)
                return any(len(words & _words(o)) >= 0.8 * len(words) for o in others)

            def listed(statements: list[str]) -> list[dict[str, str]]:
                return [{"statement": st, "reason": "word overlap"} for st in statements]

            return {
                "TP": listed([a for a in data["answer"] if matches(a, truth)]),
                "FP": listed([a for a in data["answer"] if not matches(a, truth)]),
                "FN": listed([t for t in truth if not matches(t, data["answer"])]),
            }
        raise ValueError(f"FakeJudge cannot answer a {title or 'schema'} call")

    @staticmethod
    def _useful(prompt: str) -> int:
        """Context precision's verdict: 1 for a chunk sharing three words with the answer."""
        import json

        data = json.loads(prompt.rsplit("input: ", 1)[1].rsplit("Output:", 1)[0])
        return int(len(_words(data["context"]) & _words(data["answer"])) >= 3)

    @staticmethod
    def _label(prompt: str) -> str:
        """True from a passage holding the claim's words, false from one on topic with other numbers.

        An abstention ("... do not say X") is false when the passage holds X's words.
        """
        passage = prompt.split("\nPassage:\n", 1)[1].rsplit("\n\nClaim: ", 1)[0]
        if prompt.startswith("You check whether an answer makes a claim"):
            # the premise check: the answer is the passage, the question only its context
            passage = passage.split("\nAnswer given: ", 1)[1]
        claim = prompt.rsplit("\n\nClaim: ", 1)[1].rsplit("\nAnswer:", 1)[0]
        words, text = _words(claim), _words(passage)
        if prompt.startswith("You check a statement about what a passage does NOT say"):
            topic = words - _words("the documents do not say what who how much is are")
            return "false" if topic and len(topic & text) >= 0.8 * len(topic) else "true"
        numbers = {w for w in words if any(ch.isdigit() for ch in w)}
        rest = words - numbers
        share = len(words & text) / len(words) if words else 0.0
        if (not numbers or numbers <= text) and share >= 0.8:
            return "true"
        if numbers and not numbers <= text and rest and len(rest & text) >= 0.8 * len(rest):
            return "false"
        return "unknown"


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


# `ray start` with every address of the node on loopback. With Ray's cluster mode on (Linux),
# Ray 2.60 resolves 127.0.0.1 to the address other machines reach, for --node-ip-address and
# for the head's address alike, and its GCS and raylets listen on every interface; with it off
# (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, as on macOS) the node is 127.0.0.1 and so is every port,
# but `ray start --address` refuses to add a second node. So the mode is off for every process
# of the cluster (its environment) and for the drivers that join it, and `ray start` itself
# runs with the node's address pinned to loopback and the refusal lifted.
_LOOPBACK_RAY_START = """
import sys
from ray._private import ray_constants, services
from ray.scripts.scripts import main
ray_constants.ENABLE_RAY_CLUSTER = True  # a second node may join (the nodes are on loopback)
services.get_node_ip_address = lambda address=None: "127.0.0.1"
sys.argv[0] = "ray"
main()
"""


@contextlib.contextmanager
def ray_nodes_here(nodes: int = 2) -> Iterator[tuple[str, dict[str, str]]]:
    """A real Ray cluster of `nodes` nodes on this machine (`ray start --head`, then `ray start
    --address` for each other node; 1 CPU each), on 127.0.0.1 alone, stopped after: (address,
    environment to reach it; Ray 2.60 clusters ask for a token, and a driver keeps 127.0.0.1
    only with Ray's cluster mode off, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0). For the e2e tests
    and bench/ray_check.py.

    Without a token of the user's (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token) the
    cluster gets one of its own, in the environment only. Only this cluster's processes are
    stopped: `ray stop` would end every Ray cluster on the machine, another user's too. The
    file `ray start --head` names the cluster in (ray_current_cluster, which `auto` and a bare
    `ray.init()` join) is put back as it was when it names this cluster's port: removed, or
    the earlier one restored; one naming another cluster is left alone."""
    ray = [sys.executable, "-c", _LOOPBACK_RAY_START]
    env = os.environ | {
        "RAY_AUTH_MODE": "token",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    }
    if not _ray_token_found(env):
        env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    common = [
        "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--num-gpus", "0",
        "--object-store-memory", "200000000",
    ]  # fmt: skip
    head = [*ray, "start", "--head", "--port", str(port), "--include-dashboard=false", *common]
    address = f"127.0.0.1:{port}"
    cluster_file = ray_address_file()
    before = _read_text(cluster_file)
    try:
        subprocess.run(head, env=env, check=True, capture_output=True, timeout=180)
        for _ in range(nodes - 1):
            worker = [*ray, "start", "--address", address, *common]
            subprocess.run(worker, env=env, check=True, capture_output=True, timeout=180)
        yield address, env
    finally:
        _stop_ray_cluster(address)
        put_back_cluster_file(cluster_file, before, address)


def put_back_cluster_file(path: Path, before: str | None, address: str) -> None:
    """Ray's cluster file (`path`) as it was (`before`: its text, None when there was none)
    if it now names `address`'s port, as `ray start --head` wrote it; otherwise left alone
    (another cluster started meanwhile wrote it)."""
    now = _read_text(path)
    port = address.rpartition(":")[2]
    if now is None or now.strip().rpartition(":")[2] != port:
        return
    if before is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(before, encoding="utf-8")


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _ray_token_found(env: dict[str, str]) -> bool:
    path = env.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    return bool(env.get("RAY_AUTH_TOKEN")) or Path(path).is_file()


def ray_cluster_processes(address: str) -> dict[int, str]:
    """{pid: start time} of the local processes of the Ray cluster whose GCS is at `address`
    (HOST:PORT): its node processes (each names the cluster's session directory, or the GCS's
    address) and every process below them (workers, actors, the engines the actors started)."""
    port = address.rsplit(":", 1)[1]
    commands = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                commands[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
    # the GCS server names its port and its session; every node process names the session
    sessions = {
        arg.split(b"=", 1)[1]
        for args in commands.values()
        if f"--gcs_server_port={port}".encode() in args
        for arg in args
        if arg.startswith(b"--session-dir=")
    }
    # the head's Ray client server names the GCS's address only (it outlives the GCS ~1 min)
    joined = (b"--address=", b"--gcs-address=", b"--gcs_address=")
    nodes = {
        pid
        for pid, args in commands.items()
        if any(session in arg for session in sessions for arg in args)
        or any(a.startswith(joined) and a.endswith(f":{port}".encode()) for a in args)
    }
    found = {pid: started for pid in nodes if (started := _start_time(pid)) is not None}
    return found | _descendants(*nodes)


def _stop_ray_cluster(address: str, within_s: float = 20) -> None:
    """SIGKILL the cluster's processes, as `ray stop --force` does to every cluster's (a raylet
    or GCS given SIGTERM drains for 10 s and more)."""
    processes = ray_cluster_processes(address)
    for pid, started in processes.items():
        if _alive(pid, started):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(_alive(p, t) for p, t in processes.items()):
        time.sleep(0.2)


def _alive(pid: int, started: str) -> bool:
    """The process that started at `started` runs (a zombie has ended; a reused PID is not it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] != "Z"
