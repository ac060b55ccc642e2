"""Where tensor-core operands live: fragment layouts, wgmma matrix descriptors, shared swizzles.

Pure data and functions (no GPU, no IR): the builder uses them to size operand lists, the
emulator to gather and scatter fragments, and kernel writers to know which lane holds which
element. Every layout is the PTX ISA's (PTX ISA 9.0, section 9.7.14.5 "Matrix Fragments for
mma.m16n8k*", 9.7.14.4 ldmatrix, 9.7.15.5 "Matrix Descriptor Format" and "Register Fragments"
of wgmma); the shared-memory layouts a descriptor addresses are the canonical ones CUTLASS
documents for GMMA (cute/arch/mma_sm90_desc.hpp), restated here in bytes.

Notation of the ISA: in a warp, groupID = lane >> 2 and threadID_in_group = lane % 4. A fragment
element index i counts the elements a lane holds, packed low half first into 32-bit registers.
"""
from dataclasses import dataclass

import numpy as np

# -- mma.sync shapes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MmaKind:
    """One mma.sync shape with one input type: sizes and registers per lane."""
    shape: str          # "m16n8k16"
    ab: str             # input element type: "bf16", "f16", "tf32", "s8", "u8"
    accs: tuple         # accumulator types allowed
    m: int
    n: int
    k: int
    elem_bits: int

    @property
    def a_elems(self):
        return self.m * self.k // 32

    @property
    def b_elems(self):
        return self.k * self.n // 32

    @property
    def a_regs(self):
        return self.a_elems * self.elem_bits // 32

    @property
    def b_regs(self):
        return self.b_elems * self.elem_bits // 32

    @property
    def c_elems(self):
        return self.m * self.n // 32

    def c_regs(self, acc):
        """32-bit registers of C/D per lane: f16 accumulators pack two elements per register."""
        return self.c_elems // 2 if acc == "f16" else self.c_elems


MMA_KINDS = {(k.shape, k.ab): k for k in (
    MmaKind("m16n8k16", "bf16", ("f32",), 16, 8, 16, 16),
    MmaKind("m16n8k16", "f16", ("f32", "f16"), 16, 8, 16, 16),
    MmaKind("m16n8k8", "bf16", ("f32",), 16, 8, 8, 16),
    MmaKind("m16n8k8", "f16", ("f32", "f16"), 16, 8, 8, 16),
    MmaKind("m16n8k8", "tf32", ("f32",), 16, 8, 8, 32),
    MmaKind("m16n8k4", "tf32", ("f32",), 16, 8, 4, 32),
    MmaKind("m16n8k32", "s8", ("s32",), 16, 8, 32, 8),
    MmaKind("m16n8k32", "u8", ("s32",), 16, 8, 32, 8),
)}


def mma_kind(shape, ab):
    """The MmaKind of (shape, input type); ValueError naming the known ones otherwise."""
    kind = MMA_KINDS.get((shape, ab))
    if kind is None:
        known = ", ".join(f"{s}.{t}" for s, t in sorted(MMA_KINDS))
        raise ValueError(f"mma.sync {shape} with {ab} inputs is not supported (known: {known})")
    return kind


def _group(lane):
    return lane >> 2, lane % 4


def mma_a_coord(kind, lane, i):
    """(row, col) in the m×k matrix A of element i held by `lane` (row-major A)."""
    g, t = _group(lane)
    if kind.elem_bits == 16 and kind.k == 16:
        return g + 8 * ((i >> 1) & 1), t * 2 + (i & 1) + 8 * (i >= 4)
    if kind.elem_bits == 16 and kind.k == 8:
        return g + 8 * (i >= 2), t * 2 + (i & 1)
    if kind.elem_bits == 32 and kind.k == 8:
        return g + 8 * (i & 1), t + 4 * (i >= 2)
    if kind.elem_bits == 32 and kind.k == 4:
        return g + 8 * i, t
    if kind.elem_bits == 8:
        return g + 8 * ((i >> 2) & 1), t * 4 + (i & 3) + 16 * (i >= 8)
    raise ValueError(f"no A layout for {kind.shape}.{kind.ab}")


