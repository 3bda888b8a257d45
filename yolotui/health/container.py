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
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            for info in infos:
                result.members[info.filename] = info.file_size
                if info.compress_type != zipfile.ZIP_STORED:
                    data = _read_compressed(archive, info)
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


def _read_compressed(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A compressed member's bytes (zipfile checks its CRC while inflating)."""
    try:
        return archive.read(info)
    except zipfile.BadZipFile as exc:
        raise ContainerError(f"member {info.filename}: {exc}") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise ContainerError(f"member {info.filename} is damaged: {exc}") from exc
