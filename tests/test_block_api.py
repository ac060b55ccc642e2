"""The Triton-style block API: a vector add, a saxpy and row softmaxes in a few lines each,
lowered to IR that ptxas accepts without spills, vectorized where the offsets prove it, and
correct on the CPU emulator for sizes that are not block multiples."""
import importlib.util

import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.errors import PtxgenError
from ptxgen.frontends import block as bk

needs_emu = pytest.mark.skipif(importlib.util.find_spec("ptxgen.emu") is None,
                               reason="the CPU emulator (ptxgen.emu) is not in this build")
NEG_INF = float("-inf")


@bk.kernel(num_warps=4)
def vadd(x: bk.pointer, y: bk.pointer, out: bk.pointer, n: bk.int32, BLOCK: bk.constexpr):
    offs = bk.program_id(0) * BLOCK + bk.arange(0, BLOCK)
    mask = offs < n
    bk.store(out + offs, bk.load(x + offs, mask=mask) + bk.load(y + offs, mask=mask), mask=mask)


@bk.kernel(num_warps=4)
def saxpy(a: bk.float32, x: bk.pointer, y: bk.pointer, out: bk.pointer, n: bk.int32,
          BLOCK: bk.constexpr):
    offs = bk.program_id(0) * BLOCK + bk.arange(0, BLOCK)
    m = offs < n
    bk.store(out + offs, a * bk.load(x + offs, mask=m) + bk.load(y + offs, mask=m), mask=m)


@bk.kernel(num_warps=4)
def softmax(x: bk.pointer, out: bk.pointer, N: bk.int32, BLOCK: bk.constexpr):
    row = bk.program_id(0) * N
    cols = bk.arange(0, BLOCK)
    v = bk.load(x + row + cols, mask=cols < N, other=NEG_INF)
    e = bk.exp(v - bk.max(v, axis=0))
    bk.store(out + row + cols, e / bk.sum(e, axis=0), mask=cols < N)


@bk.kernel(num_warps=2)
def softmax_rows(x: bk.pointer, out: bk.pointer, M: bk.int32, N: bk.int32, R: bk.constexpr,
                 BLOCK: bk.constexpr):
    rows = bk.program_id(0) * R + bk.arange(0, R)
    cols = bk.arange(0, BLOCK)
    offs = rows[:, None] * N + cols[None, :]
    m = (rows[:, None] < M) & (cols[None, :] < N)
    v = bk.load(x + offs, mask=m, other=NEG_INF)
    e = bk.exp(v - bk.max(v, axis=1)[:, None])
    bk.store(out + offs, e / bk.sum(e, axis=1)[:, None], mask=m)


@bk.kernel(num_warps=4)
def row_sum(x: bk.pointer, out: bk.pointer, N: bk.int32, BLOCK: bk.constexpr):
    row = x + bk.program_id(0) * N
    acc = bk.zeros([BLOCK])
    for start in bk.range(0, N, BLOCK):
        cols = start + bk.arange(0, BLOCK)
        acc += bk.load(row + cols, mask=cols < N)
    bk.store(out + bk.program_id(0), bk.sum(acc))


@bk.kernel(num_warps=4)
def col_max(x: bk.pointer, out: bk.pointer, M: bk.int32, N: bk.int32, BM: bk.constexpr,
            BN: bk.constexpr):
    cols = bk.program_id(0) * BN + bk.arange(0, BN)
    acc = bk.full([BN], NEG_INF)
    for r0 in bk.range(0, M, BM):
        rows = r0 + bk.arange(0, BM)
        m = (rows[:, None] < M) & (cols[None, :] < N)
        t = bk.load(x + rows[:, None] * N + cols[None, :], mask=m, other=NEG_INF)
        acc.assign(bk.maximum(acc, bk.max(t, axis=0)))
    bk.store(out + cols, acc, mask=cols < N)


BUILDS = [(vadd, dict(BLOCK=1024)), (vadd, dict(BLOCK=1024, hints={"n": 16})),
          (saxpy, dict(BLOCK=2048)), (softmax, dict(BLOCK=1024)),
          (softmax, dict(BLOCK=4096, num_warps=8, hints={"N": 4})),
          (softmax_rows, dict(R=4, BLOCK=256)), (row_sum, dict(BLOCK=512)),
          (col_max, dict(BM=8, BN=512))]


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", range(len(BUILDS)))
def test_assembles_without_spills(case, arch):
    k, kw = BUILDS[case]
    r = toolchain.assemble(k.ptx(arch, **kw), arch).resources[k.name]
    assert r.registers > 0 and r.spills == 0, r