def mma_b_coord(kind, lane, i):
    """(row, col) in the k×n matrix B of element i held by `lane` (column-major B)."""
    g, t = _group(lane)
    if kind.elem_bits == 16:
        return t * 2 + (i & 1) + 8 * (i >= 2), g
    if kind.elem_bits == 32 and kind.k == 8:
        return t + 4 * i, g
    if kind.elem_bits == 32 and kind.k == 4:
        return t, g
    if kind.elem_bits == 8:
        return t * 4 + (i & 3) + 16 * (i >= 4), g
    raise ValueError(f"no B layout for {kind.shape}.{kind.ab}")


def mma_c_coord(lane, i):
    """(row, col) in the 16×8 accumulator C/D of element i held by `lane` (every m16n8 shape)."""
    g, t = _group(lane)
    return g + 8 * (i >> 1), t * 2 + (i & 1)


def coord_table(fn, count):
    """int array [32 lanes, count elements, 2] of fn(lane, i) — the emulator's gather index."""
    return np.array([[fn(lane, i) for i in range(count)] for lane in range(32)], dtype=np.int64)


# -- ldmatrix / stmatrix ---------------------------------------------------------------------------


def ldmatrix_coord(lane, reg):
    """ldmatrix .m8n8 .b16 (no .trans): register `reg` of `lane` holds row lane/4, columns
    2*(lane%4) and +1 of matrix `reg`; lanes 8*j..8*j+7 give the row addresses of matrix j."""
    return reg, lane >> 2, 2 * (lane % 4)


# -- wgmma -----------------------------------------------------------------------------------------

WGMMA_N = tuple(range(8, 257, 8))


def wgmma_d_regs(n, acc="f32"):
    """Accumulator registers per thread of wgmma m64nNk16."""
    return n // 2 if acc in ("f32", "s32") else n // 4


