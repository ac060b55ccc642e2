"""How PTX values live in numpy arrays.

Every register is one numpy array with an element per thread, holding the register's bits in the
numpy dtype of its declared type. An instruction reads a register as the dtype of its own type:
same width is a free `.view`, a different width (ld/st/cvt allow wider registers) converts.
bf16 has no numpy dtype: its values travel as uint16 bit patterns and arithmetic converts them
through float64 (see fp.py).
"""
import numpy as np

from . import fp

STORAGE = {
    "pred": np.dtype(bool),
    "b8": np.dtype(np.uint8), "u8": np.dtype(np.uint8), "s8": np.dtype(np.int8),
    "b16": np.dtype(np.uint16), "u16": np.dtype(np.uint16), "s16": np.dtype(np.int16),
    "b32": np.dtype(np.uint32), "u32": np.dtype(np.uint32), "s32": np.dtype(np.int32),
    "b64": np.dtype(np.uint64), "u64": np.dtype(np.uint64), "s64": np.dtype(np.int64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16), "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64), "f16x2": np.dtype(np.uint32), "bf16x2": np.dtype(np.uint32),
    "b128": np.dtype(np.uint64),
    # tensor-core formats travel as their bit patterns, like bf16
    "tf32": np.dtype(np.uint32), "e4m3": np.dtype(np.uint8), "e5m2": np.dtype(np.uint8),
    "e4m3x2": np.dtype(np.uint16), "e5m2x2": np.dtype(np.uint16),
}
UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
            8: np.dtype(np.uint64)}
SIGNED = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32),
          8: np.dtype(np.int64)}
FLOAT_OF_WIDTH = {2: np.dtype(np.float16), 4: np.dtype(np.float32), 8: np.dtype(np.float64)}


def storage(type_):
    return STORAGE[type_.name]


def convert(v, dt):
    """v (array) as dtype dt: a view when widths match, otherwise a numeric cast, which for
    integers truncates or sign/zero-extends by v's own signedness (PTX's rule for ld/st/cvt)."""
    if v.dtype == dt:
        return v
    if v.dtype.itemsize == dt.itemsize:
        return v.view(dt)
    if v.dtype == bool or dt == bool:
        return v.astype(dt)
    if v.dtype.kind == "f" or dt.kind == "f":
        # width-changing move of float bits: go through same-width integers
        src = v.view(UNSIGNED[v.dtype.itemsize]) if v.dtype.kind == "f" else v
        out = src.astype(UNSIGNED[dt.itemsize])
        return out.view(dt)
    return v.astype(dt)


def const(value, type_):
    """A numpy scalar holding immediate `value` as an operand of type `type_`.

    Integers wrap to the type's width; a float immediate in an integer-typed instruction means
    its bit pattern (mov.b32 %r, 0f3F800000); an integer immediate of a 16-bit float type is a
    bit pattern (PTX has no f16 literals)."""
    dt = storage(type_)
    name = type_.name
    if dt == bool:
        return np.bool_(bool(value))
    if isinstance(value, float) and dt.kind in "ui":
        bits = float_bits(value, dt.itemsize)
        return np.array(bits, UNSIGNED[dt.itemsize]).view(dt)[()]
    if name in ("f16", "bf16") and not isinstance(value, float):
        return np.array(int(value) & 0xFFFF, np.uint16).view(dt)[()]
    if name == "bf16":
        return fp.to_bf16(np.array([value], np.float64))[0]
    if dt.kind == "f":
        return dt.type(value)
    bits = int(value) & ((1 << (8 * dt.itemsize)) - 1)
    return np.array(bits, UNSIGNED[dt.itemsize]).view(dt)[()]


def float_bits(value, nbytes):
    """Bits of value rounded to the float format of nbytes (out of range: infinity)."""
    with np.errstate(over="ignore"):
        return int(np.array(value, FLOAT_OF_WIDTH[nbytes]).view(UNSIGNED[nbytes]))


def literal_bits(text):
    """(bits, nbytes) of a PTX hexadecimal float literal such as 0f7FFFFFFF or -0d8000…,
    the form the parser keeps as text when the value has a NaN payload."""
    t = text.strip()
    neg = t.startswith("-")
    t = t.lstrip("-")
    if len(t) < 3 or t[0] != "0" or t[1] not in "fFdD":
        return None
    try:
        bits = int(t[2:], 16)
    except ValueError:
        return None
    nbytes = 4 if t[1] in "fF" else 8
    if neg:
        bits ^= 1 << (8 * nbytes - 1)
    return bits, nbytes


def to_f64(v, type_name):
    """Values of a float-typed operand as float64 (exact)."""
    if type_name == "bf16":
        return fp.bf16_to_f64(v)
    return np.asarray(v).astype(np.float64)


def from_f64(x, type_name, mode="rn"):
    """float64 values (the exact result, or rounded to odd) → the storage of a float type."""
    if type_name == "f64":
        return np.asarray(x, np.float64)
    return fp.to_format(x, type_name, mode)


def int_range(dt):
    info = np.iinfo(dt)
    return int(info.min), int(info.max)
