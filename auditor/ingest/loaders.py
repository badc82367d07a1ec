"""Read a knowledge-base folder into Documents, rejecting bad files with a fix to apply.

Supported: .md/.markdown, .txt, .html/.htm, .pdf. Each problem is a DocumentError whose
message names the file (and line where there is one) and what to do about it.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

from auditor.types import Document, Page

__all__ = [
    "SUPPORTED_SUFFIXES",
    "DiscoveredFiles",
    "DocumentError",
    "discover_files",
    "read_document",
]

SUPPORTED_SUFFIXES: dict[str, str] = {
    ".md": "md",
    ".markdown": "md",
    ".txt": "txt",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}


@dataclass(frozen=True)
class DocumentError(Exception):
    """A document that cannot be ingested: where, what, and the fix."""

    path: str
    problem: str
    fix: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.problem}; {self.fix}"


@dataclass
class DiscoveredFiles:
    """What a corpus folder holds: documents to read, files of other types, and entries
    skipped for safety (with why), so nothing is dropped without a word."""

    supported: list[Path]
    unsupported: list[Path]
    skipped: list[tuple[str, str]]  # (path relative to the corpus, reason)


def discover_files(corpus_dir: Path, allow_outside_links: bool = False) -> DiscoveredFiles:
    """All files under the folder; hidden ones ignored.

    A symbolic link is followed only when it resolves inside the corpus folder (unless
    `allow_outside_links`): a link such as `passwd.txt -> /etc/passwd` would otherwise carry
    any file of the machine into the index, prompts, remote endpoints and reports. Dangling
    links, FIFOs, sockets and devices are skipped and listed; links to folders are not followed.
    """
    root = corpus_dir.resolve()
    found = DiscoveredFiles([], [], [])
    for path in sorted(corpus_dir.rglob("*")):
        rel = path.relative_to(corpus_dir)
        if any(part.startswith(".") for part in rel.parts):
            continue
        reason = _skip_reason(path, root, allow_outside_links)
        if reason == "folder":
            continue
        if reason is not None:
            found.skipped.append((rel.as_posix(), reason))
            continue
        (
            found.supported if path.suffix.lower() in SUPPORTED_SUFFIXES else found.unsupported
        ).append(path)
    return found


def _skip_reason(path: Path, root: Path, allow_outside_links: bool) -> str | None:
    """Why an entry is not read as a file ("folder" for plain folders), None to read it."""
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return "dangling or looping symbolic link"
        if not allow_outside_links and not target.is_relative_to(root):
            return f"symbolic link to {target}, outside the corpus (--allow-outside-links reads it)"
        if target.is_dir():
            return "symbolic link to a folder (not followed)"
    if path.is_dir():
        return "folder"
    if not path.is_file():
        return "not a regular file (FIFO, socket or device)"
    return None


def read_document(path: Path, corpus_dir: Path, max_bytes: int) -> Document:
    """Read and validate one file; raise DocumentError with a fix when it is unusable."""
    rel = path.relative_to(corpus_dir).as_posix()
    fmt = SUPPORTED_SUFFIXES[path.suffix.lower()]
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise DocumentError(
                rel,
                f"oversized ({size / 2**20:.1f} MiB > {max_bytes / 2**20:.1f} MiB)",
                "split it, or raise ingest.max_file_mb in the pipeline file",
            )
        data = path.read_bytes()
    except OSError as exc:
        raise DocumentError(
            rel, f"unreadable ({exc.strerror})", "fix its permissions or remove it"
        ) from exc
    if not data.strip():
        raise DocumentError(rel, "empty file", "add content or remove it")
    if fmt == "pdf":
        pages, title = _read_pdf(rel, data)
    else:
        text = _decode_text(rel, data)
        if fmt == "html":
            text, title = _html_to_text(text)
        else:
            title = _first_heading(text) if fmt == "md" else None
        text = _normalise_whitespace(text)
        if not text:
            raise DocumentError(
                rel, "no text left after removing markup", "add content or remove it"
            )
        pages = (Page(number=None, text=text),)
    return Document(
        path=rel,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        format=fmt,
        pages=pages,
        title=title or path.stem,
    )


def _decode_text(rel: str, data: bytes) -> str:
    nul = data.find(b"\x00")
    if nul != -1:
        raise DocumentError(
            rel,
            "binary content (NUL byte) in a text document",
            "remove it or give it its real extension",
            line=data[:nul].count(b"\n") + 1,
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise DocumentError(
            rel,
            f"not UTF-8 (byte 0x{bad:02x})",
            f"convert it, e.g. iconv -f latin1 -t utf-8 '{rel}'",
            line=data[: exc.start].count(b"\n") + 1,
        ) from exc


def _html_to_text(html: str) -> tuple[str, str | None]:
    """Visible text of a page: scripts, styles and other non-content elements dropped."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(strip=True) if soup.title else None
    for tag in soup(["script", "style", "noscript", "template", "head", "svg", "iframe"]):
        tag.decompose()
    return soup.get_text("\n"), title


def _read_pdf(rel: str, data: bytes) -> tuple[tuple[Page, ...], str | None]:
    """Text of each page, extracted with pypdf (the library under LlamaIndex's PDFReader)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    if not data.startswith(b"%PDF"):
        raise DocumentError(rel, "not a PDF (no %PDF header)", "re-export it as PDF or rename it")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise DocumentError(rel, "encrypted PDF", "save an unencrypted copy")
        pages = tuple(
            Page(number=i, text=_normalise_whitespace(page.extract_text() or ""))
            for i, page in enumerate(reader.pages, start=1)
        )
        meta_title = reader.metadata.title if reader.metadata else None
    except DocumentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise DocumentError(rel, f"unreadable PDF ({exc})", "re-export it as PDF") from exc
    pages = tuple(page for page in pages if page.text)
    if not pages:
        raise DocumentError(
            rel, "no extractable text (a scanned PDF?)", "run OCR on it first or remove it"
        )
    return pages, (str(meta_title).strip() or None) if meta_title else None


_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _first_heading(text: str) -> str | None:
    match = _HEADING.search(text)
    return match.group(1) if match else None


_TRAILING_SPACE = re.compile(r"[ \t\r\f\v]+\n")
_BLANK_RUNS = re.compile(r"\n{3,}")


def _normalise_whitespace(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\xa0", " ")
    text = _TRAILING_SPACE.sub("\n", text)
    return _BLANK_RUNS.sub("\n\n", text).strip()
