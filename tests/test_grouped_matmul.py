"""The grouped (mixture-of-experts) GEMM, ops/grouped_matmul.py: both layouts, uneven and empty
experts, bf16 and fp8, against float64 per expert on the emulator; rows of no expert untouched;
argument checks; ptxas."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.grouped_matmul import GroupedMatmul
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

ARCH = "sm_90a"
SMALL = TcMatmulSchedule(BM=64, BN=128, wgmma_n=128, consumers=1, stages=3)


@pytest.mark.parametrize("dtype, layout, shape, rows", [
    ("bf16", "offsets", dict(M=300, N=136, K=72, G=5), [81, 81, 191, 256, 290]),   # an empty one
    ("f16", "offsets", dict(M=130, N=40, K=64, G=3), [0, 120, 128]),
    ("bf16", "masked", dict(M=280, N=100, K=64, G=4), [3, 70, 0, 12]),
    ("e4m3", "offsets", dict(M=200, N=72, K=128, G=3), [105, 156, 190]),
    ("e5m2", "masked", dict(M=192, N=80, K=64, G=3), [64, 1, 33]),
])
def test_grouped_on_the_emulator(dtype, layout, shape, rows):
    sched = SMALL.for_dtype(dtype)
    op = GroupedMatmul(dtype, "bf16", sched, layout)
    shape = op.shape(**shape)
    arrays = op.make_inputs(shape, np.random.default_rng(shape["M"]))
    arrays["rows"] = np.array(rows, np.uint32)
    ref = op.reference(shape, arrays)
    run_operator(op, shape, arrays, ARCH)
    ok, worst = op.check(shape, arrays, ref)
    assert ok, worst
    covered = ~np.isnan(ref["C"])
    assert covered.any() and not covered.all()         # the check saw both kinds of rows


def test_grouped_check_sees_a_stray_write():
    op = GroupedMatmul("bf16", "f32", SMALL)
    shape = op.shape(M=128, N=64, K=64, G=2)
    arrays = op.make_inputs(shape, np.random.default_rng(1))
    arrays["rows"] = np.array([40, 100], np.uint32)
    run_operator(op, shape, arrays, ARCH)
    assert op.check(shape, arrays)[0]
    arrays["C"][110, 3] = 0.0                            # a row of no expert
    assert not op.check(shape, arrays)[0]


def test_grouped_default_schedule_assembles_without_spills():
    if not toolchain.have_tool("ptxas"):
        pytest.skip("ptxas not found")
    for dtype in ("bf16", "e4m3"):
        op = GroupedMatmul(dtype, "bf16")
        m = op.build(op.shape(M=16384, N=4096, K=4096, G=8), ARCH)
        r = toolchain.assemble(emit_module(m, ARCH), ARCH).resources["grouped_matmul"]
        assert r.spill_stores == 0 and r.spill_loads == 0


@pytest.mark.parametrize("kwargs, shape, words", [
    (dict(dtype="tf32"), None, "dtype"),
    (dict(layout="ragged"), None, "layout"),
    (dict(), dict(M=64, N=64, K=60, G=2), "K=60"),
    (dict(layout="masked"), dict(M=65, N=64, K=64, G=2), "M=65"),
])
def test_grouped_errors(kwargs, shape, words):
    with pytest.raises(PtxgenError, match=words):
        GroupedMatmul(**kwargs).shape(**(shape or {}))


def test_grouped_schedule_must_store_from_fragments():
    op = GroupedMatmul("bf16", "bf16", TcMatmulSchedule(epilogue="tma", stages=3))
    with pytest.raises(ScheduleError, match="epilogue='direct'"):
        op.build(op.shape(M=256, N=256, K=64, G=2), ARCH)


def test_cli_runs_grouped_on_the_emulator():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "ptxgen", "run", "matmul", "--groups", "3",
                          "--dtype", "e4m3", "--group-layout", "masked", "--M", "192", "--N",
                          "80", "--K", "64", "--backend", "emu", "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "check: PASS" in out.stdout, out.stdout + out.stderr
    bad = subprocess.run([sys.executable, "-m", "ptxgen", "run", "saxpy", "--groups", "2",
                          "--backend", "emu"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--groups applies to matmul" in bad.stderr


@pytest.mark.parametrize("layout", ["offsets", "masked"])
def test_grouped_n_major_w_on_the_emulator(layout):
    """W as G x K x N (torch._grouped_mm's layout) through wgmma's transpose: the same C as the
    K-major W holding the same weights."""
    sched = TcMatmulSchedule(BM=64, BN=128, wgmma_n=128, consumers=1, stages=3)
    kn = GroupedMatmul("bf16", "f32", sched, layout, w_layout="kn")
    shape = kn.shape(M=192, N=136, K=128, G=3)
    arrays = kn.make_inputs(shape, np.random.default_rng(9))
    assert arrays["W"].shape == (3, 128, 136)
    ref = kn.reference(shape, arrays)
    nk_arrays = dict(arrays, W=np.ascontiguousarray(arrays["W"].transpose(0, 2, 1)),
                     C=arrays["C"].copy())
    run_operator(kn, shape, arrays, ARCH)
    assert kn.check(shape, arrays, ref)[0]
    nk = GroupedMatmul("bf16", "f32", sched, layout)
    run_operator(nk, shape, nk_arrays, ARCH)
    assert np.array_equal(arrays["C"], nk_arrays["C"], equal_nan=True)


def test_grouped_n_major_w_needs_whole_k_boxes():
    with pytest.raises(PtxgenError, match="K=100"):
        GroupedMatmul("bf16", w_layout="kn").shape(M=64, N=64, K=100, G=2)
    with pytest.raises(PtxgenError, match="transpose"):
        GroupedMatmul("e4m3", w_layout="kn")
