"""`auditor ingest CORPUS_DIR --index INDEX_DIR`: a trusted knowledge base into FAISS."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import click

from auditor.cli.options import pipeline_options, resolve_config
from auditor.cli.progress import StderrProgress
from auditor.config import resolve_pipeline_path
from auditor.files import Read, check_output_dir
from auditor.ingest import embed, ingest_corpus
from auditor.ingest.build import IngestProgress
from auditor.ingest.loaders import DocumentError

__all__ = ["ingest"]


@click.command()
@click.argument("corpus_dir", type=click.Path(path_type=Path))
@click.option(
    "--index",
    "index_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Index dir to create or update.",
)
@pipeline_options("ingest")
@click.option(
    "--embedder",
    help="Packaged embedder name (all-MiniLM-L6-v2) or a local sentence-transformers dir.",
)
@click.option("--chunk-size", type=click.IntRange(16), help="Word pieces per chunk.")
@click.option("--chunk-overlap", type=click.IntRange(0), help="Word pieces shared by neighbours.")
@click.option(
    "--index-type",
    type=click.Choice(["flat", "hnsw", "ivf"]),
    help="flat: exact inner product (default); hnsw or ivf: approximate, for large corpora.",
)
@click.option("--device", help="torch device for the embedder (cpu, cuda, ...).")
@click.option(
    "--strict", is_flag=True, help="Fail on the first bad document instead of skipping it."
)
@click.option("--rebuild", is_flag=True, help="Ignore the existing index and cache; build anew.")
@click.option(
    "--allow-outside-links",
    is_flag=True,
    help="Read symbolic links that point outside CORPUS_DIR (skipped and listed by default).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the ingest report as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def ingest(
    corpus_dir: Path,
    index_dir: Path,
    pipeline: str | None,
    set_items: tuple[str, ...],
    embedder: str | None,
    chunk_size: int | None,
    chunk_overlap: int | None,
    index_type: str | None,
    device: str | None,
    strict: bool,
    rebuild: bool,
    allow_outside_links: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Read, chunk and embed the documents of CORPUS_DIR into a FAISS index.

    Reads .md, .txt, .html and .pdf files. Unchanged documents are skipped on re-ingest;
    changed and deleted ones leave the index. Bad documents are reported and skipped
    (or stop the run with --strict); the index changes only when the ingest succeeds.
    """

    reads = [  # the index dir is the command's as a whole: it may not hold what it reads (in
        # the corpus, an index is no document: only its files of supported types would be)
        Read("CORPUS_DIR", corpus_dir),
        Read("--pipeline", None if pipeline is None else resolve_pipeline_path(pipeline)),
    ]
    check_output_dir(index_dir, "--index", reads)
    config = resolve_config(
        pipeline,
        set_items,
        {
            "ingest.embedder.model": ("--embedder", embedder),
            "ingest.embedder.device": ("--device", device),
            "ingest.chunking.chunk_size": ("--chunk-size", chunk_size),
            "ingest.chunking.chunk_overlap": ("--chunk-overlap", chunk_overlap),
            "ingest.index.kind": ("--index-type", index_type),
        },
    ).ingest
    model = embed.load_embedder(config.embedder)
    with StderrProgress(enabled=not quiet) as display:
        report = ingest_corpus(
            corpus_dir,
            index_dir,
            config,
            model,
            strict=strict,
            rebuild=rebuild,
            progress=_IngestProgress(display),
            allow_outside_links=allow_outside_links,
        )
        for path, why in report.skipped:
            display.warn(f"skipped {path}: {why}")
    if as_json:
        click.echo(json.dumps(_report_json(report), indent=2))
    else:
        _print_report(report)


class _IngestProgress(IngestProgress):
    """Warnings for skipped files and a bar for the embedding phase, on stderr."""

    def __init__(self, display: StderrProgress) -> None:
        self.display = display

    def start_embedding(self, total_chunks: int) -> None:
        self.display.bar("embedding chunks", total_chunks)

    def embedded(self, count: int) -> None:
        self.display.advance(count)

    def rejected(self, error: DocumentError) -> None:
        self.display.warn(f"skipped {error}")


def _report_json(report: Any) -> dict[str, Any]:
    manifest = report.manifest
    return {
        "index_dir": str(report.index_dir),
        "documents": manifest.totals["documents"],
        "chunks": manifest.totals["chunks"],
        "added": report.added,
        "changed": report.changed,
        "unchanged": report.unchanged,
        "deleted": report.deleted,
        "rejected": [
            {"path": e.path, "line": e.line, "problem": e.problem, "fix": e.fix}
            for e in report.rejected
        ],
        "unsupported": report.unsupported,
        "skipped": [{"path": path, "reason": why} for path, why in report.skipped],
        "chunks_embedded": report.chunks_embedded,
        "chunks_reused": report.chunks_reused,
        "seconds": round(report.seconds, 3),
        "embed_seconds": round(report.embed_seconds, 3),
        "embedder": manifest.embedder.model_dump(),
        "index": manifest.index,
        "per_document": [
            {"path": d.path, "format": d.format, "chunks": d.chunks, "pages": d.pages}
            for d in manifest.documents
        ],
    }


def _print_report(report: Any) -> None:
    manifest = report.manifest
    status = dict.fromkeys(report.added, "added")
    status |= dict.fromkeys(report.changed, "changed")
    status |= dict.fromkeys(report.unchanged, "unchanged")
    width = max(len(d.path) for d in manifest.documents)
    click.echo(f"{'document':<{width}}  format  chunks  status")
    for doc in manifest.documents:
        click.echo(f"{doc.path:<{width}}  {doc.format:<6}  {doc.chunks:>6}  {status[doc.path]}")
    for path in report.deleted:
        click.echo(f"{path:<{width}}  {'':<6}  {0:>6}  deleted")
    formats = Counter(d.format for d in manifest.documents)
    by_format = ", ".join(f"{n} {fmt}" for fmt, n in sorted(formats.items()))
    rate = (
        f" ({report.chunks_embedded / report.embed_seconds:.0f} chunks/s)"
        if report.chunks_embedded and report.embed_seconds > 0
        else ""
    )
    click.echo(
        f"\nIndexed {manifest.totals['documents']} documents ({by_format}) into "
        f"{manifest.totals['chunks']} chunks in {report.index_dir} "
        f"[{manifest.index['kind']}, {manifest.embedder.name} {manifest.embedder.dimension}-d]."
    )
    click.echo(
        f"{len(report.added)} added, {len(report.changed)} changed, "
        f"{len(report.unchanged)} unchanged, {len(report.deleted)} deleted; "
        f"{report.chunks_embedded} chunks embedded{rate}, {report.chunks_reused} reused; "
        f"{report.seconds:.1f} s."
    )
    if report.rejected:
        click.echo(
            f"{len(report.rejected)} documents skipped (see warnings above; --strict fails on them)."
        )
    if report.skipped:
        click.echo(f"{len(report.skipped)} links or special files skipped (see warnings above).")
    if report.unsupported:
        click.echo(
            f"{len(report.unsupported)} files of unsupported types ignored "
            f"(e.g. {report.unsupported[0]})."
        )
