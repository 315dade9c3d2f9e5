"""The trainer image's shared libraries: strip what the loader never reads, and check that every
kept one resolves.

Standard library and the package's list of CUDA libraries only (it runs with the venv's python
in the Dockerfile's builder stage, once the package is installed there; no binutils are installed).
Subcommands:

  strip SITE_PACKAGES [--accelerator A]   drop the symbol tables and debug sections of every 64-bit
  ELF file
                                          under SITE_PACKAGES (`.symtab`, `.strtab`, `.debug_*`);
                                          the bytes the dynamic loader maps stay byte for byte the
                                          same
  check SITE_PACKAGES [--accelerator A]   every DT_NEEDED of every ELF file resolves (its
  RUNPATH/RPATH, then
                                          the system library directories); with `cuda`, every
                                          library TensorFlow 2.21 and cuDNN load at run time is
                                          present (CUDA_LOADED)

Why stripping is safe: the dynamic loader and the CUDA runtime only read what a program header
covers (the PT_LOAD segments: code, data, `.dynsym`/`.dynstr`, the `.nv_fatbin` GPU kernels, ...).
`.symtab`, `.strtab` and DWARF are never mapped: they serve debuggers and symbolizers (a crash's
stack trace names only exported symbols afterwards). Only non-allocated sections behind the last
segment are dropped; anything else (a removable section inside the mapped range, a kept section
pointing at a removed one, a 32-bit or big-endian file, extended section numbering) leaves the file
untouched.
"""

from __future__ import annotations

import os
import struct
import sys

# What TensorFlow 2.21 and cuDNN load on a GPU machine, and what the driver provides: the
# package's list (the builder runs this script once the package is installed into /opt/venv).
from generic_trainer.diagnose.dlopen import CUDA_LOADED, FROM_THE_DRIVER

ELF_MAGIC = b"\x7fELF"
EHDR = struct.Struct("<16sHHIQQQIHHHHHH")  # ELF64 little-endian file header
PHDR = struct.Struct("<IIQQQQQQ")  # program header
SHDR = struct.Struct("<IIQQQQIIQQ")  # section header
SHF_ALLOC = 0x2
SHF_INFO_LINK = 0x40
SHT_NOBITS, SHT_RELA, SHT_REL, SHT_DYNAMIC = 8, 4, 9, 6
DT_NEEDED, DT_RPATH, DT_RUNPATH = 1, 15, 29
STRIPPED_NAMES = {".symtab", ".strtab"}
STRIPPED_PREFIXES = (".debug_", ".zdebug_")

SYSTEM_LIB_DIRS = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
]


