"""GEMM epilogues (schedule/epilogue.py, epilogue_lower.py): Python functions traced once, applied
to the tensor-core GEMM's accumulators before C is stored (sm_90a register and staged TMA /
row-store epilogues, the sm_80 path), on the CPU emulator at odd shapes against float64."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import emulate, run_operator
from ptxgen.errors import PtxgenError
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.schedule import epilogue as E
from ptxgen.schedule import named_epilogues as NE
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

ARCH = "sm_90a"
SMALL = TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=2, group_m=2)


def _run(op, shape, arch=ARCH, seed=0, sm_count=None):
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    if sm_count is None:
        run_operator(op, shape, arrays, arch)
        return arrays
    m = op.build(shape, arch)
    arrays.update(op.workspace_arrays(shape, arch))
    for step in op.steps(shape, arch, sm_count):
        L = step.launch
        emulate(m, step.kernel, L.grid, L.block, *step.args(arrays), shared_bytes=L.shared_bytes)
    return arrays


def _ok(op, shape, arrays):
    ok, worst = op.check(shape, arrays)
    assert ok, worst


# -- the named library, both paths, odd shapes ------------------------------------------------
@pytest.mark.parametrize("name", ["bias", "relu", "gelu_tanh", "gelu_erf", "silu", "residual",
                                  "row_scale", "col_scale", "bias_gelu", "bias_silu",
                                  "bias_gelu_residual"])
@pytest.mark.parametrize("M, N, K", [(67, 45, 64), (70, 131, 41)])
def test_named_epilogues_on_the_sm90a_gemm(name, M, N, K):
    op = TcMatmul("bf16", "f32", epilogue=name)
    shape = op.shape(M=M, N=N, K=K)
    _ok(op, shape, _run(op, shape))


@pytest.mark.parametrize("name", ["bias_gelu", "gelu_erf", "bias_silu", "residual", "row_scale"])
def test_named_epilogues_on_the_sm80_path(name):
    op = TcMatmul("bf16", "f32", epilogue=name)
    shape = op.shape(M=67, N=45, K=37)
    _ok(op, shape, _run(op, shape, "sm_80"))


@pytest.mark.parametrize("dtype", ["f16", "tf32"])
def test_other_input_types(dtype):
    op = TcMatmul(dtype, "bf16", epilogue="bias_gelu")
    shape = op.shape(M=67, N=45, K=40)
    _ok(op, shape, _run(op, shape))


# -- every C store kind -----------------------------------------------------------------------
@pytest.mark.parametrize("sched, out, N, kind", [
    (SMALL, "f32", 150, None),
    (TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, inflight=0, group_m=0,
                      epilogue="tma"), "bf16", 152, "tile"),
    (TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, epilogue="tma"), "bf16",
     151, "rows_st"),
    (TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, epilogue="rows"), "bf16",
     136, "rows"),
    (TcMatmulSchedule(BN=128, wgmma_n=128, stages=2, epilogue="tma"), "f32", 136, "tile"),
])
def test_epilogue_before_every_c_store_kind(sched, out, N, kind):
    op = TcMatmul("bf16", out, sched, epilogue="bias_gelu_residual")
    shape = op.shape(M=190, N=N, K=300)
    assert sched.c_store(out, 190, N) == kind
    _ok(op, shape, _run(op, shape, sm_count=2))


# -- user functions ---------------------------------------------------------------------------
def masked_scaled(acc, row, col, alpha, colw, rowb):
    """Comparisons, where, an index expression, a scalar, casts, bf16 and f16 tensors."""
    lower = where(col <= row, acc * alpha, -acc)
    shifted = lower + colw[col // 2] + rowb[row] * E.cast(col % 3, "f32")
    return E.cast(E.tanh(shifted * 0.25) + E.exp(E.minimum(acc, 1.0) * 0.5) - E.sqrt(abs(acc)),
                  "bf16")


where = E.where


def test_a_user_epilogue_with_indices_scalars_and_16_bit_tensors():
    epi = E.trace_epilogue(masked_scaled, alpha=E.Tensor("scalar"),
                           colw=E.Tensor("col", "bf16"), rowb=E.Tensor("row", "f16"))
    for arch in (ARCH, "sm_80"):
        op = TcMatmul("bf16", "f32", epilogue=epi)
        shape = op.shape(M=67, N=45, K=64)
        _ok(op, shape, _run(op, shape, arch))


def test_an_epilogue_of_row_and_col_only():
    epi = E.trace_epilogue(lambda acc, row, col: acc + E.cast(row * 1000 + col, "f32"), "rc")
    op = TcMatmul("bf16", "f32", epilogue=epi)
    shape = op.shape(M=67, N=45, K=16)
    arrays = _run(op, shape)
    _ok(op, shape, arrays)
    a, b = op.matrices(arrays)
    plain = arrays["C"] - (a @ b)
    r, c = np.meshgrid(np.arange(67), np.arange(45), indexing="ij")
    assert np.allclose(plain, r * 1000 + c, atol=1e-2)


def test_the_check_fails_for_another_epilogue():
    op = TcMatmul("bf16", "f32", epilogue="bias_gelu")
    shape = op.shape(M=67, N=45, K=64)
    arrays = _run(op, shape)
    assert op.check(shape, arrays)[0]
    assert not TcMatmul("bf16", "f32", epilogue="bias_silu").check(shape, arrays)[0]
    assert not TcMatmul("bf16", "f32").check(shape, arrays)[0]


# -- tracing --------------------------------------------------------------------------------------
def test_the_function_is_traced_once_into_shared_nodes():
    calls = []

    def f(acc, row, col, bias):
        calls.append(1)
        x = acc + bias[col]
        return x * E.sigmoid(x) + x * E.sigmoid(x)
    epi = E.trace_epilogue(f, bias=E.Tensor("col"))
    assert len(calls) == 1
    assert sum(n.op == "sigmoid" for n in epi.nodes) == 1
    op = TcMatmul("bf16", "f32", epilogue=epi)
    text = emit_module(op.build(op.shape(M=256, N=256, K=64), ARCH))
    assert len(calls) == 1 and ".approx" not in text


def test_keys_are_stable_and_tell_epilogues_apart():
    a = NE.named_epilogue("bias_gelu")
    assert a.key == NE.named_epilogue("bias_gelu").key
    assert a.key != NE.named_epilogue("bias_silu").key
    f1 = E.trace_epilogue(lambda acc, row, col: acc * 2.0, "s")
    f2 = E.trace_epilogue(lambda acc, row, col: acc * 3.0, "s")
    assert f1.key != f2.key
    assert TcMatmul("bf16", epilogue=a).kernel_name() == f"tc_matmul_{a.key}"
    assert TcMatmul("bf16").kernel_name() == "tc_matmul"


@pytest.mark.parametrize("fn, tensors, msg", [
    (lambda acc, row, col: acc if acc > 0 else 0.0, {}, "truth value"),
    (lambda acc, row, col, t: acc + t[row, col], {"t": E.Tensor("col")}, "1 index"),
    (lambda acc, row, col, t: acc + t, {"t": E.Tensor("row")}, "must be indexed"),
    (lambda acc, row, col: row / 2, {}, "use //"),
    (lambda acc, row, col: acc > 0, {}, "returns a predicate"),
    (lambda acc, row: acc, {}, "epilogue"),
])
def test_bad_epilogues_are_one_line_errors(fn, tensors, msg):
    with pytest.raises(PtxgenError, match=msg):
        E.trace_epilogue(fn, "bad", **tensors)


def test_bad_names_are_one_line_errors():
    with pytest.raises(PtxgenError, match="unknown epilogue"):
        TcMatmul("bf16", epilogue="gelu_fast")
    with pytest.raises(PtxgenError, match="taken"):
        TcMatmul("bf16", epilogue=E.trace_epilogue(lambda acc, row, col, C: acc + C[col], "x",
                                                   C=E.Tensor("col")))


# -- the float64 reference --------------------------------------------------------------------
def test_the_reference_bound_covers_the_kernel_and_is_tight():
    """The epilogue's bound is the accumulator's propagated through GELU (slope below 1.13)
    plus its own few ulps, not a blanket tolerance: a C off by 1 % fails."""
    op = TcMatmul("bf16", "f32", epilogue="bias_gelu_erf")
    shape = op.shape(M=67, N=45, K=64)
    arrays = _run(op, shape)
    ref = op.reference(shape, arrays)
    a, b = op.matrices(arrays)
    acc_bound = op.error_bound(shape, np.abs(a) @ np.abs(b))
    assert np.all(ref["bound"] <= 1.2 * acc_bound + 1e-5 * (np.abs(ref["C"]) + 1))
    arrays["C"] = arrays["C"] * np.float32(1.01)
    assert not op.check(shape, arrays)[0]


def test_sampled_rows_reference_matches_the_full_one():
    op = TcMatmul("bf16", "bf16", epilogue="bias_gelu")
    shape = op.shape(M=67, N=45, K=64)
    arrays = op.make_inputs(shape, np.random.default_rng(3))
    full = op.reference(shape, arrays)
    rows = [0, 7, 66]
    part = op.reference(shape, arrays, rows=rows)
    assert np.array_equal(part["C"], full["C"][rows])
    assert np.array_equal(part["bound"], full["bound"][rows])


# -- ptxas -----------------------------------------------------------------------------------
@pytest.mark.skipif(toolchain.find_tool("ptxas") is None, reason="no ptxas")
@pytest.mark.parametrize("arch", [ARCH, "sm_80"])
def test_bias_gelu_at_4096_assembles_without_spills(arch):
    op = TcMatmul("bf16", "bf16", epilogue="bias_gelu")
    shape = op.shape(M=4096, N=4096, K=4096)
    text = emit_module(op.build(shape, arch), arch)
    r = toolchain.assemble(text, arch).resources[op.kernel_name()]
    assert r.spills == 0


# -- bk.dot on the tensor cores ----------------------------------------------------------------
def _block_kernel():
    from ptxgen.frontends import block as bk

    @bk.kernel(num_warps=8)
    def mm_epi(A: bk.pointer_to(bk.bf16), B: bk.pointer_to(bk.bf16), C: bk.pointer,
               bias: bk.pointer, res: bk.pointer_to(bk.bf16), M: bk.int32, N: bk.int32,
               K: bk.int32, BM: bk.constexpr, BN: bk.constexpr, BK: bk.constexpr):
        rm = bk.program_id(0) * BM + bk.arange(0, BM)
        rn = bk.program_id(1) * BN + bk.arange(0, BN)
        rk = bk.arange(0, BK)
        acc = bk.zeros([BM, BN])
        for k in bk.range(0, K, BK):
            a = bk.load(A + rm[:, None] * K + (k + rk)[None, :],
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K))
            b = bk.load(B + (k + rk)[:, None] * N + rn[None, :])
            acc += bk.dot(a, b)
        acc = acc + bk.load(bias + rn)[None, :]
        acc = bk.where(rn[None, :] < 8, bk.maximum(acc, 0.0), bk.tanh(acc))
        acc = acc + bk.load(res + rm[:, None] * N + rn[None, :])
        bk.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
    return mm_epi


def _reference_epi(acc, row, col, bias, res):
    x = acc + bias[col]
    return where(col < 8, E.maximum(x, 0.0), E.tanh(x)) + res[row, col]


def test_a_bf16_block_dot_kernel_is_the_tensor_core_gemm_with_its_epilogue(arch=ARCH):
    k = _block_kernel()
    op, roles = k.tc_operator(BM=128, BN=128, BK=64)
    assert roles == dict(A="A", B="B", C="C", M="M", N="N", K="K")
    assert op.b_layout == "row" and op.out == "f32" and op.inputs == ("A", "B", "bias", "res")
    assert {n: (t.kind, t.dtype) for n, t in op.epilogue.tensors.items()} == \
        {"bias": ("col", "f32"), "res": ("elem", "bf16")}
    shape = op.shape(M=67, N=45, K=40)
    arrays = _run(op, shape, arch)
    _ok(op, shape, arrays)
    # the same function written as a library epilogue gives the same C
    lib = TcMatmul("bf16", "f32", b_layout="row", epilogue=E.trace_epilogue(
        _reference_epi, bias=E.Tensor("col"), res=E.Tensor("elem", "bf16")))
    assert lib.check(shape, arrays)[0]
    again = dict(arrays, C=np.full_like(arrays["C"], np.nan))
    run_operator(lib, shape, again, arch)
    assert np.array_equal(again["C"], arrays["C"])


def test_block_dot_kernel_on_sm80_is_a_one_line_error():
    """A row-major B (the block form's) has no sm_80 (mma.sync) path yet."""
    op, _ = _block_kernel().tc_operator(BM=128, BN=128, BK=64)
    with pytest.raises(PtxgenError, match="column-major B"):
        op.build(op.shape(M=64, N=64, K=64), "sm_80")


def test_block_dot_kernel_ptx_is_wgmma():
    k = _block_kernel()
    text = k.ptx(ARCH, shape=dict(M=512, N=512, K=512), BM=128, BN=128, BK=64)
    assert "wgmma.mma_async" in text and k.tc_kernel_name in text


@pytest.mark.parametrize("body, msg", [
    ("bk.store(C + rm[:, None] * N + rn[None, :], acc)", None),
    ("bk.store(C + rn[None, :] * M + rm[:, None], acc)", "rm \\* N \\+ rn"),
    ("bk.store(C + rm[:, None] * N + rn[None, :], acc + bk.load(bias + rm * 2))", "offset"),
])
def test_block_dot_kernel_forms(body, msg):
    from ptxgen.frontends import block as bk
    src = f'''
@bk.kernel(num_warps=8)
def kern(A: bk.pointer_to(bk.f16), B: bk.pointer_to(bk.f16), C: bk.pointer_to(bk.bf16),
         bias: bk.pointer, M: bk.int32, N: bk.int32, K: bk.int32,
         BM: bk.constexpr, BN: bk.constexpr, BK: bk.constexpr):
    rm = bk.program_id(0) * BM + bk.arange(0, BM)
    rn = bk.program_id(1) * BN + bk.arange(0, BN)
    rk = bk.arange(0, BK)
    acc = bk.zeros([BM, BN])
    for k in bk.range(0, K, BK):
        a = bk.load(A + rm[:, None] * K + (k + rk)[None, :])
        b = bk.load(B + (k + rk)[:, None] * N + rn[None, :])
        acc += bk.dot(a, b)
    {body}
'''
    import linecache
    fname = f"<block-form-{abs(hash(body))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"bk": bk}
    exec(compile(src, fname, "exec"), ns)
    if msg is None:
        op, _ = ns["kern"].tc_operator(BM=64, BN=64, BK=32)
        assert op.dtype == "f16" and op.out == "bf16" and op.epilogue is None
        shape = op.shape(M=33, N=40, K=24)
        _ok(op, shape, _run(op, shape))
    else:
        with pytest.raises(PtxgenError, match=msg):
            ns["kern"].tc_operator(BM=64, BN=64, BK=32)


# -- command line ----------------------------------------------------------------------------
def test_cli_emits_and_runs_a_fused_epilogue(cli):
    rc, out, err = cli("emit", "matmul", "--M", "256", "--N", "256", "--K", "256", "--dtype",
                       "bf16", "--epilogue", "bias_gelu", "--arch", "sm_90a")
    assert rc == 0 and ".entry tc_matmul_bias_gelu_" in out and "epi_bias" in out
    rc, out, err = cli("run", "matmul", "--M", "67", "--N", "45", "--K", "41", "--dtype", "bf16",
                       "--epilogue", "bias_gelu:fast", "--backend", "emu", "--check")
    assert rc == 0 and "PASS" in out, err


@pytest.mark.parametrize("argv, fragment", [
    (["emit", "matmul", "--dtype", "bf16", "--epilogue", "gelu_fast"], "unknown epilogue"),
    (["emit", "add", "--epilogue", "bias"], "--epilogue applies"),
    (["emit", "matmul", "--dtype", "bf16", "--epilogue", "bias:quick"], "math must be"),
])
def test_cli_bad_epilogues_are_one_line_errors(cli, argv, fragment):
    rc, out, err = cli(*argv)
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and fragment in lines[0]


# -- fast math ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bias_gelu:fast", "gelu_erf:fast", "bias_silu:fast",
                                  "tanh:fast"])
