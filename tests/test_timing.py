"""The hold kernel behind ptxgen.runtime.time_calls (built and assembled without a GPU)."""
import pytest

from ptxgen import emit_module, toolchain
from ptxgen.ir.verify import verify_module
from ptxgen.runtime.timing import hold_module


def test_hold_kernel_rereads_the_timer_in_its_loop():
    text = emit_module(verify_module(hold_module("sm_90")), "sm_90")
    body = text[text.index("$spin_0:"):]
    assert "%globaltimer;" in body and "bra $spin_0" in body      # read again on every trip
    assert "setp.lt.u64" in body


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_hold_kernel_assembles(arch):
    asm = toolchain.assemble(emit_module(verify_module(hold_module(arch)), arch), arch)
    assert asm.resources["hold"].spills == 0


def test_load_steps_and_bound_steps_wire_every_step(monkeypatch):
    """Without a GPU: load_steps loads each kernel of a packed matmul once, bound_steps launches
    the four steps in order with their own arguments (loader and launcher replaced by fakes)."""
    from ptxgen.ops.matmul import Matmul
    from ptxgen.runtime import device, driver
    loaded, launched = [], []
    monkeypatch.setattr(device, "sm_count", lambda: 132)           # the H200's
    monkeypatch.setattr(driver, "sm_count", lambda: 132)           # imported by name there
    monkeypatch.setattr(driver, "load_kernel", lambda ptx, name, params, directives=(): (
        loaded.append(name), name)[1])
    monkeypatch.setattr(driver, "bound_launch", lambda k, grid, block, args, shm=0: (
        lambda: launched.append((k, grid, tuple(args[-2:])))))
    op = Matmul(pack=True)
    shape = {"M": 4095, "N": 4097, "K": 513}
    module = op.build(shape)
    kernels = driver.load_steps(op, shape, module, "sm_90")
    assert sorted(loaded) == ["matmul", "matmul_edge", "pad_copy"]
    arrays = {"A": "a", "B": "b", "C": "c", "A_packed": "ap", "B_packed": "bp"}
    driver.bound_steps(op, shape, kernels, arrays, "sm_90")()
    assert [(k, last) for k, _, last in launched] == [
        ("pad_copy", ("a", "ap")), ("pad_copy", ("b", "bp")), ("matmul", ("bp", "c")),
        ("matmul_edge", ("bp", "c"))]
    assert launched[2][1] == op.launch(shape).grid
