"""Fragment layouts, matrix descriptors and swizzles against the PTX ISA's tables."""
import numpy as np
import pytest

from ptxgen.ir import fragments as F


@pytest.mark.parametrize("key", sorted(F.MMA_KINDS))
def test_every_element_held_exactly_once(key):
    kind = F.MMA_KINDS[key]
    for fn, rows, cols, count in ((lambda l, i: F.mma_a_coord(kind, l, i), kind.m, kind.k,
                                   kind.a_elems),
                                  (lambda l, i: F.mma_b_coord(kind, l, i), kind.k, kind.n,
                                   kind.b_elems),
                                  (F.mma_c_coord, kind.m, kind.n, kind.c_elems)):
        t = F.coord_table(fn, count)
        seen = np.zeros((rows, cols), int)
        np.add.at(seen, (t[..., 0], t[..., 1]), 1)
        assert (seen == 1).all()


def test_isa_figure_entries():
    """Spot values read off the ISA's fragment figures (PTX ISA 9.0, 9.7.14.5.x)."""
    k16 = F.mma_kind("m16n8k16", "bf16")
    # m16n8k16 A: lane 0 holds a0,a1 = (0,0),(0,1); a2 = (8,0); a4 = (0,8); a7 = (8,9)
    assert [F.mma_a_coord(k16, 0, i) for i in (0, 1, 2, 4, 7)] == \
        [(0, 0), (0, 1), (8, 0), (0, 8), (8, 9)]
    # lane 5: groupID 1, threadID_in_group 1 → a0 = (1, 2), a6 = (9, 10)
    assert F.mma_a_coord(k16, 5, 0) == (1, 2) and F.mma_a_coord(k16, 5, 6) == (9, 10)
    # B: lane 6 (group 1, tig 2) holds b0 = (4, 1), b3 = (13, 1)
    assert F.mma_b_coord(k16, 6, 0) == (4, 1) and F.mma_b_coord(k16, 6, 3) == (13, 1)
    # C: lane 31 holds c3 = (15, 7)
    assert F.mma_c_coord(31, 3) == (15, 7)
    tf = F.mma_kind("m16n8k8", "tf32")
    # tf32 A: a1 is 8 rows below a0, a2 four columns right
    assert [F.mma_a_coord(tf, 9, i) for i in range(4)] == [(2, 1), (10, 1), (2, 5), (10, 5)]
    assert [F.mma_b_coord(tf, 9, i) for i in range(2)] == [(1, 2), (5, 2)]
    s8 = F.mma_kind("m16n8k32", "s8")
    # s8 A: four bytes per register; a4..a7 are rows +8, a8.. columns +16
    assert [F.mma_a_coord(s8, 1, i) for i in (0, 3, 4, 8, 15)] == \
        [(0, 4), (0, 7), (8, 4), (0, 20), (8, 23)]
    assert F.mma_b_coord(s8, 1, 5) == (21, 0)
    assert (k16.a_regs, k16.b_regs, k16.c_regs("f32"), k16.c_regs("f16")) == (4, 2, 4, 2)
    assert (s8.a_regs, s8.b_regs, tf.a_regs, tf.b_regs) == (4, 2, 4, 2)


def test_ldmatrix_x4_gives_the_mma_a_fragment():
    """ldmatrix.x4 of a 16×16 tile (matrices: rows 0-7/cols 0-7, rows 8-15/cols 0-7, rows 0-7/
    cols 8-15, rows 8-15/cols 8-15) yields exactly the m16n8k16 A registers — the reason the
    two exist together."""
    k16 = F.mma_kind("m16n8k16", "f16")
    origin = [(0, 0), (8, 0), (0, 8), (8, 8)]
    for lane in range(32):
        for reg in range(4):
            m, r, c = F.ldmatrix_coord(lane, reg)
            r0, c0 = origin[m]
            assert F.mma_a_coord(k16, lane, 2 * reg) == (r0 + r, c0 + c)
            assert F.mma_a_coord(k16, lane, 2 * reg + 1) == (r0 + r, c0 + c + 1)


@pytest.mark.parametrize("n", [8, 64, 256])
def test_wgmma_accumulator_layout(n):
    t = np.array([[F.wgmma_d_coord(th, i) for i in range(F.wgmma_d_regs(n))]
                  for th in range(128)])
    seen = np.zeros((64, n), int)
    np.add.at(seen, (t[..., 0], t[..., 1]), 1)
    assert (seen == 1).all()
    # warp 2 owns rows 32..47; thread 64+5 holds d0 at (33, 2) and d4 at (33, 10)
    assert F.wgmma_d_coord(69, 0) == (33, 2) and F.wgmma_d_coord(69, 4) == (33, 10)
    assert F.wgmma_d_coord(69, 2) == (41, 2)


