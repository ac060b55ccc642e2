"""PTX scalar types as IR types.

A type knows its PTX spelling, its width and its kind, which is all the emitter, the
verifier and the emulator need to agree on operand rules.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Type:
    name: str          # PTX spelling without the dot: "f32"
    bits: int
    kind: str          # "pred", "bits", "uint", "sint", "float"

    def __str__(self):
        return self.name

    @property
    def ptx(self):
        return "." + self.name

    @property
    def nbytes(self):
        return max(1, self.bits // 8)

    @property
    def is_float(self):
        return self.kind == "float"

    @property
    def is_int(self):
        return self.kind in ("uint", "sint")

    @property
    def is_signed(self):
        return self.kind == "sint"


_ALL = [
    Type("pred", 1, "pred"),
    Type("b8", 8, "bits"), Type("b16", 16, "bits"), Type("b32", 32, "bits"), Type("b64", 64, "bits"),
    Type("u8", 8, "uint"), Type("u16", 16, "uint"), Type("u32", 32, "uint"), Type("u64", 64, "uint"),
    Type("s8", 8, "sint"), Type("s16", 16, "sint"), Type("s32", 32, "sint"), Type("s64", 64, "sint"),
    Type("f16", 16, "float"), Type("bf16", 16, "float"), Type("f32", 32, "float"),
    Type("f64", 64, "float"),
    Type("f16x2", 32, "bits"), Type("bf16x2", 32, "bits"),
    # tensor-core formats: tf32 lives in a 32-bit register (low 13 mantissa bits unused); the
    # 8-bit floats (sm_89+) travel in pairs (x2) in 16-bit registers, or in 32-bit ones (x4)
    Type("tf32", 32, "float"), Type("e4m3", 8, "float"), Type("e5m2", 8, "float"),
    Type("e4m3x2", 16, "bits"), Type("e5m2x2", 16, "bits"),
]
TYPES = {t.name: t for t in _ALL}

pred = TYPES["pred"]
b8, b16, b32, b64 = (TYPES[n] for n in ("b8", "b16", "b32", "b64"))
u8, u16, u32, u64 = (TYPES[n] for n in ("u8", "u16", "u32", "u64"))
s8, s16, s32, s64 = (TYPES[n] for n in ("s8", "s16", "s32", "s64"))
f16, bf16, f32, f64 = (TYPES[n] for n in ("f16", "bf16", "f32", "f64"))
tf32, e4m3, e5m2 = (TYPES[n] for n in ("tf32", "e4m3", "e5m2"))
e4m3x2, e5m2x2 = TYPES["e4m3x2"], TYPES["e5m2x2"]
FP8 = frozenset({"e4m3", "e5m2", "e4m3x2", "e5m2x2"})


def type_of(name):
    """Type from its PTX spelling, with or without the leading dot (None when not a type)."""
    return TYPES.get(name.lstrip("."))


def compatible(reg_type, op_type):
    """Whether a register declared reg_type may be an operand of an instruction typed op_type.

    PTX allows any register of the same width for bit/int types ('.b32' registers in '.u32'
    instructions); floating-point instructions need a float register of the same width or a
    bit-type register of that width.
    """
    if reg_type == op_type:
        return True
    if reg_type.kind == "pred" or op_type.kind == "pred":
        return False
    if reg_type.bits != op_type.bits:
        return False
    if op_type.is_float or reg_type.is_float:
        return reg_type.kind == "bits" or op_type.kind == "bits"
    return True


# Declaration prefix per register type: emitted '.reg' groups read like NVVM's output.
REG_PREFIX = {
    "pred": "p", "b8": "rc", "u8": "rc", "s8": "rc",
    "b16": "rs", "u16": "rs", "s16": "rs", "f16": "h", "bf16": "hb",
    "b32": "r", "u32": "r", "s32": "r", "f16x2": "hh", "bf16x2": "hhb", "tf32": "rt",
    "e4m3": "rc", "e5m2": "rc", "e4m3x2": "rs", "e5m2x2": "rs",
    "b64": "rd", "u64": "rd", "s64": "rd",
    "f32": "f", "f64": "fd",
}
