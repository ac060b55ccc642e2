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


@pytest.mark.skipif(not toolchain.have_tool("ptxas"), reason="ptxas not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_hold_kernel_assembles(arch):
    asm = toolchain.assemble(emit_module(verify_module(hold_module(arch)), arch), arch)
    assert asm.resources["hold"].spills == 0
