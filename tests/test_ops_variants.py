"""Speed variants of transpose (float4 accesses through a swizzled tile, several tiles per CTA,
cache operators) and row_reduce (unroll 16, several long rows per CTA, ld.nc and L1 eviction
hints): they assemble without spills, run correctly on the CPU emulator at shapes that are no
tile multiples (every alignment of M and N), reach SASS with the intended access widths and
hints, and the transposed tile's shared accesses are conflict-free. The defaults stay as
they were."""
import importlib.util

import numpy as np
import pytest

from ptxgen import emit_module, toolchain
from ptxgen.errors import PtxgenError
from ptxgen.ir.verify import verify_module
from ptxgen.ops.reduce import RowReduce
from ptxgen.ops.transpose import Transpose

needs_emu = pytest.mark.skipif(importlib.util.find_spec("ptxgen.emu") is None,
                               reason="the CPU emulator (ptxgen.emu) is not in this build")

def _t32(**kw):
    """The 32×32-tile transpose, 32×4 threads, 2-D grid, unless kw says otherwise."""
    return Transpose(**{"tile": 32, "block_rows": 4, "group": 0, **kw})


T_VARIANTS = [
    Transpose(), _t32(vec=1), _t32(vec=4), _t32(vec=4, block_rows=1), _t32(vec=4, block_rows=2),
    _t32(vec=4, block_rows=8), Transpose(vec=4, tile=64, block_rows=4),
    Transpose(vec=4, tile=64, block_rows=8), Transpose(vec=4, tile=64, block_rows=16),
    Transpose(vec=4, tile=64, block_rows=32), _t32(vec=4, store_cache="cs"),
    Transpose(vec=4, tile=64, block_rows=8, load_cache="nc", store_cache="cs"),
    Transpose(vec=4, tile=64, block_rows=8, tiles=2), _t32(vec=4, tiles=4),
    _t32(vec=4, block_rows=2, tiles=4), Transpose(vec=4, tile=64, block_rows=16, tiles=4),
    _t32(vec=1, store_cache="cs", load_cache="nc"),
    # grouped CTA order; group=2 and 3 leave a short last band on the test shapes
    Transpose(vec=4, tile=64, block_rows=8, group=2), _t32(vec=4, group=3), _t32(vec=1, group=2),
    Transpose(tile=64, block_rows=8, vec=1, group=32),
    Transpose(vec=4, tile=64, block_rows=8, tiles=2, group=3),
]
R_VARIANTS = [
    RowReduce("sum", unroll=16), RowReduce("sum", unroll=16, rows_per_cta=2),
    RowReduce("max", unroll=16, rows_per_cta=2), RowReduce("sum", rows_per_cta=4, unroll=4),
    RowReduce("sum", unroll=4, cache="nc"),
    RowReduce("sum", unroll=4, cache="nc", evict="no_allocate"),
    RowReduce("max", unroll=4, cache="nc", evict="no_allocate"),
    RowReduce("sum", threads=512, rows_per_cta=8, evict="evict_first"),
    RowReduce("sum", threads=1024, rows_per_cta=2, unroll=2),
    RowReduce("sum", threads=128, rows_per_cta=2, unroll=2, cache="cs"),
]
T_BIG = [{"M": 8192, "N": 8192}, {"M": 8191, "N": 8193}, {"M": 8192, "N": 8190}]
R_BIG = [{"M": 16384, "N": 8192}, {"M": 8192, "N": 1000}, {"M": 37, "N": 50001}]


def _label(op):
    keys = ("tile", "block_rows", "vec", "tiles", "group", "load_cache", "store_cache", "op",
            "threads", "unroll", "rows_per_cta", "cache", "evict")
    return ",".join(f"{k}={getattr(op, k)}" for k in keys if hasattr(op, k))


def _resources(op, dims, arch):
    shape = op.shape(**dims)
    asm = toolchain.assemble(emit_module(verify_module(op.build(shape, arch)), arch), arch)
    return asm, asm.resources[op.kernel_name()]


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("op", T_VARIANTS + R_VARIANTS, ids=_label)
def test_variants_assemble_without_spills(op, arch):
    for dims in (T_BIG if isinstance(op, Transpose) else R_BIG):
        _, r = _resources(op, dims, arch)
        assert r.registers > 0 and r.spills == 0 and r.stack_bytes == 0, (dims, r)


# -- the emulator ----------------------------------------------------------------------------
# M and N cover both alignments of each side (float4 or scalar fallback), partial tiles, a
# single row and grids with a partial last CTA
T_SHAPES = [{"M": 37, "N": 70}, {"M": 36, "N": 68}, {"M": 36, "N": 70}, {"M": 37, "N": 68},
            {"M": 1, "N": 33}, {"M": 130, "N": 65}, {"M": 64, "N": 200}]
