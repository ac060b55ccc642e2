"""The sm_90a GEMM's fused pad copy (lower/fused_pad.py, TcMatmul k_pack="fused"): the
producer's idle warps fill the padded workspace chunk by chunk while the kernel runs and the TMA
thread waits on per-chunk flags. On the CPU emulator (every CTA in one batch, memcheck and
racecheck on): bit for bit equal to the pad-copy path, against float64, with small forced grids
so CTAs walk several tiles and wait on chunks other CTAs copy, over repeated launches on one
workspace (the flags' epochs); the chunk order, the fallback to pad copies, ptxas without spills;
on the GPU against float64 and bit for bit against the emulator."""
import dataclasses

import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import compile_kernel, emulate
from ptxgen.errors import ScheduleError
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.lower import fused_pad, lower_tc_matmul
from ptxgen.lower.fused_pad import HEADER_WORDS, chunk_table
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

ARCH = "sm_90a"


def _emulate(op, shape, arrays, sm_count, launches=1):
    """All of op's steps on the emulator with a grid sized for `sm_count` SMs, `launches` times
    on the same arrays (C refilled with NaN bits before each)."""
    m = op.build(shape, ARCH)
    fill = arrays["C"].copy()
    for _ in range(launches):
        arrays["C"][...] = fill
        for st in op.steps(shape, ARCH, sm_count):
            emulate(m, st.kernel, st.launch.grid, st.launch.block, *st.args(arrays),
                    shared_bytes=st.launch.shared_bytes, check="error", verify=False)
    return arrays


def _pair(dtype, out, shape_kw, sm_count, seed, k_pack="fused", **op_kw):
    """C of the fused path and of the pad-copy path on the same inputs."""
    fused = TcMatmul(dtype, out, k_pack=k_pack, **op_kw)
    pad = TcMatmul(dtype, out, k_pack="pad", **op_kw)
    shape = fused.shape(**shape_kw)
    inputs = fused.make_inputs(shape, np.random.default_rng(seed))
    got = _emulate(fused, shape, dict({k: v.copy() for k, v in inputs.items()},
                                      **fused.workspace_arrays(shape, ARCH)), sm_count)
    want = _emulate(pad, shape, dict(inputs, **pad.workspace_arrays(shape, ARCH)), sm_count)
    return fused, shape, got, want


@pytest.mark.parametrize("dtype, out, M, N, K, sms", [
    ("bf16", "bf16", 300, 520, 137, 8),      # 15 tiles of 128x128 on 8 CTAs
    ("bf16", "f32", 70, 131, 41, 2),
    ("f16", "bf16", 129, 257, 203, 3),
    ("tf32", "f32", 300, 200, 77, 5),        # 4-byte elements: K % 4
    ("bf16", "bf16", 5, 300, 3, 2),          # one k-block, a 16-byte padded row
    ("bf16", "bf16", 200, 136, 1029, 3),     # K = 64k + 5: a tail k-block of one chunk
])
def test_fused_matches_the_pad_path_bit_for_bit_and_float64(dtype, out, M, N, K, sms):
    seed = int(np.random.default_rng().integers(2 ** 31))
    op, shape, got, want = _pair(dtype, out, dict(M=M, N=N, K=K), sms, seed)
    assert op.fused(shape) == (True, True)
    assert [s.kernel for s in op.steps(shape, ARCH, sms)] == ["tc_matmul"]
    assert op.check(shape, got)[0]
    assert np.array_equal(got["C"].view(np.uint8), want["C"].view(np.uint8))
    flags = got["fused_flags"]
    assert flags[0] == 1 and flags[1] == 0             # epoch bumped, exit counter reset
    assert (flags[HEADER_WORDS:] == fused_pad.COPIER_WARPS).all()   # 3 warps per chunk


