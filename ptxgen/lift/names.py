"""Lift stage, naming: readable Python identifiers for PTX names, and which kernels to lift.

Numba's entries carry Itanium-mangled names (`_ZN8__main__4histB2v1…`); the readable name is the
last source-name component of the nested name ("hist"). Triton's and hand-written names are
already identifiers.
"""
import keyword
import re

from ..errors import PtxgenError

_LEN = re.compile(r"\d+")


def demangle_base(name):
    """The base name of an Itanium nested name `_ZN<len><id>…E…` (the function's own name), or
    the name itself when it is not mangled that way."""
    if not name.startswith("_ZN"):
        return name
    i, last = 3, None
    while i < len(name):
        m = _LEN.match(name, i)
        if not m:
            break                       # 'B' (ABI tag), 'E' (end of the nested name) …
        n = int(m.group())
        start = m.end()
        if n == 0 or start + n > len(name):
            break
        last = name[start:start + n]
        i = start + n
    return last or name


def identifier(text, taken=()):
    """`text` as a Python identifier not in `taken` (non-word characters become '_')."""
    ident = re.sub(r"\W", "_", text, flags=re.ASCII).strip("_") or "x"
    if ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident) or keyword.issoftkeyword(ident):
        ident += "_"
    base, n = ident, 1
    while ident in taken:
        ident = f"{base}_{n}"
        n += 1
    return ident


def select_entry(module, name, filename):
    """The entry kernel `name` refers to: its exact name, its demangled base name, or a unique
    substring of its name. One-line errors for no match and for several."""
    entries = module.entries
    listing = ", ".join(sorted({demangle_base(k.name) for k in entries})) or "none"
    for match in (lambda k: k.name == name, lambda k: demangle_base(k.name) == name,
                  lambda k: name in k.name):
        found = [k for k in entries if match(k)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(_short(k.name) for k in found)
            raise PtxgenError(f"--kernel {name!r} is ambiguous in {filename}: it matches "
                              f"{len(found)} entries ({names}); give more of the name")
    raise PtxgenError(f"--kernel {name!r}: no entry of that name in {filename} "
                      f"(entries: {listing})")


def _short(name, width=40):
    return name if len(name) <= width else name[:width - 1] + "…"
