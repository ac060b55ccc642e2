"""The block-scaled fp8 GEMM's opt-in tile forms (lower/block_scales.py, blockwise_k_loop):
128 x 256 and 256 x 128 tiles of two consumers, each consumer's m64n128 blocks issued, waited
for and promoted one at a time through one block accumulator. Their C is the default serial
kernel's bit for bit (every element's promotions run in the same k order with the same f32
arithmetic), and at 8192^3 ptxas keeps the block accumulator and the totals in registers."""
import dataclasses

import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.errors import ScheduleError
from ptxgen.ops.fp8_matmul import Fp8Matmul

from test_fp8_matmul import _emulate_steps

ARCH = "sm_90a"
needs_ptxas = pytest.mark.skipif(not toolchain.have_tool("ptxas"), reason="ptxas not found")
# fields over the default block schedule (benchmarks/llm_gemms.py times the same forms)
FORMS = {"n256": dict(BN=256, stages=3), "m256": dict(BM=256, stages=3)}


def block_op(out, shape, **fields):
    op = Fp8Matmul("e4m3", out, scaling="block")
    return Fp8Matmul("e4m3", out, dataclasses.replace(op.schedule_for(shape), **fields),
                     scaling="block")


@pytest.mark.parametrize("out, shape, cluster_m", [
    ("bf16", dict(M=200, N=300, K=520), 1),      # 5 k-blocks, the last partial; edge tiles
    ("f32", dict(M=200, N=300, K=520), 2),
    ("f32", dict(M=130, N=200, K=256), 1),
    ("bf16", dict(M=67, N=45, K=64), 1),         # one k-block, one partial tile
])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_block_form_is_bit_identical_to_serial(form, out, shape, cluster_m):
    """Two persistent CTAs over all tiles (each carries slots, phases and totals from tile to
    tile), C poisoned with NaN so every element must be stored."""
    serial = Fp8Matmul("e4m3", out, scaling="block")
    shape = serial.shape(**shape)
    inputs = serial.make_inputs(shape, np.random.default_rng(shape["M"] + shape["K"]))
    got = []
    for fields in ({}, FORMS[form]):
        op = block_op(out, shape, cluster_m=cluster_m, **fields)
        assert op.schedule_for(shape).m_blocks * op.schedule_for(shape).n_blocks == \
            (2 if fields else 1)
        arrays = {k: v.copy() for k, v in inputs.items()}
        arrays["C"][...] = 0x7FC1 if out == "bf16" else np.nan
        _emulate_steps(op, shape, arrays, gemm_ctas=2)
        assert op.check(shape, arrays)[0]
        got.append(arrays["C"])
    assert got[0].tobytes() == got[1].tobytes()


@pytest.mark.parametrize("form", sorted(FORMS))
def test_block_form_scales_reach_their_block(form):
    """One B scale of the tile's second 128-column block (form n256) or one A scale of a row
    of the second m64 block (m256) doubled changes that block's elements only."""
    shape = dict(M=256, N=256, K=256)
    op = block_op("f32", shape, **FORMS[form])
    arrays = op.make_inputs(shape, np.random.default_rng(5))
    first = {k: v.copy() for k, v in arrays.items()}
    _emulate_steps(op, shape, first, gemm_ctas=1)
    if form == "n256":
        arrays["b_scales"][1, 1] *= 2               # columns 128..255, k-block 1
        want = np.zeros((256, 256), bool)
        want[:, 128:] = True
    else:
        arrays["a_scales"][0, 200] *= 2             # row 200 (consumer 1, its m64 block 1)
        want = np.zeros((256, 256), bool)
        want[200] = True
    _emulate_steps(op, shape, arrays, gemm_ctas=1)
    assert np.array_equal(arrays["C"] != first["C"], want)
    assert op.check(shape, arrays)[0]


def test_block_forms_refuse_the_pingpong():
    shape = dict(M=512, N=512, K=512)
    with pytest.raises(ScheduleError, match="one m64n128 block per consumer"):
        block_op("bf16", shape, inflight=1, **FORMS["n256"]).build(shape, ARCH)


@needs_ptxas
@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("form", sorted(FORMS))
def test_block_form_fits_the_registers_at_8192(form):
    """No spills, no local memory in the SASS, and the main loop per k-block: eight m64n128k32
    wgmmas (two groups, each waited for), 128 promotion FFMAs."""
    shape = dict(M=8192, N=8192, K=8192)
    op = block_op("bf16", shape, **FORMS[form])
    ptx = emit_module(op.build(op.shape(**shape), ARCH), ARCH)
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 2
    asm = toolchain.assemble(ptx, ARCH)
    r = asm.resources["tc_matmul"]
    assert r.spill_stores == 0 and r.spill_loads == 0 and "serialized" not in asm.log
    sass = toolchain.disassemble(asm.cubin)
    mix = toolchain.sass_mix(sass)["tc_matmul"]
    assert not any(k.startswith(("LDL", "STL")) for k in mix)
    assert sass.count("QGMMA.64x128x32.F32.E4M3.E4M3") == 8 and mix["FFMA"] == 128
