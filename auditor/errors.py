"""Errors shown to the user as one line, with the exit code they map to."""

from __future__ import annotations

__all__ = ["AuditorError", "BackendUnavailable", "BadInput"]


class AuditorError(Exception):
    """A failure the user can act on; the message is printed as is (one line)."""

    exit_code = 1


class BadInput(AuditorError):
    """Bad input (file, folder, config, index): exit code 2, nothing written half-way."""

    exit_code = 2


class BackendUnavailable(AuditorError):
    """An optional heavy package (vllm, faiss, ...) is not installed."""

    exit_code = 2

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed: run scripts/setup.sh, or pip install 'auditor[{extra}]'"
        )
        self.package = package
        self.extra = extra
