"""The zip container torch.save writes: find the pickle, check every member's CRC, spot a torn file.

torch stores members uncompressed, each storage 64-byte aligned through padding in the local header's
extra field, so CRCs are computed straight over a memory map of the file: one sequential pass, no copy.
"""

from __future__ import annotations

import mmap
import os
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

ZIP_MAGIC = b"PK\x03\x04"
LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # signature .. name length, extra length (30 bytes)
CRC_CHUNK = 16 * 1024 * 1024
MAX_RATIO = 100  # deflate reaches ~1000:1 only on crafted or degenerate data
MAX_INFLATE_BYTES = 64 * 1024 * 1024


class ContainerError(ValueError):
    """The file is a damaged zip archive; the message says how."""


@dataclass
class Container:
    """What the container check found: the members, the pickle's bytes, and damaged members."""

    members: dict[str, int] = field(default_factory=dict)  # name -> uncompressed size
    prefix: str = ""  # the archive folder inside the zip ("last" in "last/data.pkl")
    pickle_bytes: bytes = b""
    bad_crc: list[str] = field(default_factory=list)


def looks_like_zip(head: bytes) -> bool:
    """True when `head` (the file's first bytes) is a zip local header or a prefix of one (a torn file)."""
    return head.startswith(ZIP_MAGIC) or (0 < len(head) < 4 and ZIP_MAGIC.startswith(head))


def has_zip_end_record(path: Path) -> bool:
    """True when the file ends with a zip end-of-central-directory record (a zip whose start is damaged)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 22 - 65535))
            tail = handle.read()
    except OSError:
        return False
    return b"PK\x05\x06" in tail


def _member_data(view: mmap.mmap, info: zipfile.ZipInfo, file_size: int) -> tuple[int, int]:
    """Offset and length of a stored member's bytes, checked against its local header."""
    start = info.header_offset
    if start + LOCAL_HEADER.size > file_size:
        raise ContainerError(f"member {info.filename} lies past the end of the file (truncated)")
    fields = LOCAL_HEADER.unpack_from(view, start)
    if fields[0] != ZIP_MAGIC:
        raise ContainerError(f"local header of member {info.filename} is damaged")
    name_len, extra_len = fields[9], fields[10]
    name_start = start + LOCAL_HEADER.size
    if view[name_start : name_start + name_len] != info.orig_filename.encode("utf-8") and \
            view[name_start : name_start + name_len] != info.orig_filename.encode("cp437", "replace"):
        raise ContainerError(f"local header of member {info.filename} names another file")
    data_start = name_start + name_len + extra_len
    if data_start + info.compress_size > file_size:
        raise ContainerError(f"member {info.filename} is cut short (file truncated)")
    return data_start, info.compress_size


def read_container(path: Path, check_crc: bool = True) -> Container:
    """Open the torch zip at `path`, verify each member's CRC, and return the data.pkl bytes.

    Raises ContainerError for a torn or damaged archive (the message says which member and how).
    """
    try:
        return _read_container(path, check_crc)
    except ContainerError:
        raise
    except (struct.error, NotImplementedError, RuntimeError, ValueError, EOFError, zlib.error) as exc:
        # A damaged directory entry can claim any compression, flag or size.
        raise ContainerError(f"zip directory damaged: {exc}") from exc


def _read_container(path: Path, check_crc: bool) -> Container:
    result = Container()
    file_size = os.path.getsize(path)
    with open(path, "rb") as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except zipfile.BadZipFile as exc:
            raise ContainerError(f"zip end record missing or damaged ({exc}): the file is truncated or torn") \
                from exc
        except (OSError, ValueError, EOFError) as exc:
            raise ContainerError(f"zip directory unreadable: {exc}") from exc
        infos = archive.infolist()
        pickle_names = [i.filename for i in infos if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
        if not pickle_names:
            raise ContainerError("zip archive without data.pkl: not a torch checkpoint")
        pickle_name = min(pickle_names, key=lambda n: n.count("/"))
        result.prefix = pickle_name[: -len("data.pkl")].rstrip("/")
        if file_size == 0:
            raise ContainerError("empty file")
        inflated = 0
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            for info in infos:
                result.members[info.filename] = info.file_size
                if info.compress_type != zipfile.ZIP_STORED:
                    inflated += _check_inflation(info, file_size, inflated)
                    data = _read_compressed(archive, info, keep=info.filename == pickle_name)
                    if info.filename == pickle_name:
                        result.pickle_bytes = data
                    continue
                start, length = _member_data(view, info, file_size)
                if info.filename == pickle_name:
                    result.pickle_bytes = view[start : start + length]
                if (check_crc or info.filename == pickle_name) and _crc(view, start, length) != info.CRC:
                    result.bad_crc.append(info.filename)
    return result


def _crc(view: mmap.mmap, start: int, length: int) -> int:
    """CRC-32 of `length` bytes at `start`, read through a memoryview (no copy)."""
    crc = 0
    with memoryview(view) as whole:
        for offset in range(start, start + length, CRC_CHUNK):
            with whole[offset : min(offset + CRC_CHUNK, start + length)] as chunk:
                crc = zlib.crc32(chunk, crc)
    return crc


def _check_inflation(info: zipfile.ZipInfo, file_size: int, inflated_so_far: int) -> int:
    """The bytes `info` inflates to, after refusing a suspicious ratio or an over-budget total (a zip bomb).

    torch.save never compresses, so a compressed member is already unusual; one that claims to grow more
    than MAX_RATIO times, or members that together inflate past MAX_INFLATE_BYTES, make the file `corrupt`
    without inflating anything, so a verdict stays within a second and a few MB.
    """
    claimed = int(info.file_size)
    ratio = claimed / max(1, int(info.compress_size))
    if ratio > MAX_RATIO:
        raise ContainerError(f"member {info.filename} claims to inflate {ratio:.0f} times "
                             f"({info.compress_size} -> {claimed} bytes): a suspicious ratio (zip bomb?); not inflated")
    if inflated_so_far + claimed > MAX_INFLATE_BYTES:
        raise ContainerError(f"compressed members inflate to more than {MAX_INFLATE_BYTES >> 20} MB in all "
                             f"(in a {file_size}-byte file): not a checkpoint torch wrote; not inflated")
    return claimed


def _read_compressed(archive: zipfile.ZipFile, info: zipfile.ZipInfo, keep: bool = True) -> bytes:
    """A compressed member's bytes (zipfile checks its CRC while inflating), read in bounded chunks.

    Never more than the size the directory claims (plus one byte to notice a lie) is inflated; with
    `keep=False` the bytes are only checked, not kept.
    """
    limit = int(info.file_size)
    chunks: list[bytes] = []
    total = 0
    try:
        with archive.open(info) as stream:
            while True:
                chunk = stream.read(min(CRC_CHUNK, limit + 1 - total))
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise ContainerError(f"member {info.filename} inflates past the size its directory entry "
                                         "claims: damaged or crafted")
                if keep:
                    chunks.append(chunk)
        return b"".join(chunks)
    except zipfile.BadZipFile as exc:
        raise ContainerError(f"member {info.filename}: {exc}") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise ContainerError(f"member {info.filename} is damaged: {exc}") from exc
