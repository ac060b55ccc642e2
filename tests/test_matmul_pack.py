"""Packed matmul: pad_copy, the ldb stride of the lowering, the pack decision and the three-step
run on the emulator (and on a GPU when there is one)."""
import importlib.util

import numpy as np
import pytest

from ptxgen import emit_module, toolchain
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ir import Module
from ptxgen.ir.verify import verify_module
from ptxgen.ops.matmul import Matmul
from ptxgen.ops.pack import add_pad_copy, pad_args, pad_launch, padded
from ptxgen.lower import lower_matmul
from ptxgen.schedule import CANDIDATES

needs_emu = pytest.mark.skipif(importlib.util.find_spec("ptxgen.emu") is None,
                               reason="the CPU emulator (ptxgen.emu) is not in this build")


@needs_emu
@pytest.mark.parametrize("rows,cols,out_rows", [(5, 7, 5), (3, 1, 8), (33, 64, 33), (1, 9, 4)])
def test_pad_copy_copies_and_zero_fills(rows, cols, out_rows):
    from ptxgen.emu import emulate
    rng = np.random.default_rng(rows * 100 + cols)
    src = rng.standard_normal((rows, cols)).astype(np.float32)
    out_cols = padded(cols)
    dst = np.full((out_rows, out_cols), np.nan, np.float32)
    m = verify_module(add_pad_copy(Module(target="sm_90")))
    cfg = pad_launch(out_rows, out_cols)
    emulate(m, "pad_copy", cfg.grid, cfg.block, *pad_args(rows, cols, out_rows, out_cols, src, dst),
            check="error")
    want = np.zeros((out_rows, out_cols), np.float32)
    want[:rows, :cols] = src
    assert np.array_equal(dst, want)


def test_ldb_gives_b_128_bit_loads_and_is_checked():
    s = CANDIDATES["128x128x8_g8"]
    odd = emit_module(lower_matmul(s, "sm_90", {"M": 64, "N": 45, "K": 36}))
    packed = emit_module(lower_matmul(s, "sm_90", {"M": 64, "N": 45, "K": 36, "ldb": 48}))
    # prologue and loop: A only (K % 4 == 0, N odd), then A and B
    assert odd.count("ld.global.v4") == 2 and "ld.global.f32" in odd
    assert packed.count("ld.global.v4") == 4 and "ld.global.f32" not in packed
    assert "mov.u32 %ldb0, 48;" in packed
    with pytest.raises(ScheduleError, match="ldb"):
        lower_matmul(s, "sm_90", {"M": 64, "N": 45, "K": 36, "ldb": 44})


def test_pack_decision():
    odd = {"M": 4095, "N": 4097, "K": 513}
    assert not Matmul().packs(odd)                                  # off by default
    assert Matmul(pack=True).packs(odd) and Matmul(pack=True).packs({"M": 5, "N": 6, "K": 8})
    assert not Matmul(pack=True).packs({"M": 4096, "N": 4096, "K": 4096})   # aligned
    assert not Matmul(None, pack=True).packs({"M": 5, "N": 6, "K": 7})     # the simple kernel
    with pytest.raises(PtxgenError, match="pack must be"):
        Matmul(pack="yes")


def test_packed_steps_and_workspace():
    op = Matmul(pack=True)
    shape = {"M": 67, "N": 45, "K": 33}
    m = op.build(shape)
    assert [k.name for k in m.entries] == ["matmul", "pad_copy"]
    steps = op.steps(shape)
    assert [s.kernel for s in steps] == ["pad_copy", "pad_copy", "matmul"]
    assert op.workspace(shape) == {"A_packed": ((67, 36), np.float32),
                                   "B_packed": ((36, 48), np.float32)}
    arrays = {"A": "a", "B": "b", "C": "c", "A_packed": "ap", "B_packed": "bp"}
    assert steps[0].args(arrays)[4:] == ["a", "ap"] and steps[1].args(arrays)[4:] == ["b", "bp"]
    assert steps[2].args(arrays)[2:] == [np.uint32(36), "ap", "bp", "c"]
    aligned = {"M": 64, "N": 64, "K": 64}
    op.build(aligned)
    assert [s.kernel for s in op.steps(aligned)] == ["matmul"] and not op.workspace(aligned)


@needs_emu
@pytest.mark.parametrize("K", [33, 34, 35, 36])
@pytest.mark.parametrize("N", [45, 46, 47, 48])
def test_packed_matmul_correct_on_emulator(K, N):
    from ptxgen.reports.run import run_operator
    op = Matmul(pack=True)
    res = run_operator(op, op.shape(M=67, N=N, K=K), "emu", seed=K * N)
    assert res.ok, res


