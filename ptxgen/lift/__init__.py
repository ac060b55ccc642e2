"""Lift foreign PTX into an editable Python script that rebuilds it with the Builder.

    source = lift_ptx(open("k.ptx").read(), "k.ptx", kernel="hist")

The script prints the re-emitted PTX when run; ptxas turns it into the same SASS as the original.
"""
from ..parse import parse_ptx
from .writer import lift_module

__all__ = ["lift_ptx", "lift_module"]


def lift_ptx(text, filename="<ptx>", kernel=None):
    """Python source for the module in `text` (only entry `kernel`, if given, and the .func
    functions)."""
    return lift_module(parse_ptx(text, filename), text, filename, kernel)
