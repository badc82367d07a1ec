"""Reading documents: every supported format, and a fix for every kind of bad file."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.ingest.loaders import DocumentError, discover_files, read_document
from tests.conftest import KESTREL, WriteCorpus, make_pdf

MB = 2**20


def _read(root: Path, name: str, max_bytes: int = 50 * MB):  # type: ignore[no-untyped-def]
    return read_document(root / name, root, max_bytes)


def test_reads_each_format_with_title_and_text(write_corpus: WriteCorpus) -> None:
    """md, txt, html and pdf become text with a title; PDF pages keep their numbers."""
    root = write_corpus(
        {
            "a.md": "# Returns\n\nReturn within **30 days**.\n",
            "b.txt": "Plain policy text.\r\nSecond line.",
            "c.html": "<html><head><title>Pricing</title><style>p{}</style></head>"
            "<body><h1>Prices</h1><p>T9 costs $179.</p>"
            "<script>alert('x')</script></body></html>",
            "d.pdf": make_pdf(["Page one says 45 days.", "Page two says 15%."]),
        }
    )
    md, txt, html, pdf = (_read(root, n) for n in ("a.md", "b.txt", "c.html", "d.pdf"))
    assert (md.title, md.format) == ("Returns", "md")
    assert "30 days" in md.text
    assert txt.text == "Plain policy text.\nSecond line."
    assert html.title == "Pricing"
    assert "T9 costs $179." in html.text
    assert "alert" not in html.text and "p{}" not in html.text
    assert [p.number for p in pdf.pages] == [1, 2]
    assert "45 days" in pdf.pages[0].text and "15%" in pdf.pages[1].text
    assert len(md.sha256) == 64 and md.size == len("# Returns\n\nReturn within **30 days**.\n")


@pytest.mark.parametrize(
    ("name", "content", "problem", "line"),
    [
        ("empty.txt", b"", "empty file", None),
        ("blank.md", b"  \n\n\t\n", "empty file", None),
        ("bin.txt", b"line one\nline two\x00\x01\x02", "binary content", 2),
        ("latin.md", "caf\u00e9\nna\u00efve\n".encode("latin-1"), "not UTF-8 (byte 0xe9)", 1),
        ("late.txt", b"ok\nok\nbad \xff here\n", "not UTF-8 (byte 0xff)", 3),
        ("markup.html", b"<html><script>x()</script></html>", "no text left", None),
        ("fake.pdf", b"this is not a pdf", "not a PDF", None),
        ("broken.pdf", b"%PDF-1.4\n garbage garbage", "unreadable PDF", None),
    ],
    ids=[
        "empty",
        "whitespace",
        "binary",
        "non-utf8",
        "non-utf8-line3",
        "markup-only",
        "not-pdf",
        "corrupt-pdf",
    ],
)
def test_bad_files_name_file_line_and_fix(
    write_corpus: WriteCorpus, name: str, content: bytes, problem: str, line: int | None
) -> None:
    """Each bad file gets a one-line error naming the file, the line where known, and a fix."""
    root = write_corpus({name: content})
    with pytest.raises(DocumentError) as caught:
        _read(root, name)
    error = caught.value
    message = str(error)
    assert message.startswith(name + (f":{line}:" if line else ":"))
    assert problem in message
    assert error.fix and "\n" not in message


def test_scanned_pdf_without_text_is_rejected(write_corpus: WriteCorpus) -> None:
    """A PDF with no text layer asks for OCR."""
    root = write_corpus({"scan.pdf": make_pdf([""])})
    with pytest.raises(DocumentError, match=r"no extractable text.*OCR"):
        _read(root, "scan.pdf")


def test_oversized_file_is_rejected_before_reading(write_corpus: WriteCorpus) -> None:
    """A file above the size limit names the limit and the setting that raises it."""
    root = write_corpus({"big.txt": "x" * 3000})
    with pytest.raises(DocumentError, match=r"oversized.*ingest.max_file_mb"):
        _read(root, "big.txt", max_bytes=1000)


def test_unreadable_file(write_corpus: WriteCorpus, monkeypatch: pytest.MonkeyPatch) -> None:
    """A permission error becomes 'unreadable' with a fix (root ignores chmod, so we raise it)."""
    root = write_corpus({"secret.txt": "text"})

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)
    with pytest.raises(
        DocumentError, match=r"secret.txt: unreadable \(Permission denied\); fix its permissions"
    ):
        _read(root, "secret.txt")


def test_discover_skips_hidden_and_splits_unsupported(write_corpus: WriteCorpus) -> None:
    """Hidden files and folders are ignored; other types are listed as unsupported."""
    root = write_corpus(
        {"a.md": "x", "sub/b.TXT": "y", ".git/c.txt": "z", ".hidden.md": "h", "img.png": b"\x89PNG"}
    )
    found = discover_files(root)
    assert [p.relative_to(root).as_posix() for p in found.supported] == ["a.md", "sub/b.TXT"]
    assert [p.name for p in found.unsupported] == ["img.png"] and found.skipped == []


def test_bundled_corpus_reads_cleanly() -> None:
    """Every document of the bundled Kestrel corpus is valid, in all four formats."""
    found = discover_files(KESTREL / "docs")
    docs = [read_document(f, KESTREL / "docs", 50 * MB) for f in found.supported]
    assert not found.unsupported and not found.skipped
    assert {d.format for d in docs} == {"md", "txt", "html", "pdf"}
    assert 15 <= len(docs) <= 30
    assert all(len(d.text.split()) >= 200 for d in docs)
    assert all("<script" not in d.text and "alert(" not in d.text for d in docs)


def test_links_leaving_the_corpus_and_special_files_are_skipped_and_listed(
    write_corpus: WriteCorpus, tmp_path: Path
) -> None:
    """`passwd.txt -> /etc/passwd` never reaches the index unless allowed; links inside the
    corpus are read; dangling links, FIFOs and links to folders are listed with why."""
    import os

    root = write_corpus({"a.md": "inside", "sub/b.txt": "more"})
    outside = tmp_path / "secret.txt"
    outside.write_text("password")
    (root / "passwd.txt").symlink_to(outside)
    (root / "alias.md").symlink_to(root / "a.md")
    (root / "gone.txt").symlink_to(tmp_path / "missing.txt")
    (root / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(root / "pipe.txt")
    found = discover_files(root)
    assert sorted(p.name for p in found.supported) == ["a.md", "alias.md", "b.txt"]
    reasons = dict(found.skipped)
    assert set(reasons) == {"passwd.txt", "gone.txt", "elsewhere", "pipe.txt"}
    assert "outside the corpus (--allow-outside-links reads it)" in reasons["passwd.txt"]
    assert "dangling" in reasons["gone.txt"] and "FIFO" in reasons["pipe.txt"]
    allowed = discover_files(root, allow_outside_links=True)
    assert "passwd.txt" in {p.name for p in allowed.supported}
