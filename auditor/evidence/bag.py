"""The bundle's tar: a BagIt bag (RFC 8493) written deterministically and read safely.

Written: one regular-file entry per file, sorted by path, every header the same but for name
and size (mtime fixed by the caller, uid/gid 0, no owner names, mode 0644), POSIX pax format,
no compression: the same files give the same bytes. Read: every member header is checked
before any content is used: absolute names, `..`, links, devices, FIFOs, sparse files, any
member other than a regular file or a folder, and duplicates are refused, and nothing is
extracted by tarfile itself (`extract_to` writes plain files).

What is read is bounded before it is read, since the whole bundle is held in memory: a member
may not declare more bytes than the tar holds after its header (a sparse or forged header
could otherwise make a small file read as gigabytes), nor more than `MAX_MEMBER_BYTES`
(2 GiB); the members together may not hold more than `MAX_TOTAL_BYTES` (4 GiB), nor number
more than `MAX_MEMBERS` (100,000). `bundle` refuses to write a bundle outside these bounds, so
every bundle it writes can be read back. A gzip, zip, bzip2, xz or zstd file is named as what
it is (a bundle is a plain tar).
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from auditor.errors import BadInput

__all__ = [
    "BAGIT_TXT",
    "BAG_INFO",
    "ENVELOPE",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_TOTAL_BYTES",
    "PAYLOAD_MANIFEST",
    "BagError",
    "bag_tag_files",
    "check_bounds",
    "extract_to",
    "read_tar",
    "tar_bytes",
]

BAGIT_TXT = "bagit.txt"
BAG_INFO = "bag-info.txt"
PAYLOAD_MANIFEST = "manifest-sha256.txt"
ENVELOPE = "audit.dsse.json"  # a tag file: the one file the statement cannot list

# what one bundle may hold: verify reads it all into memory (docs/compliance.md)
MAX_MEMBER_BYTES = 2 * 1024**3
MAX_TOTAL_BYTES = 4 * 1024**3
MAX_MEMBERS = 100_000
# the tar member types a bundle has: regular files (pax writes "0"; "\0" is the old
# spelling) and folders; GNU sparse ("S"), contiguous ("7"), volume and multi-volume headers
# and every type tarfile does not know are refused
_MEMBER_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)
# what a file that is not a plain tar may be instead, by its first bytes, and what to do
_NOT_A_TAR = (
    (b"\x1f\x8b", "a gzip file", "gunzip it first (gunzip -k FILE) and verify the .tar"),
    (b"PK\x03\x04", "a zip archive", "verify the .tar `auditor bundle` wrote, not a zip of it"),
    (b"PK\x05\x06", "a zip archive", "verify the .tar `auditor bundle` wrote, not a zip of it"),
    (b"BZh", "a bzip2 file", "bunzip2 it first (bunzip2 -k FILE) and verify the .tar"),
    (b"\xfd7zXZ\x00", "an xz file", "unxz it first (unxz -k FILE) and verify the .tar"),
    (b"\x28\xb5\x2f\xfd", "a zstd file", "unzstd it first (unzstd FILE) and verify the .tar"),
)


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
    if member.issparse():  # GNU sparse, or pax GNU.sparse.*: its holes read as zeros
        raise BagError(
            f"member {name!r}: a sparse file (declares {member.size:,} bytes); a bundle holds "
            "plain files only; refused"
        )
    if member.type not in _MEMBER_TYPES:
        raise BagError(
            f"member {name!r}: a device, FIFO or other special file (tar type "
            f"{member.type!r}); a bundle holds plain files and folders only; refused"
        )
    return "/".join(parts)


def check_bounds(sizes: Mapping[str, int]) -> str | None:
    """Why files of these sizes (by bag path) make no bundle `read_tar` reads (None: they
    do): one over `MAX_MEMBER_BYTES`, more than `MAX_TOTAL_BYTES` or `MAX_MEMBERS` in all."""
    if len(sizes) > MAX_MEMBERS:
        return f"{len(sizes):,} files, more than a bundle holds ({MAX_MEMBERS:,})"
    for name, size in sizes.items():
        if size > MAX_MEMBER_BYTES:
            return (
                f"{name}: {size:,} bytes, more than a bundle's file may hold ({MAX_MEMBER_BYTES:,})"
            )
    total = sum(sizes.values())
    if total > MAX_TOTAL_BYTES:
        return f"{total:,} bytes in all, more than a bundle holds ({MAX_TOTAL_BYTES:,})"
    return None


def _refuse_compressed(path: Path) -> None:
    """BadInput naming what the file is when its first bytes say it is no plain tar."""
    try:
        with path.open("rb") as handle:
            head = handle.read(6)
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror}); give a readable bundle") from exc
    for magic, what, fix in _NOT_A_TAR:
        if head.startswith(magic):
            raise BadInput(
                f"{path}: {what}, not a bundle: a bundle is the plain tar `auditor bundle` "
                f"writes; {fix}"
            )


def read_tar(path: Path) -> dict[str, bytes]:
    """Every file of the tar at `path` by its bag path (directory entries skipped), after every
    header passed `_member_name` and the sizes their bounds; BagError when unsafe, truncated,
    too large or not a tar, BadInput when it is a compressed file or a zip (named)."""
    _refuse_compressed(path)
    try:
        length = path.stat().st_size
        with tarfile.open(path, mode="r:") as tar:
            names: dict[str, tarfile.TarInfo] = {}
            total = 0
            for member in tar:  # reads every header to the end: a cut tar fails here
                name = _member_name(member)
                if name in names:
                    raise BagError(f"member {name!r}: appears twice; the bundle is refused")
                if len(names) >= MAX_MEMBERS:
                    raise BagError(f"more than {MAX_MEMBERS:,} members; not a bundle, refused")
                names[name] = member
                if member.isdir():
                    continue
                held = length - member.offset_data
                if member.size > held:
                    raise BagError(
                        f"member {name!r}: declares {member.size:,} bytes, the tar holds "
                        f"{max(held, 0):,} after its header; the tar is truncated or forged"
                    )
                total += member.size
                problem = check_bounds({name: member.size}) or (
                    None
                    if total <= MAX_TOTAL_BYTES
                    else f"more than {MAX_TOTAL_BYTES:,} bytes in all, more than a bundle holds"
                )
                if problem:
                    raise BagError(f"{problem}; refused")
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
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror}); give a readable bundle") from exc
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