class Elf:
    """The headers of a 64-bit little-endian ELF file (None from `read` for anything else)."""

    def __init__(
        self, path: str, header: tuple, phdrs: list[tuple], shdrs: list[tuple], names: list[str]
    ):
        self.path, self.header, self.phdrs, self.shdrs, self.names = (
            path,
            header,
            phdrs,
            shdrs,
            names,
        )

    @classmethod
    def read(cls, path: str) -> Elf | None:
        with open(path, "rb") as f:
            head = f.read(EHDR.size)
            if len(head) < EHDR.size or head[:4] != ELF_MAGIC or head[4] != 2 or head[5] != 1:
                return None
            header = EHDR.unpack(head)
            (
                _,
                e_type,
                _,
                _,
                _,
                phoff,
                shoff,
                _,
                _,
                phentsize,
                phnum,
                shentsize,
                shnum,
                shstrndx,
            ) = header
            if (
                e_type not in (2, 3)
                or not shnum
                or shstrndx >= shnum
                or shentsize != SHDR.size
                or (phnum and phentsize != PHDR.size)
            ):
                return None
            f.seek(phoff)
            raw = f.read(PHDR.size * phnum)
            phdrs = [PHDR.unpack_from(raw, i * PHDR.size) for i in range(phnum)]
            f.seek(shoff)
            raw = f.read(SHDR.size * shnum)
            if len(raw) < SHDR.size * shnum:
                return None
            shdrs = [SHDR.unpack_from(raw, i * SHDR.size) for i in range(shnum)]
            f.seek(shdrs[shstrndx][4])
            table = f.read(shdrs[shstrndx][5])
        names = [table[s[0] : table.find(b"\0", s[0])].decode("latin-1") for s in shdrs]
        return cls(path, header, phdrs, shdrs, names)

    def mapped_end(self) -> int:
        """The end of the last byte any program header covers."""
        return max((p[2] + p[5] for p in self.phdrs), default=EHDR.size)

    def dynamic(self) -> tuple[list[str], list[str]]:
        """(DT_NEEDED names, RUNPATH or else RPATH directories) from the dynamic section."""
        for sh in self.shdrs:
            if sh[1] == SHT_DYNAMIC:
                with open(self.path, "rb") as f:
                    f.seek(sh[4])
                    raw = f.read(sh[5])
                    strtab = self.shdrs[sh[6]]
                    f.seek(strtab[4])
                    strings = f.read(strtab[5])
                break
        else:
            return [], []
        text = lambda off: strings[off : strings.find(b"\0", off)].decode()  # noqa: E731
        needed, runpath, rpath = [], [], []
        for i in range(0, len(raw) - 15, 16):
            tag, val = struct.unpack_from("<qQ", raw, i)
            if tag == 0:
                break
            if tag == DT_NEEDED:
                needed.append(text(val))
            elif tag == DT_RUNPATH:
                runpath += text(val).split(":")
            elif tag == DT_RPATH:
                rpath += text(val).split(":")
        return needed, [d for d in (runpath or rpath) if d]


def strippable(name: str) -> bool:
    return name in STRIPPED_NAMES or name.startswith(STRIPPED_PREFIXES)


def strip(path: str) -> int:
    """Strip one file in place; the bytes saved (0: not an ELF file it can strip safely, left
    untouched)."""
    elf = Elf.read(path)
    if elf is None:
        return 0
    end = elf.mapped_end()
    drop = {
        i
        for i, (sh, name) in enumerate(zip(elf.shdrs, elf.names, strict=True))
        if i and not sh[2] & SHF_ALLOC and strippable(name)
    }
    if not drop:
        return 0
    keep = [i for i in range(len(elf.shdrs)) if i not in drop]
    for i in drop:  # a removable section inside the mapped range: leave the file as it is
        sh = elf.shdrs[i]
        if sh[1] != SHT_NOBITS and sh[5] and sh[4] < end:
            return 0
    for i in keep:
        sh = elf.shdrs[i]
        if sh[6] in drop or (
            (sh[1] in (SHT_REL, SHT_RELA) or sh[2] & SHF_INFO_LINK) and sh[7] in drop
        ):
            return 0
        if not sh[2] & SHF_ALLOC and sh[1] != SHT_NOBITS and sh[4] < end < sh[4] + sh[5]:
            return 0
    index = {old: new for new, old in enumerate(keep)}
    tmp = path + ".strip-tmp"
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        copy_range(src, dst, 0, end)
        pos = end
        new_shdrs = []
        tail = sorted(
            (
                i
                for i in keep
                if i
                and not elf.shdrs[i][2] & SHF_ALLOC
                and elf.shdrs[i][1] != SHT_NOBITS
                and elf.shdrs[i][4] >= end
            ),
            key=lambda i: elf.shdrs[i][4],
        )
        offsets = {}
        for i in tail:
            align = max(1, elf.shdrs[i][8])
            pad = -pos % align
            dst.write(b"\0" * pad)
            pos += pad
            offsets[i] = pos
            copy_range(src, dst, elf.shdrs[i][4], elf.shdrs[i][5])
            pos += elf.shdrs[i][5]
        pad = -pos % 8
        dst.write(b"\0" * pad)
        shoff = pos + pad
        for i in keep:
            name, typ, flags, addr, off, size, link, info, align, entsize = elf.shdrs[i]
            if typ in (SHT_REL, SHT_RELA) or flags & SHF_INFO_LINK:
                info = index.get(info, 0)
            new_shdrs.append(
                SHDR.pack(
                    name,
                    typ,
                    flags,
                    addr,
                    offsets.get(i, off),
                    size,
                    index.get(link, 0),
                    info,
                    align,
                    entsize,
                )
            )
        dst.write(b"".join(new_shdrs))
        header = list(elf.header)
        header[6], header[12], header[13] = shoff, len(keep), index[header[13]]
        dst.seek(0)
        dst.write(EHDR.pack(*header))
    stripped = Elf.read(tmp)
    if stripped is None or stripped.phdrs != elf.phdrs or stripped.mapped_end() != end:
        os.remove(tmp)
        raise SystemExit(
            f"elf.py: stripping {path} would change what the loader maps; left as it was"
        )
    os.chmod(tmp, os.stat(path).st_mode)
    saved = os.path.getsize(path) - os.path.getsize(tmp)
    os.replace(tmp, path)
    return saved