@pytest.mark.parametrize("M, N, K, sms, which", [
    (300, 520, 137, 8, (True, False)),       # 128x128 tiles, one wave: A 3 x 128 rows, B 5 x 128
    (600, 200, 77, 4, (False, True)),        # A 5 x 128 rows, B 2 x 128
])
def test_fused1_copies_the_lighter_operand_in_the_kernel(M, N, K, sms, which):
    """k_pack="fused1": the operand whose panels the first wave needs fewer rows of is copied in
    the kernel, the other by the pad kernel; C bit for bit that of the pad path."""
    seed = int(np.random.default_rng().integers(2 ** 31))
    op, shape, got, want = _pair("bf16", "bf16", dict(M=M, N=N, K=K), sms, seed,
                                 k_pack="fused1")
    assert op.fused(shape) == which
    assert [s.kernel for s in op.steps(shape, ARCH, sms)] == ["pad_copy_b16", "tc_matmul"]
    assert op.check(shape, got)[0]
    assert np.array_equal(got["C"].view(np.uint8), want["C"].view(np.uint8))


def test_fused_repeated_launches_on_one_workspace():
    """Flags are not reset: each launch waits for 3 more per chunk (its epoch)."""
    op = TcMatmul("bf16", "bf16", k_pack="fused")
    shape = op.shape(M=260, N=300, K=93)
    arrays = dict(op.make_inputs(shape, np.random.default_rng()), **op.workspace_arrays(shape))
    _emulate(op, shape, arrays, 3, launches=3)
    assert op.check(shape, arrays)[0]
    assert arrays["fused_flags"][0] == 3 and arrays["fused_flags"][1] == 0
    assert (arrays["fused_flags"][HEADER_WORDS:] == 9).all()


def test_one_operand_fused_the_other_pad_copied():
    """A column-major A (At: K x M, rows of M elements) is pad-copied when M % 8 != 0; B's
    K-major rows come by the fused copy."""
    seed = int(np.random.default_rng().integers(2 ** 31))
    op, shape, got, want = _pair("bf16", "bf16", dict(M=300, N=200, K=77), 4, seed,
                                 a_layout="col")
    assert op.fused(shape) == (False, True)
    assert [s.kernel for s in op.steps(shape, ARCH, 4)] == ["pad_copy_b16", "tc_matmul"]
    assert op.check(shape, got)[0]
    assert np.array_equal(got["C"].view(np.uint8), want["C"].view(np.uint8))


