"""The fp8 tensor-core GEMM (ops/fp8_matmul.py) and wgmma's e4m3/e5m2 forms: the builder's
checks, the emulated instruction against the numerics model, the operator at odd small shapes
against float64 (per-tensor scales, both formats, mixed, misaligned K), ptxas, the CLI."""
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import emulate, run_operator, tensor_math as TM
from ptxgen.errors import PtxgenError
from ptxgen.ir import Builder, Module, Param, ptr, types as T
from ptxgen.ops import tensor_probes as P
from ptxgen.ops.fp8_matmul import Fp8Matmul
from ptxgen.ops.tc_matmul import TcMatmul

ARCH = "sm_90a"
needs_ptxas = pytest.mark.skipif(not toolchain.have_tool("ptxas"), reason="ptxas not found")


# -- the instruction ---------------------------------------------------------------------------------
def test_builder_refuses_fp8_transposes_and_register_a():
    m = Module(target=ARCH)
    b = Builder(m.add_kernel("k", [Param("p", T.u64, ptr(T.b8))]))
    desc = b.mov(0, type=T.u64)
    with pytest.raises(ValueError, match="K-major"):
        b.wgmma_mma_async(64, None, desc, desc, ab="e4m3", trans_b=1, scale_d=0)
    with pytest.raises(ValueError, match="K-major"):
        b.wgmma_mma_async(64, None, [b.mov(0, type=T.b32) for _ in range(4)], desc, ab="e5m2",
                          scale_d=0)
    with pytest.raises(ValueError, match="not supported"):
        b.wgmma_mma_async(64, None, desc, desc, ab=("e4m3", "bf16"), scale_d=0)


def test_wgmma_fp8_mods():
    m = Module(target=ARCH)
    b = Builder(m.add_kernel("k", [Param("p", T.u64, ptr(T.b8))]))
    desc = b.mov(0, type=T.u64)
    b.wgmma_mma_async(32, None, desc, desc, ab=("e4m3", "e5m2"), scale_d=0)
    text = emit_module(m, ARCH)
    assert "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e5m2" in text


@pytest.mark.parametrize("ab, c_in", [("e4m3", False), ("e5m2", True), (("e4m3", "e5m2"), True),
                                      (("e5m2", "e4m3"), False)])
def test_emulated_wgmma_fp8_is_the_model(ab, c_in):
    """The emulated instruction reads the swizzled fp8 tiles through the descriptors and sums
    with MODEL_FP8: equal, element for element, to the model on the same matrices (and close
    to the exact float64 product, so the layouts are right)."""
    fa, fb = ab if isinstance(ab, tuple) else (ab, ab)
    rng = np.random.default_rng(7)
    ctas, n, ks = 2, 64, 4
    m = P.wgmma_probe(n, ksteps=ks, ab=ab, c_in=c_in)
    a_bits, a = P.random_bits(rng, fa, (ctas, 64, 128))
    b_bits, bb = P.random_bits(rng, fb, (ctas, n, 128))
    c = rng.standard_normal((ctas, 64, n)).astype(np.float32) if c_in else None
    d = np.zeros((ctas, 64, n), np.float32)
    emulate(m, "wgmma_probe", (ctas,), (128,), a_bits, b_bits, *([c] if c_in else []), d)
    want = np.zeros((ctas, 64, n)) if c is None else c.astype(np.float64)
    for s in range(ks):
        sl = slice(32 * s, 32 * s + 32)
        want = TM.block_dot(a[..., sl], np.swapaxes(bb[..., sl], 1, 2), want, "f32",
                            TM.MODEL_FP8)
    assert np.array_equal(d, want.astype(np.float32))
    exact = a @ np.swapaxes(bb, 1, 2) + (0 if c is None else c)
    assert np.abs(d - exact).max() <= 2.0 ** -8 * (np.abs(a) @ np.abs(np.swapaxes(bb, 1, 2))
                                                   + (0 if c is None else np.abs(c))).max()


