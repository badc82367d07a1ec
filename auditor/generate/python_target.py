"""An in-house RAG pipeline called in process (`kind = "python"`): no server to write.

`target = "module:attribute"` names a callable (question -> answer) or a LlamaIndex query
engine (anything with `.query(question)`); with `factory = true` the attribute builds it once.
What it returns is read as:
- a string: the answer, no contexts;
- a dict: `answer`, optional `contexts` (strings, or dicts with text / id / source / score)
  and `output_tokens`;
- a LlamaIndex response: `response` (or, streaming, `response_gen`) and `source_nodes`;
- an iterator of strings: the answer streamed, piece by piece.
Timing is what a caller sees: end-to-end always, TTFT and inter-token times when it streams.
A pipeline that raises becomes an error on that record ("ValueError: ..."); the run goes on.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from auditor.config import PythonGeneratorConfig
from auditor.errors import BadInput
from auditor.generate.base import GenerationStats, GenRequest, GenResult, OnResult, tpot
from auditor.generate.scheduler import one_line

__all__ = ["PythonTargetGenerator", "load_target"]


def load_target(cfg: PythonGeneratorConfig) -> Any:
    """Import `module:attribute` (from `cfg.path` first, if given) and build it if a factory."""
    module_name, _, attribute = cfg.target.partition(":")
    if cfg.path is not None and cfg.path not in sys.path:
        sys.path.insert(0, cfg.path)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        where = f" (looked in {cfg.path} first)" if cfg.path else ""
        raise BadInput(
            f"generator.target: cannot import {module_name!r}{where}: {one_line(str(exc))}; "
            "fix generator.target or generator.path"
        ) from exc
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise BadInput(
                f"generator.target: {module_name} has no attribute {attribute!r}; "
                "fix generator.target"
            )
        found = getattr(found, part)
    if cfg.factory:
        found = found(**cfg.factory_args)
    if not callable(found) and not hasattr(found, "query"):
        raise BadInput(
            f"generator.target: {cfg.target} is {type(found).__name__}, neither callable nor "
            "a query engine (an object with .query); name a function or an engine"
        )
    return found


@dataclass
class _Answer:
    text: str = ""
    contexts: list[dict[str, Any]] | None = None
    output_tokens: int | None = None
    piece_times: list[float] = field(default_factory=list)


class PythonTargetGenerator:
    """Calls an in-process pipeline for each question, timing what a caller sees."""

    def __init__(self, cfg: PythonGeneratorConfig, target: Any) -> None:
        self.cfg = cfg
        self.target = target
        self._count_tokens: Callable[[str], list[int]] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: PythonGeneratorConfig) -> PythonTargetGenerator:
        return cls(cfg, load_target(cfg))

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.cfg.target,
            "backend": "python",
            "kind": "query engine" if hasattr(self.target, "query") else "callable",
            "class": type(self.target).__name__,
        }

    def generate(self, requests: Sequence[GenRequest], on_result: OnResult) -> GenerationStats:
        start = time.perf_counter()
        anchor_wall = time.time()

        def wall(t: float) -> float:
            return anchor_wall + (t - start)

        def one(request: GenRequest) -> GenResult:
            return self._ask(request, wall)

        if self.cfg.concurrency == 1:
            for request in requests:
                on_result(one(request))
        else:
            with ThreadPoolExecutor(self.cfg.concurrency) as pool:
                futures = [pool.submit(one, request) for request in requests]
                try:
                    for future in as_completed(futures):  # each record as soon as it is done
                        on_result(future.result())
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
        regime = {"mode": "in-process", "concurrency": self.cfg.concurrency}
        return GenerationStats(wall_s=time.perf_counter() - start, regime=regime)

    def close(self) -> None:
        """The pipeline's resources are its own; nothing to free here."""

    def _ask(self, request: GenRequest, wall: Callable[[float], float]) -> GenResult:
        question = request.question or ""
        sent = time.perf_counter()
        try:
            if hasattr(self.target, "query"):
                raw = self.target.query(question)
            else:
                raw = self.target(question)
            answer = self._read(raw)
        except Exception as exc:  # the pipeline's own failure: recorded, the run goes on
            return GenResult(
                request_id=request.request_id,
                error=f"{type(exc).__name__}: {one_line(str(exc))}",
                finish_reason=None,
                arrival_time=wall(sent),
                e2e_s=time.perf_counter() - sent,
            )
        end = time.perf_counter()
        engine: dict[str, Any] = {}
        if answer.output_tokens is not None:
            output_tokens = answer.output_tokens
            engine["output_tokens_source"] = "pipeline"
        else:
            output_tokens = len(self._tokens(answer.text))
            engine["output_tokens_source"] = "cl100k_base count of the answer"
        times = answer.piece_times
        first = wall(times[0]) if times else None
        last = wall(times[-1]) if times else None
        return GenResult(
            request_id=request.request_id,
            text=answer.text,
            output_tokens=output_tokens,
            finish_reason="stop",
            arrival_time=wall(sent),
            first_token_time=first,
            last_token_time=last,
            ttft_s=times[0] - sent if times else None,
            tpot_s=tpot(first, last, output_tokens) if times else None,
            e2e_s=end - sent,
            itl_s=[round(b - a, 6) for a, b in itertools.pairwise(times)] if times else None,
            engine=engine,
            contexts=answer.contexts,
        )

    def _read(self, raw: Any) -> _Answer:
        """What the pipeline returned, as answer text, contexts and (streamed) piece times."""
        answer = _Answer()
        if isinstance(raw, str):
            answer.text = raw
            return answer
        if isinstance(raw, dict):
            text = raw.get("answer")
            if not isinstance(text, str):
                raise TypeError(f"the returned dict has no 'answer' string (keys: {sorted(raw)})")
            answer.text = text
            if raw.get("contexts") is not None:
                answer.contexts = _contexts_of(raw["contexts"])
            tokens = raw.get("output_tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                answer.output_tokens = tokens
            return answer
        if hasattr(raw, "source_nodes"):  # a LlamaIndex Response or StreamingResponse
            stream = getattr(raw, "response_gen", None)
            if stream is not None:
                answer.text = self._stream(stream, answer)
            else:
                answer.text = str(raw.response or "")
            answer.contexts = _nodes_of(raw.source_nodes)
            return answer
        if isinstance(raw, Iterable):
            answer.text = self._stream(raw, answer)
            return answer
        raise TypeError(
            f"the pipeline returned {type(raw).__name__}; return a string, a dict with "
            "'answer', a LlamaIndex response or an iterator of text"
        )

    @staticmethod
    def _stream(pieces: Iterable[Any], answer: _Answer) -> str:
        parts = []
        for piece in pieces:
            if isinstance(piece, str) and piece:
                parts.append(piece)
                answer.piece_times.append(time.perf_counter())
        return "".join(parts)

    def _tokens(self, text: str) -> list[int]:
        with self._lock:
            if self._count_tokens is None:
                # cl100k_base, shipped inside llama-index-core: no download
                from llama_index.core.utils import get_tokenizer

                self._count_tokens = get_tokenizer()
        return self._count_tokens(text)


def _contexts_of(items: Any) -> list[dict[str, Any]]:
    """Returned contexts (strings, or dicts with text / id / source / score) as chunk records."""
    contexts = []
    for number, item in enumerate(items if isinstance(items, list) else [items], 1):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            continue
        if not item["text"].strip():
            continue
        score = item.get("score")
        contexts.append(
            {
                "chunk_id": str(item.get("id") or f"returned-{number}"),
                "document": None if item.get("source") is None else str(item["source"]),
                "page": None,
                "score": float(score) if isinstance(score, int | float) else None,
                "text": item["text"],
            }
        )
    return contexts


def _nodes_of(nodes: Any) -> list[dict[str, Any]]:
    """LlamaIndex source nodes (NodeWithScore) as chunk records."""
    contexts: list[dict[str, Any]] = []
    for scored in nodes or []:
        node = getattr(scored, "node", scored)
        text = node.get_content() if hasattr(node, "get_content") else str(node)
        if not text.strip():
            continue
        meta = getattr(node, "metadata", {}) or {}
        source = meta.get("document") or meta.get("file_name") or meta.get("source")
        score = getattr(scored, "score", None)
        contexts.append(
            {
                "chunk_id": str(getattr(node, "node_id", "") or f"returned-{len(contexts) + 1}"),
                "document": None if source is None else str(source),
                "page": meta.get("page"),
                "score": float(score) if isinstance(score, int | float) else None,
                "text": text,
            }
        )
    return contexts
