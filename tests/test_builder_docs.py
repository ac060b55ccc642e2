"""The Builder documents itself and checks special-register names (issue 16, problem 8)."""
import inspect

import pytest

import ptxgen
from ptxgen import toolchain
from ptxgen.errors import PtxgenError
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T


def test_every_public_builder_method_has_a_docstring():
    missing = [n for n, f in inspect.getmembers(Builder, inspect.isfunction)
               if not n.startswith("_") and not (f.__doc__ or "").strip()]
    assert not missing, missing
    assert Builder.__doc__


def _tid_kernel(name):
    m = Module(target="sm_90")
    k = m.add_kernel("k", [Param("out", T.u64, ptr(T.u32))])
    b = Builder(k)
    out = b.param("out")
    t = b.special(name)
    b.st("global", b.element_addr(out, t, 4), t)
    b.ret()
    return m


def test_special_with_percent_is_normalized():
    a, b = ptxgen.emit_module(_tid_kernel("tid.x")), ptxgen.emit_module(_tid_kernel("%tid.x"))
    assert a == b and "%tid.x;" in a and "%%" not in a


@pytest.mark.needs_ptxas
def test_special_with_percent_assembles():
    toolchain.assemble(ptxgen.emit_module(_tid_kernel("%tid.x")), "sm_90")


@pytest.mark.parametrize("bad,msg", [("foo.x", "unknown special register 'foo.x'"),
                                     ("%bogus", "unknown special register '%bogus'"),
                                     ("tid", "needs a component: tid.x, tid.y or tid.z"),
                                     ("ctaid.w", "needs a component"),
                                     ("laneid.x", "%laneid has no components")])
def test_bad_special_names_are_refused(bad, msg):
    b = Builder(Module().add_kernel("k"))
    with pytest.raises(PtxgenError, match=msg) as e:
        b.special(bad)
    assert "\n" not in str(e.value)


def test_good_special_names():
    b = Builder(Module().add_kernel("k"))
    for name in ("laneid", "clock64", "globaltimer", "nctaid.y", "%smid"):
        r = b.special(name)
        assert r.type == (T.u64 if name in ("clock64", "globaltimer") else T.u32)
