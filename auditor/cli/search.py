"""`auditor search --index INDEX_DIR QUERY`: the top-k chunks for a query."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import click

from auditor.retrieve import Retriever

__all__ = ["search"]


@click.command()
@click.option(
    "--index", "index_dir", required=True, type=click.Path(path_type=Path), help="Index dir."
)
@click.argument("query", nargs=-1, required=True)
@click.option(
    "-k",
    "top_k",
    default=5,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Chunks to return.",
)
@click.option(
    "--device", default="cpu", show_default=True, help="torch device for the query embedder."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
def search(index_dir: Path, query: tuple[str, ...], top_k: int, device: str, as_json: bool) -> None:
    """Print the chunks of INDEX_DIR most similar to QUERY, best first."""

    hits = Retriever.open(index_dir, device=device).search(" ".join(query), k=top_k)
    if as_json:
        rows = [
            {
                "rank": hit.rank,
                "score": round(hit.score, 6),
                "chunk_id": hit.chunk.chunk_id,
                "document": hit.chunk.document,
                "page": hit.chunk.page,
                "char_start": hit.chunk.char_start,
                "char_end": hit.chunk.char_end,
                "text": hit.chunk.text,
            }
            for hit in hits
        ]
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for hit in hits:
        page = f", page {hit.chunk.page}" if hit.chunk.page is not None else ""
        click.echo(
            f"[{hit.rank}] {hit.score:.3f}  {hit.chunk.document}{page}  ({hit.chunk.chunk_id})"
        )
        click.echo(textwrap.indent(textwrap.fill(hit.chunk.text, width=96), "    "))
        click.echo()