def test_fp8_accumulation_keeps_fewer_bits_than_f32():
    """MODEL_FP8's measured rule: one instruction's sum keeps frac_bits fraction bits, so a
    product 2^-(frac_bits+2) beside 1.0 is lost where an f32 sum keeps it."""
    mf = TM.MODEL_FP8
    frac = 23 if mf.frac_bits is None else mf.frac_bits
    a = np.zeros((1, 32))
    b = np.zeros((32, 1))
    a[0, 0], b[0, 0] = 1.0, 1.0
    a[0, 1], b[1, 0] = 2.0 ** -((frac + 2) // 2), 2.0 ** -((frac + 3) // 2)
    got = TM.block_dot(a, b, np.zeros((1, 1)), "f32", mf)[0, 0]
    assert got == 1.0 and (frac >= 23 or 1.0 + a[0, 1] * b[1, 0] != got)


# -- the operator --------------------------------------------------------------------------------------
CASES = [("e4m3", None, "bf16", dict(M=67, N=45, K=64)),
         ("e5m2", "e4m3", "f32", dict(M=130, N=72, K=200)),      # K % 16: the 8-bit pad copy
         ("e5m2", None, "bf16", dict(M=33, N=130, K=136))]


@pytest.mark.parametrize("fa, fb, out, shape", CASES)
def test_fp8_matmul_on_the_emulator(fa, fb, out, shape):
    op = Fp8Matmul(fa, out, b_dtype=fb)
    arrays = op.make_inputs(shape, np.random.default_rng(hash((fa, out)) % 2 ** 32))
    ref = op.reference(shape, arrays)
    run_operator(op, shape, arrays, ARCH)
    ok, worst = op.check(shape, arrays, ref)
    assert ok, worst
    # the bound is the measured accumulation's worst case and no looser (under 0.45 % of
    # sum |a||b| scaled per 32 k: 32 products and C each cut 13 fraction bits below the largest
    # exponent, the sum cut to 13 bits; plus a bf16 C's rounding) and check() applies it: one
    # element off by twice its bound fails
    a, b = op.matrices(arrays)
    absprod = op.scale(arrays) * (np.abs(a) @ np.abs(b))
    per = -(-shape["K"] // 32) * 0.0045 + (2.0 ** -7 if out == "bf16" else 0.0)
    assert (ref["bound"] <= per * absprod + 1e-12).all()
    bad = dict(arrays)
    c = op.values(arrays["C"], out).copy()
    i, j = shape["M"] // 2, shape["N"] // 2
    c[i, j] += 2 * ref["bound"][i, j]
    bad["C"] = c.astype(np.float32) if out == "f32" else op_bits(c)
    assert not op.check(shape, bad, ref)[0]


def op_bits(c):
    from ptxgen.ops.tc_matmul import bf16_bits
    return bf16_bits(c)


def test_fp8_scales_multiply_c():
    op = Fp8Matmul("e4m3", "f32")
    shape = dict(M=64, N=64, K=64)
    arrays = op.make_inputs(shape, np.random.default_rng(3))
    arrays["scale_a"][0], arrays["scale_b"][0] = 1.0, 1.0
    one = {k: v.copy() for k, v in arrays.items()}
    run_operator(op, shape, one, ARCH)
    arrays["scale_a"][0], arrays["scale_b"][0] = 0.5, 0.25
    run_operator(op, shape, arrays, ARCH)
    assert np.array_equal(arrays["C"], one["C"] * np.float32(0.125))


@pytest.mark.parametrize("kwargs, words", [
    (dict(dtype="bf16"), "e4m3 or e5m2"), (dict(b_dtype="f16"), "b_dtype"),
    (dict(k_pack="ldg"), "k_pack")])
def test_fp8_matmul_errors(kwargs, words):
    with pytest.raises(PtxgenError, match=words):
        Fp8Matmul(**kwargs)


def test_fp8_needs_wgmma():
    with pytest.raises(PtxgenError, match="sm_90a"):
        Fp8Matmul().build(dict(M=64, N=64, K=64), "sm_80")


def test_tc_matmul_keeps_fp8_out():
    with pytest.raises(PtxgenError, match="bf16, f16, tf32"):
        TcMatmul("e4m3")


@needs_ptxas
@pytest.mark.parametrize("shape", [dict(M=4096, N=4096, K=4096), dict(M=8192, N=8192, K=8192),
                                   dict(M=67, N=45, K=200)])
@pytest.mark.parametrize("scaling", ["tensor", "block"])
def test_fp8_emits_ptxas_clean_without_spills(shape, scaling):
    op = Fp8Matmul("e4m3", "bf16", scaling=scaling)
    m = op.build(shape, ARCH)
    asm = toolchain.assemble(emit_module(m, ARCH), ARCH)
    r = asm.resources["tc_matmul"]
    assert r.spill_stores == 0 and r.spill_loads == 0
    assert op.schedule_for(shape).BK == 128


def test_cli_runs_fp8_on_the_emulator():
    out = subprocess.run([sys.executable, "-m", "ptxgen", "run", "matmul", "--dtype", "e4m3",
                          "--M", "67", "--N", "45", "--K", "64", "--backend", "emu", "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "check: PASS" in out.stdout, out.stdout + out.stderr
    bad = subprocess.run([sys.executable, "-m", "ptxgen", "run", "matmul", "--dtype", "e4m3",
                          "--b-layout", "row", "--backend", "emu"], capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "--b-layout" in bad.stderr


# -- block scales ------------------------------------------------------------------------------------
@pytest.mark.parametrize("out, shape", [("bf16", dict(M=67, N=45, K=300)),
                                        ("f32", dict(M=130, N=200, K=256))])
def test_block_scaled_fp8_on_the_emulator(out, shape):
    op = Fp8Matmul("e4m3", out, scaling="block")
    arrays = op.make_inputs(shape, np.random.default_rng(shape["K"]))
    assert arrays["a_scales"].shape == (-(-shape["K"] // 128), shape["M"])
    ref = op.reference(shape, arrays)
    first = {k: v.copy() for k, v in arrays.items()}
    run_operator(op, shape, first, ARCH)
    assert op.check(shape, first, ref)[0]
    # one A scale block (row 5, k-block 1) doubled changes row 5 only
    arrays["a_scales"][1, 5] *= 2
    run_operator(op, shape, arrays, ARCH)
    changed = np.any(op.values(arrays["C"], out) != op.values(first["C"], out), axis=1)
    assert changed[5] and changed.sum() == 1
    assert op.check(shape, arrays)[0]


def _pingpong(op, shape, **fields):
    """op's block-scaled schedule for shape with the ping-pong promotion (inflight=1)."""
    return dataclasses.replace(op.schedule_for(shape), inflight=1, **fields)


def _emulate_steps(op, shape, arrays, gemm_ctas):
    """op's steps on the emulator, the GEMM on gemm_ctas CTAs: fewer than its tiles, so each
    persistent CTA carries its slots, phases and accumulators from tile to tile."""
    module = op.build(shape, ARCH)
    for name, buf in op.workspace_arrays(shape, ARCH).items():
        arrays.setdefault(name, buf)
    for step in op.steps(shape, ARCH):
        cfg = step.launch
        grid = (gemm_ctas,) if step.kernel == "tc_matmul" else cfg.grid
        emulate(module, step.kernel, grid, cfg.block, *step.args(arrays),
                shared_bytes=cfg.shared_bytes)


@pytest.mark.parametrize("out, shape, cluster_m", [
    ("bf16", dict(M=200, N=300, K=520), 1),      # 5 k-blocks, the last partial: odd count
    ("f32", dict(M=200, N=300, K=520), 2),
    ("bf16", dict(M=130, N=200, K=256), 1),      # 2 k-blocks: drains from the other accumulator
    ("f32", dict(M=67, N=45, K=64), 1),          # 1 k-block: drains at once
])
def test_block_scaled_pingpong_is_bit_identical_to_serial(out, shape, cluster_m):
    serial = Fp8Matmul("e4m3", out, scaling="block")
    shape = serial.shape(**shape)
    sched = dataclasses.replace(serial.schedule_for(shape), cluster_m=cluster_m)
    inputs = serial.make_inputs(shape, np.random.default_rng(shape["N"]))
    got = []
    for inflight in (0, 1):
        op = Fp8Matmul("e4m3", out, dataclasses.replace(sched, inflight=inflight),
                       scaling="block")
        arrays = {k: v.copy() for k, v in inputs.items()}
        arrays["C"][...] = 0x7FC1 if out == "bf16" else np.nan     # poisoned: every element stored
        _emulate_steps(op, shape, arrays, gemm_ctas=2)
        assert op.check(shape, arrays)[0]
        got.append(arrays["C"])
    assert got[0].dtype == got[1].dtype and got[0].tobytes() == got[1].tobytes()


@needs_ptxas
@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("n", [4096, 8192])
def test_block_pingpong_keeps_one_group_in_flight_without_spills(n):
    """ptxas keeps wait_group 1 (DEPBAR.LE gsb0, 0x1), the wgmmas unserialized, and the three
    accumulators in registers."""
    serial = Fp8Matmul("e4m3", "bf16", scaling="block")
    shape = serial.shape(M=n, N=n, K=n)
    ptx = emit_module(Fp8Matmul("e4m3", "bf16", _pingpong(serial, shape),
                                scaling="block").build(shape, ARCH), ARCH)
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    asm = toolchain.assemble(ptx, ARCH)
    r = asm.resources["tc_matmul"]
    assert r.spill_stores == 0 and r.spill_loads == 0 and "serialized" not in asm.log
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in toolchain.disassemble(asm.cubin)


def test_block_scales_refuse_split_k():
    from ptxgen.errors import ScheduleError
    op = Fp8Matmul("e4m3", "bf16", scaling="block")
    shape = op.shape(M=256, N=256, K=256)
    bad = Fp8Matmul("e4m3", "bf16", _pingpong(op, shape, split_k=2, epilogue="direct",
                                              cluster_m=1), scaling="block")
    with pytest.raises(ScheduleError, match="split_k=1"):
        bad.build(shape, ARCH)


# -- epilogues (applied to the scaled accumulators) ------------------------------------------------
@pytest.mark.parametrize("scaling, epilogue, out, shape", [
    ("tensor", "bias_silu", "bf16", dict(M=67, N=45, K=200)),
    ("tensor", "residual", "f32", dict(M=33, N=130, K=64)),
    ("block", "bias_gelu", "bf16", dict(M=67, N=131, K=300)),
])
def test_fp8_epilogues_on_the_emulator(scaling, epilogue, out, shape):
    op = Fp8Matmul("e4m3", out, scaling=scaling, epilogue=epilogue)
    arrays = op.make_inputs(shape, np.random.default_rng(shape["N"]))
    run_operator(op, shape, arrays, ARCH)
    ok, worst = op.check(shape, arrays)
    assert ok, worst
    # the same C checked as the GEMM without its epilogue fails: the epilogue ran
    plain = Fp8Matmul("e4m3", out, scaling=scaling)
    assert not plain.check(shape, arrays)[0]


def test_fp8_epilogue_tensor_names_may_not_be_the_scales():
    from ptxgen.schedule import epilogue as E
    with pytest.raises(PtxgenError, match="scale_a"):
        Fp8Matmul("e4m3", epilogue=E.trace_epilogue(lambda acc, row, col, scale_a:
                                                    acc * scale_a[row],
                                                    scale_a=E.Tensor("row")))


def test_cli_runs_an_fp8_epilogue_and_refuses_one_with_groups(cli):
    rc, out, err = cli("run", "matmul", "--M", "67", "--N", "45", "--K", "64", "--dtype",
                       "e4m3", "--epilogue", "bias_gelu", "--backend", "emu", "--check")
    assert rc == 0 and "PASS" in out, err
    rc, out, err = cli("emit", "matmul", "--dtype", "e4m3", "--groups", "4", "--epilogue",
                       "bias")
    assert rc != 0 and "--epilogue" in err and "--groups" in err


def test_block_scales_need_128_wide_tiles():
    from ptxgen.errors import ScheduleError
    from ptxgen.schedule.tc_matmul import TcMatmulSchedule
    op = Fp8Matmul("e4m3", "bf16", TcMatmulSchedule(inflight=0).for_dtype("e4m3"),
                   scaling="block")
    with pytest.raises(ScheduleError, match="wgmma_n = BK = 128"):
        op.build(dict(M=256, N=256, K=256), ARCH)


def test_operator_bound_follows_the_emulators_model():
    from ptxgen.ops.fp8_matmul import FP8_ACCUMULATION
    m = TM.MODEL_FP8
    assert FP8_ACCUMULATION == (m.block, m.width, m.frac_bits)


# -- against the H200 ---------------------------------------------------------------------------------
GPU_DATA = "fp8_gemm_h200.npz"
S128 = dict(BM=128, BN=128, wgmma_n=128, stages=6)          # the auto choice the GPU ran
S64 = dict(BM=64, BN=128, wgmma_n=128, consumers=1, stages=4)
GPU_CASES = {                                       # name: (A's, B's format, C, schedule)
    "e4m3_bf16": ("e4m3", "e4m3", "bf16", S128),
    "e4m3_f32": ("e4m3", "e4m3", "f32", S128),
    "e5m2e4m3_f32": ("e5m2", "e4m3", "f32", S128),
    "e5m2_bf16": ("e5m2", "e5m2", "bf16", S128),
    "e4m3_bf16_splitk2": ("e4m3", "e4m3", "bf16", dict(S64, split_k=2)),
    "grouped_e4m3_f32": ("e4m3", "e4m3", "f32", dict(S64, stages=3)),
}


def _gpu_data(name):
    import os
    with np.load(os.path.join(os.path.dirname(__file__), "data", GPU_DATA)) as f:
        return {k.split("__")[1]: f[k] for k in f.files if k.startswith(name + "__")}


@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_fp8_gemm_bit_equal_to_the_h200(name):
    """The fp8 GEMMs of `benchmarks/llm_gemms.py --parts fp8emu` as an H200 ran them
    (2026-12-07; whole or a slice of rows and columns: each element depends only on its row of A
    and column of B): the emulated kernel on the same inputs gives the GPU's C bit for bit, so
    MODEL_FP8 (fitted to them with `benchmarks/numerics.py --fit`) is wgmma's fp8 sum."""
    from ptxgen.ops.grouped_matmul import GroupedMatmul
    from ptxgen.schedule.tc_matmul import TcMatmulSchedule
    fa, fb, out, sched = GPU_CASES[name]
    d = _gpu_data(name)
    sched = TcMatmulSchedule(**sched).for_dtype(fa)
    gpu = d.pop("gpu")
    if "X" in d:
        op = GroupedMatmul(fa, out, sched, "masked", b_dtype=fb)
        G, N, K = d["W"].shape
        shape = op.shape(M=d["X"].shape[0], N=N, K=K, G=G)
    else:
        op = Fp8Matmul(fa, out, sched, b_dtype=fb)
        shape = op.shape(M=d["A"].shape[0], N=d["Bt"].shape[0], K=d["A"].shape[1])
        d["C"] = np.full(gpu.shape, np.nan, np.float32) if out == "f32" else \
            np.full(gpu.shape, 0x7FC0, np.uint16)
    run_operator(op, shape, d, ARCH)
    g, e = gpu, d["C"]
    same = (g == e) | (np.isnan(g) & np.isnan(e)) if g.dtype.kind == "f" else g == e
    assert same.all(), f"{np.mean(same):.4%} of C bit-equal"


def test_fp8_model_bit_equal_to_the_h200():
    """MODEL_FP8 alone on the f32-C GEMMs of the same data (no bf16 rounding hides the sum's low
    bits): the accumulator from zero through one block_dot per 32 k, times the kernel's f32
    scale, is the GPU's C on every element; the prior (width 25) was not."""
    from ptxgen.arrays import from_fp8
    for model, want in ((TM.MODEL_FP8, True), (TM.Numerics(block=32, width=25, frac_bits=13),
                                               False)):
        for name in ("e4m3_f32", "e5m2e4m3_f32"):
            fa, fb = GPU_CASES[name][:2]
            d = _gpu_data(name)
            a, b = from_fp8(d["A"], fa), from_fp8(d["Bt"], fb).T
            acc = np.zeros((a.shape[0], b.shape[1]))
            for k0 in range(0, a.shape[1], 32):
                acc = TM.block_dot(a[:, k0:k0 + 32], b[k0:k0 + 32], acc, "f32", model)
            scale = np.float32(d["scale_a"][0]) * np.float32(d["scale_b"][0])
            c = (acc.astype(np.float32) * scale).astype(np.float32)
            assert np.array_equal(c, d["gpu"]) == want, (model, name)