def test_chunk_table_lists_every_chunk_once_in_need_order():
    s = TcMatmulSchedule(epilogue="tma", stages=3)
    shape = dict(M=4096, N=4096, K=4093)
    order, nflags = chunk_table(s, shape, (True, True), 132)
    assert nflags == (32 + 16) * 64 and len(order) == nflags
    assert sorted(order[:, 0].tolist()) == list(range(nflags))
    # the first wave's k-block 0: the A panels and B panels its 132 tiles touch (group_m 8:
    # A panels 0..11, every B panel), before any k-block 1
    first = order[order[:, 3] == 0][:12 + 16]
    assert sorted(first[first[:, 1] == 0][:, 2] // 128) == list(range(12))
    assert sorted(first[first[:, 1] == 1][:, 2] // 256) == list(range(16))
    assert (order[:28, 3] == 0).all() and order[28, 3] == 1
    a_only, n = chunk_table(s, shape, (True, False), 132)
    assert n == 32 * 64 and set(a_only[:, 1]) == {0}


def test_fused_falls_back_to_pad_copies_without_a_resident_persistent_grid():
    shape = dict(M=300, N=520, K=137)
    for sched in (TcMatmulSchedule(persistent=False), TcMatmulSchedule(cluster_m=2)):
        op = TcMatmul("bf16", "bf16", sched, k_pack="fused")
        assert op.fused(shape) == (False, False)
        assert [s.kernel for s in op.steps(shape, ARCH)][:2] == ["pad_copy_b16"] * 2
    with pytest.raises(ScheduleError, match="fused"):
        lower_tc_matmul(TcMatmulSchedule(cluster_m=2), ARCH, shape, fused=(True, True))
    with pytest.raises(ScheduleError, match="K-major"):
        lower_tc_matmul(TcMatmulSchedule(), ARCH, shape, a_major=False, fused=(True, False))


def test_emulator_runs_every_cta_in_one_batch_for_gpu_acquires():
    op = TcMatmul("bf16", "bf16", k_pack="fused")
    shape = op.shape(M=300, N=520, K=137)
    assert compile_kernel(op.build(shape, ARCH), "tc_matmul").grid_sync
    pad = TcMatmul("bf16", "bf16", k_pack="pad")
    assert not compile_kernel(pad.build(shape, ARCH), "tc_matmul").grid_sync


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("M, N, K", [(4096, 4096, 4093), (4095, 4097, 4093), (8192, 8192, 8189)])
def test_fused_kernel_assembles_without_spills(M, N, K):
    op = TcMatmul("bf16", "bf16", k_pack="fused")
    shape = op.shape(M=M, N=N, K=K)
    assert op.fused(shape) == (True, True) and op.schedule_for(shape).cluster_m == 1
    ptx = emit_module(op.build(shape, ARCH), ARCH)
    for needle in ("ld.relaxed.gpu.global.u32", "fence.acq_rel.gpu",
                   "red.release.gpu.global.add.u32", "fence.proxy.async.global",
                   "atom.acq_rel.gpu.global.add.u32", "cp.async.cg.shared.global"):
        assert needle in ptx
    # the TMA thread polls POLL_AHEAD k-blocks of both operands' flags in one round trip
    # (+ the epoch load)
    assert ptx.count("ld.relaxed.gpu.global.u32") == 2 * fused_pad.POLL_AHEAD + 1
    res = toolchain.assemble(ptx, ARCH).resources["tc_matmul"]
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0


# -- GPU -------------------------------------------------------------------------------------
def _gpu(op, shape, arrays, sm_count, launches=1):
    from numba import cuda
    from ptxgen.runtime import bound_launch, load_steps, synchronize
    dev = {k: cuda.to_device(v) for k, v in arrays.items()}
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    gos = [bound_launch(kernels[s.kernel], s.launch.grid, s.launch.block, s.args(dev),
                        s.launch.shared_bytes) for s in op.steps(shape, ARCH, sm_count)]
    for _ in range(launches):
        for go in gos:
            go()
    synchronize("tc_matmul")
    return {k: v.copy_to_host() for k, v in dev.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, out, M, N, K, sms", [
    ("bf16", "bf16", 300, 520, 137, 8), ("f16", "f32", 70, 131, 41, 2),
    ("tf32", "f32", 300, 200, 77, 5), ("bf16", "bf16", 1000, 777, 203, 16)])
def test_gpu_fused_float64_and_bit_equal_to_emulator(dtype, out, M, N, K, sms):
    op = TcMatmul(dtype, out, k_pack="fused")
    shape = op.shape(M=M, N=N, K=K)
    inputs = dict(op.make_inputs(shape, np.random.default_rng()), **op.workspace_arrays(shape))
    got = _gpu(op, shape, {k: v.copy() for k, v in inputs.items()}, sms, launches=3)
    assert op.check(shape, got)[0]
    assert got["fused_flags"][0] == 3 and got["fused_flags"][1] == 0
    emu = _emulate(op, shape, inputs, sms)
    assert np.array_equal(got["C"].view(np.uint8), emu["C"].view(np.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("M, N, K", [(4096, 4096, 4093), (4095, 4097, 4093)])
def test_gpu_fused_full_grid_large_shapes(M, N, K):
    from ptxgen.runtime import sm_count
    op = TcMatmul("bf16", "bf16", k_pack="fused")
    shape = op.shape(M=M, N=N, K=K)
    arrays = dict(op.make_inputs(shape, np.random.default_rng()), **op.workspace_arrays(shape))
    got = _gpu(op, shape, arrays, sm_count(), launches=2)
    rows = np.random.default_rng().choice(M, 16, replace=False)
    a, b = op.matrices(got)
    want = a[rows] @ b
    bound = op.error_bound(shape, np.abs(a[rows]) @ np.abs(b))
    assert (np.abs(op.values(got["C"][rows], "bf16") - want) <= bound).all()


def test_schedule_for_turns_clusters_off_for_fused():
    """The auto schedule at 8192x8192x8189 is a 2-CTA cluster one; fused takes it with
    cluster_m=1 (and pad keeps the cluster)."""
    shape = dict(M=8192, N=8192, K=8189)
    pad = TcMatmul("bf16", "bf16", k_pack="pad").schedule_for(shape)
    fused = TcMatmul("bf16", "bf16", k_pack="fused").schedule_for(shape)
    assert pad.cluster_m == 2 and fused == dataclasses.replace(pad, cluster_m=1)


def _split_kernel(producer, consumer):
    from ptxgen.ir import Builder, Module
    m = Module(target=ARCH)
    k = m.add_kernel("split", [])
    k.directives += [".maxntid 384, 1, 1", ".maxnreg 168"]
    b = Builder(k)
    wg = b.shr(b.special("tid.x"), 7, name="wg")
    cons = b.new_label("cons")
    b.branch(cons, b.setp("ne", wg, 0))
    b.setmaxnreg(producer, inc=False)
    b.ret()
    b.label(cons)
    b.setmaxnreg(consumer, inc=True)
    b.ret()
    return m


def test_register_split_beyond_the_ctas_allocation_is_caught():
    """The first H200 run of the fused copy hung: producer 64 + 2 consumers x 224 registers per
    128 threads need 512, the CTA holds 3 x 168 = 504 (.maxnreg 168 at 384 threads), so the
    consumers' setmaxnreg.inc waited forever. The schedule check and the emulator say so."""
    from ptxgen.errors import EmulationError
    with pytest.raises(ScheduleError, match="wait forever"):
        TcMatmulSchedule(producer_regs=64, consumer_regs=224).validate(ARCH)
    TcMatmulSchedule(producer_regs=64, consumer_regs=216).validate(ARCH)
    with pytest.raises(EmulationError, match="wait forever"):
        emulate(_split_kernel(64, 224), "split", 2, 384)
    emulate(_split_kernel(64, 216), "split", 2, 384)
    op = TcMatmul("bf16", "bf16", k_pack="fused")
    m = op.build(op.shape(M=4096, N=4096, K=4093), ARCH)
    directives = " ".join(m.kernel("tc_matmul").directives)
    assert ".maxnreg 168" in directives
    ptx = emit_module(m, ARCH)
    assert "setmaxnreg.dec.sync.aligned.u32 80" in ptx and "inc.sync.aligned.u32 208" in ptx


def test_a_chunk_never_copied_traps_instead_of_hanging():
    """With no chunk order (nchunks 0) nothing is copied: the TMA thread's spin gives up after
    SPIN_LIMIT_NS (globaltimer) and traps, a launch failure rather than a hang."""
    from ptxgen.errors import EmulationError
    op = TcMatmul("bf16", "bf16", k_pack="fused")
    shape = op.shape(M=70, N=131, K=41)
    arrays = dict(op.make_inputs(shape, np.random.default_rng()), **op.workspace_arrays(shape))
    st = op.steps(shape, ARCH, 2)[-1]
    args = st.args(arrays)
    args[-1] = np.uint32(0)
    old, fused_pad.SPIN_LIMIT_NS = fused_pad.SPIN_LIMIT_NS, 2 * 10 ** 7
    try:
        m = op.build(shape, ARCH)
    finally:
        fused_pad.SPIN_LIMIT_NS = old
    assert "2000000000" not in emit_module(m, ARCH)
    with pytest.raises(EmulationError, match="trap"):
        emulate(m, st.kernel, st.launch.grid, st.launch.block, *args,
                shared_bytes=st.launch.shared_bytes, check="off")