def test_fast_math_epilogues(name):
    op = TcMatmul("bf16", "f32", epilogue=name)
    text = emit_module(op.build(op.shape(M=67, N=45, K=64), ARCH))
    assert ".approx" in text
    assert op.kernel_name() != TcMatmul("bf16", epilogue=name.split(":")[0]).kernel_name()
    shape = op.shape(M=67, N=45, K=64)
    _ok(op, shape, _run(op, shape))


@pytest.mark.parametrize("math, suffix", [("ieee", ""), ("fast", ":fast")])
def test_the_tutorial_block_kernel_is_the_library_gemm_byte_for_byte(math, suffix):
    """bias + SiLU written after a bk.dot loop emits the same PTX (kernel name aside) as the
    library GEMM with the named bias_silu epilogue and the same B layout: the same speed."""
    import linecache
    import pathlib
    import re
    doc = pathlib.Path(__file__).resolve().parents[1] / "docs" / "tutorial_fused_kernels.md"
    code = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)[2].split("op, roles")[0]
    linecache.cache["<tutorial kernel>"] = (len(code), None, code.splitlines(True),
                                            "<tutorial kernel>")
    ns = {}
    exec(compile(code, "<tutorial kernel>", "exec"), ns)
    op, _ = ns["mm_bias_silu"].tc_operator(math=math, BM=128, BN=256, BK=64)
    lib = TcMatmul("bf16", "bf16", b_layout="row", epilogue="bias_silu" + suffix)
    shape = op.shape(M=4096, N=4096, K=4096)
    mine = emit_module(op.build(shape, ARCH)).replace(op.kernel_name(), "k")
    assert mine == emit_module(lib.build(shape, ARCH)).replace(lib.kernel_name(), "k")
