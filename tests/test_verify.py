"""The verifier names the kernel, the instruction and the problem."""
import pytest

from ptxgen.errors import VerifyError
from ptxgen.ir import Addr, Builder, Instr, Module, Param, Reg, Sym, ptr
from ptxgen.ir import types as T
from ptxgen.ir.verify import verify_module


def kernel(params=()):
    m = Module()
    k = m.add_kernel("k", list(params) or [Param("x", T.u64, ptr(T.f32, align=4))])
    return m, k, Builder(k)


def test_use_before_definition():
    m, k, b = kernel()
    ghost = b.reg(T.f32, "ghost")
    b.add(ghost, 1.0)
    with pytest.raises(VerifyError, match=r"kernel k, instruction 0 .*%ghost0 is used before"):
        verify_module(m)


def test_type_mismatch():
    m, k, b = kernel()
    f = b.const(1.0, T.f32)
    i = b.const(1, T.u32)
    b.emit(Instr("add", ("rn", "f32"), (b.reg(T.f32), f, i)))
    with pytest.raises(VerifyError, match=r"operand %r0 is u32, expected f32"):
        verify_module(m)


def test_store_to_parameter():
    m, k, b = kernel()
    v = b.const(1.0, T.f32)
    b.emit(Instr("st", ("param", "f32"), (Addr(Sym("x")), v)))
    with pytest.raises(VerifyError, match="stores to kernel parameters"):
        verify_module(m)


def test_vector_width_mismatch():
    m, k, b = kernel([Param("x", T.u64, ptr(T.f32, align=16))])
    x = b.param("x")
    regs = tuple(b.reg(T.f32) for _ in range(3))
    from ptxgen.ir import Vec
    b.emit(Instr("ld", ("global", "v4", "f32"), (Vec(regs), Addr(x))))
    with pytest.raises(VerifyError, match="v4 access with 3 value"):
        verify_module(m)


def test_vector_misalignment_from_pointer_parameter():
    m, k, b = kernel([Param("x", T.u64, ptr(T.f32, align=4))])
    x = b.param("x")
    b.ld("global", T.f32, x, vec=4)
    with pytest.raises(VerifyError, match="only known to be 4-byte aligned; a v4 access needs 16"):
        verify_module(m)


def test_vector_misalignment_from_index():
    m, k, b = kernel([Param("x", T.u64, ptr(T.f32, align=16))])
    x = b.param("x")
    tid = b.special("tid.x")
    b.ld("global", T.f32, b.element_addr(x, tid, 4), vec=4)   # tid*4 bytes: 4-byte aligned
    with pytest.raises(VerifyError, match="v4 access needs 16"):
        verify_module(m)


def test_aligned_vector_access_passes():
    m, k, b = kernel([Param("x", T.u64, ptr(T.f32, align=16))])
    x = b.param("x")
    tid = b.special("tid.x")
    b.ld("global", T.f32, b.element_addr(x, tid, 16), vec=4)
    b.ret()
    verify_module(m)


def test_barrier_in_thread_dependent_branch():
    m, k, b = kernel()
    tid = b.special("tid.x")
    with b.if_(b.setp("lt", tid, 16)):
        b.bar_sync(0)
    with pytest.raises(VerifyError, match="bar.sync in divergent code"):
        verify_module(m)


def test_barrier_in_uniform_loop_passes():
    m, k, b = kernel([Param("n", T.s32)])
    n = b.param("n")
    with b.for_range(0, n, 1):
        b.bar_sync(0)
    b.ret()
    verify_module(m)


def test_undeclared_register():
    m, k, b = kernel()
    b.emit(Instr("mov", ("f32",), (Reg("%zz", T.f32), b.const(1.0, T.f32))))
    with pytest.raises(VerifyError, match="%zz is not declared"):
        verify_module(m)


def test_branch_to_missing_label():
    m, k, b = kernel()
    b.branch("$nowhere")
    with pytest.raises(VerifyError, match="branch target \\$nowhere is not a label"):
        verify_module(m)
