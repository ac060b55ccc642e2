"""The attention forward's optional schedule forms, each bit-equal on the emulator to the
default form on the same inputs (O poisoned) and within the float64 bound:
- persistent=True: one CTA per SM walks the (query block, head) tiles, its ring's slots and
  phases and Q's barrier carried from tile to tile (run with a few CTAs, so each walks several);
- peel=True: the key blocks the built-in mask leaves whole run in a loop without mask code;
- full_apart=True: a block mask's partial blocks first, then its full ones in a loop without
  the mask_mod (another summation order: within the bound and near the ascending form).
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
from ptxgen.ops import tile_plan
from ptxgen.ops.attention_varlen import AttentionVarlen
from ptxgen.schedule.attention import AttentionSchedule, default_attention_schedule

ARCH = "sm_90a"


def _run(op, shape, arrays, sm_count=None):
    """op on the emulator; persistent, with its tile plan dealt to `sm_count` lists."""
    if op.workspace(shape, ARCH):
        arrays["tile_plan"] = op.tile_plan(shape, sm_count)
    m = op.build(shape, ARCH)
    for step in op.steps(shape, ARCH, sm_count):
        L = step.launch
        emulate(m, step.kernel, L.grid, L.block, *step.args(arrays),
                shared_bytes=L.shared_bytes)
    return arrays


def _pair(kw, schedule, shape, sm_count=None, seed=None, form="persistent", value=True):
    """(default-form arrays, arrays of the form with field `form` = value) for the same fresh
    inputs (O poisoned)."""
    base = Attention("bf16", schedule=schedule, **kw)
    other = Attention("bf16", schedule=dataclasses.replace(schedule, **{form: value}), **kw)
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
    # block lists per (batch, head): the plan's costs and the kernel's lists follow the tile
    ("a window per head and batch", dict(
        mask_mod=lambda b, h, q, kv: (q - kv >= 0) & (q - kv < 20 + 70 * h + 40 * b)), SMALL,
     dict(B=2, H=2, S=201, D=64)),
])
def test_persistent_ctas_match_the_one_tile_kernel_bit_for_bit(name, kw, schedule, shape):
    op, shape, one, pers = _pair(kw, schedule, shape, sm_count=3)
    tiles = -(-shape["S"] // schedule.BM) * shape["B"] * shape["H"]
    assert tiles > 3                                     # a CTA walks several tiles
    assert np.isfinite(op.values(pers["O"])).all()       # every poisoned row written once
    assert np.array_equal(one["O"], pers["O"]), name
    assert np.array_equal(one["LSE"], pers["LSE"]), name
    assert op.check(shape, pers)[0]


FULL_APART_CASES = [
    ("sliding window", dict(mask_mod=am.sliding_window(37)), SMALL, dict(B=1, H=2, S=201, D=64)),
    ("document ids", dict(mask_mod=am.document(np.arange(130) // 40)), SMALL,
     dict(B=2, H=1, S=130, D=64)),
    # every block full but the ragged last one, which the lists move to the partial ones
    ("all allowed, ragged S", dict(mask_mod=lambda b, h, q, kv: q >= 0), SMALL,
     dict(B=1, H=1, S=97, D=64)),
    ("causal mask_mod, serial", dict(mask_mod=lambda b, h, q, kv: q >= kv),
     dataclasses.replace(SMALL, overlap=False), dict(B=1, H=2, S=133, D=64)),
    ("prefix-LM, 3 consumers, D128", dict(mask_mod=am.prefix_lm(50)),
     AttentionSchedule(BN=64, consumers=3, consumer_regs=160), dict(B=1, H=2, S=333, D=128)),
    ("sliding, persistent", dict(mask_mod=am.sliding_window(60)),
     dataclasses.replace(SMALL, persistent=True), dict(B=2, H=2, S=201, D=64)),
    ("sliding + soft-cap", dict(mask_mod=am.sliding_window(45), score_mod=am.soft_cap(2.0)),
     SMALL, dict(B=1, H=2, S=150, D=64)),
    ("a window per head and batch, grouped-query", dict(
        mask_mod=lambda b, h, q, kv: (q - kv >= 0) & (q - kv < 20 + 70 * h + 40 * b),
        kv_group=2), SMALL, dict(B=2, H=2, S=201, D=64)),
]


@pytest.mark.parametrize("name, kw, schedule, shape", FULL_APART_CASES)
def test_full_blocks_apart_stay_within_the_bound(name, kw, schedule, shape):
    op, shape, asc, apart = _pair(kw, schedule, shape, sm_count=3, form="full_apart")
    assert np.isfinite(op.values(apart["O"])).all()       # every poisoned row written once
    assert op.check(shape, apart)[0], name
    diff = np.abs(op.values(apart["O"]) - op.values(asc["O"]))
    assert diff.max() <= 2.0 ** -6, name                  # the ascending form, up to rounding
    assert np.allclose(apart["LSE"], asc["LSE"], rtol=0, atol=1e-5, equal_nan=True)


def test_full_apart_lists_hold_partial_blocks_first():
    bm = am.create_block_mask(am.sliding_window(100), None, None, 300, 300, (64, 64))
    asc, apart = bm.kernel_arrays(), bm.kernel_arrays(partial_first=True)
    assert apart["BM_counts"][0, 1] == 64 | (1 << 31)      # the order rides in the tile row
    for r in range(bm.shape[2]):
        n_p, n_f = apart["BM_counts"][1 + r]
        row = apart["BM_lists"][r, :n_p + n_f]
        assert (row[:n_p] >> 31 == 1).all() and (row[n_p:] >> 31 == 0).all()
        assert sorted(row & 0x7FFFFFFF) == sorted(asc["BM_lists"][r, :n_p + n_f] & 0x7FFFFFFF)
        assert 4 not in (row[n_p:] & 0x7FFFFFFF)           # keys 256..319 pass S = 300


def test_a_block_mask_made_for_the_other_order_is_remade():
    """Arrays of the ascending lists handed to a full_apart kernel are made again for it."""
    kw = dict(mask_mod=am.sliding_window(37))
    op, shape, asc, apart = _pair(kw, SMALL, dict(B=1, H=2, S=201, D=64), form="full_apart")
    assert op.check(shape, apart)[0]


@pytest.mark.needs_nvdisasm
def test_the_full_blocks_loop_has_no_mask_code():
    """SASS: with the ascending lists ptxas predicates the mask_mod's selects into every step;
    apart, one loop of the key blocks has no FSEL or ISETP at all."""
    s = dataclasses.replace(default_attention_schedule(128, forms=False), full_apart=True)
    op = Attention("bf16", schedule=s, mask_mod=am.sliding_window(1024))
    shape = op.shape(B=4, H=32, S=4096, D=128)
    asm = toolchain.assemble(emit_module(op.build(shape, ARCH), ARCH), ARCH)
    assert asm.resources["attention"].spills == 0
    loops = [r for r in toolchain.sass_regions(toolchain.disassemble(asm.cubin), "attention")
             if sum(o.startswith("HGMMA") for o in r) == 24]      # S and P·V chains: a step
    assert any(not any(o.startswith(("FSEL", "ISETP")) for o in r) for r in loops)
    assert any(sum(o.startswith("FSEL") for o in r) >= 64 for r in loops)


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


def test_a_plan_for_more_ctas_than_launched_still_covers_every_tile():
    """A plan of 5 lists on a grid of 2: CTA 0 walks lists 0, 2, 4 and CTA 1 lists 1, 3."""
    sched = dataclasses.replace(SMALL, persistent=True)
    base = Attention("bf16", causal=True, schedule=SMALL)
    op = Attention("bf16", causal=True, schedule=sched)
    shape = op.shape(B=1, H=3, S=250, D=64)
    arrays = op.make_inputs(shape, np.random.default_rng())
    one = _run(base, shape, {k: v.copy() for k, v in arrays.items()})
    arrays["tile_plan"] = op.tile_plan(shape, 5)
    m = op.build(shape, ARCH)
    step = op.steps(shape, ARCH, 2)[0]
    assert step.launch.grid == (2, 1, 1)
    emulate(m, step.kernel, step.launch.grid, step.launch.block, *step.args(arrays),
            shared_bytes=step.launch.shared_bytes)
    assert np.array_equal(one["O"], arrays["O"]) and np.array_equal(one["LSE"], arrays["LSE"])


def test_the_plan_balances_causal_tiles():
    """Causal, 6 query blocks per head on 132 SMs: a stride (CTA x: tiles x + 132k) would give
    CTA 0 the longest block every time; the plan's busiest list has at most one tile more than
    the mean, and it lists every tile once, in order."""
    op = Attention("bf16", causal=True, schedule=dataclasses.replace(
        default_attention_schedule(64), persistent=True))
    shape = op.shape(B=8, H=16, S=1024, D=64)
    plan = op.tile_plan(shape, 132)
    lists = tile_plan.lists_of(plan)
    assert len(lists) == 132 and sorted(t for l in lists for t in l) == list(range(6 * 128))
    assert all(l == sorted(l) for l in lists)
    nq = 6
    cost = [min(8, -(-min(1024, (nq - t % nq) * 192) // 128)) + 1 for t in range(6 * 128)]
    loads = [sum(cost[t] for t in l) for l in lists]
    stride = [sum(cost[t] for t in range(x, 6 * 128, 132)) for x in range(132)]
    mean = sum(cost) / 132
    assert max(stride) > 1.4 * mean and max(loads) <= mean + max(cost)
    assert tile_plan.plan([3, 1, 2], 5).tolist() == [3, 5, 6, 7, 8, 0, 1, 2]


def test_the_plan_takes_the_deal_with_the_lighter_busiest_list():
    def heaviest(lists, costs):
        return max(sum(costs[t] for t in tiles) for tiles in lists)
    rng = np.random.default_rng()
    for n, tiles in ((2, 5), (7, 40), (132, 512)):
        costs = rng.integers(1, 20, tiles).tolist()
        got = heaviest(tile_plan.lists_of(tile_plan.plan(costs, n)), costs)
        assert got == min(heaviest(tile_plan.greedy(costs, n), costs),
                          heaviest(tile_plan.boustrophedon(tiles, n), costs))
    # causal B2 H16 S2048 D128: each head's blocks 16 … 1 (+1); greedy leaves the last head's
    # long tiles to busy lists (47), the mirrored waves do not (38)
    costs = [16 - t % 16 + 1 for t in range(512)]
    assert heaviest(tile_plan.greedy(costs, 132), costs) == 47
    assert heaviest(tile_plan.boustrophedon(512, 132), costs) == 38
    assert heaviest(tile_plan.lists_of(tile_plan.plan(costs, 132)), costs) == 38


def test_schedule_name_and_errors():
    assert str(AttentionSchedule(persistent=True, peel=True)).endswith("_p_peel")
    assert str(AttentionSchedule(persistent=True, full_apart=True)).endswith("_p_fa")
    assert str(AttentionSchedule(soft_ex2_every=4)).endswith("_sx4")
    with pytest.raises(ScheduleError, match="soft_ex2_every=1 must be 0"):
        AttentionSchedule(soft_ex2_every=1).validate(ARCH, "bf16", 64)
    with pytest.raises(ScheduleError, match="peel must be True or False"):
        AttentionSchedule(peel="yes").validate(ARCH, "bf16", 128)
    s = AttentionSchedule(persistent=True)
    assert str(s).endswith("_p") and s.shared_bytes(128) == AttentionSchedule().shared_bytes(
        128) + 8                                         # the barrier that hands Q back
    op = Attention("bf16", schedule=s)
    shape = op.shape(B=1, H=2, S=300, D=128)
    # 6 tiles on 6 lists: n, 7 starts, the tiles
    assert op.workspace(shape, ARCH) == {"tile_plan": ((1 + 7 + 6,), np.uint32)}
    big = op.shape(B=2, H=40, S=1000, D=128)                # 640 tiles on 132 lists
    assert op.workspace(big, ARCH)["tile_plan"][0] == op.tile_plan(big).shape == (774,)
    assert Attention("bf16").workspace(shape, ARCH) == {}
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
        arrays.update(op.workspace_arrays(shape, ARCH))
        run_steps(op, shape, load_steps(op, shape, op.build(shape, ARCH), ARCH), arrays, ARCH)
        assert op.check(shape, arrays)[0]
        out.append(arrays)
    assert np.array_equal(out[0]["O"], out[1]["O"])
    assert np.array_equal(out[0]["LSE"], out[1]["LSE"])


@pytest.mark.gpu
def test_gpu_full_apart_matches_the_emulator_bit_for_bit():
    from ptxgen.runtime import load_steps, run_steps
    sched = AttentionSchedule(BN=64, full_apart=True)
    op = Attention("bf16", schedule=sched, mask_mod=am.sliding_window(90))
    shape = op.shape(B=2, H=3, S=333, D=128)
    gpu = op.make_inputs(shape, np.random.default_rng(12))
    emu = {k: v.copy() for k, v in gpu.items()}
    run_steps(op, shape, load_steps(op, shape, op.build(shape, ARCH), ARCH), gpu, ARCH)
    assert op.check(shape, gpu)[0]
    _run(op, shape, emu)
    assert np.array_equal(gpu["O"], emu["O"]) and np.array_equal(gpu["LSE"], emu["LSE"])


@pytest.mark.parametrize("schedule, shape, kw", [
    (dataclasses.replace(SMALL, soft_ex2_every=4), dict(B=1, H=2, S=201, D=64), {}),
    (AttentionSchedule(BN=64, consumers=3, consumer_regs=160, soft_ex2_every=3, peel=True),
     dict(B=1, H=2, S=333, D=128), dict(causal=True)),
    (dataclasses.replace(SMALL, soft_ex2_every=2, persistent=True), dict(B=2, H=1, S=150, D=64),
     dict(causal=True)),
])
def test_exp2_on_the_fma_pipe_stays_within_the_bound(schedule, shape, kw):
    op, shape, sfu, soft = _pair(kw, dataclasses.replace(schedule, soft_ex2_every=0), shape,
                                 sm_count=3, form="soft_ex2_every",
                                 value=schedule.soft_ex2_every)
    assert np.isfinite(op.values(soft["O"])).all()
    assert op.check(shape, soft)[0]
    assert np.abs(op.values(soft["O"]) - op.values(sfu["O"])).max() <= 2.0 ** -7


@pytest.mark.needs_nvdisasm
def test_exp2_on_the_fma_pipe_leaves_the_sfu():
    def mufu(k):
        op = Attention("bf16", schedule=dataclasses.replace(
            default_attention_schedule(64, forms=False), soft_ex2_every=k))
        sh = op.shape(B=4, H=32, S=4096, D=64)
        asm = toolchain.assemble(emit_module(op.build(sh, ARCH), ARCH), ARCH)
        assert asm.resources["attention"].spills == 0
        return toolchain.sass_mix(toolchain.disassemble(asm.cubin))["attention"]["MUFU.EX2"]
    # P's 64 exp2 per thread and key block, in the block before the loop and in it
    assert mufu(0) - mufu(4) == 2 * 64 // 4
