"""The `python` target backend: in-house callables and real LlamaIndex query engines."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.config import PythonGeneratorConfig
from auditor.errors import BadInput
from auditor.generate.base import GenRequest, GenResult
from auditor.generate.python_target import PythonTargetGenerator

PIPELINE = """
import time

CONTEXT = {"text": "Paris is the capital of France.", "id": "geo-1", "source": "geo.md",
           "score": 0.9}


def answer(question):
    if question == "boom":
        raise ValueError("index is locked")
    if question == "plain":
        return "Just text."
    if question == "stream":
        return stream()
    return {"answer": "Paris is the capital.", "contexts": [CONTEXT, "Lyon is in France.", ""],
            "output_tokens": 5}


def stream():
    for piece in ("Paris", " is", " the capital."):
        time.sleep(0.01)
        yield piece


class Engine:
    def __init__(self, prefix):
        self.prefix = prefix

    def __call__(self, question):
        return self.prefix + question


def build(prefix="A: "):
    return Engine(prefix)


NOT_A_PIPELINE = 42
"""


@pytest.fixture
def module_dir(tmp_path: Path) -> Iterator[Path]:
    name = f"inhouse_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PIPELINE))
    yield tmp_path
    sys.modules.pop(name, None)


def _cfg(module_dir: Path, attribute: str, **fields: Any) -> PythonGeneratorConfig:
    name = f"inhouse_{module_dir.name.replace('-', '_')}"
    return PythonGeneratorConfig.model_validate(
        {"kind": "python", "target": f"{name}:{attribute}", "path": str(module_dir)} | fields
    )


def _run(cfg: PythonGeneratorConfig, *questions: str) -> list[GenResult]:
    generator = PythonTargetGenerator.from_config(cfg)
    results: list[GenResult] = []
    requests = [GenRequest(f"q{i}", (), question=q) for i, q in enumerate(questions)]
    generator.generate(requests, results.append)
    return sorted(results, key=lambda r: r.request_id)


def test_a_callable_returning_answer_and_contexts(module_dir: Path) -> None:
    full, plain, streamed, failed = _run(
        _cfg(module_dir, "answer"), "capital?", "plain", "stream", "boom"
    )
    assert full.text == "Paris is the capital." and full.output_tokens == 5
    assert full.engine["output_tokens_source"] == "pipeline"
    assert [c["chunk_id"] for c in full.contexts or []] == ["geo-1", "returned-2"]
    assert (full.contexts or [])[0]["document"] == "geo.md"
    assert full.ttft_s is None and full.e2e_s is not None
    # a bare string: the answer, no contexts, tokens counted
    assert plain.text == "Just text." and plain.contexts is None and plain.output_tokens >= 2
    # an iterator of text: streamed, so TTFT and inter-token times are measured
    assert streamed.text == "Paris is the capital."
    assert streamed.ttft_s is not None and streamed.ttft_s >= 0.01
    assert streamed.itl_s is not None and len(streamed.itl_s) == 2
    # a pipeline that raises: an error on its record, the others answered
    assert failed.error == "ValueError: index is locked" and failed.text == ""


def test_a_factory_builds_the_target_once(module_dir: Path) -> None:
    cfg = _cfg(module_dir, "build", factory=True, factory_args={"prefix": "Q: "})
    (result,) = _run(cfg, "why?")
    assert result.text == "Q: why?"


def test_threads_answer_every_question_once(module_dir: Path) -> None:
    results = _run(_cfg(module_dir, "answer", concurrency=4), *[f"q{i}" for i in range(12)])
    assert len(results) == 12 and all(r.error is None for r in results)


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("missing", "has no attribute 'missing'"),
        ("NOT_A_PIPELINE", "is int, neither callable nor a query engine"),
    ],
)
def test_bad_targets_are_one_line_errors(module_dir: Path, attribute: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        PythonTargetGenerator.from_config(_cfg(module_dir, attribute))


def test_a_module_that_does_not_import_names_where_it_looked(tmp_path: Path) -> None:
    cfg = PythonGeneratorConfig.model_validate(
        {"kind": "python", "target": "no_such_rag_module:answer", "path": str(tmp_path)}
    )
    with pytest.raises(BadInput, match=r"cannot import 'no_such_rag_module' \(looked in"):
        PythonTargetGenerator.from_config(cfg)


@pytest.mark.parametrize("streaming", [False, True])
def test_a_real_llamaindex_query_engine(streaming: bool, tmp_path: Path) -> None:
    """A LlamaIndex query engine as a team builds one (here over a mock LLM and embedding):
    the answer from its response, the contexts from its source nodes."""
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import TextNode

    Settings.llm = None  # type: ignore[assignment]
    nodes = [
        TextNode(text="The T9 warranty lasts 2 years.", id_="w-1", metadata={"file_name": "w.md"}),
        TextNode(text="Returns within 30 days.", id_="r-1", metadata={"file_name": "r.md"}),
    ]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(
        llm=MockLLM(max_tokens=8), similarity_top_k=2, streaming=streaming
    )
    cfg = PythonGeneratorConfig.model_validate({"kind": "python", "target": "x:engine"})
    generator = PythonTargetGenerator(cfg, engine)
    results: list[GenResult] = []
    generator.generate([GenRequest("q1", (), question="How long is the warranty?")], results.append)
    (result,) = results
    assert result.error is None and result.text.strip()
    assert sorted(c["chunk_id"] for c in result.contexts or []) == ["r-1", "w-1"]
    assert {c["document"] for c in result.contexts or []} == {"w.md", "r.md"}
    assert (result.ttft_s is not None) == streaming
    assert generator.identity()["kind"] == "query engine"