def wgmma_d_coord(thread, i):
    """(row, col) in the 64×N accumulator of element i held by warpgroup thread 0..127: each
    warp owns 16 rows; along N the m16n8 C layout repeats every 4 elements."""
    warp, lane = divmod(thread, 32)
    r, c = mma_c_coord(lane, i % 4)
    return 16 * warp + r, 8 * (i // 4) + c


def wgmma_a_coord(thread, i):
    """(row, col) in the 64×16 A (16-bit types, A from registers) of element i of thread."""
    warp, lane = divmod(thread, 32)
    r, c = mma_a_coord(MMA_KINDS[("m16n8k16", "bf16")], lane, i)
    return 16 * warp + r, c


# -- matrix descriptors (wgmma) ------------------------------------------------------------------

SWIZZLE_CODE = {None: 0, 128: 1, 64: 2, 32: 3}     # descriptor bits 62-63
SWIZZLE_OF_CODE = {v: k for k, v in SWIZZLE_CODE.items()}


@dataclass(frozen=True)
class Descriptor:
    """A decoded wgmma shared-memory matrix descriptor (byte quantities)."""
    start: int          # shared address (bits 0-13 hold start >> 4, so 18 bits of address)
    lbo: int            # leading dimension byte offset
    sbo: int            # stride dimension byte offset
    base_offset: int    # bits 49-51: pattern start when the matrix is not swizzle-aligned
    swizzle: object     # None, 32, 64 or 128


def _field(value, what, bits=14):
    if value % 16 or not 0 <= value >> 4 < (1 << bits):
        raise ValueError(f"descriptor {what} {value} must be a multiple of 16 below "
                         f"{16 << bits}")
    return value >> 4


def encode_descriptor(start, lbo, sbo, swizzle=None, base_offset=0):
    """The 64-bit matrix descriptor: start address, leading/stride byte offsets (multiples of
    16 bytes), swizzle mode (None, 32, 64, 128 bytes) and the 3-bit base offset."""
    if swizzle not in SWIZZLE_CODE:
        raise ValueError(f"swizzle must be None, 32, 64 or 128, not {swizzle!r}")
    if not 0 <= base_offset < 8:
        raise ValueError(f"descriptor base offset {base_offset} must be 0..7")
    return (_field(start & 0x3FFFF, "start address") | _field(lbo, "leading byte offset") << 16
            | _field(sbo, "stride byte offset") << 32 | base_offset << 49
            | SWIZZLE_CODE[swizzle] << 62)


def decode_descriptor(desc):
    desc = int(desc)
    return Descriptor(start=(desc & 0x3FFF) << 4, lbo=((desc >> 16) & 0x3FFF) << 4,
                      sbo=((desc >> 32) & 0x3FFF) << 4, base_offset=(desc >> 49) & 7,
                      swizzle=SWIZZLE_OF_CODE[(desc >> 62) & 3])


def descriptor_high(lbo, sbo, swizzle=None, base_offset=0):
    """The descriptor without its start address: what a kernel ORs with (addr >> 4)."""
    return encode_descriptor(0, lbo, sbo, swizzle, base_offset)


# -- shared-memory swizzles ----------------------------------------------------------------------

_SWIZZLE_MASK = {None: 0, 32: 1, 64: 3, 128: 7}


def swizzle(offset, mode):
    """Byte address after the TMA / wgmma swizzle of `mode` bytes (None, 32, 64, 128): the 16-byte
    chunk index (address bits 4..6) is XORed with address bits 7..9, as many bits as the mode has
    chunks (CUTLASS Swizzle<3,4,3>, <2,4,3>, <1,4,3>). Works on ints and numpy arrays."""
    if mode not in _SWIZZLE_MASK:
        raise ValueError(f"swizzle mode must be None, 32, 64 or 128, not {mode!r}")
    return offset ^ (((offset >> 7) & _SWIZZLE_MASK[mode]) << 4)


def descriptor_offset(d, mn, k, elem_bytes, k_major=True):
    """Shared address of element (mn, k) of the matrix a descriptor describes, swizzle applied.

    mn is the M (for A) or N (for B) index, k the reduction index; 'K-major' means consecutive k
    are adjacent in memory (no transpose). Canonical layouts in bytes (T = 16 bytes, W = swizzle
    width): K-major, no swizzle: 8×16-byte core matrices, rows 16 B apart, 8-row groups SBO
    apart, 16-byte column chunks LBO apart; K-major swizzled: rows W apart, 8-row groups SBO
    apart; MN-major, no swizzle: 16-byte runs along mn, 8 k-rows 16 B apart, next mn run SBO,
    next 8 k LBO; MN-major swizzled: W-byte runs along mn (next run LBO), k-rows W apart, next 8 k
    SBO. The swizzle XOR acts on the absolute address, which is why atoms are W*8-aligned."""
    mn, k = np.asarray(mn), np.asarray(k)
    per16 = 16 // elem_bytes
    w = d.swizzle
    if k_major:
        if w is None:
            off = (mn % 8) * 16 + (mn // 8) * d.sbo + (k % per16) * elem_bytes + \
                (k // per16) * d.lbo
        else:
            off = (mn % 8) * w + (mn // 8) * d.sbo + k * elem_bytes
    else:
        if w is None:
            off = (mn % per16) * elem_bytes + (mn // per16) * d.sbo + (k % 8) * 16 + \
                (k // 8) * d.lbo
        else:
            run = w // elem_bytes
            off = (mn % run) * elem_bytes + (mn // run) * d.lbo + (k % 8) * w + (k // 8) * d.sbo
    if d.base_offset:
        raise ValueError("descriptors with a non-zero base offset are not modelled; align the "
                         "matrix to its swizzle pattern (8 × the swizzle width)")
    return swizzle(d.start + off, w)
