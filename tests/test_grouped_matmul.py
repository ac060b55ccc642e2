"""The grouped (mixture-of-experts) GEMM, ops/grouped_matmul.py: both layouts, uneven and empty
experts, bf16 and fp8, against float64 per expert on the emulator; rows of no expert untouched;
argument checks; ptxas."""
import dataclasses

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
    direct = TcMatmulSchedule()                 # the fragment-store form (benchmarks/llm_gemms)
    for dtype, sched in (("bf16", "auto"), ("e4m3", "auto"), ("bf16", direct)):
        op = GroupedMatmul(dtype, "bf16", sched)
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


@pytest.mark.parametrize("sched, N", [
    (TcMatmulSchedule(epilogue="rows", stages=3), 256),     # TMA by flat rows: no expert ends
    (TcMatmulSchedule(epilogue="tma", stages=3), 100),      # bf16 rows not 16-byte aligned
    (TcMatmulSchedule(cluster_m=2, stages=3), 256),
])
def test_grouped_schedule_refusals(sched, N):
    op = GroupedMatmul("bf16", "bf16", sched)
    with pytest.raises(ScheduleError, match="epilogue='direct'|cluster_m=1"):
        op.build(op.shape(M=256, N=N, K=64, G=2), ARCH)


def test_grouped_default_stores_c_from_the_fragments():
    """The default (4 stages, C from the fragments) until the staged TMA form is timed; the
    staged form is a schedule choice that builds where C's rows align."""
    op = GroupedMatmul("bf16", "bf16")
    s = op.schedule_for(op.shape(M=1024, N=512, K=256, G=4))
    assert (s.epilogue, s.stages) == ("direct", 4)
    staged = GroupedMatmul("bf16", "bf16", schedule=TcMatmulSchedule(epilogue="tma", stages=3))
    assert staged.c_store(staged.shape(M=1024, N=512, K=256, G=4)) == "tile"
    assert staged.c_store(staged.shape(M=1024, N=100, K=256, G=4)) != "tile"   # misaligned rows


S2 = dict(BM=128, BN=128, wgmma_n=128, consumers=2, stages=3)
STORE_CASES = [     # experts: empty, 1 row, exact multiples of BM, ragged; N not a BN multiple
    ("bf16", "bf16", "offsets", "nk", SMALL, dict(M=300, N=136, K=72, G=6), [0, 1, 64, 191, 256,
                                                                             290]),
    ("bf16", "bf16", "offsets", "kn", SMALL, dict(M=300, N=136, K=128, G=5), [64, 64, 65, 192,
                                                                              300]),
    ("bf16", "f32", "masked", "nk", SMALL, dict(M=280, N=100, K=64, G=4), [3, 70, 0, 64]),
    ("bf16", "bf16", "masked", "kn", SMALL, dict(M=256, N=200, K=64, G=4), [64, 1, 0, 63]),
    ("e4m3", "bf16", "offsets", "nk", SMALL, dict(M=200, N=72, K=128, G=3), [105, 156, 190]),
    ("bf16", "bf16", "offsets", "nk", TcMatmulSchedule(**S2), dict(M=400, N=264, K=64, G=4),
     [0, 128, 129, 390]),
    ("f16", "bf16", "masked", "nk", TcMatmulSchedule(**S2), dict(M=512, N=136, K=64, G=4),
     [128, 5, 127, 0]),
]


class _TmaToScratch(GroupedMatmul):
    """C's tensor map on arrays["C_tma"]: what the TMA stores write lands there, apart from
    the fragment stores' rows in C."""
    def kernel_args(self, shape, arrays):
        from ptxgen.arrays import TiledMap
        args = super().kernel_args(shape, arrays)
        s = self.schedule_for(shape)
        args[2] = TiledMap(arrays["C_tma"], self.out, s.rows_per_consumer,
                           128 // arrays["C"].itemsize)
        return args


@pytest.mark.parametrize("case", range(len(STORE_CASES)))
def test_grouped_tma_store_matches_the_fragment_stores(case):
    """A tile inside its expert's rows stored by TMA, the tile crossing its expert's end from
    the fragments: C bit for bit the all-fragment kernel's (the same accumulation), within the
    float64 bound, rows of no expert untouched; and each way wrote exactly its own rows."""
    dtype, out, layout, w_layout, sched, shape, rows = STORE_CASES[case]
    ops = {way: cls(dtype, out, dataclasses.replace(sched, epilogue=epi).for_dtype(dtype),
                    layout, w_layout=w_layout)
           for way, epi, cls in (("direct", "direct", GroupedMatmul), ("tma", "tma", GroupedMatmul),
                                 ("split", "tma", _TmaToScratch))}
    for epi in ("tma", "split"):
        assert ops[epi].c_store(ops[epi].shape(**shape)) == "tile"
    shape = ops["direct"].shape(**shape)
    arrays = ops["direct"].make_inputs(shape, np.random.default_rng(case))
    arrays["rows"] = np.array(rows, np.uint32)
    ref = ops["direct"].reference(shape, arrays)
    got = {}
    for epi, op in ops.items():
        a = dict(arrays, C=arrays["C"].copy())
        if epi == "split":
            a["C_tma"] = arrays["C"].copy()
        run_operator(op, shape, a, ARCH)
        got[epi] = a
    for epi in ("direct", "tma"):
        ok, worst = ops[epi].check(shape, got[epi], ref)
        assert ok, (epi, worst)
    assert np.array_equal(got["tma"]["C"], got["direct"]["C"], equal_nan=True)
    by_tma = np.zeros(shape["M"], bool)         # rows of the tiles wholly inside an expert
    for lo, hi in ops["direct"].expert_rows(shape, rows):
        by_tma[lo: lo + (hi - lo) // sched.BM * sched.BM] = True
    assert by_tma.any() and (~np.isnan(ref["C"][:, 0]) & ~by_tma).any()
    split, poison = got["split"], arrays["C"]
    assert np.array_equal(split["C_tma"][by_tma], got["direct"]["C"][by_tma], equal_nan=True)
    assert np.array_equal(split["C_tma"][~by_tma], poison[~by_tma], equal_nan=True)
    assert np.array_equal(split["C"][~by_tma], got["direct"]["C"][~by_tma], equal_nan=True)
    assert np.array_equal(split["C"][by_tma], poison[by_tma], equal_nan=True)


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
