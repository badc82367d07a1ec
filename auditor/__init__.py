"""auditor: RAG pipeline goodput auditor.

Ingests a trusted knowledge base into FAISS, drives retrieval-augmented generation through
vLLM, checks every claim of every answer against its sources and reports throughput weighted
by quality. Importing this package loads nothing heavy (no torch, vllm, faiss or ragas).
"""

from auditor.errors import AuditorError, BackendUnavailable, BadInput

__version__ = "0.1.0"
__all__ = ["AuditorError", "BackendUnavailable", "BadInput", "__version__"]
