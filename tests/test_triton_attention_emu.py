"""Triton 3.6's own fused-attention forward PTX (tests/data/ptx/triton_attention_causal_d64_sm90a.ptx,
benchmarks/triton_kernels.py `attn_fwd`: wgmma Q·Kᵀ and P·V, online softmax, a layout
conversion where several lanes store the same value to one shared address) on the emulator with
its default checks (racecheck on, every finding an error): the output against float64."""
from pathlib import Path

import numpy as np
import pytest

from ptxgen.emu import emulate
from ptxgen.emu.fp import bf16_to_f64, to_bf16

DATA = Path(__file__).parent / "data" / "ptx"
SEED = np.random.SeedSequence().entropy          # fresh inputs every run; printed on failure
BM, D = 128, 64


def _run(ptx, q, k, v, scale, shared):
    bh, s, _ = q.shape
    o = np.full(q.shape, 0x7fc0, np.uint16)      # poisoned with NaN
    lse = np.full((bh, s), np.nan, np.float32)
    scratch = np.zeros(16, np.uint8)
    r = emulate(ptx, "attn_fwd", ((s + BM - 1) // BM, bh), 256, q, k, v, o, lse, np.uint32(s),
                np.float32(scale), scratch, scratch.copy(), shared_bytes=shared)
    return o, lse, r


def _reference(q, k, v, scale, causal):
    qf, kf, vf = (bf16_to_f64(x) for x in (q, k, v))
    s = qf @ kf.transpose(0, 2, 1) * scale
    if causal:
        n = s.shape[-1]
        s[:, np.triu(np.ones((n, n), bool), 1)] = -np.inf
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    return (p / l) @ vf, (p / l) @ np.abs(vf), (m + np.log(l))[..., 0]


@pytest.mark.parametrize("s", [200, 128])
def test_triton_causal_attention_with_default_checks(s):
    rng = np.random.default_rng([SEED, s])
    q, k, v = (to_bf16(rng.standard_normal((2, s, D))) for _ in range(3))
    scale = 1 / np.sqrt(D)
    ptx = (DATA / "triton_attention_causal_d64_sm90a.ptx").read_text()
    o, lse, r = _run(ptx, q, k, v, scale, 49152)
    assert r.findings == []
    ref, mass, ref_lse = _reference(q, k, v, scale, True)
    got = bf16_to_f64(o)
    assert np.isfinite(got).all()
    # P is rounded to bf16 before P·V and O on the way out: half an ulp of bf16 each
    assert (np.abs(got - ref) <= 2.0 ** -8 * (np.abs(ref) + mass) + 1e-6).all()
    np.testing.assert_allclose(lse, ref_lse, rtol=0, atol=1e-3)
