"""What a launch does only when it is needed: the pass finding the parameters a kernel writes
through runs when a read-only array is passed (and then once per program)."""
import numpy as np
import pytest

from ptxgen import launch_shape
from ptxgen.emu import compile_kernel, emulate
from ptxgen.errors import EmulationError, PtxgenError
from ptxgen.parse import parse_ptx
from ptx_samples import SAXPY


@pytest.fixture
def written_calls(monkeypatch):
    calls = []
    real = launch_shape.written_params

    def counting(kernel):
        calls.append(kernel.name)
        return real(kernel)
    monkeypatch.setattr(launch_shape, "written_params", counting)
    return calls


def test_writeable_arrays_skip_the_written_parameter_pass(written_calls):
    m = parse_ptx(SAXPY)
    x, y = np.ones(32, np.float32), np.ones(32, np.float32)
    emulate(m, "saxpy", 1, 32, x, y, np.float32(2), np.uint32(32))
    np.testing.assert_array_equal(y, 3.0)
    assert written_calls == []
    assert "written" not in vars(compile_kernel(m, "saxpy"))


def test_a_read_only_array_runs_the_pass_once_and_is_still_checked(written_calls):
    m = parse_ptx(SAXPY)
    x, y = np.ones(32, np.float32), np.ones(32, np.float32)
    x.flags.writeable = False                   # read only by the kernel: accepted
    emulate(m, "saxpy", 1, 32, x, y, np.float32(2), np.uint32(32))
    emulate(m, "saxpy", 1, 32, x, y, np.float32(2), np.uint32(32))
    np.testing.assert_array_equal(y, 5.0)
    assert written_calls == ["saxpy"]
    y.flags.writeable = False
    with pytest.raises(PtxgenError, match="parameter y is written by the kernel"):
        emulate(m, "saxpy", 1, 32, x, y, np.float32(2), np.uint32(32))


GUARDED = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 y, .param .u32 n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd0, [y];
    ld.param.u32 %r0, [n];
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p0, %r1, %r0;
    @%p0 bra $done;
    mul.wide.u32 %rd1, %r1, 4;
    add.u64 %rd2, %rd0, %rd1;
    mul.lo.u32 %r2, %r1, 3;
    setp.eq.u32 %p1, %r1, 5;
    not.pred %p2, %p1;
    selp.b32 %r3, 7, %r2, %p2;
    st.global.u32 [%rd2], %r3;
$done:
    ret;
}
"""


def test_ops_are_built_when_lanes_first_reach_them():
    """Ops no thread reaches keep their deferred builder; the results do not depend on it."""
    m = parse_ptx(GUARDED)
    y = np.zeros(8, np.uint32)
    emulate(m, "k", 1, 8, y, np.uint32(0))          # every thread branches to $done
    np.testing.assert_array_equal(y, 0)
    code = compile_kernel(m, "k").code
    names = [(op.instr.opcode if op.instr is not None else None, op.fn.__name__ if op.fn else None)
             for op in code]
    assert ("mul", "first_run") in names and ("st", "first_run") in names
    assert ("setp", "first_run") not in names[:4]   # the branch condition ran
    emulate(m, "k", 1, 8, y, np.uint32(8))
    np.testing.assert_array_equal(y, [7, 7, 7, 7, 7, 15, 7, 7])
    assert all(fn != "first_run" for _, fn in
               [(op.instr, op.fn.__name__ if op.fn else None) for op in code])


def test_an_unsupported_op_fails_only_where_a_thread_runs_it():
    text = GUARDED.replace("mul.lo.u32 %r2, %r1, 3;", "mul.lo %r2, %r1, 3;")
    m = parse_ptx(text)
    y = np.zeros(8, np.uint32)
    emulate(m, "k", 1, 8, y, np.uint32(0))
    with pytest.raises(EmulationError, match="cannot emulate `mul.lo %r2"):
        emulate(m, "k", 1, 8, y, np.uint32(8))


def test_a_register_first_seen_by_a_deferred_op_joins_the_register_file():
    from ptxgen.emu import program as emu_program

    class Batch:
        n = 4
        R = [np.ones(4, np.uint32)]
    b = Batch()
    emu_program._grow_registers(b, [np.dtype(np.uint32), np.dtype(bool), np.dtype(np.float32)])
    assert [r.dtype for r in b.R] == [np.uint32, bool, np.float32]
    assert b.R[0].all() and not b.R[1].any() and not b.R[2].any() and len(b.R[2]) == 4
