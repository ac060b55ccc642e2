"""The elementwise, transpose, row-reduction and softmax operators: they assemble for sm_80 and
sm_90 without spills, run correctly on the CPU emulator at shapes that are not tile multiples
(every plan and variant), and their Numba twins compile."""
import importlib.util

import numpy as np
import pytest

from ptxgen import emit_module, toolchain
from ptxgen.errors import PtxgenError, ToolchainError
from ptxgen.ir.verify import verify_module
from ptxgen.ops import OPERATORS, get_operator
from ptxgen.ops.elementwise import Add, Scale
from ptxgen.ops.reduce import RowReduce
from ptxgen.ops.softmax import Softmax
from ptxgen.ops.transpose import Transpose

NEW = ("add", "scale", "transpose", "row_reduce", "row_max", "softmax")
needs_emu = pytest.mark.skipif(importlib.util.find_spec("ptxgen.emu") is None,
                               reason="the CPU emulator (ptxgen.emu) is not in this build")

# (operator, shapes): the defaults, the benchmark shapes, and awkward ones
ASSEMBLE = [
    (Add(), [{"n": 1 << 28}, {"n": 37}]), (Add(vec=1), [{"n": 37}]),
    (Add(vec=2, chunks=1), [{"n": 37}]), (Scale(), [{"n": 1 << 28}, {"n": 37}]),
    (Scale(vec=1, chunks=4), [{"n": 37}]),
    (Transpose(), [{"M": 8192, "N": 8192}, {"M": 8191, "N": 8193}]),
    (Transpose(pad=0), [{"M": 37, "N": 37}]), (Transpose(block_rows=8), [{"M": 37, "N": 37}]),
    (Transpose(tile=64), [{"M": 37, "N": 37}]),
    (RowReduce("sum"), [{"M": 16384, "N": 8192}, {"M": 8192, "N": 1000}, {"M": 37, "N": 37}]),
    (RowReduce("max"), [{"M": 16384, "N": 8192}, {"M": 8192, "N": 1000}]),
    (RowReduce("sum", threads=1024, unroll=4), [{"M": 37, "N": 50000}]),
    (Softmax(), [{"M": 16384, "N": 1024}, {"M": 4096, "N": 4096}, {"M": 37, "N": 37},
                 {"M": 37, "N": 40000}, {"M": 5, "N": 32768}]),
    (Softmax(threads=512), [{"M": 37, "N": 3000}]),
]


def _assemble(op, dims, arch):
    shape = op.shape(**dims)
    text = emit_module(verify_module(op.build(shape, arch)), arch)
    return toolchain.assemble(text, arch).resources[op.kernel_name()]


def test_registered():
    for name in NEW:
        assert get_operator(name).name == name
    assert {"saxpy", "matmul"} <= set(OPERATORS)


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", range(len(ASSEMBLE)))
def test_assembles_without_spills(case, arch):
    op, shapes = ASSEMBLE[case]
    for dims in shapes:
        r = _assemble(op, dims, arch)
        assert r.registers > 0 and r.spills == 0 and r.stack_bytes == 0, (op.name, dims, r)


@pytest.mark.needs_ptxas
def test_vector_widths_reach_sass():
    """v4 is the default (128-bit LDG/STG), v2 gives 64-bit and v1 32-bit accesses."""
    widths = {}
    for vec in (1, 2, 4):
        op = Add(vec=vec)
        asm = toolchain.assemble(emit_module(op.build(op.shape(n=1000))), "sm_90")
        mix = toolchain.sass_mix(toolchain.disassemble(asm.cubin))["add"]
        widths[vec] = {o.split(".")[-1] for o in mix if o.startswith("LDG")}
    assert "128" in widths[4] and "64" in widths[2]
    assert not ({"64", "128"} & widths[1])


@pytest.mark.needs_ptxas
def test_transpose_padding_sets_the_tile_pitch():
    pad = emit_module(Transpose(tile=32, block_rows=4, vec=1, pad=1).build({"M": 64, "N": 64}))
    nopad = emit_module(Transpose(tile=32, block_rows=4, pad=0).build({"M": 64, "N": 64}))
    assert ".f32 tile[1056]" in pad and ".f32 tile[1024]" in nopad
    # the column read of the store phase: 33 floats apart with padding, 32 without
    assert "mad.lo.u32 %ls0, %tid_x0, 33, %tid_y0" in pad
    assert "mad.lo.u32 %ls0, %tid_x0, 32, %tid_y0" in nopad


def test_softmax_plans_follow_row_length():
    op = Softmax()
    assert op.plan({"M": 1, "N": 1000})[0] == "warp"
    assert op.plan({"M": 1, "N": 4096})[:2] == ("resident", 256)
    assert op.plan({"M": 1, "N": 32768})[0] == "resident"
    assert op.plan({"M": 1, "N": 40000})[0] == "online"


def test_bad_options_are_one_line_errors():
    for make in (lambda: Add(vec=3), lambda: Transpose(pad=2), lambda: Transpose(tile=48),
                 lambda: RowReduce("mean"), lambda: Softmax(threads=100)):
        with pytest.raises(PtxgenError) as e:
            make()
        assert "\n" not in str(e.value)


