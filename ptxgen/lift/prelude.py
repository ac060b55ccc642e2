"""Helpers the scripts written by `ptxgen lift` import: register ranges and loop regions.

They only append to the kernel being built, in the order the original PTX had, so the lifted
script re-emits the same statements; the loop region exists to make the script read like the
loop it is (an indented body under its header label).
"""
import contextlib
from dataclasses import dataclass

from ..ir.values import Addr, Reg


def declare_range(kernel, stem, type, count):
    """Declare %stem0 … %stem<count-1> of `type` on `kernel` (PTX's '.reg .type %stem<count>')
    and return them as a list, so the script can say r[5] for %r5."""
    return [kernel.declare(Reg(f"{stem}{i}", type)) for i in range(count)]


@contextlib.contextmanager
def loop(builder, header):
    """A loop whose first statement is the label `header`; the body's last branch back to that
    label (written out in the body) closes it."""
    builder.label(header)
    yield header


@dataclass(frozen=True)
class AddrPlus0(Addr):
    """An address written '[%r+0]'. The IR's Addr prints offset 0 as '[%r]', the same address;
    ptxas at -O0 (debug PTX) compiles the two spellings differently, so a lifted script keeps
    the original one where the source had it."""

    def __str__(self):
        return f"[{self.base}+0]"
