"""Kernel names as users say them: Numba's and Triton's entries by their short names.

Numba mangles entries in the Itanium C++ style (`_ZN8__main__4histB2v1...`); a user calls that
kernel `hist`. `short_name` gives the last component of a mangled nested name (or the name
itself), `resolve` finds an entry by its full name, its short name or a unique substring, and
`display_name` is what report headers and plot titles print.
"""
import re

from .errors import PtxgenError

DISPLAY_LIMIT = 48


def demangle_parts(name):
    """The components of an Itanium nested name (`_ZN<len><id>...E`), [] when not one."""
    if not name.startswith("_ZN"):
        return []
    parts, i = [], 3
    while i < len(name):
        m = re.match(r"\d+", name[i:])
        if not m:
            break                    # 'E', an ABI tag ('B2v1'), template args: the name ends
        n = int(m.group())
        i += len(m.group())
        parts.append(name[i:i + n])
        i += n
    return parts


def short_name(name):
    """`hist` for `_ZN8__main__4histB2v1...`; any other name unchanged."""
    parts = demangle_parts(name)
    return parts[-1] if parts else name


def display_name(name, limit=DISPLAY_LIMIT):
    """The name for headers and titles: the short name, cut to `limit` characters."""
    s = short_name(name)
    return s if len(s) <= limit else s[:limit - 1] + "…"


def resolve(names, wanted, where="module"):
    """The one name in `names` that `wanted` means: itself, else the only one whose short
    name is `wanted`, else the only one containing it. One-line PtxgenError otherwise."""
    names = list(names)
    if wanted in names:
        return wanted
    for match in ([n for n in names if short_name(n) == wanted],
                  [n for n in names if wanted in n]):
        if len(match) == 1:
            return match[0]
        if len(match) > 1:
            raise PtxgenError(f"kernel name {wanted!r} is ambiguous in {where}; candidates: "
                              + ", ".join(sorted(match)))
    shown = ", ".join(f"{short_name(n)} ({n})" if short_name(n) != n else n
                      for n in names) or "none"
    raise PtxgenError(f"no kernel named {wanted!r} in {where} (entries: {shown})")
