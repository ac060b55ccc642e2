"""The simulator on kernels whose CTAs loop over tiles or read their work from index arrays:
a persistent attention CTA (one per SM walking the (query block, head) tiles, the producer
warp's tile loop handing tiles to the consumers' own), its Q buffer handed back on a barrier
of its own, tiles of different work (causal) sampled and extrapolated, and a block mask's key
block counts read by a vector load."""
import dataclasses

import pytest

from ptxgen import isa
from ptxgen.ops import attention_mods as am
from ptxgen.ops.attention import Attention
from ptxgen.schedule.attention import default_attention_schedule
from ptxgen.sim import async_copy as AC
from ptxgen.sim import simulate_operator
from ptxgen.sim.program import compile_kernel


def _attention(persistent, **kw):
    s = dataclasses.replace(default_attention_schedule(128), persistent=persistent)
    return Attention("bf16", schedule=s, **kw)


def _us(op, sample=16, **shape):
    return simulate_operator(op, op.shape(D=128, **shape), arch="sm_90a",
                             sample=sample).device_us


def _channels(persistent):
    op = _attention(persistent)
    m = op.build(op.shape(B=1, H=8, S=1024, D=128), "sm_90a")
    prog = compile_kernel(m.kernel(op.kernel_name()), isa.load("sm_90a"))
    roles = AC.async_roles(prog)
    return {i: (roles[i][0], reg) for i, reg in AC.barrier_channels(prog, roles).items()}


def test_the_q_buffer_barrier_is_a_channel_of_its_own():
    """The persistent kernel's Q buffer goes back on one barrier register that the producer
    waits on and the consumers arrive on; the K/V ring's slots are computed per use."""
    got = _channels(True)
    assert sorted(kind for kind, _ in got.values()) == sorted([AC.RELEASE, AC.WAIT])
    assert len({reg for _, reg in got.values()}) == 1
    assert _channels(False) == {}


def test_a_persistent_cta_costs_its_tiles_as_one_tile_ctas_do():
    """31 tiles per CTA (B4 H32 S4096, 4096 tiles on 132 SMs), the same per-tile work as the
    one-tile CTAs of the non-persistent grid's 31 waves: within a few per cent of each other
    (the tile loop sampled in the producer only, the consumers ran every tile unfed and the
    extrapolation added the left-out tiles again: +35 %)."""
    full = _us(_attention(False), B=4, H=32, S=4096)
    pers = _us(_attention(True), B=4, H=32, S=4096)
    assert abs(pers / full - 1) < 0.04


def test_tiles_of_different_work_are_extrapolated_by_their_work():
    """Causal persistent: CTA x's tiles x, x + 132, … cycle through long and short query
    blocks; sampled (8 tiles kept) the prediction matches the whole walk of ~16 tiles."""
    op = _attention(True, causal=True)
    sampled = _us(op, sample=8, B=2, H=32, S=4096)
    whole = _us(op, sample=32, B=2, H=32, S=4096)
    assert abs(sampled / whole - 1) < 0.04


def test_a_block_masks_counts_set_the_key_blocks():
    """Sliding window 1024 over S = 4096: ~7.9 of 32 key blocks per query block, read from the
    block mask's counts (one v2 load). The kernel costs more than that share of the full one
    (each CTA's fixed work: Q, the pipeline's fill, the epilogue); with the counts unread every
    CTA ran one key block (predicted 0.17 of the full kernel, measured 0.29)."""
    full = _us(Attention("bf16"), B=2, H=32, S=4096)
    sliding = _us(Attention("bf16", mask_mod=am.sliding_window(1024)), B=2, H=32, S=4096)
    # query block q computes key blocks q - 8 … q (the window's 1024 keys and its own block)
    share = sum(min(q + 1, 9) for q in range(32)) / (32 * 32)
    assert share < sliding / full < 0.4
