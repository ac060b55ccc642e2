"""Builder-made IR is verified by default wherever it is emitted, assembled, emulated or launched
(issue 16, problem 2); verify=False opts out; PTX text is never judged by the IR verifier."""
import numpy as np
import pytest

import ptxgen
from ptxgen import toolchain
from ptxgen.errors import VerifyError
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T


def _kernel():
    m = Module(target="sm_90")
    k = m.add_kernel("bad", [Param("n", T.u32), Param("x", T.u64, ptr(T.f32))])
    return m, Builder(k)


def u32_in_f32_add():
    m, b = _kernel()
    n, x = b.param("n"), b.param("x")
    a = b.ld("global", T.f32, b.element_addr(x, b.special("tid.x"), 4))
    b.st("global", x, b.add(a, n))              # n is u32: its bits would be read as f32
    b.ret()
    return m, r"operand %n0 is u32, expected f32"


def use_before_def():
    m, b = _kernel()
    x = b.param("x")
    ghost = b.reg(T.f32, "ghost")
    b.st("global", x, b.add(ghost, 1.0))
    b.ret()
    return m, r"%ghost0 is used before it is defined"


def barrier_under_thread_branch():
    m, b = _kernel()
    x = b.param("x")
    with b.if_(b.setp("lt", b.special("tid.x"), 16)):
        b.bar_sync()
        b.st("global", x, 1.0, type=T.f32)
    b.ret()
    return m, r"bar\.sync"


CASES = [u32_in_f32_add, use_before_def, barrier_under_thread_branch]


@pytest.mark.parametrize("case", CASES)
def test_emit_module_refuses(case):
    m, msg = case()
    with pytest.raises(VerifyError, match=msg):
        ptxgen.emit_module(m)
    with pytest.raises(VerifyError, match="kernel bad, instruction"):
        ptxgen.emit_module(m)
    assert ".entry bad" in ptxgen.emit_module(m, verify=False)      # the expert's opt-out


@pytest.mark.parametrize("case", CASES)
def test_emulate_refuses(case):
    m, msg = case()
    x = np.zeros(32, np.float32)
    with pytest.raises(VerifyError, match=msg):
        ptxgen.emulate(m, "bad", 1, 32, np.uint32(3), x)
    assert not x.any()                              # nothing ran


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("case", CASES)
def test_assembling_refuses(case):
    # assembling goes through emit_module: the malformed module never reaches ptxas
    m, msg = case()
    with pytest.raises(VerifyError, match=msg):
        toolchain.assemble(ptxgen.emit_module(m), "sm_90")


def test_emulate_opt_out_runs_it():
    m, _ = use_before_def()
    x = np.zeros(4, np.float32)
    ptxgen.emulate(m, "bad", 1, 1, np.uint32(0), x, verify=False)


def test_parsed_ptx_is_not_verified():
    # a foreign kernel the IR verifier would reject (a v2 load from a 4-byte-aligned address)
    # still emits and emulates: ptxas, not the IR verifier, judges PTX text
    m, _ = u32_in_f32_add()
    text = ptxgen.emit_module(m, verify=False)
    parsed = ptxgen.parse_ptx(text)
    assert ptxgen.emit_module(parsed).count("add.rn.f32") == 1
    ptxgen.emulate(text, "bad", 1, 4, np.uint32(1), np.zeros(4, np.float32))
