"""Ingest throughput next to raw SentenceTransformer.encode on the same chunks, in one run.

    .venv/bin/python bench/ingest.py [CORPUS_DIR] [--rounds 3]

Each round runs a full ingest from nothing (read, chunk, embed, build FAISS, persist) and then
encodes exactly the chunks that ingest produced with the bare model. Rounds alternate so that
machine noise hits both sides alike; the median ratio is the figure (target >= 0.8). The model
is loaded once, outside both timings.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/x.py` finds bench.*

from auditor.config import EmbedderConfig, IngestConfig
from auditor.ingest import ingest_corpus, load_embedder
from auditor.retrieve import Retriever
from bench.harness import side_order, spread, spread_line, write_result

DEFAULT_CORPUS = (
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "ragtruth-qa" / "corpus"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--name", help="bench/results/NAME.json (default: none written).")
    args = parser.parse_args()

    config = IngestConfig(embedder=EmbedderConfig(batch_size=args.batch_size))
    embedder = load_embedder(config.embedder)
    model = embedder.model  # type: ignore[attr-defined]
    workdir = Path(tempfile.mkdtemp(prefix="auditor-bench-"))
    try:
        # warm-up: first-call costs (thread pools, allocator) belong to neither side
        ingest_corpus(args.corpus, workdir / "warm", config, embedder)
        retriever = Retriever(workdir / "warm", embedder)
        total = retriever.manifest.totals["chunks"]
        texts = [hit.chunk.text for hit in retriever.search("warm-up", k=total)]
        model.encode(texts[:64], batch_size=args.batch_size, normalize_embeddings=True)

        ratios, ingest_rates, encode_rates = [], [], []
        for round_no in range(1, args.rounds + 1):
            index = workdir / f"round{round_no}"
            seconds: dict[str, float] = {}
            for side in side_order(round_no, ["ingest", "encode"]):
                started = time.perf_counter()
                if side == "ingest":
                    report = ingest_corpus(args.corpus, index, config, embedder)
                else:
                    model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
                seconds[side] = time.perf_counter() - started
            ingest_s, encode_s = seconds["ingest"], seconds["encode"]

            ingest_rate, encode_rate = report.chunks / ingest_s, len(texts) / encode_s
            ingest_rates.append(ingest_rate)
            encode_rates.append(encode_rate)
            ratios.append(ingest_rate / encode_rate)
            print(
                f"round {round_no}: ingest {report.chunks} chunks in {ingest_s:.2f} s "
                f"({ingest_rate:.1f} chunks/s; embedding {report.embed_seconds:.2f} s) | "
                f"raw encode {len(texts)} chunks in {encode_s:.2f} s ({encode_rate:.1f} chunks/s) | "
                f"ratio {ingest_rate / encode_rate:.3f}"
            )
        print(
            f"\ncorpus {args.corpus.name}: {report.manifest.totals['documents']} documents, "
            f"{total} chunks, batch size {args.batch_size}"
        )
        print(
            f"ingest {statistics.median(ingest_rates):.1f} chunks/s, raw encode "
            f"{statistics.median(encode_rates):.1f} chunks/s; ratio {spread_line(ratios)} "
            f"(target >= 0.8)"
        )
        if args.name:
            write_result(
                args.name,
                "ingest",
                {
                    "ratio": spread(ratios),
                    "ingest_chunks_per_s": spread(ingest_rates),
                    "encode_chunks_per_s": spread(encode_rates),
                },
                note=f"{total} chunks, batch size {args.batch_size}",
                data=[args.corpus],
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