def test_contiguous_offsets_become_vector_accesses():
    # 1024 elements over 128 threads: 2 float4 groups per thread and array
    text = vadd.ptx(BLOCK=1024, hints={"n": 16})
    assert text.count("ld.global.v4.f32") == 4 and text.count("st.global.v4.f32") == 2
    assert "ld.global.f32" not in text          # the mask is constant over each float4
    # without the hint a group may straddle n: vector when all lanes are in, else per element
    text = vadd.ptx(BLOCK=1024)
    assert text.count("ld.global.v4.f32") == 4 and text.count("ld.global.f32") == 16


def test_unaligned_row_start_falls_back_to_scalar_accesses():
    """row = pid*N is not known to be a multiple of 4 unless N is promised to be."""
    assert "ld.global.v4" not in softmax.ptx(BLOCK=1024)
    assert softmax.ptx(BLOCK=1024, hints={"N": 4}).count("ld.global.v4.f32") == 2


@pytest.mark.needs_ptxas
def test_vector_add_matches_the_library_kernel_in_sass():
    """The block vadd and the hand-built add operator both load with 128-bit LDGs."""
    asm = toolchain.assemble(vadd.ptx("sm_90", BLOCK=1024), "sm_90")
    mix = toolchain.sass_mix(toolchain.disassemble(asm.cubin))["vadd"]
    assert any(o.startswith("LDG") and o.endswith(".128") for o in mix)
    assert any(o.startswith("STG") and o.endswith(".128") for o in mix)


def test_errors_are_one_line():
    with pytest.raises(PtxgenError, match="multiple of the CTA"):
        vadd.build(BLOCK=200)
    with pytest.raises(PtxgenError, match="needs a value"):
        vadd.build()
    with pytest.raises(PtxgenError, match="only valid inside a kernel"):
        bk.arange(0, 16)

    @bk.kernel
    def bad(x, n: bk.int32):
        pass
    with pytest.raises(PtxgenError, match="annotate parameter x"):
        bad.build()

    @bk.kernel
    def branchy(x: bk.pointer, n: bk.int32):
        if bk.program_id(0) < n:
            pass
    with pytest.raises(PtxgenError, match="no truth value"):
        branchy.build()


# -- the emulator ----------------------------------------------------------------------------
def _emulate(kernel, kw, grid, *args):
    from ptxgen.emu import emulate
    kw = dict(kw)
    warps = kw.pop("num_warps", None)
    m = kernel.build(num_warps=warps, **kw)
    emulate(m, kernel.name, grid, (kernel.threads(warps),), *args)


def _softmax_ref(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True).astype(np.float64))
    return e / e.sum(axis=-1, keepdims=True)