def test_descriptor_round_trip_and_fields():
    d = F.encode_descriptor(0x1A400, lbo=16, sbo=1024, swizzle=128)
    assert d & 0x3FFF == 0x1A40 and (d >> 16) & 0x3FFF == 1 and (d >> 32) & 0x3FFF == 64
    assert d >> 62 == 1
    assert F.decode_descriptor(d) == F.Descriptor(0x1A400, 16, 1024, 0, 128)
    for sw, code in ((None, 0), (128, 1), (64, 2), (32, 3)):
        assert F.encode_descriptor(0, 16, 256, sw) >> 62 == code
        assert F.decode_descriptor(F.encode_descriptor(512, 32, 256, sw)).swizzle == sw
    assert F.descriptor_high(16, 1024, 128) | (0x1A400 >> 4) == d
    with pytest.raises(ValueError, match="multiple of 16"):
        F.encode_descriptor(8, 16, 16)
    with pytest.raises(ValueError, match="swizzle"):
        F.encode_descriptor(0, 16, 16, swizzle=16)


def test_swizzle_tables():
    # 128-byte swizzle: row r of 128 bytes has its 16-byte chunk c at chunk c ^ (r % 8)
    for r in range(16):
        for c in range(8):
            assert F.swizzle(r * 128 + c * 16 + 3, 128) == r * 128 + ((c ^ (r % 8)) * 16) + 3
    # 64-byte: chunks 0..3 of each 64-byte row XOR (address bits 7-8); 32-byte: bit 4 ^= bit 7
    assert [F.swizzle(x, 64) for x in (0, 128, 256, 384, 512)] == [0, 144, 288, 432, 512]
    assert [F.swizzle(x, 32) for x in (0, 16, 128, 144, 256)] == [0, 16, 144, 128, 256]
    assert F.swizzle(12345, None) == 12345
    a = np.arange(4096)
    for mode in (32, 64, 128):
        s = F.swizzle(a, mode)
        assert sorted(s) == list(a) and (F.swizzle(s, mode) == a).all()   # a bijection, involution


def test_descriptor_offsets_k_major_128b():
    """K-major bf16 tile of 64 rows × 64 k (128-byte rows, 8-row atoms SBO=1024 apart), as TMA
    with 128-byte swizzle writes it: element (r, k) lives at swizzle(r*128 + 2k)."""
    d = F.decode_descriptor(F.encode_descriptor(2048, 16, 1024, 128))
    r, k = np.meshgrid(np.arange(64), np.arange(16), indexing="ij")
    got = F.descriptor_offset(d, r, k, 2)
    assert (got == F.swizzle(2048 + r * 128 + 2 * k, 128)).all()
    # advancing K by 16 inside the atom is start + 32 bytes
    d2 = F.decode_descriptor(F.encode_descriptor(2048 + 32, 16, 1024, 128))
    assert (F.descriptor_offset(d2, r, k, 2) == F.descriptor_offset(d, r, k + 16, 2)).all()


def test_descriptor_offsets_no_swizzle_core_matrices():
    """Interleaved (no swizzle) K-major: 8×16-byte core matrices; LBO steps along K between
    core matrices, SBO along M/N."""
    d = F.Descriptor(start=0, lbo=128, sbo=256, base_offset=0, swizzle=None)
    assert F.descriptor_offset(d, 0, 7, 2) == 14
    assert F.descriptor_offset(d, 0, 8, 2) == 128
    assert F.descriptor_offset(d, 3, 0, 2) == 48
    assert F.descriptor_offset(d, 8, 0, 2) == 256
    # MN-major swizzled: 64 consecutive mn (128 bytes), k rows 128 bytes apart
    d = F.Descriptor(start=0, lbo=8192, sbo=1024, base_offset=0, swizzle=128)
    assert F.descriptor_offset(d, 5, 0, 2, k_major=False) == 10
    assert F.descriptor_offset(d, 0, 1, 2, k_major=False) == F.swizzle(128, 128) == 144
    assert F.descriptor_offset(d, 64, 0, 2, k_major=False) == 8192
    assert F.descriptor_offset(d, 0, 8, 2, k_major=False) == 1024
