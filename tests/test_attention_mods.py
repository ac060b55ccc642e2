"""Programmable attention (FlexAttention's model): score_mod / mask_mod traced once, block masks,
the named mods, each on the CPU emulator (sm_90a and the sm_80 path) against float64 at odd
shapes, the CLI, ptxas without spills, and (GPU) the same on the device."""
import os

import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.cli import main
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError
from ptxgen.ops import attention_mods as am
from ptxgen.ops.attention import Attention
from ptxgen.schedule.attention import AttentionSchedule
from ptxgen.schedule.mma_attention import MmaAttentionSchedule
from ptxgen.schedule.score_mods import (ModTensor, absolute, evaluate, maximum, trace_mask_mod,
                                        trace_score_mod, where)

SM90, SM80 = "sm_90a", "sm_80"
needs_ptxas = pytest.mark.skipif(not (toolchain.have_tool("ptxas") and
                                      toolchain.have_tool("nvdisasm")),
                                 reason="ptxas/nvdisasm not found")
# several query and key blocks at small sizes: 128 x 32 tiles (sm_90a), 128 x 64 (sm_80)
SCHED90 = AttentionSchedule(BN=32, consumers=2)
SCHED80 = MmaAttentionSchedule(BN=64)


def named_mods(S, H):
    docs = np.repeat(np.arange(S), np.random.default_rng(1).integers(5, 40, S))[:S]
    return {
        "causal": dict(mask_mod=am.causal()),
        "sliding": dict(mask_mod=am.sliding_window(37)),
        "document": dict(mask_mod=am.document(docs)),
        "document_causal_scattered": dict(mask_mod=am.document(np.arange(S) % 3, causal=True)),
        "prefix_lm": dict(mask_mod=am.prefix_lm(45)),
        "alibi": dict(score_mod=am.alibi(am.alibi_slopes(H))),
        "soft_cap": dict(score_mod=am.soft_cap(2.0)),
        "alibi_sliding": dict(score_mod=am.alibi(am.alibi_slopes(H)),
                              mask_mod=am.sliding_window(50)),
    }


def _emulated(op, shape, arch, seed=None):
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    run_operator(op, shape, arrays, arch)
    return arrays


