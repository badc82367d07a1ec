"""A real, small RAG service as a team would deploy it, for the end-to-end tests of `http`
targets: Starlette under uvicorn, LlamaIndex retrieval over the FAISS index `auditor ingest`
wrote, generation by a `vllm serve` on 127.0.0.1 (OpenAI API, streamed).

Endpoints (JSON body `{"query": ...}`):
- POST /ask     one JSON reply: {"data": {"answer", "sources": [{id, document, score, text}]},
                "usage": {"completion_tokens"}}
- POST /bare    the answer alone, no contexts: {"answer": ...}
- POST /stream  server-sent events: {"token": piece} as vLLM streams, then {"sources", "usage",
                "server_ttft_s"} and [DONE]. `server_ttft_s` is the service's own measurement:
                from the request's arrival to the first token event handed to the server.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "pipelines" / "examples"))
from kestrel_llamaindex import load_index

PROMPT = (
    "Answer the question using only these passages.\n\n{context}\n\nQuestion: {question}\nAnswer:"
)


def make_app(index_dir: Path, llm_url: str, model: str, max_tokens: int = 64) -> Starlette:
    """The service over `index_dir`, generating with the OpenAI-compatible server at `llm_url`."""
    retriever = load_index(str(index_dir)).as_retriever(similarity_top_k=3)
    client = httpx.AsyncClient(base_url=llm_url, timeout=120)
    ttfts: dict[str, float] = {}

    def retrieve(question: str) -> list[dict[str, Any]]:
        return [
            {
                "id": hit.node.node_id,
                "document": hit.node.metadata.get("document"),
                "score": hit.score,
                "text": hit.node.get_content(),
            }
            for hit in retriever.retrieve(question)
        ]

    def body(question: str, sources: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
        context = "\n\n".join(s["text"] for s in sources)
        return {
            "model": model,
            "messages": [
                {"role": "user", "content": PROMPT.format(context=context, question=question)}
            ],
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "seed": 0,
            "stream": stream,
            **({"stream_options": {"include_usage": True}} if stream else {}),
        }

    async def answer(question: str) -> tuple[str, list[dict[str, Any]], int]:
        sources = retrieve(question)
        reply = await client.post("/chat/completions", json=body(question, sources, False))
        reply.raise_for_status()
        data = reply.json()
        return (
            data["choices"][0]["message"]["content"],
            sources,
            data["usage"]["completion_tokens"],
        )

    async def ask(request: Request) -> JSONResponse:
        question = (await request.json())["query"]
        text, sources, tokens = await answer(question)
        return JSONResponse(
            {"data": {"answer": text, "sources": sources}, "usage": {"completion_tokens": tokens}}
        )

    async def bare(request: Request) -> JSONResponse:
        text, _, _ = await answer((await request.json())["query"])
        return JSONResponse({"answer": text})

    async def stream(request: Request) -> StreamingResponse:
        arrived = time.perf_counter()
        question = (await request.json())["query"]
        sources = retrieve(question)

        async def events() -> AsyncIterator[str]:
            first: float | None = None
            usage: dict[str, Any] = {}
            async with client.stream(
                "POST", "/chat/completions", json=body(question, sources, True)
            ) as reply:
                async for line in reply.aiter_lines():
                    if not line.startswith("data:") or line.strip() == "data: [DONE]":
                        continue
                    chunk = json.loads(line[5:])
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content")
                        if piece:
                            if first is None:
                                first = time.perf_counter() - arrived
                                ttfts[question] = first
                            yield f"data: {json.dumps({'token': piece})}\n\n"
            final = {"sources": sources, "usage": usage, "server_ttft_s": first}
            yield f"data: {json.dumps(final)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def measured(request: Request) -> JSONResponse:
        return JSONResponse(ttfts)

    return Starlette(
        routes=[
            Route("/ask", ask, methods=["POST"]),
            Route("/bare", bare, methods=["POST"]),
            Route("/stream", stream, methods=["POST"]),
            Route("/measured", measured, methods=["GET"]),
        ]
    )