R_SHAPES = [{"M": 5, "N": 3001}, {"M": 3, "N": 9001}, {"M": 7, "N": 2049}, {"M": 1, "N": 4099},
            {"M": 11, "N": 301}]


def _emulate(op, dims, seed):
    from ptxgen.emu.backend import run_operator
    shape = op.shape(**dims)
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    run_operator(op, shape, arrays, "sm_90")
    return op.check(shape, arrays)


@needs_emu
@pytest.mark.parametrize("op", T_VARIANTS + R_VARIANTS, ids=_label)
def test_variants_correct_on_emulator(op):
    for k, dims in enumerate(T_SHAPES if isinstance(op, Transpose) else R_SHAPES):
        ok, err = _emulate(op, dims, k)
        assert ok, (dims, err)


@needs_emu
def test_rows_past_m_are_not_written():
    """rows_per_cta=4 with M=5: the last CTA's groups past M reduce a clamped row but must not
    store it (out has exactly M elements; a stray store would land past the array)."""
    from ptxgen.emu.backend import run_operator
    op = RowReduce("sum", rows_per_cta=4, unroll=2)
    shape = op.shape(M=5, N=2100)
    arrays = op.make_inputs(shape, np.random.default_rng(0))
    arrays["out"] = np.full(8, np.nan, np.float32)[:5]        # the view's tail stays NaN
    base = arrays["out"].base
    run_operator(op, shape, arrays, "sm_90")
    assert op.check(shape, arrays)[0]
    assert np.isnan(base[5:]).all()


# -- SASS ----------------------------------------------------------------------------------------
def _mix(op, dims):
    asm, _ = _resources(op, dims, "sm_90")
    return toolchain.sass_mix(toolchain.disassemble(asm.cubin))[op.kernel_name()]


@pytest.mark.needs_nvdisasm
def test_transpose_vec4_moves_16_bytes_per_access():
    mix = _mix(Transpose(vec=4, tile=64, block_rows=8), {"M": 8192, "N": 8192})
    assert mix.get("LDG.E.128", 0) == 4 and mix.get("STG.E.128", 0) == 4
    assert mix.get("LDS.128", 0) == 4 and mix.get("STS", 0) == 16
    assert not {"LDG.E", "STG.E"} & set(mix)
    # x rows not 16-byte aligned (N odd): scalar loads, float4 stores (M % 4 == 0)
    mix = _mix(_t32(vec=4), {"M": 64, "N": 65})
    assert mix.get("LDG.E", 0) == 8 and "LDG.E.128" not in mix and mix.get("STG.E.128") == 2
    # out rows not aligned (M odd): float4 loads, scalar stores
    mix = _mix(_t32(vec=4), {"M": 63, "N": 64})
    assert mix.get("LDG.E.128") == 2 and mix.get("STG.E", 0) == 8


@pytest.mark.needs_nvdisasm
def test_cache_hints_reach_sass():
    mix = _mix(_t32(vec=4, load_cache="nc", store_cache="cs"), {"M": 64, "N": 64})
    assert "LDG.E.128.CONSTANT" in mix and "STG.E.EF.128" in mix
    mix = _mix(_t32(vec=1, store_cache="cs"), {"M": 64, "N": 64})
    assert "STG.E.EF" in mix
    mix = _mix(RowReduce("sum", cache="nc", evict="no_allocate"), {"M": 64, "N": 8192})
    assert mix.get("LDG.E.NA.128.CONSTANT") == 8
    mix = _mix(RowReduce("sum", unroll=16, rows_per_cta=2), {"M": 64, "N": 8192})
    assert mix.get("LDG.E.128") == 16


def test_eviction_hint_raises_the_ptx_version_for_sm_80():
    op = RowReduce("sum", evict="no_allocate")
    text = emit_module(op.build(op.shape(M=4, N=8192), "sm_80"), "sm_80")
    assert ".version 7.4" in text and "ld.global.L1::no_allocate.v4.f32" in text
    plain = emit_module(RowReduce("sum").build(op.shape(M=4, N=8192), "sm_80"), "sm_80")
    assert ".version 7.0" in plain


# -- shared-memory banks ---------------------------------------------------------------------
def _shared_accesses(op, dims):
    """[(instruction, BankConflicts)] of warp 0's first execution of each shared access, with
    the addresses the emulator computes."""
    from shared_access import first_shared_accesses
    shape = op.shape(**dims)
    module = verify_module(op.build(shape, "sm_90"))
    arrays = op.make_inputs(shape, np.random.default_rng(0))
    cfg = op.launch(shape)
    return first_shared_accesses(module, op.kernel_name(), cfg.grid, cfg.block,
                                 *op.kernel_args(shape, arrays))