# -- tracing -------------------------------------------------------------------------------------
def test_a_traced_mod_evaluates_as_the_python_function():
    t = ModTensor(np.array([0.5, -2.0, 3.0]), "t")
    ids = ModTensor(np.array([4, 7, 7, 1, 0]), "ids")

    def fn(score, b, h, q, kv):
        x = where(q >= kv, score * t[h] - (q - kv) / 4, absolute(score) + 1)
        return maximum(x, -3.0) + (kv // 3 - kv % 3) * 0.25 + ids[q] * 0.5 + b

    g = trace_score_mod(fn)
    rng = np.random.default_rng()
    s = rng.standard_normal((2, 3, 5, 9))
    b = np.arange(2)[:, None, None, None]
    h = np.arange(3)[None, :, None, None]
    q, kv = np.arange(5)[:, None] - 1, np.arange(9)[None, :] - 4      # negatives: // and %
    got, _ = evaluate(g, dict(score=s, b=b, h=h, q=q, kv=kv))
    tv = np.array([0.5, -2.0, 3.0], np.float32)[h]
    want = np.where(q >= kv, s * tv - (q - kv) / 4, np.abs(s) + 1)
    want = np.maximum(want, -3.0) + (kv // 3 - kv % 3) * 0.25 + \
        np.array([4, 7, 7, 1, 0])[np.clip(q, 0, 4)] * 0.5 + b
    assert np.allclose(got, want, rtol=1e-12, atol=0)
    assert g.tensors[0] is t and g.leaves == {"score", "b", "h", "q", "kv"}


def test_the_same_subexpression_is_one_node():
    g = trace_mask_mod(lambda b, h, q, kv: ((q - kv) >= 0) & ((q - kv) < 9))
    assert sum(n.op == "sub" for n in g.nodes) == 1
    assert "b" not in g.leaves and "h" not in g.leaves


@pytest.mark.parametrize("fn, words", [
    (lambda s, b, h, q, kv: s if q > kv else 0.0, "where"),
    (lambda s, b, h, q, kv: q > kv, "not a mask"),
    (lambda s, b, h, q, kv: s + np.arange(3), "ModTensor"),
    (lambda s, b, h, q, kv: s + ModTensor([1.0], "t")[h, q], "2 indices"),
    (lambda s, b, h, q, kv: (q > kv) + 1, "mask is not a number"),
])
def test_untraceable_score_mods_are_one_line_errors(fn, words):
    with pytest.raises(PtxgenError, match=words) as e:
        trace_score_mod(fn)
    assert "\n" not in str(e.value)


def test_mask_mod_must_return_a_mask():
    with pytest.raises(PtxgenError, match="mask_mod must return a mask"):
        trace_mask_mod(lambda b, h, q, kv: q - kv)


def test_soft_exp2_on_the_fma_pipe_matches_exp2():
    """The polynomial exp2 the softmax takes for some elements when a score_mod uses the
    special-function unit: relative error below 4e-6 over x <= 0, and 0 at -inf."""
    from ptxgen.emu import emulate
    from ptxgen.ir import Builder, Module, Param, ptr
    from ptxgen.ir import types as T
    from ptxgen.lower.online_softmax import soft_exp2
    m = Module(target=SM90)
    k = m.add_kernel("e2", [Param("X", T.u64, ptr(T.f32)), Param("Y", T.u64, ptr(T.f32))])
    b = Builder(k)
    i = b.mad(b.special("ctaid.x"), 128, b.special("tid.x"), type=T.u32)
    x = b.ld("global", T.f32, b.element_addr(b.param("X"), i, 4))
    b.st("global", b.element_addr(b.param("Y"), i, 4), soft_exp2(b, x))
    b.ret()
    x = np.concatenate([-np.random.default_rng().uniform(0, 126, 1000), [0.0, -0.5, -1.5, -126.0,
                       -126.4, -200.0, -np.inf], np.zeros(17)]).astype(np.float32)
    y = np.full_like(x, np.nan)
    emulate(m, "e2", len(x) // 128, 128, x, y)
    want = np.exp2(x.astype(np.float64))
    normal = x >= -126
    assert (np.abs(y[normal] / want[normal] - 1) < 4e-6).all()
    assert y[-18] == 0 and y[-19] == 0                      # -inf, -200
    assert (y[~normal] < 2.0 ** -126).all()


def test_soft_cap_with_exp2_on_the_fma_pipe_matches_float64(monkeypatch):
    """The FMA-pipe exp2 path (off by default: defaults.json attention.soft_ex2_every) still
    gives soft-cap within its float64 bound when chosen."""
    from ptxgen.schedule import score_mods
    monkeypatch.setattr(score_mods, "SOFT_EX2_EVERY", 4)
    B, H, S, D = 1, 2, 201, 64
    op = Attention("bf16", schedule=SCHED90, **named_mods(S, H)["soft_cap"])
    shape = op.shape(B=B, H=H, S=S, D=D)
    assert op.mod_spec(shape).soft_ex2_every == 4
    ok, worst = op.check(shape, _emulated(op, shape, SM90))
    assert ok, worst


# -- block masks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["causal", "sliding", "document", "prefix_lm"])
def test_block_mask_classifies_every_tile_like_the_dense_mask(name):
    Q, KV, bq, bk = 203, 190, 32, 16
    fn = named_mods(max(Q, KV), 1)[name]["mask_mod"]
    bm = am.create_block_mask(fn, None, None, Q, KV, BLOCK_SIZE=(bq, bk))
    dense, _ = evaluate(trace_mask_mod(fn), dict(b=0, h=0, q=np.arange(Q)[:, None],
                                                 kv=np.arange(KV)[None, :]))
    dense = np.broadcast_to(dense, (Q, KV))
    assert bm.shape == (1, 1, -(-Q // bq), -(-KV // bk))
    assert bm.allowed[0, 0] == dense.sum()
    arrays = bm.kernel_arrays()
    assert tuple(arrays["BM_counts"][0]) == (bq, bk)
    for i in range(bm.shape[2]):
        n_p, n_f = bm.kv_num_blocks[0, 0, i], bm.full_kv_num_blocks[0, 0, i]
        part, full = set(bm.kv_indices[0, 0, i, :n_p]), set(bm.full_kv_indices[0, 0, i, :n_f])
        entries = arrays["BM_lists"][i, :n_p + n_f]
        assert list(entries & 0x7FFFFFFF) == sorted(part | full)
        assert {int(e & 0x7FFFFFFF) for e in entries if e >> 31} == part
        for j in range(bm.shape[3]):
            tile = dense[i * bq:(i + 1) * bq, j * bk:(j + 1) * bk]
            kind = "full" if tile.all() else "empty" if not tile.any() else "partial"
            assert kind == ("full" if j in full else "partial" if j in part else "empty")


def test_block_mask_per_head_only_where_the_mask_reads_h():
    per_head = am.create_block_mask(lambda b, h, q, kv: q - kv < 10 * (h + 1), 2, 3, 100, 100,
                                    BLOCK_SIZE=16)
    assert per_head.shape[:2] == (1, 3)
    shared = am.create_block_mask(am.causal(), 2, 3, 100, 100)
    assert shared.shape[:2] == (1, 1)
    with pytest.raises(PtxgenError, match="give B and H"):
        am.create_block_mask(lambda b, h, q, kv: kv < h, None, None, 8, 8)


# -- on the emulator -------------------------------------------------------------------------------
@pytest.mark.parametrize("arch, sched", [(SM90, SCHED90), (SM80, SCHED80)])
@pytest.mark.parametrize("name", list(named_mods(1, 1)))
def test_named_mods_on_the_emulator_match_float64(arch, sched, name):
    B, H, S, D = 1, 2, 201, 64
    op = Attention("bf16", schedule=sched, **named_mods(S, H)[name])
    shape = op.shape(B=B, H=H, S=S, D=D)
    arrays = _emulated(op, shape, arch)
    ok, worst = op.check(shape, arrays)
    assert ok, worst
    # the check sees the mod: without it the same output fails
    assert not Attention("bf16", schedule=sched).check(shape, arrays)[0]


def test_per_head_and_per_batch_masks_and_d128():
    """A mask that reads b and h (its block lists per (batch, head)) with a score_mod reading
    per-(batch, head) tensors, D = 128, the default tiles."""
    bias = ModTensor(np.random.default_rng(2).standard_normal((2, 3)), "bias")

    def mask_mod(b, h, q, kv):
        return (q - kv < 20 + 30 * h) & (kv <= q + b)

    def score_mod(score, b, h, q, kv):
        return score * 0.5 + bias[b, h]
    op = Attention("bf16", score_mod=score_mod, mask_mod=mask_mod)
    shape = op.shape(B=2, H=3, S=150, D=128)
    arrays = _emulated(op, shape, SM90)
    assert arrays["BM_lists"].shape[0] == 2 * 3 * 2
    assert op.check(shape, arrays)[0]


def test_causal_as_mask_mod_is_bit_equal_to_the_built_in_causal():
    for arch, sched in ((SM90, SCHED90), (SM90, "auto"), (SM80, SCHED80)):
        op_b = Attention("bf16", causal=True, schedule=sched)
        op_m = Attention("bf16", mask_mod=am.causal(), schedule=sched)
        shape = op_b.shape(B=1, H=2, S=177, D=64)
        built, modded = _emulated(op_b, shape, arch, 5), _emulated(op_m, shape, arch, 5)
        assert op_b.check(shape, built)[0]
        assert (built["O"] == modded["O"]).all() and (built["LSE"] == modded["LSE"]).all()


def test_rows_without_keys_give_zero_and_minus_infinity():
    op = Attention("bf16", schedule=SCHED90, mask_mod=lambda b, h, q, kv: (q % 7 != 3) & (kv < q))
    shape = op.shape(B=1, H=1, S=90, D=64)
    arrays = _emulated(op, shape, SM90)
    assert op.check(shape, arrays)[0]
    assert np.isneginf(arrays["LSE"][0, 0, [0, 3, 10]]).all()
    assert (op.values(arrays["O"])[0, 0, [0, 3, 10]] == 0).all()


def test_causal_flag_with_a_mask_mod_is_both():
    op = Attention("bf16", causal=True, schedule=SCHED90, mask_mod=am.prefix_lm(30))
    shape = op.shape(B=1, H=1, S=100, D=64)
    arrays = _emulated(op, shape, SM90)
    assert op.check(shape, arrays)[0]
    assert Attention("bf16", causal=True).check(shape, arrays)[0]       # prefix ∧ causal


def test_a_score_mod_with_the_built_in_causal_mask():
    op = Attention("bf16", causal=True, schedule=SCHED90, score_mod=am.alibi([0.5]))
    assert op.causal and op.mod_spec(op.shape(B=1, H=1, S=99, D=64)).block_lists is None
    shape = op.shape(B=1, H=1, S=99, D=64)
    arrays = _emulated(op, shape, SM90)
    assert op.check(shape, arrays)[0]
    assert not Attention("bf16", score_mod=am.alibi([0.5]), schedule=SCHED90).check(
        shape, arrays)[0]


def test_flops_count_the_allowed_pairs():
    op = Attention("bf16", mask_mod=am.sliding_window(100))
    shape = op.shape(B=2, H=4, S=1000, D=64)
    pairs = sum(min(q + 1, 100) for q in range(1000))
    assert op.flops(shape) == 4 * 64 * pairs * 2 * 4
    assert Attention("bf16", mask_mod=am.causal()).flops(shape) == \
        4 * 64 * 1000 * 1001 // 2 * 8


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(PtxgenError, match="create_block_mask"):
        Attention(block_mask="x")
    bm = am.create_block_mask(am.causal(), 1, 1, 100, 100, BLOCK_SIZE=64)
    with pytest.raises(PtxgenError, match="causal=True with a block_mask"):
        Attention(causal=True, block_mask=bm)
    op = Attention("bf16", block_mask=bm)
    with pytest.raises(PtxgenError, match=r"BLOCK_SIZE=\(128, 128\)"):
        op.build(op.shape(B=1, H=1, S=100, D=128), SM90)
    with pytest.raises(PtxgenError, match="S=90"):
        op.build(op.shape(B=1, H=1, S=90, D=128), SM90)
    for bad in (lambda: am.sliding_window(0), lambda: am.soft_cap(-1),
                lambda: am.document(np.zeros((2, 2), int)), lambda: am.alibi("x")):
        with pytest.raises(PtxgenError):
            bad()


def test_a_given_block_mask_is_used():
    bm = am.create_block_mask(am.sliding_window(40), 1, 1, 130, 130, BLOCK_SIZE=(128, 32))
    op = Attention("bf16", schedule=SCHED90, block_mask=bm)
    shape = op.shape(B=1, H=2, S=130, D=64)
    arrays = _emulated(op, shape, SM90)
    assert op.check(shape, arrays)[0]
    assert (arrays["BM_lists"] == bm.kernel_arrays()["BM_lists"]).all()


# -- the command line, ptxas -----------------------------------------------------------------------
def test_cli_emit_and_run_with_mods(capsys, tmp_path):
    out = tmp_path / "a.ptx"
    assert main(["emit", "attention", "--B", "1", "--H", "2", "--S", "300", "--D", "64",
                 "--mask", "sliding:64", "--score-mod", "alibi", "--arch", SM90, "-o",
                 str(out)]) == 0
    assert "BM_lists" in out.read_text()
    for extra in (["--mask", "document:50", "--score-mod", "softcap:20"],
                  ["--mask", "prefix:40"], ["--mask", "causal", "--arch", SM80]):
        assert main(["run", "attention", "--B", "1", "--H", "2", "--S", "133", "--D", "64",
                     "--backend", "emu", "--check"] + extra) == 0
        assert "check: PASS" in capsys.readouterr().out
    assert main(["run", "attention", "--mask", "sliding:x", "--backend", "emu"]) != 0
    assert "--mask sliding:x" in capsys.readouterr().err
    assert main(["run", "saxpy", "--score-mod", "alibi", "--backend", "emu"]) != 0


@needs_ptxas
@pytest.mark.parametrize("spec", [["--mask", "sliding:1024"], ["--mask", "document:1000"],
                                  ["--mask", "prefix:1024"], ["--score-mod", "alibi"],
                                  ["--score-mod", "softcap:30"]])
def test_full_size_kernels_assemble_without_spills(spec, tmp_path):
    out = tmp_path / "a.ptx"
    assert main(["emit", "attention", "--B", "4", "--H", "32", "--S", "4096", "--D", "128",
                 "--dtype", "bf16", "--arch", SM90, "-o", str(out)] + spec) == 0
    asm = toolchain.assemble(out.read_text(), SM90)
    r = asm.resources["attention"]
    assert r.spills == 0 and r.stack_bytes == 0, r
    mix = toolchain.sass_mix(toolchain.disassemble(asm.cubin))["attention"]
    assert "LDL" not in mix and "STL" not in mix
    if "softcap:30" in spec:
        # one tanh per score element (BN/2 = 64 per thread and key block, in the block before
        # the loop and in it); every k-th exp2 moved off the special-function unit
        from ptxgen.schedule.score_mods import SOFT_EX2_EVERY
        from ptxgen.schedule.attention import default_attention_schedule
        unpeeled = Attention(schedule=default_attention_schedule(128, forms=False))
        plain = toolchain.sass_mix(toolchain.disassemble(toolchain.assemble(emit_module(
            unpeeled.build(unpeeled.shape(B=4, H=32, S=4096, D=128), SM90), SM90),
            SM90).cubin))["attention"]
        assert mix["MUFU.TANH"] == 2 * 64
        moved = 2 * 64 // SOFT_EX2_EVERY if SOFT_EX2_EVERY else 0
        assert mix["MUFU.EX2"] == plain["MUFU.EX2"] - moved


# -- on the GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", list(named_mods(1, 1)))
def test_gpu_matches_float64_and_the_emulator(name):
    from ptxgen.runtime import load_steps, run_steps
    B, H, S, D = 1, 2, 201, 64
    op = Attention("bf16", schedule=SCHED90, **named_mods(S, H)[name])
    shape = op.shape(B=B, H=H, S=S, D=D)
    gpu = op.make_inputs(shape, np.random.default_rng(7))
    run_steps(op, shape, load_steps(op, shape, op.build(shape, SM90), SM90), gpu, SM90)
    assert op.check(shape, gpu)[0]
    emu = _emulated(op, shape, SM90, 7)
    if os.environ.get("OUT_DIR"):               # keep both for an offline look at a mismatch
        np.savez_compressed(os.path.join(os.environ["OUT_DIR"], f"mods_{name}.npz"),
                            **{f"gpu_{k}": v for k, v in gpu.items()},
                            **{f"emu_{k}": v for k, v in emu.items()})
    if name != "soft_cap":                      # the emulator's tanh.approx is exact
        bad = np.argwhere(gpu["O"] != emu["O"])
        ulps = np.abs(gpu["O"].astype(np.int32) - emu["O"].astype(np.int32)).max()
        rows = sorted({tuple(r) for r in bad[:, :3].tolist()})
        assert np.array_equal(gpu["LSE"].view(np.uint32), emu["LSE"].view(np.uint32))
        assert not len(bad), (f"{len(bad)} of {gpu['O'].size} O elements differ (at most "
                              f"{ulps} ulp) in {len(rows)} (b, h, row)s, first {rows[:8]}; "
                              f"LSE differs at {int((gpu['LSE'] != emu['LSE']).sum())}")
