"""Fixtures shared by the end-to-end tests (each module that uses one gets its own)."""

from tests.e2e.servers import vllm_server

__all__ = ["vllm_server"]
