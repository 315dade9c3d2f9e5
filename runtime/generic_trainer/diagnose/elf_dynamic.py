"""The dynamic section of a 64-bit little-endian ELF shared library: what the loader reads to
resolve it.

Standard library only: it runs wherever TensorFlow's CUDA libraries are checked (the image's build,
a user's venv), with no binutils.
"""

from __future__ import annotations

import dataclasses
import struct

ELF_MAGIC = b"\x7fELF"
EHDR = struct.Struct("<16sHHIQQQIHHHHHH")  # ELF64 little-endian file header
SHDR = struct.Struct("<IIQQQQIIQQ")  # section header
SHT_DYNAMIC = 6
DT_NEEDED, DT_RPATH, DT_RUNPATH = 1, 15, 29


@dataclasses.dataclass(frozen=True)
class Dynamic:
    """DT_NEEDED names, the search directories (RUNPATH, else RPATH) and whether they are a
    RUNPATH."""

    needed: tuple[str, ...]
    dirs: tuple[str, ...]
    runpath: bool


def read_dynamic(path: str) -> Dynamic | None:
    """The dynamic section of the ELF file at `path`; None for anything else (or a file without
    one).

    Args:
      path: a file.

    Returns:
      Its `Dynamic`, or None when it is not a 64-bit little-endian ELF file with a dynamic section.
    """
    try:
        with open(path, "rb") as f:
            raw, strings = _dynamic_bytes(f)
    except (OSError, struct.error):
        return None
    if raw is None:
        return None

    def text(off: int) -> str:
        return strings[off : strings.find(b"\0", off)].decode(errors="replace")

    needed, runpath, rpath, has_runpath = [], [], [], False
    for i in range(0, len(raw) - 15, 16):
        tag, val = struct.unpack_from("<qQ", raw, i)
        if tag == 0:
            break
        if tag == DT_NEEDED:
            needed.append(text(val))
        elif tag == DT_RUNPATH:
            has_runpath = True
            runpath += text(val).split(":")
        elif tag == DT_RPATH:
            rpath += text(val).split(":")
    dirs = tuple(d for d in (runpath if has_runpath else rpath) if d)
    return Dynamic(tuple(needed), dirs, has_runpath)


def _dynamic_bytes(f) -> tuple[bytes | None, bytes]:
    """(the dynamic section's bytes or None, its string table's bytes) of the open file `f`."""
    head = f.read(EHDR.size)
    if len(head) < EHDR.size or head[:4] != ELF_MAGIC or head[4] != 2 or head[5] != 1:
        return None, b""
    header = EHDR.unpack(head)
    shoff, shentsize, shnum = header[6], header[11], header[12]
    if not shnum or shentsize != SHDR.size:
        return None, b""
    f.seek(shoff)
    table = f.read(SHDR.size * shnum)
    if len(table) < SHDR.size * shnum:
        return None, b""
    shdrs = [SHDR.unpack_from(table, i * SHDR.size) for i in range(shnum)]
    for sh in shdrs:
        if sh[1] == SHT_DYNAMIC and sh[6] < shnum:
            f.seek(sh[4])
            raw = f.read(sh[5])
            strtab = shdrs[sh[6]]
            f.seek(strtab[4])
            return raw, f.read(strtab[5])
    return None, b""
