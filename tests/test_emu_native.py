"""The emulator's native engine (emu.native): bit-identical to the interpreter on random
programs (tests/irgen.py) and on the library operators, invalid accesses stopped with a
one-line error, kernels it does not run refused (engine='native') or left to the interpreter
(engine='auto')."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

import irgen
from case_args import case_arguments
from ptxgen.emu import emulate
from ptxgen.errors import EmulationError
from ptxgen.ir.verify import verify_module
from ptxgen.ops import OPERATORS

SEED = np.random.SeedSequence().entropy
NATIVE_OPS = ("saxpy", "matmul", "add", "scale", "transpose")   # the others use shfl.sync


def _run_case(case, engine):
    arrays, args = case_arguments(case)
    r = emulate(case.module, case.kernel.name, (case.grid, 1, 1), (case.block, 1, 1), *args,
                check="off", engine=engine)
    assert r.engine == engine
    return {name: arr.tobytes() for name, arr in arrays.items()}


# programs the native engine refuses (directed roundings, bf16…) are filtered out; hypothesis
# fails the test (filter_too_much) if that leaves too few
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(irgen.programs())
def test_native_engine_is_bit_identical_to_the_interpreter(case):
    want = _run_case(case, "interp")
    try:
        got = _run_case(case, "native")
    except EmulationError as e:
        assert "native engine:" in str(e) and "\n" not in str(e)
        assume(False)
    diff = case.outputs_equal(want, got)
    assert diff is None, f"native differs from the interpreter: {diff}\n{case.describe()}"


def _shape(op):
    return op.shape(**({"n": 1003} if op.shape_names == ("n",) else
                       dict(M=67, N=45, K=33) if op.shape_names == ("M", "N", "K") else
                       dict(zip(op.shape_names, (67, 45)))))


def _run_op(op, shape, base, engine):
    module = verify_module(op.build(shape, "sm_90"))
    arrays = {k: v.copy() for k, v in base.items()}
    arrays.update(op.workspace_arrays(shape, "sm_90"))
    engines = set()
    for step in op.steps(shape, "sm_90"):
        cfg = step.launch
        r = emulate(module, step.kernel, cfg.grid, cfg.block, *step.args(arrays),
                    shared_bytes=cfg.shared_bytes, check="off", engine=engine)
        engines.add(r.engine)
    return arrays, engines


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operators_native_or_interpreter(name):
    op = OPERATORS[name]
    shape = _shape(op)
    base = op.make_inputs(shape, np.random.default_rng([SEED, sorted(OPERATORS).index(name)]))
    want, _ = _run_op(op, shape, base, "interp")
    got, engines = _run_op(op, shape, base, "auto")
    assert engines == ({"native"} if name in NATIVE_OPS else {"interp"}), engines
    for n in op.outputs:
        assert want[n].tobytes() == got[n].tobytes(), f"{name}: {n} differs (seed {SEED})"
    assert op.check(shape, got)[0]


def test_unsupported_kernel_is_refused_in_one_line():
    op = OPERATORS["softmax"]
    shape = _shape(op)
    with pytest.raises(EmulationError) as e:
        _run_op(op, shape, op.make_inputs(shape, np.random.default_rng(0)), "native")
    msg = str(e.value)
    assert msg.startswith("native engine: kernel softmax:") and "shfl" in msg and "\n" not in msg


OOB = """
.version 7.8
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u32 n)
{
 .reg .pred %p1; .reg .b32 %r<4>; .reg .b64 %rd<4>;
 ld.param.u64 %rd1, [p];
 ld.param.u32 %r2, [n];
 mov.u32 %r1, %tid.x;
 setp.ge.u32 %p1, %r1, %r2;
 @%p1 bra $done;
 mul.wide.u32 %rd2, %r1, 4;
 add.u64 %rd3, %rd1, %rd2;
 st.global.u32 [%rd3], %r1;
$done:
 ret;
}"""


def test_out_of_bounds_store_stops_the_native_engine():
    a = np.zeros(8, np.uint32)
    emulate(OOB, "k", 1, 32, a, np.uint32(8), engine="native", check="off")
    np.testing.assert_array_equal(a, np.arange(8))
    with pytest.raises(EmulationError) as e:
        emulate(OOB, "k", 1, 32, a, np.uint32(9), engine="native", check="off")
    msg = str(e.value)
    line = OOB.splitlines().index(" st.global.u32 [%rd3], %r1;") + 1
    assert "out-of-bounds or misaligned" in msg and f"PTX line {line} " in msg and "\n" not in msg


def test_auto_keeps_the_interpreter_when_checking():
    a = np.zeros(8, np.uint32)
    assert emulate(OOB, "k", 1, 32, a, np.uint32(8), engine="auto").engine == "interp"
    assert emulate(OOB, "k", 1, 32, a, np.uint32(8), engine="auto", check="off").engine == \
        "native"


def test_native_code_calls_no_library_function():
    """MCJIT resolves library calls against the process, where libgcc's half-precision helpers
    (__truncdfhf2, …) may be missing: the generated code must need none but memset."""
    import re

    import llvmlite.binding as llvm

    from ptxgen.emu.api import compile_kernel
    from ptxgen.emu.native import _host
    from ptxgen.emu.native_lower import lower_host
    from ptxgen.ir import Builder, Module, Param, ptr
    from ptxgen.ir import types as T
    m = Module()
    k = m.add_kernel("k", [Param("x", T.u64, ptr(T.b8))])
    b = Builder(k)
    x = b.param("x")
    h = b.reg(T.f16)
    b.mov(b.ld("global", T.b16, x), type=T.b16, out=h)
    f32, s16, u16 = (b.ld("global", t, x) for t in (T.f32, T.s16, T.u16))
    outs = [b.cvt(T.f16, src, rounding=r) for r in ("rn", "rz", "rm", "rp")
            for src in (f32, s16, u16)]
    outs += [b.cvt(t, h, rounding=r) for r in ("rni", "rzi", "rmi", "rpi")
             for t in (T.s32, T.u16, T.s64)]
    outs += [b.cvt(T.f64, h, rounding=""), b.cvt(T.f32, h, rounding=""),
             b.add(h, h), b.mul(h, h), b.min(h, h)]
    for i, o in enumerate(outs):
        t = T.b16 if o.type == T.f16 else o.type
        b.st("global", b.add(x, 8 * (i + 1), type=T.u64), o, type=t)
    b.ret()
    lm, _ = lower_host(compile_kernel(m, "k"))
    llvm_, tm = _host()
    mod = llvm.parse_assembly(str(lm))
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    calls = set(re.findall(r"movabsq\s+\$([A-Za-z_]\w*)", tm.emit_assembly(mod)))
    assert calls <= {"memset"}, calls


def test_native_refuses_bf16_min_with_one_line():
    """bf16 values are 16-bit integers in the host lowering (no float compare on them): the
    native engine refuses min.bf16 with a one-line EmulationError, and engine='auto' runs it on
    the interpreter."""
    text = """.version 7.8
.target sm_90
.address_size 64
.visible .entry k(.param .u64 inp, .param .u64 out)
{
    .reg .b16 %h<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [inp];
    ld.param.u64 %rd1, [out];
    ld.global.b16 %h0, [%rd0];
    mov.b16 %h1, 0;
    min.bf16 %h2, %h0, %h1;
    st.global.b16 [%rd1], %h2;
    ret;
}
"""
    out = np.zeros(1, np.uint16)
    with pytest.raises(EmulationError, match="not available to the native engine") as e:
        emulate(text, "k", 1, 1, np.array([0x3F80], np.uint16), out, engine="native")
    assert "\n" not in str(e.value)
    r = emulate(text, "k", 1, 1, np.array([0x3F80], np.uint16), out, engine="auto")
    assert r.engine == "interp" and out[0] == 0                 # min(1.0, 0.0)
