"""The bundle's tar: a BagIt bag (RFC 8493) written deterministically and read safely.

Written: one regular-file entry per file, sorted by path, every header the same but for name
and size (mtime fixed by the caller, uid/gid 0, no owner names, mode 0644), POSIX pax format,
no compression: the same files give the same bytes. Read: every member header is checked
before any content is used: absolute names, `..`, links, devices, FIFOs and duplicates are
refused, and nothing is extracted by tarfile itself (`extract_to` writes plain files).
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

__all__ = [
    "BAGIT_TXT",
    "BAG_INFO",
    "ENVELOPE",
    "PAYLOAD_MANIFEST",
    "BagError",
    "bag_tag_files",
    "extract_to",
    "read_tar",
    "tar_bytes",
]

BAGIT_TXT = "bagit.txt"
BAG_INFO = "bag-info.txt"
PAYLOAD_MANIFEST = "manifest-sha256.txt"
ENVELOPE = "audit.dsse.json"  # a tag file: the one file the statement cannot list


class BagError(Exception):
    """A tar that is unsafe, damaged or not a bundle: verify names it and exits 1."""


def _manifest_path(path: str) -> str:
    """A payload path as RFC 8493 §2.1.3 writes it in a manifest: CR, LF and % encoded."""
    return path.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def bag_tag_files(payload: Mapping[str, bytes], agent: str, bagging_date: str) -> dict[str, bytes]:
    """bagit.txt, bag-info.txt and manifest-sha256.txt of `payload` (paths under data/)."""
    manifest = "".join(
        f"{hashlib.sha256(payload[path]).hexdigest()}  {_manifest_path(path)}\n"
        for path in sorted(payload)
    )
    octets = sum(len(data) for data in payload.values())
    info = (
        f"Bag-Software-Agent: {agent}\n"
        f"Bagging-Date: {bagging_date}\n"
        f"Payload-Oxum: {octets}.{len(payload)}\n"
        "External-Description: An audit of RAG pipelines with its signed in-toto statement "
        f"({ENVELOPE}); verify with `auditor verify BUNDLE --key KEY.pub`\n"
    )
    return {
        BAGIT_TXT: b"BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n",
        BAG_INFO: info.encode("utf-8"),
        PAYLOAD_MANIFEST: manifest.encode("utf-8"),
    }


def tar_bytes(files: Mapping[str, bytes], mtime: int) -> bytes:
    """A plain pax tar of `files`, sorted, with fixed headers: identical for identical input."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = mtime
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.type = tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _member_name(member: tarfile.TarInfo) -> str:
    """The member's path inside the bag; BagError naming it when it could land outside (or on
    something other than a plain file)."""
    name = member.name
    if name.startswith("/") or "\\" in name or "\x00" in name:
        raise BagError(f"member {name!r}: an absolute or odd path; the bundle is refused")
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if not parts or ".." in parts:
        raise BagError(f"member {name!r}: a path outside the bundle (..); the bundle is refused")
    if member.issym() or member.islnk():
        raise BagError(f"member {name!r}: a link; the bundle is refused")
    if not (member.isreg() or member.isdir()):
        raise BagError(f"member {name!r}: a device, FIFO or other special file; refused")
    return "/".join(parts)


def read_tar(path: Path) -> dict[str, bytes]:
    """Every file of the tar at `path` by its bag path (directory entries skipped), after every
    header passed `_member_name`; BagError when unsafe, truncated or not a plain tar."""
    try:
        with tarfile.open(path, mode="r:") as tar:
            members = tar.getmembers()  # reads every header to the end: a cut tar fails here
            names: dict[str, tarfile.TarInfo] = {}
            for member in members:
                name = _member_name(member)
                if name in names:
                    raise BagError(f"member {name!r}: appears twice; the bundle is refused")
                names[name] = member
            files: dict[str, bytes] = {}
            for name, member in names.items():
                if member.isdir():
                    continue
                handle = tar.extractfile(member)
                assert handle is not None  # a regular file
                data = handle.read()
                if len(data) != member.size:
                    raise BagError(f"member {name!r}: cut short; the tar is truncated")
                files[name] = data
    except (tarfile.TarError, EOFError) as exc:
        raise BagError(f"not a complete tar ({exc}); the bundle is truncated or damaged") from exc
    folders = {
        "/".join(name.split("/")[:k]) for name in files for k in range(1, name.count("/") + 1)
    }
    if clash := sorted(folders & files.keys()):
        raise BagError(f"member {clash[0]!r}: both a file and a folder; the bundle is refused")
    return files


def extract_to(files: Mapping[str, bytes], root: Path) -> None:
    """Write `files` (checked bag paths) under the empty dir `root` as new plain files: no
    existing file is followed or replaced (O_EXCL, O_NOFOLLOW)."""
    for name in sorted(files):
        target = root.joinpath(*name.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(target, flags, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(files[name])
