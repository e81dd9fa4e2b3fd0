"""Which CUDA kernels a candidate's built extension (a load_inline build) holds, read from its ELF file: the device
names its host code registers with the CUDA runtime, demangled as the profiler writes kernel names. Kernel
attribution (verify/attribution.py) counts a profiled kernel as an extension's own only where its name is one of
these (and carries a kernel the source declares).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path


def extension_kernels(paths) -> set[str]:
    """The kernels the shared objects at `paths` (a candidate's load_inline builds) hold, as the profiler names
    them (demangled); a file that is not a 64-bit little-endian ELF holds none."""
    names: set[str] = set()
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        names |= {_demangle(n) for n in elf_kernel_symbols(data)}
    return names


def elf_kernel_symbols(data: bytes) -> set[str]:
    """The names (as linked: mangled) of the CUDA kernels an ELF shared object's host code registers: defined
    function symbols whose names are also strings in its read-only data. nvcc's host code registers each kernel
    (`__cudaRegisterFunction`) by its device name, a string literal, and that name is the host stub's symbol too
    (`_Z11relu_kernelPKfPfi`; `extern "C"`: the plain name). The symbol table is read whole (.symtab and .dynsym:
    a kernel in an anonymous namespace is a local symbol)."""
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return set()
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        shstr = sections[shstrndx][4]

        def cstring(offset: int) -> bytes:
            return data[offset:data.index(b"\0", offset)]

        functions: set[bytes] = set()
        strings: set[bytes] = set()
        for sh_name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if sh_type in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
                names_at = sections[link][4]
                for at in range(offset, offset + size, entsize or 24):
                    st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", data, at)
                    if st_info & 0xF == 2 and st_shndx != 0 and st_name:  # STT_FUNC, defined here
                        functions.add(cstring(names_at + st_name))
            elif sh_type == 1 and cstring(shstr + sh_name).startswith(b".rodata"):  # SHT_PROGBITS
                strings.update(data[offset:offset + size].split(b"\0"))
    except (struct.error, ValueError, IndexError):
        return set()
    return {n.decode("ascii", "replace") for n in functions & strings if _SYMBOL.fullmatch(n)}


_SYMBOL = re.compile(rb"[A-Za-z_][A-Za-z0-9_$.]*")


def _demangle(name: str) -> str:
    """As the profiler (libkineto, through __cxa_demangle) writes a kernel's name: demangled, or as it is."""
    try:
        import torch

        return torch._C._demangle(name)
    except (ImportError, AttributeError, RuntimeError):
        return name
