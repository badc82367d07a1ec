"""The shipped pipelines: CPU ones resolve to packaged models, production ones validate offline."""

from __future__ import annotations

import pytest

from auditor.config import OpenAIGeneratorConfig, VLLMGeneratorConfig, load_pipeline
from auditor.errors import BadInput
from auditor.models import PACKAGED_MODELS, resolve_model
from tests.conftest import REPO

PIPELINES = REPO / "pipelines"


def test_cpu_pipelines_compare_two_packaged_models() -> None:
    """At least two CPU pipelines, over different packaged models, all on in-process vLLM."""
    cpu = [load_pipeline(p) for p in sorted(PIPELINES.glob("*-cpu.toml"))]
    models = {c.generator.model for c in cpu if isinstance(c.generator, VLLMGeneratorConfig)}
    assert len(cpu) >= 2 and len(models) >= 2 and models <= set(PACKAGED_MODELS)


def test_production_in_process_example_passes_hub_id_through() -> None:
    """The H100 example validates and names a hub model that is handed to vLLM as is."""
    config = load_pipeline(PIPELINES / "llama3-8b-h100.toml")
    assert isinstance(config.generator, VLLMGeneratorConfig)
    assert config.generator.engine_args["gpu_memory_utilization"] == 0.90
    assert config.ingest.index.kind == "hnsw"
    path, identity = resolve_model(config.generator.model)
    assert path == "meta-llama/Meta-Llama-3-8B-Instruct" and identity["source"] == "hub"


def test_production_server_example_needs_its_api_key_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The serve example spreads over two endpoints and refuses to start without its key."""
    from auditor.generate.openai_server import OpenAIServerGenerator

    config = load_pipeline(PIPELINES / "llama3-8b-serve.toml")
    assert isinstance(config.generator, OpenAIGeneratorConfig)
    assert len(config.generator.endpoints) == 2 and config.generator.request_rate == 8.0
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    with pytest.raises(BadInput, match="VLLM_API_KEY"):
        OpenAIServerGenerator.from_config(config.generator)


def test_http_service_example_validates_and_needs_its_secret_header(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The black-box service example streams SSE, maps contexts, and reads its secret from env."""
    from auditor.config import HttpGeneratorConfig
    from auditor.generate.http_target import HttpTargetGenerator

    config = load_pipeline(PIPELINES / "our-service-http.toml")
    assert isinstance(config.generator, HttpGeneratorConfig)
    assert config.generator.stream == "sse" and config.generator.contexts == "sources"
    monkeypatch.delenv("RAG_SERVICE_AUTH", raising=False)
    with pytest.raises(BadInput, match="RAG_SERVICE_AUTH is not set"):
        HttpTargetGenerator.from_config(config.generator)


def test_llamaindex_example_names_an_importable_factory() -> None:
    """The in-process LlamaIndex example validates, and its module imports (building it starts
    an engine: the end-to-end test does that)."""
    import importlib
    import sys

    from auditor.config import PythonGeneratorConfig

    config = load_pipeline(PIPELINES / "llamaindex-kestrel.toml")
    assert isinstance(config.generator, PythonGeneratorConfig) and config.generator.factory
    module_name, _, attribute = config.generator.target.partition(":")
    sys.path.insert(0, str(REPO / (config.generator.path or "")))
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.pop(0)
    assert callable(getattr(module, attribute))
