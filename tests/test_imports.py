"""`auditor --help` must work without loading the heavy stack."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "vllm", "ragas", "sentence_transformers", "transformers", "faiss", "llama_index")


def test_cli_import_loads_nothing_heavy() -> None:
    """Importing the CLI and the package leaves torch, vllm, ragas, faiss and LlamaIndex unloaded."""
    code = (
        "import sys, auditor, auditor.cli, auditor.config, auditor.ingest, auditor.retrieve; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
