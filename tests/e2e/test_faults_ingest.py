"""Fault suite, no engine: `auditor ingest` killed while it replaces an index (kill -9,
Ctrl-C; SIGTERM in `make test-extended`) leaves the old index serving, and the re-run ends
with the index a clean ingest builds. Real MiniLM, each ingest a command in a subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KESTREL, REPO

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


def _as_from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _index_content(index: Path) -> dict[str, Any]:
    """What an index serves: its documents and chunks (manifest, docstore), and its vectors."""
    import faiss

    manifest = json.loads((index / "manifest.json").read_text())
    (generation,) = [p for p in index.glob("gen-*") if p.is_dir()]
    store = json.loads((generation / "docstore.json").read_text())
    texts = sorted(node["__data__"]["text"] for node in store["docstore/data"].values())
    vectors = faiss.read_index(str(generation / "default__vector_store.json"))
    return {
        "documents": [(d["path"], d["sha256"], d["chunks"]) for d in manifest["documents"]],
        "texts": texts,
        "vectors": vectors.reconstruct_n(0, vectors.ntotal),
    }


def _same_index(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same documents and chunks, and every vector of one has its twin in the other (the
    embedder's floats vary in the last digits with the batch it ran in)."""
    if a["documents"] != b["documents"] or a["texts"] != b["texts"]:
        return False
    if a["vectors"].shape != b["vectors"].shape:
        return False
    similarity = a["vectors"] @ b["vectors"].T
    return bool((similarity.max(axis=1) > 0.9999).all() and (similarity.max(axis=0) > 0.9999).all())


@pytest.mark.parametrize(
    "how",
    [
        signal.SIGKILL,
        signal.SIGINT,
        pytest.param(signal.SIGTERM, marks=pytest.mark.extended),  # as SIGKILL: no handler
    ],
    ids=lambda s: s.name,
)
def test_a_killed_ingest_keeps_the_old_index_and_resumes_to_the_same_index(
    tmp_path: Path, kestrel_index: Path, how: signal.Signals
) -> None:
    """kill -9, Ctrl-C or SIGTERM during an ingest over an existing index: the old index still
    serves; the re-run ends with the index a clean ingest builds (`kestrel_index`)."""
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(KESTREL / "docs", corpus)
    index = tmp_path / "index"
    auditor = [sys.executable, "-m", "auditor", "ingest"]
    ingest = [*auditor, str(corpus), "--index", str(index), "-q"]
    first = sorted(corpus.iterdir())[:3]
    for path in first:  # the old index: a corpus without three documents
        shutil.move(path, tmp_path / path.name)
    subprocess.run(ingest, cwd=REPO, check=True, capture_output=True, timeout=600)
    old = _index_content(index)
    for path in first:
        shutil.move(tmp_path / path.name, corpus / path.name)
    killed = subprocess.Popen(
        ingest,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_as_from_a_terminal,
    )
    time.sleep(6)  # the embedder is loaded and embedding
    assert killed.poll() is None, "the ingest ended before it could be killed"
    killed.send_signal(how)
    killed.wait(timeout=30)
    assert killed.returncode != 0, f"ran to the end: {how.name} did not stop it"
    assert _same_index(_index_content(index), old), "a killed ingest changed the index"
    subprocess.run(ingest, cwd=REPO, check=True, capture_output=True, timeout=600)
    assert _same_index(_index_content(index), _index_content(kestrel_index))