@pytest.mark.filterwarnings("ignore:All-NaN slice")
def test_poisoned_output_fails_the_check():
    """The NaN poison is what makes an unwritten element fail."""
    for name in NEW:
        op = get_operator(name)
        shape = op.shape(**{k: 5 for k in op.shape_names})
        arrays = op.make_inputs(shape, np.random.default_rng(0))
        assert all(np.isnan(arrays[o]).all() for o in op.outputs)
        assert op.check(shape, arrays)[0] is False


# -- the emulator ----------------------------------------------------------------------------
EMULATE = [
    (Add(), {"n": 1003}), (Add(), {"n": 3}), (Add(vec=2, chunks=3), {"n": 2001}),
    (Add(vec=1), {"n": 77}), (Scale(), {"n": 4099}), (Scale(vec=2), {"n": 5}),
    # capped grid: threads loop several trips with a grid stride
    (Add(threads=32, ctas_per_sm=1, chunks=2), {"n": 40003}),
    (Scale(threads=32, ctas_per_sm=1), {"n": 20001}),
    (Transpose(), {"M": 37, "N": 70}), (Transpose(), {"M": 1, "N": 33}),
    (Transpose(block_rows=8), {"M": 40, "N": 9}),
    (Transpose(pad=0), {"M": 33, "N": 31}), (Transpose(tile=64, block_rows=4), {"M": 65, "N": 130}),
    # warp plan with rows that start misaligned (N % 4 != 0) and a partial last CTA
    (RowReduce("sum"), {"M": 11, "N": 301}), (RowReduce("max"), {"M": 9, "N": 3}),
    (RowReduce("sum"), {"M": 3, "N": 1}),
    # CTA plan: a trip with some chunks predicated off, and several trips
    (RowReduce("sum"), {"M": 3, "N": 3001}), (RowReduce("max"), {"M": 2, "N": 9001}),
    (RowReduce("sum", threads=64, unroll=2), {"M": 2, "N": 2999}),
    (Softmax(), {"M": 5, "N": 37}), (Softmax(), {"M": 9, "N": 2}), (Softmax(), {"M": 6, "N": 1000}),
    (Softmax(), {"M": 3, "N": 1025}), (Softmax(), {"M": 2, "N": 4099}),
    (Softmax(), {"M": 2, "N": 40001}), (Softmax(threads=64, unroll=2), {"M": 2, "N": 5003}),
    # online plan where most threads get no chunk at all (empty running states merge)
    (Softmax(threads=1024, max_chunks=0), {"M": 2, "N": 1503}),
]


@needs_emu
@pytest.mark.parametrize("case", range(len(EMULATE)))
def test_correct_on_emulator(case):
    from ptxgen.emu.backend import run_operator
    op, dims = EMULATE[case]
    shape = op.shape(**dims)
    arrays = op.make_inputs(shape, np.random.default_rng(case))
    run_operator(op, shape, arrays, "sm_90")
    ok, err = op.check(shape, arrays)
    assert ok, (op.name, dims, err)


@needs_emu
def test_softmax_survives_rows_that_overflow_a_naive_exp():
    from ptxgen.emu.backend import run_operator
    op = Softmax()
    shape = op.shape(M=2, N=300)
    arrays = op.make_inputs(shape, np.random.default_rng(1))
    arrays["x"][0] += 200.0            # exp(x) alone would be inf in fp32
    arrays["x"][1] -= 200.0            # and 0 here
    run_operator(op, shape, arrays, "sm_90")
    assert op.check(shape, arrays)[0]
    assert np.allclose(arrays["out"].sum(axis=1), 1.0, atol=1e-5)


# -- the Numba twins -------------------------------------------------------------------------
@pytest.mark.parametrize("name", NEW)
def test_twin_compiles(name):
    from ptxgen.runtime import twins
    assert twins.has_twin(name)
    try:
        ptx, entry = twins.twin_ptx(name, "sm_90")
    except ToolchainError as e:
        pytest.skip(str(e))
    assert ".entry" in ptx and entry in ptx


def test_twin_launch_shapes():
    from ptxgen.runtime.twins import twin_launch_args
    grid, block, args = twin_launch_args("transpose", {"M": 70, "N": 37}, {"x": 1, "out": 2})
    assert grid == (2, 3) and block == (32, 8) and args == (1, 2)
    grid, block, args = twin_launch_args("softmax", {"M": 70, "N": 37}, {"x": 1, "out": 2})
    assert grid == (70,) and args == (1, 2)


def test_grid_stride_grids_use_the_targets_or_the_devices_sm_count():
    """No SM count is assumed: steps() takes the target's from isa, a runner the live device's."""
    from ptxgen import isa
    from ptxgen.ops.saxpy import Saxpy
    from ptxgen.runtime.twins import TWIN_CTAS_PER_SM, twin_launch_args
    op, shape = Saxpy(ctas_per_sm=2), {"n": 1 << 24}
    for arch in ("sm_80", "sm_86", "sm_90"):
        assert op.steps(shape, arch)[0].launch.grid == (2 * isa.sm_count(arch), 1, 1)
    assert op.steps(shape, "sm_90", sm_count=7)[0].launch.grid == (14, 1, 1)
    assert op.launch(shape).grid == (2 * isa.sm_count("sm_90"), 1, 1)
    arrays = {k: k for k in ("a", "x", "y", "out")}
    assert twin_launch_args("saxpy", shape, arrays, sm_count=10)[0] == (10 * TWIN_CTAS_PER_SM,)
