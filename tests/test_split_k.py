"""Split-K on the sm_90a tensor-core GEMM (lower/split_k.py): odd shapes against float64 on
the emulator, the in-kernel reduction's determinism and its counters, schedule checks, and the
tuner's split-K points for skinny shapes."""
import dataclasses

import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import ScheduleError
from ptxgen.ops.fp8_matmul import Fp8Matmul
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

ARCH = "sm_90a"
S64 = dict(BM=64, BN=128, wgmma_n=128, consumers=1, stages=4)


@pytest.mark.parametrize("op, shape", [
    (TcMatmul("bf16", "bf16", TcMatmulSchedule(**S64, split_k=3)), dict(M=37, N=200, K=1000)),
    (TcMatmul("bf16", "f32", TcMatmulSchedule(BM=128, BN=128, wgmma_n=128, stages=4,
                                              split_k=4)), dict(M=130, N=72, K=300)),
    # more pieces than k-blocks: the last pieces are empty and add zeros
    (TcMatmul("f16", "f32", TcMatmulSchedule(**S64, split_k=5)), dict(M=5, N=9, K=130)),
    (Fp8Matmul("e4m3", "bf16", TcMatmulSchedule(**S64, split_k=2).for_dtype("e4m3")),
     dict(M=16, N=130, K=520)),
])
def test_split_k_on_the_emulator(op, shape):
    arrays = op.make_inputs(shape, np.random.default_rng(shape["K"]))
    ref = op.reference(shape, arrays)
    first = {k: v.copy() for k, v in arrays.items()}
    run_operator(op, shape, first, ARCH)
    assert op.check(shape, first, ref)[0]
    assert not first["counters"].any()              # left zero for the next launch
    # a second launch on the same workspace (counters, stale partials): bit-identical C
    again = dict(first, C=arrays["C"].copy())
    run_operator(op, shape, again, ARCH)
    assert np.array_equal(again["C"], first["C"])


def test_split_k_pieces_are_summed_in_order():
    """Each piece's partial sum is an f32 of its k-blocks; C is their sum in piece order, so
    with 2 pieces C = fl(p0 + p1) exactly (p_i: the unsplit kernel on that K range)."""
    shape = dict(M=40, N=64, K=256)
    op = TcMatmul("bf16", "f32", TcMatmulSchedule(**S64, split_k=2))
    arrays = op.make_inputs(shape, np.random.default_rng(5))
    run_operator(op, shape, arrays, ARCH)
    whole = TcMatmul("bf16", "f32", TcMatmulSchedule(**S64))
    halves = []
    for lo in (0, 128):
        part = dict(A=np.ascontiguousarray(arrays["A"][:, lo:lo + 128]),
                    Bt=np.ascontiguousarray(arrays["Bt"][:, lo:lo + 128]),
                    C=np.zeros((40, 64), np.float32))
        run_operator(whole, dict(M=40, N=64, K=128), part, ARCH)
        halves.append(part["C"])
    assert np.array_equal(arrays["C"], halves[0] + halves[1])


@pytest.mark.parametrize("fields, words", [
    (dict(split_k=0), "split_k=0"),
    (dict(split_k=2, epilogue="tma", stages=3), "epilogue='direct'"),
    (dict(split_k=2, cluster_m=2), "cluster_m=1"),
    (dict(split_k=2, persistent=False), "persistent"),
])
def test_split_k_schedule_errors(fields, words):
    with pytest.raises(ScheduleError, match=words):
        TcMatmulSchedule(**fields).validate(ARCH)


def test_tuner_searches_split_k_for_skinny_shapes_only():
    from ptxgen.tune.tc_space import bound_us, tc_space
    skinny = tc_space(ARCH, "bf16", dict(M=16, N=8192, K=8192))
    splits = [s for s in skinny.points if s.split_k > 1]
    assert splits and all(s.epilogue == "direct" and s.cluster_m == 1 for s in splits)
    assert {s.BM for s in splits} == {64, 128}
    assert not any(s.split_k > 1 for s in tc_space(ARCH, "bf16",
                                                   dict(M=4096, N=4096, K=4096)).points)
    # the bound counts work units: 2 pieces of 64 tiles fill twice the SMs of 64 tiles
    shape = dict(M=16, N=8192, K=8192)
    one = TcMatmulSchedule(**dict(S64, stages=8))
    assert bound_us(dataclasses.replace(one, split_k=2), shape, ARCH) < bound_us(one, shape,
                                                                                  ARCH)


@pytest.mark.skipif(not toolchain.have_tool("ptxas"), reason="ptxas not found")
@pytest.mark.parametrize("sched", [TcMatmulSchedule(**dict(S64, stages=8), split_k=2),
                                   TcMatmulSchedule(BM=128, BN=128, wgmma_n=128, stages=6,
                                                    split_k=2)])
def test_split_k_assembles_without_spills(sched):
    op = TcMatmul("bf16", "bf16", sched)
    m = op.build(dict(M=16, N=8192, K=8192), ARCH)
    r = toolchain.assemble(emit_module(m, ARCH), ARCH).resources["tc_matmul"]
    assert r.spill_stores == 0 and r.spill_loads == 0
