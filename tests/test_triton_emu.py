"""Triton 3.6's compiled bf16 `tl.dot` matmul PTX (tests/data/ptx/triton_mm_*.ptx, compiled on a
CPU machine by `benchmarks/triton_matmul_emu.py --save-ptx`) run on the emulator with Triton's
launch (grid, 32·num_warps threads, metadata.shared bytes, the two trailing scratch pointers):
sm_90a wgmma with cp.async or st.shared staging, sm_80 mma.sync + ldmatrix + cp.async, edge
tiles in M, N and K. C must match float64 within the accumulation bound and equal, bit for bit,
the tensor-core summation model (tensor_math.block_dot) applied in k order, and, on inputs saved
from the H200, Triton's own C there."""
import hashlib
import os

import numpy as np
import pytest

from ptxgen.ir.instr import Instr
from ptxgen.emu import as_module, tensor_math as TM
from ptxgen.emu.fp import bf16_to_f64, to_bf16
from ptxgen.ops.tc_matmul import TcMatmul

import triton_matmul_emu as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = T.corpus_meta(T.CORPUS)
# what each target's form must contain, so the cases keep covering what they claim
FAMILIES = {90: {"wgmma.mma_async"}, 80: {"mma", "ldmatrix"}}


def _text(meta):
    with open(os.path.join(T.CORPUS, meta["ptx"])) as f:
        return f.read()


def test_every_case_was_saved():
    assert sorted(CASES) == sorted(c["name"] for c in T.CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_triton_matmul_on_emulator(name):
    meta = CASES[name]
    text = _text(meta)
    assert hashlib.sha256(text.encode()).hexdigest() == meta["sha256"]
    ops = {s.opcode + ("." + s.mods[0] if s.opcode == "wgmma" else "")
           for s in as_module(text).kernel(meta["kernel"]).body if isinstance(s, Instr)}
    assert FAMILIES[meta["arch"]] | ({"cp"} if meta["staging"] == "cp.async" else set()) <= ops
    a, b = T.inputs(meta, np.random.default_rng())
    c, _ = T.emu_run(text, meta, a, b)
    fa, fb = bf16_to_f64(a), bf16_to_f64(b)
    got = bf16_to_f64(c) if meta["out"] == "bf16" else c.astype(np.float64)
    assert np.isfinite(got).all()               # C starts as NaN: every element was written
    shape = dict(M=meta["M"], N=meta["N"], K=meta["K"])
    bound = TcMatmul("bf16", "bf16" if meta["out"] == "bf16" else "f32").error_bound(
        shape, np.abs(fa) @ np.abs(fb))
    assert (np.abs(got - fa @ fb) <= bound).all()
    model = TM.block_dot(fa, fb, np.zeros((meta["M"], meta["N"])), "f32")
    if meta["out"] == "bf16":
        assert (c == to_bf16(model)).all()
    else:
        assert (c.view(np.uint32) == model.astype(np.float32).view(np.uint32)).all()


H200 = os.path.join(ROOT, "tests", "data", "triton_mm_h200_2026-12-01.npz")


def _h200_cases():
    with np.load(H200) as f:
        return sorted({k.split("__")[0] for k in f.files})


@pytest.mark.parametrize("name", _h200_cases())
def test_emulator_reproduces_the_h200_bit_for_bit(name):
    """Inputs and Triton's own C from the H200 (benchmarks/triton_matmul_emu.py, 2026-12-01,
    docs/data/triton_matmul_emu_2026-12-01.json; the GPU compiled byte-identical PTX): the
    emulator running the corpus PTX on those inputs gives the same C, every bit."""
    meta = CASES[name]
    with np.load(H200) as f:
        a, b, gpu = f[f"{name}__a"], f[f"{name}__b"], f[f"{name}__gpu"]
    c, _ = T.emu_run(_text(meta), meta, a, b)
    assert c.dtype == gpu.dtype and (c.view(np.uint8) == gpu.view(np.uint8)).all()
