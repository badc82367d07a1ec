"""What the `http` target costs on top of a plain async HTTP client, on the same requests.

    .venv/bin/python bench/http_overhead.py [--requests 200] [--concurrency 8] [--rounds 3]

A local service (Starlette under uvicorn on 127.0.0.1) answers each question after a fixed
20 ms, like a fast RAG service, with an answer, three sources and a token count. Side by side,
alternating, in one process: the auditor's `HttpTargetGenerator` (JMESPath mapping, contexts,
retries and endpoint choice armed, one record per answer) against `httpx.AsyncClient` posting
the same bodies at the same concurrency and reading the answer by hand. Prints requests/s of
each and the ratio (target >= 0.95): median and spread of the rounds, the two sides
taking turns to go first; then the same with the answer's
tokens counted by the auditor (cl100k_base) instead of read from the reply.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from auditor.config import HttpGeneratorConfig
from auditor.generate.base import GenRequest, GenResult
from auditor.generate.http_target import HttpTargetGenerator
from bench.harness import side_order, spread, spread_line, write_result

SERVICE_S = 0.02
ANSWER = " ".join(["The warranty lasts two years from the delivery date."] * 8)
SOURCES = [
    {"id": f"doc-{i}", "document": "warranty.md", "score": 0.9 - i / 10, "text": ANSWER}
    for i in range(3)
]


def start_service() -> tuple[str, uvicorn.Server]:
    async def ask(request: Request) -> JSONResponse:
        question = (await request.json())["query"]
        await asyncio.sleep(SERVICE_S)
        return JSONResponse(
            {
                "data": {"answer": f"{question}: {ANSWER}", "sources": SOURCES},
                "usage": {"completion_tokens": 90},
            }
        )

    app = Starlette(routes=[Route("/ask", ask, methods=["POST"])])
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}/ask", server


def auditor_side(url: str, questions: list[str], concurrency: int, counted: bool) -> float:
    config = HttpGeneratorConfig.model_validate(
        {
            "kind": "http",
            "endpoints": [url],
            "body": {"query": "{question}"},
            "answer": "data.answer",
            "contexts": "data.sources",
            "context_id": "id",
            "context_source": "document",
            "context_score": "score",
            "output_tokens": None if counted else "usage.completion_tokens",
            "concurrency": concurrency,
        }
    )
    generator = HttpTargetGenerator.from_config(config)
    results: list[GenResult] = []
    requests = [GenRequest(f"q{i}", (), question=q) for i, q in enumerate(questions)]
    started = time.perf_counter()
    generator.generate(requests, results.append)
    elapsed = time.perf_counter() - started
    assert len(results) == len(questions) and not any(r.error for r in results)
    return len(questions) / elapsed


def plain_side(url: str, questions: list[str], concurrency: int) -> float:
    async def run() -> None:
        semaphore = asyncio.Semaphore(concurrency)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:

            async def one(question: str) -> str:
                async with semaphore:
                    reply = await client.post(url, json={"query": question})
                    answer: str = reply.json()["data"]["answer"]
                    return answer

            answers = await asyncio.gather(*(one(q) for q in questions))
            assert len(answers) == len(questions)

    started = time.perf_counter()
    asyncio.run(run())
    return len(questions) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    args = parser.parse_args()
    url, server = start_service()
    questions = [f"question {i}" for i in range(args.requests)]
    auditor_side(url, questions[:20], args.concurrency, True)  # warm-up (and the tokenizer)
    plain_side(url, questions[:20], args.concurrency)
    figures = {}
    for counted in (False, True):
        ours: list[float] = []
        plain: list[float] = []
        ratios: list[float] = []
        for round_no in range(1, args.rounds + 1):
            rates = {}
            for side in side_order(round_no, ["auditor", "plain"]):
                rates[side] = (
                    auditor_side(url, questions, args.concurrency, counted)
                    if side == "auditor"
                    else plain_side(url, questions, args.concurrency)
                )
            ours.append(rates["auditor"])
            plain.append(rates["plain"])
            ratios.append(rates["auditor"] / rates["plain"])
        a, b = statistics.median(ours), statistics.median(plain)
        how = "tokens counted by the auditor" if counted else "tokens from the reply"
        print(
            f"{how:32s} auditor http target {a:6.1f} req/s | plain httpx {b:6.1f} req/s | "
            f"ratio {spread_line(ratios)} (target >= 0.95; {args.requests} requests, "
            f"concurrency {args.concurrency}, service {SERVICE_S * 1000:.0f} ms)"
        )
        figures["counted" if counted else "from_reply"] = {
            "ratio": spread(ratios),
            "auditor_rps": spread(ours),
            "plain_rps": spread(plain),
        }
    if args.name:
        write_result(
            args.name,
            "http overhead",
            figures,
            note=f"{args.requests} requests, concurrency {args.concurrency}, "
            f"service {SERVICE_S * 1000:.0f} ms",
        )
    server.should_exit = True


if __name__ == "__main__":
    main()
