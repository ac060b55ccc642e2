"""The attention forward's optional schedule forms, each bit-equal on the emulator to the
default form on the same inputs (O poisoned) and within the float64 bound:
- persistent=True: one CTA per SM walks the (query block, head) tiles, its ring's slots and
  phases and Q's barrier carried from tile to tile (run with a few CTAs, so each walks several);
- peel=True: the key blocks the built-in mask leaves whole run in a loop without mask code.
Also ptxas without spills, the SASS of the peeled loop, and one-line errors."""
import dataclasses

import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import emulate
from ptxgen.errors import ScheduleError
from ptxgen.ops import attention_mods as am
from ptxgen.ops.attention import Attention
from ptxgen.ops.attention_varlen import AttentionVarlen
from ptxgen.schedule.attention import AttentionSchedule, default_attention_schedule

ARCH = "sm_90a"


def _run(op, shape, arrays, sm_count=None):
    m = op.build(shape, ARCH)
    for step in op.steps(shape, ARCH, sm_count):
        L = step.launch
        emulate(m, step.kernel, L.grid, L.block, *step.args(arrays),
                shared_bytes=L.shared_bytes)
    return arrays


def _pair(kw, schedule, shape, sm_count=None, seed=None, form="persistent"):
    """(default-form arrays, `form`'s arrays) for the same fresh inputs (O poisoned)."""
    base = Attention("bf16", schedule=schedule, **kw)
    other = Attention("bf16", schedule=dataclasses.replace(schedule, **{form: True}), **kw)
    shape = base.shape(**shape)
    arrays = base.make_inputs(shape, np.random.default_rng(seed))
    copy = {k: v.copy() for k, v in arrays.items()}
    return base, shape, _run(base, shape, arrays), _run(other, shape, copy, sm_count)


SMALL = AttentionSchedule(BN=32, consumers=2, stages=2)


