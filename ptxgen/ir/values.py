"""Operands of IR instructions. Each one prints itself as PTX."""
import struct
from dataclasses import dataclass

from . import types as T


@dataclass(frozen=True, eq=False)
class Reg:
    """A virtual register. Identity is the object; the name is what the emitter prints."""
    name: str          # with the leading '%'
    type: T.Type

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Reg({self.name}:{self.type})"


@dataclass(frozen=True)
class Imm:
    value: object      # int or float
    type: T.Type = None

    def __str__(self):
        t = self.type
        if t is not None and t.is_float:
            if t.bits == 64:
                return "0d%016X" % struct.unpack("<Q", struct.pack("<d", float(self.value)))[0]
            if t.bits == 32:
                return "0f%08X" % _f32_bits(float(self.value))
            # PTX has no f16 immediates; 16-bit floats travel as their bit pattern.
            return str(int(self.value))
        if isinstance(self.value, float):
            return "0f%08X" % _f32_bits(self.value)
        return str(int(self.value))


def _f32_bits(x):
    """Bits of x rounded to single precision; beyond its range that is an infinity, as ptxas
    reads an out-of-range literal (struct refuses to pack it)."""
    try:
        return struct.unpack("<I", struct.pack("<f", x))[0]
    except OverflowError:
        return 0xFF800000 if x < 0 else 0x7F800000


@dataclass(frozen=True)
class Special:
    """A special register such as %tid.x, %laneid or %clock64."""
    name: str          # without '%': "tid.x"

    def __str__(self):
        return "%" + self.name

    @property
    def type(self):
        return SPECIAL_TYPES.get(self.name.split(".")[0], T.u32)


SPECIAL_TYPES = {
    "tid": T.u32, "ntid": T.u32, "ctaid": T.u32, "nctaid": T.u32, "laneid": T.u32,
    "warpid": T.u32, "nwarpid": T.u32, "smid": T.u32, "nsmid": T.u32, "gridid": T.u64,
    "clock": T.u32, "clock64": T.u64, "globaltimer": T.u64, "lanemask_lt": T.u32,
    "lanemask_le": T.u32, "lanemask_eq": T.u32, "lanemask_gt": T.u32, "lanemask_ge": T.u32,
    "dynamic_smem_size": T.u32, "total_smem_size": T.u32,
    # sm_90 thread-block clusters (PTX ISA 9.0, section 10: special registers)
    "clusterid": T.u32, "nclusterid": T.u32, "cluster_ctaid": T.u32, "cluster_nctaid": T.u32,
    "cluster_ctarank": T.u32, "cluster_nctarank": T.u32, "is_explicit_cluster": T.pred,
}


@dataclass(frozen=True)
class Sym:
    """A named variable or parameter used as an operand (its address, or its value in ld.param)."""
    name: str

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Addr:
    """A memory operand: [base+offset]."""
    base: object       # Reg, Sym or Imm
    offset: int = 0

    def __str__(self):
        if self.offset > 0:
            return f"[{self.base}+{self.offset}]"
        if self.offset < 0:
            return f"[{self.base}+{self.offset}]"
        return f"[{self.base}]"


@dataclass(frozen=True)
class Vec:
    """A vector operand {a, b, c, d} of ld/st .v2/.v4 and mov."""
    items: tuple

    def __str__(self):
        return "{" + ", ".join(str(i) for i in self.items) + "}"


@dataclass(frozen=True)
class LabelRef:
    name: str

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class PredPair:
    """setp's optional second destination: %p|%q."""
    first: object
    second: object

    def __str__(self):
        return f"{self.first}|{self.second}"


@dataclass(frozen=True)
class TensorCoords:
    """The tensor operand of cp.async.bulk.tensor: [tensor-map, {c0, c1, ...}]."""
    tmap: object       # Reg (a generic 64-bit address) or Sym (a .param tensor map)
    coords: tuple      # Reg or Imm per dimension, innermost first

    def __str__(self):
        return f"[{self.tmap}, {{{', '.join(str(c) for c in self.coords)}}}]"


@dataclass(frozen=True)
class Raw:
    """Operand text the IR does not model (call argument lists, for example); kept verbatim."""
    text: str

    def __str__(self):
        return self.text


def regs_in(operand):
    """Registers an operand mentions (an address's base, a vector's items)."""
    if isinstance(operand, Reg):
        return (operand,)
    if isinstance(operand, Addr):
        return regs_in(operand.base)
    if isinstance(operand, (Vec,)):
        return tuple(r for i in operand.items for r in regs_in(i))
    if isinstance(operand, PredPair):
        return regs_in(operand.first) + regs_in(operand.second)
    if isinstance(operand, TensorCoords):
        return regs_in(operand.tmap) + tuple(r for c in operand.coords for r in regs_in(c))
    return ()