@needs_emu
@pytest.mark.parametrize("N", [65, 66, 67, 68, 69, 128 + 3])
def test_edge_columns_split_off_correct_on_emulator(N):
    """64-wide block tiles: N = 64j + 1..4 leaves 1 to 4 columns to matmul_edge, + 5 none."""
    from ptxgen.reports.run import run_operator
    op = Matmul(CANDIDATES["64x64x8"], pack=True)
    shape = op.shape(M=70, N=N, K=35)
    edge = op.plan(shape)[2]
    assert edge == (N % 64 if N % 64 <= 4 else 0)
    assert [s.kernel for s in op.steps(shape)][-1] == ("matmul_edge" if edge else "matmul")
    res = run_operator(op, shape, "emu", seed=N)
    assert res.ok, res


def test_edge_split_launches_the_main_kernel_on_whole_tiles():
    op = Matmul(pack=True)
    shape = {"M": 4095, "N": 4097, "K": 513}
    s, packs, edge = op.plan(shape)
    assert packs and edge == 1 and s.BN == 128
    op.build(shape)
    assert op.launch(shape).grid == s.grid({"M": 4095, "N": 4096})
    args = op.kernel_args(shape, {"A_packed": "ap", "B_packed": "bp", "C": "c"})
    assert args[:3] == [4095, 4096, 516]
    edge_step = op.steps(shape)[-1]
    assert edge_step.kernel == "matmul_edge" and edge_step.launch.grid == (512, 1, 1)
    assert edge_step.args({"A_packed": "ap", "B_packed": "bp", "C": "c"}) == \
        [4095, 4096, 516, 4100, 4097, "ap", "bp", "c"]


@pytest.mark.needs_nvdisasm
def test_packed_kernel_sass_has_wide_loads_and_no_spills():
    op = Matmul(pack=True)
    shape = {"M": 4095, "N": 4097, "K": 513}
    asm = toolchain.assemble(emit_module(verify_module(op.build(shape))), "sm_90")
    for name in ("matmul", "pad_copy", "matmul_edge"):
        r = asm.resources[name]
        assert r.spills == 0 and r.stack_bytes == 0, name
    mix = toolchain.sass_mix(toolchain.disassemble(asm.cubin))
    assert mix["matmul"].get("LDG.E.128", 0) >= 2 and "LDG.E" not in mix["matmul"]
    assert mix["matmul"].get("LDS.128", 0) > 0 and mix["pad_copy"].get("STG.E.128") == 1
    assert mix["matmul_edge"].get("LDG.E.128", 0) >= 1       # the A row, float4s per lane


@pytest.mark.gpu
def test_packed_matmul_on_gpu():
    from ptxgen.reports.run import run_operator
    for op in (Matmul(), Matmul(pack=True)):
        res = run_operator(op, op.shape(M=4095, N=4097, K=513), "gpu")
        assert res.ok, res
    res = run_operator(Matmul(pack=True), {"M": 67, "N": 45, "K": 33}, "gpu")
    assert res.ok, res


def test_staged_epilogue_is_used_for_misaligned_c_and_is_conflict_free():
    from ptxgen.analysis.banks_static import static_bank_conflicts
    s = CANDIDATES["128x128x8_g8"]
    odd = lower_matmul(s, "sm_90", {"M": 130, "N": 131, "K": 8})
    aligned = lower_matmul(s.replace(stage_c=False), "sm_90", {"M": 130, "N": 132, "K": 8})
    n_bar = [emit_module(m).count("bar.sync") for m in (odd, aligned)]
    assert n_bar[0] == n_bar[1] + 2 * s.TM              # two barriers per fragment row
    rep = static_bank_conflicts(odd.kernel("matmul"), s.block(), module=odd)
    assert not rep.conflicted, [a.text for a in rep.accesses if a.conflicted]


@needs_emu
@pytest.mark.parametrize("name", ["128x128x8_g8", "128x64x8", "64x64x8", "128x128x8_cp3"])
def test_staged_epilogue_correct_on_emulator(name):
    """N odd and even-but-not-4 (C rows misaligned), M and N past a tile edge."""
    from ptxgen.reports.run import run_operator
    op = Matmul(CANDIDATES[name], pack=False)
    for dims in ({"M": 130, "N": 131, "K": 9}, {"M": 67, "N": 66, "K": 12}):
        res = run_operator(op, op.shape(**dims), "emu", seed=len(name))
        assert res.ok, (dims, res)
