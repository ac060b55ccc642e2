"""Differential tests: the emulator against numpy references for every library operator, for
NVVM PTX of Numba kernels (compiled here with numba.cuda.compile_ptx, no GPU needed) and for
Triton PTX collected on a GPU."""
from pathlib import Path

import numpy as np
import pytest

from ptxgen.emu import emulate, numba_array_args
from ptxgen.emu.backend import run_operator
from ptxgen.ops import OPERATORS

DATA = Path(__file__).parent / "data" / "ptx"
SEED = np.random.SeedSequence().entropy          # fresh inputs every run; printed on failure


def _shapes(op, rng):
    if op.shape_names == ("n",):
        fixed = [{"n": 1}, {"n": 5}, {"n": 1003}]
        return fixed + [{"n": int(rng.integers(1, 5000))}]
    if op.shape_names == ("M", "N", "K"):
        fixed = [dict(M=67, N=45, K=33), dict(M=1, N=1, K=1)]
        return fixed + [dict(zip("MNK", (int(v) for v in rng.integers(1, 90, 3))))]
    fixed = [dict(zip(op.shape_names, (67, 45))), dict(zip(op.shape_names, (1, 1)))]
    return fixed + [dict(zip(op.shape_names, (int(v) for v in rng.integers(1, 300, 2))))]


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operator_matches_reference(name):
    op = OPERATORS[name]
    rng = np.random.default_rng([SEED, sorted(OPERATORS).index(name)])
    for given in _shapes(op, rng):
        shape = op.shape(**given)
        arrays = op.make_inputs(shape, rng)
        for out in op.outputs:                      # a kernel that skips an element shows up
            if arrays[out].dtype.kind == "f":
                arrays[out][...] = np.nan
        run_operator(op, shape, arrays)
        ok, err = op.check(shape, arrays)
        assert ok, f"{name} {shape}: max relative error {err} (seed {SEED})"


def test_saxpy_large_odd_n():
    op = OPERATORS["saxpy"]
    shape = op.shape(n=1000003)
    arrays = op.make_inputs(shape, np.random.default_rng(SEED))
    run_operator(op, shape, arrays)
    ok, err = op.check(shape, arrays)
    assert ok, f"max relative error {err} (seed {SEED})"
    # fma.rn.f32 rounds once: the result is the float64 value rounded to float32
    want = (np.float64(arrays["a"]) * arrays["x"] + arrays["y"]).astype(np.float32)
    np.testing.assert_array_equal(arrays["out"], want)


