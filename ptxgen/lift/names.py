"""Lift stage, naming: readable Python identifiers for PTX names.

Numba's entries carry Itanium-mangled names (`_ZN8__main__4histB2v1…`); the readable name is
ptxgen.names.short_name's ("hist"), and --kernel is resolved like every kernel name
(Module.kernel: exact, short or unique-substring name).
"""
import keyword
import re


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
