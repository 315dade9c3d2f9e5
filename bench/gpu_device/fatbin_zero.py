"""Zero the GPU kernels a Hopper GPU (sm_90) never loads, in every shared library under a folder.

Used to carry TensorFlow and its CUDA 12 libraries to a GPU machine in few megabytes (see
pack.sh): zeroed bytes compress to almost nothing. CUDA keeps kernels in fatbin containers
(magic 0xBA55ED50) of entries, each an ELF (cubin, for one architecture) or PTX; the runtime reads
every entry's header and loads the one that fits the GPU. Here, per container: if it has a cubin
for 9.x, every other entry's payload is zeroed; else the newest PTX up to compute_90 is kept
(TensorFlow 2.21's own kernels for Hopper are PTX only) and the rest zeroed; a container with
neither has nothing a Hopper GPU can run, and is zeroed too. Headers stay as they were. Sections
searched: `.nv_fatbin`, `__nv_relfatbin`, `.data`, `.rodata`, `.data.rel.ro` (cuFFT keeps some in
`.data`); a container whose entries do not chain exactly to its size is left alone.

  python fatbin_zero.py SITE_PACKAGES [--dry]
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from collections import Counter

MAGIC = 0xBA55ED50
SECTIONS = (".nv_fatbin", "__nv_relfatbin", ".data", ".rodata", ".data.rel.ro")


def sections(mm: mmap.mmap):
    """(name, offset, size) of each section of a 64-bit little-endian ELF file with bytes."""
    (shoff,) = struct.unpack_from("<Q", mm, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", mm, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", mm, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    for h in headers:
        if h[1] != 8:  # SHT_NOBITS has no bytes in the file
            yield mm[names + h[0] : mm.find(b"\0", names + h[0])].decode(), h[4], h[5]


def entries(mm: mmap.mmap, at: int, end: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """The entries (kind, arch, payload offset, size) of the container at `at`, and where it ends;
    ([], 0) when the bytes there are not a well-formed container."""
    magic, version, header, size = struct.unpack_from("<IHHQ", mm, at)
    if magic != MAGIC or version != 1 or header != 16 or at + header + size > end:
        return [], 0
    found, e = [], at + header
    while e < at + header + size:
        kind, _, entry_header, payload = struct.unpack_from("<HHIQ", mm, e)
        (arch,) = struct.unpack_from("<I", mm, e + 28)
        if kind not in (1, 2) or not 64 <= entry_header <= 4096 or not 0 < arch < 1000:
            return [], 0
        found.append((kind, arch, e + entry_header, payload))
        e += entry_header + payload
    return (found, e) if e == at + header + size else ([], 0)


def kept(found: list[tuple[int, int, int, int]]) -> set[int]:
    """Payload offsets to keep: the 9.x cubins, else the newest PTX up to compute_90."""
    cubins = {x[2] for x in found if x[0] == 2 and x[1] // 10 == 9}
    if cubins:
        return cubins
    ptx = [x for x in found if x[0] == 1 and x[1] <= 90]
    return {max(ptx, key=lambda x: x[1])[2]} if ptx else set()


def zero_range(mm: mmap.mmap, start: int, end: int, dry: bool, stats: Counter) -> None:
    """Zero what no sm_90 GPU loads in every container between start and end."""
    at = start
    while at + 16 <= end:
        found, after = entries(mm, at, end)
        if not found:
            at += 8
            continue
        keep = kept(found)
        for _kind, _arch, payload, size in found:
            stats["kept" if payload in keep else "zeroed"] += size
            if payload not in keep and not dry:
                mm[payload : payload + size] = bytes(size)
        at = after


def main(argv: list[str]) -> int:
    root, dry, stats = argv[0], "--dry" in argv, Counter()
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if ".so" not in name or os.path.islink(path):
                continue
            with open(path, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
            with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
                for section, offset, size in list(sections(mm)):
                    if section in SECTIONS:
                        zero_range(mm, offset, offset + size, dry, stats)
    print({k: f"{v / 1e6:.0f} MB" for k, v in stats.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