# -- NVVM PTX of Numba kernels ---------------------------------------------------------------------
def _numba_kernels():
    """The Numba kernels whose PTX is checked in under tests/data/ptx (collect.py), compiled
    afresh here so the emulator runs what this NVVM gives today."""
    import importlib.util
    path = Path(__file__).parent / "data" / "ptx" / "collect.py"
    spec = importlib.util.spec_from_file_location("ptx_collect", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.KERNELS


@pytest.fixture(scope="module")
def numba_ptx():
    cuda = pytest.importorskip("numba.cuda")
    out = {}
    for name, (fn, sig) in _numba_kernels().items():
        try:
            ptx, _ = cuda.compile_ptx(fn, sig, cc=(8, 0))
        except Exception as e:                      # no NVVM in this environment
            pytest.skip(f"numba.cuda.compile_ptx unavailable: {e}")
        from ptxgen.parse import parse_ptx
        m = parse_ptx(ptx)
        out[name] = (m, m.entries[0].name)
    return out


def _run(numba_ptx, name, grid, block, *arrays, scalars=()):
    module, kname = numba_ptx[name]
    args = list(scalars)
    for a in arrays:
        args += numba_array_args(a)
    return emulate(module, kname, grid, block, *args)


def test_numba_saxpy(numba_ptx):
    rng = np.random.default_rng(SEED)
    n = 1000
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n, np.nan, np.float32)
    a = np.float32(rng.uniform(-2, 2))
    _run(numba_ptx, "saxpy", -(-n // 128), 128, x, y, out, scalars=[a])
    np.testing.assert_array_equal(out, (np.float64(a) * x + y).astype(np.float32))


@pytest.mark.parametrize("kind", ["matmul_naive", "matmul_shared"])
def test_numba_matmul(numba_ptx, kind):
    rng = np.random.default_rng(SEED)
    M, N, K = 37, 29, 45
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.full((M, N), np.nan, np.float32)
    # naive: i = grid x over rows; shared: x over columns (as the Python source says)
    grid = (-(-M // 16), -(-N // 16)) if kind == "matmul_naive" else (-(-N // 16), -(-M // 16))
    _run(numba_ptx, kind, grid, (16, 16), A, B, C)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, atol=1e-4, rtol=1e-5)


def test_numba_block_reduce_with_atomic_add(numba_ptx):
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal(5000).astype(np.float32)
    total = np.zeros(1, np.float32)
    _run(numba_ptx, "block_reduce", -(-5000 // 256), 256, x, total)
    assert total[0] == pytest.approx(float(x.astype(np.float64).sum()), abs=1e-3)


def test_numba_transpose_padded(numba_ptx):
    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((70, 45)).astype(np.float32)
    b = np.full((45, 70), np.nan, np.float32)
    _run(numba_ptx, "transpose_padded", (2, 3), (32, 32), a, b)
    np.testing.assert_array_equal(b, a.T)


def test_numba_libdevice_math_with_internal_calls():
    # NVVM's libdevice: sin/cos with Payne-Hanek reduction of large arguments (a .func with a
    # local array and extended-precision mad.cc chains), pow through an internal .func
    cuda = pytest.importorskip("numba.cuda")
    from ptxgen.parse import parse_ptx
    import math

    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i, 0] = math.sin(x[i])
            out[i, 1] = math.cos(x[i])
            out[i, 2] = math.pow(x[i], 0.37)
            out[i, 3] = math.exp(x[i] * 1e-6)

    rng = np.random.default_rng(SEED)
    for dt, sig, tol in ((np.float32, "float32[:], float32[:,:]", 3e-7),
                         (np.float64, "float64[:], float64[:,:]", 1e-15)):
        try:
            ptx, _ = cuda.compile_ptx(k, sig, cc=(8, 0))
        except Exception as e:
            pytest.skip(f"numba.cuda.compile_ptx unavailable: {e}")
        assert "call.uni" in ptx
        m = parse_ptx(ptx)
        x = (rng.random(500) * 1e6).astype(dt)
        out = np.full((500, 4), np.nan, dt)
        emulate(m, m.entries[0].name, 4, 128, *numba_array_args(x), *numba_array_args(out))
        x64 = x.astype(np.float64)
        want = np.stack([np.sin(x64), np.cos(x64), x64 ** 0.37, np.exp(x64 * 1e-6)], 1)
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol, err_msg=str(dt))


def test_numba_array_args_layout():
    a = np.zeros((3, 5), np.float32)
    args = numba_array_args(a)
    assert args[4] is a
    assert [int(v) for v in args[:4]] == [0, 0, 15, 4]
    assert [int(v) for v in args[5:]] == [3, 5, 20, 4]
    neg = numba_array_args(a[:, ::-1])
    assert int(neg[-1]) == (1 << 64) - 4


# -- Triton PTX (collected on a GPU, checked in) ---------------------------------------------------
def test_triton_vector_add():
    rng = np.random.default_rng(SEED)
    x, y = (rng.standard_normal(4096).astype(np.float32) for _ in range(2))
    out = np.full(4096, np.nan, np.float32)
    scratch = np.zeros(16, np.uint8)
    emulate((DATA / "triton_add.ptx").read_text(), "add_kernel", 4, 128, x, y, out,
            np.uint32(4096), scratch, scratch.copy())
    np.testing.assert_array_equal(out, x + y)


def test_triton_softmax():
    rng = np.random.default_rng(SEED)
    s = rng.standard_normal((64, 1000)).astype(np.float32)
    out = np.full_like(s, np.nan)
    scratch = np.zeros(16, np.uint8)
    emulate((DATA / "triton_softmax.ptx").read_text(), "softmax_kernel", 64, 128, out, s,
            np.uint32(1000), np.uint32(1000), scratch, scratch.copy(), shared_bytes=64)
    e = np.exp(s.astype(np.float64) - s.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_triton_matmul_with_cp_async():
    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((256, 128)).astype(np.float32)
    b = rng.standard_normal((128, 192)).astype(np.float32)
    c = np.full((256, 192), np.nan, np.float32)
    scratch = np.zeros(16, np.uint8)
    dims = [np.uint32(v) for v in (256, 192, 128, 128, 192, 192)]
    emulate((DATA / "triton_matmul.ptx").read_text(), "matmul_kernel", (4, 3), 128, a, b, c,
            *dims, scratch, scratch.copy(), shared_bytes=64 * 1024)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, atol=1e-3, rtol=1e-4)