@pytest.mark.parametrize("name, kw, schedule, shape", [
    ("plain", {}, SMALL, dict(B=1, H=2, S=201, D=64)),
    ("causal", dict(causal=True), SMALL, dict(B=2, H=1, S=150, D=64)),
    ("serial causal", dict(causal=True), dataclasses.replace(SMALL, overlap=False),
     dict(B=1, H=2, S=133, D=64)),
    ("3 consumers, D128", dict(causal=True),
     AttentionSchedule(BN=64, consumers=3, consumer_regs=160), dict(B=1, H=2, S=333, D=128)),
    ("grouped-query", dict(causal=True, kv_group=2), SMALL, dict(B=1, H=4, S=100, D=128)),
    ("sliding window (block lists)", dict(mask_mod=am.sliding_window(37)), SMALL,
     dict(B=1, H=2, S=201, D=64)),
    ("document ids", dict(mask_mod=am.document(np.arange(130) // 40)), SMALL,
     dict(B=2, H=1, S=130, D=64)),
    ("soft-cap", dict(score_mod=am.soft_cap(2.0)), SMALL, dict(B=2, H=2, S=90, D=64)),
])
def test_persistent_ctas_match_the_one_tile_kernel_bit_for_bit(name, kw, schedule, shape):
    op, shape, one, pers = _pair(kw, schedule, shape, sm_count=3)
    tiles = -(-shape["S"] // schedule.BM) * shape["B"] * shape["H"]
    assert tiles > 3                                     # a CTA walks several tiles
    assert np.isfinite(op.values(pers["O"])).all()       # every poisoned row written once
    assert np.array_equal(one["O"], pers["O"]), name
    assert np.array_equal(one["LSE"], pers["LSE"]), name
    assert op.check(shape, pers)[0]


def test_a_persistent_grid_is_one_cta_per_sm_at_most():
    op = Attention("bf16", schedule=dataclasses.replace(default_attention_schedule(128),
                                                        persistent=True))
    shape = op.shape(B=4, H=32, S=4096, D=128)
    assert op.launch(shape, 132).grid == (132, 1, 1)
    assert op.launch(op.shape(B=1, H=2, S=200, D=128), 132).grid == (4, 1, 1)
    assert Attention("bf16").launch(shape, 132).grid == (32, 128, 1)


def test_one_cta_walks_every_tile():
    _, shape, one, pers = _pair({}, SMALL, dict(B=2, H=2, S=140, D=64), sm_count=1)
    assert np.array_equal(one["O"], pers["O"]) and np.array_equal(one["LSE"], pers["LSE"])


# S = 223, 191: one key short of a multiple of BN = 32, so the last block holds one key past S
@pytest.mark.parametrize("name, kw, schedule, shape", [
    ("plain", {}, SMALL, dict(B=1, H=2, S=223, D=64)),
    ("causal", dict(causal=True), SMALL, dict(B=2, H=1, S=191, D=64)),
    ("serial causal", dict(causal=True), dataclasses.replace(SMALL, overlap=False),
     dict(B=1, H=2, S=191, D=64)),
    ("3 consumers, D128, grouped-query", dict(causal=True, kv_group=2),
     AttentionSchedule(BN=64, consumers=3, consumer_regs=160), dict(B=1, H=2, S=300, D=128)),
    ("one consumer", {}, AttentionSchedule(BN=32, consumers=1), dict(B=1, H=2, S=256, D=64)),
    # a block list whose last block is full inside S: only the bounds mask guards it
    ("all-allowed mask_mod", dict(mask_mod=lambda b, h, q, kv: kv >= 0), SMALL,
     dict(B=1, H=2, S=223, D=64)),
    ("serial all-allowed mask_mod", dict(mask_mod=lambda b, h, q, kv: kv >= 0),
     dataclasses.replace(SMALL, overlap=False), dict(B=1, H=2, S=223, D=64)),
    ("sliding window", dict(mask_mod=am.sliding_window(37)), SMALL, dict(B=1, H=2, S=223, D=64)),
    ("soft-cap, causal", dict(score_mod=am.soft_cap(2.0), causal=True), SMALL,
     dict(B=1, H=2, S=191, D=64)),
])
def test_peeled_key_loop_matches_the_masked_loop_bit_for_bit(name, kw, schedule, shape):
    op, shape, one, peeled = _pair(kw, schedule, shape, form="peel")
    assert np.array_equal(one["O"], peeled["O"]), name
    assert np.array_equal(one["LSE"], peeled["LSE"]), name
    assert op.check(shape, peeled)[0]


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("causal", [False, True])
def test_the_peeled_loop_has_no_mask_selects(causal):
    """Without peel ptxas predicates the mask's selects into every step (FSEL in the loop that
    issues the wgmma chains); the peeled form has one such loop without them."""
    def loops(peel):
        s = dataclasses.replace(default_attention_schedule(128), peel=peel)
        op = Attention("bf16", causal=causal, schedule=s)
        ptx = emit_module(op.build(op.shape(B=4, H=32, S=4096, D=128), ARCH))
        asm = toolchain.assemble(ptx, ARCH)
        assert asm.resources["attention"].spills == 0
        regions = toolchain.sass_regions(toolchain.disassemble(asm.cubin), "attention")
        # the steady-state loops: the regions issuing both chains (S = Q·Kᵀ and P·V: 24
        # HGMMA), with their FSEL count
        return [sum(op.startswith("FSEL") for op in r) for r in regions
                if sum(op.startswith("HGMMA") for op in r) == 24]
    assert loops(False) == [64]
    assert sorted(loops(True)) == [0, 64]


def test_schedule_name_and_errors():
    assert str(AttentionSchedule(persistent=True, peel=True)).endswith("_p_peel")
    with pytest.raises(ScheduleError, match="peel must be True or False"):
        AttentionSchedule(peel="yes").validate(ARCH, "bf16", 128)
    s = AttentionSchedule(persistent=True)
    assert str(s).endswith("_p") and s.shared_bytes(128) == AttentionSchedule().shared_bytes(
        128) + 8                                         # the barrier that hands Q back
    with pytest.raises(ScheduleError, match="persistent must be True or False"):
        AttentionSchedule(persistent=1).validate(ARCH, "bf16", 128)
    op = AttentionVarlen("bf16", schedule=s)
    with pytest.raises(ScheduleError, match="persistent=True is for the dense") as e:
        op.build(op.shape(seqlens_q=[5, 70], H=2, D=64), ARCH)
    assert "\n" not in str(e.value)


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("kw", [{}, dict(causal=True), dict(mask_mod=am.sliding_window(1024))])
def test_persistent_d128_assembles_without_spills(kw):
    s = dataclasses.replace(default_attention_schedule(128), persistent=True)
    op = Attention("bf16", schedule=s, **kw)
    asm = toolchain.assemble(emit_module(op.build(op.shape(B=4, H=32, S=4096, D=128), ARCH)),
                             ARCH)
    r = asm.resources["attention"]
    assert r.spills == 0 and r.stack_bytes == 0, r


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_persistent_is_bit_equal_to_the_one_tile_kernel(causal):
    from ptxgen.runtime import load_steps, run_steps
    sched = AttentionSchedule(BN=64)
    out = []
    for s in (sched, dataclasses.replace(sched, persistent=True)):
        op = Attention("bf16", causal=causal, schedule=s)
        shape = op.shape(B=2, H=5, S=333, D=128)
        arrays = op.make_inputs(shape, np.random.default_rng(11))
        run_steps(op, shape, load_steps(op, shape, op.build(shape, ARCH), ARCH), arrays, ARCH)
        assert op.check(shape, arrays)[0]
        out.append(arrays)
    assert np.array_equal(out[0]["O"], out[1]["O"])
    assert np.array_equal(out[0]["LSE"], out[1]["LSE"])