@needs_emu
@pytest.mark.parametrize("n", [1, 5, 1000, 4096, 5000])
@pytest.mark.parametrize("hinted", [False, True])
def test_vadd_and_saxpy_on_emulator(n, hinted):
    if hinted and n % 16:
        pytest.skip("the hint promises n % 16 == 0")
    rng = np.random.default_rng(n)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n, np.nan, np.float32)
    kw = dict(BLOCK=1024, hints={"n": 16} if hinted else None)
    _emulate(vadd, kw, (-(-n // 1024),), x, y, out, np.int32(n))
    assert np.array_equal(out, x + y)
    out[:] = np.nan
    _emulate(saxpy, dict(BLOCK=2048), (-(-n // 2048),), np.float32(-1.25), x, y, out,
             np.int32(n))
    assert np.allclose(out, -1.25 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)


@needs_emu
@pytest.mark.parametrize("M,N,kw", [(3, 1000, dict(BLOCK=1024)), (2, 1, dict(BLOCK=1024)),
                                    (3, 1021, dict(BLOCK=1024)),
                                    (2, 4096, dict(BLOCK=4096, num_warps=8, hints={"N": 4}))])
def test_softmax_on_emulator(M, N, kw):
    rng = np.random.default_rng(M * N)
    x = (rng.standard_normal((M, N)) * 3 + 50).astype(np.float32)
    out = np.full((M, N), np.nan, np.float32)
    _emulate(softmax, kw, (M,), x, out, np.int32(N))
    assert np.allclose(out, _softmax_ref(x), rtol=1e-5, atol=1e-9)


@needs_emu
@pytest.mark.parametrize("M,N", [(5, 200), (8, 256), (3, 1)])
def test_two_dimensional_softmax_on_emulator(M, N):
    rng = np.random.default_rng(M + N)
    x = (rng.standard_normal((M, N)) * 3).astype(np.float32)
    out = np.full((M, N), np.nan, np.float32)
    _emulate(softmax_rows, dict(R=4, BLOCK=256), (-(-M // 4),), x, out, np.int32(M),
             np.int32(N))
    assert np.allclose(out, _softmax_ref(x), rtol=1e-5, atol=1e-9)


@needs_emu
@pytest.mark.parametrize("M,N", [(3, 1000), (2, 5), (3, 2048)])
def test_runtime_loop_carries_accumulators(M, N):
    rng = np.random.default_rng(N)
    x = rng.standard_normal((M, N)).astype(np.float32)
    out = np.full(M, np.nan, np.float32)
    _emulate(row_sum, dict(BLOCK=512), (M,), x, out, np.int32(N))
    assert np.allclose(out, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    cm = np.full(N, np.nan, np.float32)
    _emulate(col_max, dict(BM=8, BN=512), (-(-N // 512),), x, cm, np.int32(M), np.int32(N))
    assert np.array_equal(cm, x.max(axis=0))


# -- dot: a matmul kernel lowered to the SGEMM schedule ------------------------------------------
def _schedule():
    mod = pytest.importorskip("ptxgen.lower")
    if not hasattr(mod, "lower_matmul"):
        pytest.skip("ptxgen.lower has no lower_matmul in this build")
    return mod


@bk.kernel(num_warps=4)
def matmul(A: bk.pointer, B: bk.pointer, C: bk.pointer, M: bk.int32, N: bk.int32, K: bk.int32,
           BM: bk.constexpr, BN: bk.constexpr, BK: bk.constexpr):
    rm = bk.program_id(0) * BM + bk.arange(0, BM)
    rn = bk.program_id(1) * BN + bk.arange(0, BN)
    rk = bk.arange(0, BK)
    acc = bk.zeros([BM, BN])
    for k in bk.range(0, K, BK):
        a = bk.load(A + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K))
        b = bk.load(B + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N))
        acc += bk.dot(a, b)
    bk.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_dot_lowers_to_the_sgemm_schedule(arch):
    _schedule()
    text = matmul.ptx(arch, BM=64, BN=64, BK=8)
    s = matmul.dot_schedule
    assert (s.BM, s.BN, s.BK, s.threads) == (64, 64, 8, 128)
    assert "ld.shared.v4.f32" in text and "fma.rn.f32" in text
    r = toolchain.assemble(text, arch).resources["matmul"]
    assert r.spills == 0


@needs_emu
@pytest.mark.parametrize("M,N,K,hints", [(70, 45, 33, None), (64, 128, 16, {"K": 4, "N": 4})])
def test_dot_matmul_on_emulator(M, N, K, hints):
    _schedule()
    from ptxgen.emu import emulate
    rng = np.random.default_rng(K)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.full((M, N), np.nan, np.float32)
    m = matmul.build(BM=64, BN=64, BK=8, hints=hints)
    grid, args = matmul.dot_launch((-(-M // 64), -(-N // 64)),
                                   [A, B, C, np.int32(M), np.int32(N), np.int32(K)])
    emulate(m, "matmul", grid, (matmul.threads(),), *args)
    assert np.allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


def test_dot_outside_the_matmul_form_is_refused():
    _schedule()

    @bk.kernel
    def loose(A: bk.pointer, B: bk.pointer, C: bk.pointer, M: bk.int32, N: bk.int32,
              K: bk.int32, BM: bk.constexpr, BN: bk.constexpr, BK: bk.constexpr):
        acc = bk.dot(bk.load(A + bk.arange(0, BM)), bk.load(B + bk.arange(0, BN)))
        bk.store(C + bk.arange(0, BM), acc)
    with pytest.raises(PtxgenError, match="acc \\+= bk.dot"):
        loose.build(BM=64, BN=64, BK=8)