@needs_emu
@pytest.mark.parametrize("op", [_t32(vec=4), _t32(vec=4, block_rows=1), Transpose(),
                                Transpose(vec=4, tile=64, block_rows=8),
                                Transpose(vec=4, tile=64, block_rows=4, tiles=2)], ids=_label)
def test_swizzled_tile_is_conflict_free(op):
    acc = _shared_accesses(op, {"M": 128, "N": 128})
    stores = [r for text, r in acc if " st.shared." in text]
    loads = [r for text, r in acc if " ld.shared.v4." in text]
    J = op.tile * op.tile // (128 * op.block_rows)
    assert len(stores) == 4 * J * op.tiles and len(loads) == J * op.tiles
    for text, r in acc:
        assert r.degree == 1.0, (text, r.wavefronts, r.ideal)


@needs_emu
def test_bank_check_sees_conflicts():
    """The same check finds the 32-way conflict of the unpadded scalar tile."""
    acc = _shared_accesses(_t32(vec=1, pad=0), {"M": 64, "N": 64})
    assert max(r.degree for _, r in acc) >= 16


# -- options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("make,msg", [
    (lambda: Transpose(vec=2), "vec must be 1, 4 or None"),
    (lambda: Transpose(vec=4, tile=64, block_rows=2), "needs block_rows from 4 to 32"),
    (lambda: Transpose(tiles=2), "above 1 only with vec=4"),
    (lambda: _t32(vec=4, block_rows=1, tiles=4), "more than 16"),
    (lambda: Transpose(group=-1), "group must be"),
    (lambda: Transpose(store_cache="nc"), "store_cache must be one of"),
    (lambda: RowReduce("sum", unroll=32), "unroll must be"),
    (lambda: RowReduce("sum", cache="cs", evict="no_allocate"), "combines with cache='nc'"),
    (lambda: RowReduce("sum", evict="keep"), "evict must be"),
    (lambda: RowReduce("sum", threads=128, rows_per_cta=4), "at least 64 threads per row"),
])
def test_bad_variant_options_are_one_line_errors(make, msg):
    with pytest.raises(PtxgenError, match=msg) as e:
        make()
    assert "\n" not in str(e.value)


def test_defaults():
    """The transpose default is the fastest on the H200 (docs/PERF.md): 64×64 tile, 32×8
    threads, float4 accesses when rows are 16-byte aligned (scalar otherwise), CTAs walked 128
    tile rows at a time."""
    t = Transpose()
    assert (t.tile, t.block_rows, t.pad, t.vec, t.tiles, t.group, t.load_cache,
            t.store_cache) == (64, 8, 1, None, 1, 128, None, None)
    assert t.vec_for({"M": 64, "N": 64}) == 4 and t.vec_for({"M": 64, "N": 66}) == 1
    assert t.launch({"M": 130, "N": 64}).grid == (3, 1, 1)
    r = RowReduce("sum")
    assert (r.threads, r.unroll, r.rows_per_cta, r.cache, r.evict) == (256, 8, 1, None, None)
    assert r.per_row({"M": 1, "N": 8192}) == 256 and r.per_row({"M": 1, "N": 1000}) == 32
    text = emit_module(t.build({"M": 64, "N": 64}))
    assert "ld.global.v4.f32" in text and ".reqntid 32, 8, 1" in text
    text = emit_module(t.build({"M": 64, "N": 65}))
    assert ".v4" not in text and ".f32 tile[4160]" in text      # scalar, 64 × 65 floats


def test_rows_per_cta_launch():
    op = RowReduce("sum", rows_per_cta=2)
    assert op.per_row({"M": 9, "N": 8192}) == 128
    assert op.launch({"M": 9, "N": 8192}).grid == (5, 1, 1)
    assert op.launch({"M": 9, "N": 1000}).grid == (2, 1, 1)        # warp plan: 8 rows a CTA
    assert Transpose(vec=4, tile=64, block_rows=8, tiles=2, group=0).launch(
        {"M": 100, "N": 300}).grid == (3, 2, 1)


@pytest.mark.needs_nvdisasm
def test_benchmark_variants_assemble():
    """Every variant benchmarks/operators.py times is valid for its cases."""
    import operators as mod
    for name, dims in mod.CASES:
        for label, op in mod.VARIANTS.get(name, []):
            if name in ("transpose", "row_reduce", "row_max"):
                _, r = _resources(op, dims, "sm_90")
                assert r.spills == 0, (name, label, dims, r)