def copy_range(src, dst, offset: int, length: int) -> None:
    src.seek(offset)
    while length > 0:
        chunk = src.read(min(length, 1 << 24))
        if not chunk:
            raise SystemExit(f"elf.py: {src.name} ends before byte {offset + length}")
        dst.write(chunk)
        length -= len(chunk)


def elf_files(root: str):
    """Regular files under root that start with the ELF magic."""
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                if f.read(4) == ELF_MAGIC:
                    yield path


def strip_tree(root: str) -> dict[str, int]:
    """Strip every ELF file under root: {path relative to root: bytes saved} for the files that
    shrank."""
    saved = {}
    for path in elf_files(root):
        n = strip(path)
        if n:
            saved[os.path.relpath(path, root)] = n
    return saved


def unresolved(root: str, system_dirs: list[str] | None = None) -> list[str]:
    """`file: needs lib` for every DT_NEEDED of an ELF file under root that neither its
    RUNPATH/RPATH
    ($ORIGIN expanded) nor the system library directories provide (the driver's libcuda
    excepted)."""
    system_dirs = SYSTEM_LIB_DIRS if system_dirs is None else system_dirs
    missing = []
    for path in sorted(elf_files(root)):
        elf = Elf.read(path)
        if elf is None:
            continue
        needed, dirs = elf.dynamic()
        origin = os.path.dirname(path)
        search = [
            d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in dirs
        ] + system_dirs
        if origin.endswith(".libs"):
            # auditwheel's vendored libraries (`<dist>.libs/`) have no RUNPATH: the extension
            # modules that
            # need them list the whole chain in their own DT_NEEDED, so their siblings are loaded by
            # then.
            search.append(origin)
        for lib in needed:
            if lib in FROM_THE_DRIVER or any(os.path.exists(os.path.join(d, lib)) for d in search):
                continue
            missing.append(f"{os.path.relpath(path, root)}: needs {lib}")
    return missing


def missing_cuda(root: str) -> list[str]:
    """The entries of CUDA_LOADED that are not under root."""
    import glob

    return [rel for rel in CUDA_LOADED if not glob.glob(os.path.join(root, rel))]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("strip", "check"):
        print(__doc__)
        return 2
    cmd, root = argv[0], argv[1]
    accelerator = argv[argv.index("--accelerator") + 1] if "--accelerator" in argv else "cpu"
    if cmd == "strip":
        saved = strip_tree(root)
        print(
            f"elf.py: stripped symbol tables and debug sections of {len(saved)} files: "
            f"{sum(saved.values()) / 1e6:.0f} MB"
        )
        for rel, n in sorted(saved.items(), key=lambda kv: -kv[1])[:10]:
            print(f"  {n / 1e6:8.1f} MB  {rel}")
        return 0
    problems = unresolved(root)
    if accelerator == "cuda":
        problems += [
            f"{rel}: missing (TensorFlow or cuDNN loads it on a GPU)" for rel in missing_cuda(root)
        ]
    if problems:
        print(
            "elf.py: the image's libraries do not resolve:\n  " + "\n  ".join(problems),
            file=sys.stderr,
        )
        return 1
    print(
        f"elf.py: every shared library under {root} resolves"
        + (" and every CUDA library TensorFlow loads is present" if accelerator == "cuda" else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
