"""The attention decode (split-KV over a contiguous or paged K/V cache, GQA rows in one mma
tile, the combine kernel) and the cache append: the emulator against float64 at odd lengths
per sequence, S_q 1 and 5, GQA and MHA, page sizes 16 and 64 with a shuffled block table, D 64
and 128, one split and several; schedules; the public functions on numpy and torch CPU
tensors; the CLI; ptxas at D = 128 without spills."""
import numpy as np
import pytest

import ptxgen
from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.attention_decode import AttentionDecode, KvCacheAppend
from ptxgen.schedule.attention_decode import DecodeSchedule, default_decode_schedule

LENS = [1, 37, 300]


def _run(op, shape, lens, engine="auto"):
    arrays = op.make_inputs(shape, np.random.default_rng(7), lens=lens)
    assert np.isnan(op.values(arrays["O"])).all()                 # poisoned before the run
    run_operator(op, shape, arrays, "sm_90a", engine=engine)
    return arrays


@pytest.mark.parametrize("page, S_q, H, H_kv, D, splits, warps", [
    (None, 1, 8, 2, 64, 1, 1),                # GQA 4, one split
    (None, 1, 2, 2, 128, 8, 4),               # MHA, several splits
    (16, 5, 8, 2, 128, 4, 2),                 # GQA 4 x 5 tokens: 20 rows, two 16-row tiles
    (64, 1, 8, 2, 64, 12, 4),                 # more splits than some sequences have blocks
    (64, 5, 2, 2, 64, 1, 1),                  # MHA, paged, one split
])
def test_decode_matches_float64(page, S_q, H, H_kv, D, splits, warps):
    op = AttentionDecode("bf16", page_size=page,
                         schedule=DecodeSchedule(splits=splits, warps=warps))
    shape = op.shape(B=3, S_q=S_q, H=H, H_kv=H_kv, D=D, S_max=300)
    arrays = _run(op, shape, [max(n, S_q) for n in LENS])
    ok, worst = op.check(shape, arrays)
    assert ok, worst


def test_decode_gqa8_default_schedule_interpreter():
    """GQA 8 (8 query heads per K/V head), the default schedule, the interpreter (racecheck
    of the warps' own rings and the shared Q tile)."""
    op = AttentionDecode("bf16", page_size=16, scale=0.3)
    shape = op.shape(B=2, S_q=1, H=16, H_kv=2, D=64, S_max=96)
    arrays = _run(op, shape, [37, 96], engine="interp")
    ok, worst = op.check(shape, arrays)
    assert ok, worst


def test_check_catches_a_wrong_result():
    op = AttentionDecode("bf16", schedule=DecodeSchedule(splits=2, warps=2))
    shape = op.shape(B=2, S_q=1, H=4, H_kv=2, D=64, S_max=64)
    arrays = _run(op, shape, [5, 64])
    assert op.check(shape, arrays)[0]
    arrays["LSE"][1, 0, 1] += 1e-3
    assert not op.check(shape, arrays)[0]


@pytest.mark.parametrize("page", [None, 16, 64])
def test_append_is_exact(page):
    op = KvCacheAppend("bf16", page_size=page)
    shape = op.shape(B=3, S_q=5, H_kv=2, D=128, S_max=130)
    arrays = op.make_inputs(shape, np.random.default_rng(3), lens=[0, 61, 127])  # 2 past the end
    run_operator(op, shape, arrays, "sm_90a")
    ok, _ = op.check(shape, arrays)
    assert ok
    assert not np.array_equal(arrays["K"], arrays["K_before"])


def test_schedule_choice_and_errors():
    # 16 x 8 heads: 2 waves of 132 SMs x 2 CTAs (100 KB each) want 5 CTAs per head: 20 splits
    s = default_decode_schedule(16, 8, 4, 32768, 128, "sm_90a")
    assert (s.splits, s.warps) == (20, 4)
    assert default_decode_schedule(1, 1, 1, 40, 64, "sm_90a") == DecodeSchedule(1, 1)
    assert default_decode_schedule(1, 1, 1, 300, 64, "sm_90a").splits == 4   # >= 4 blocks each
    for fields, words in ((dict(splits=6, warps=4), "multiple of warps"),
                          (dict(BN=32), "BN=32"), (dict(stages=1), "stages=1"),
                          (dict(splits=8, warps=8, stages=6), "shared memory")):
        with pytest.raises(ScheduleError) as e:
            DecodeSchedule(**fields).validate("sm_90a", 128)
        assert "\n" not in str(e.value) and words in str(e.value), str(e.value)


def test_operator_errors_are_one_line():
    for make, words in (
            (lambda: AttentionDecode(page_size=24), "page_size"),
            (lambda: AttentionDecode().shape(H=6, H_kv=4), "multiple of H_kv"),
            (lambda: AttentionDecode().shape(S_q=17), "S_q=17"),
            (lambda: AttentionDecode(dtype="f32"), "dtype")):
        with pytest.raises(PtxgenError) as e:
            make()
        assert "\n" not in str(e.value) and words in str(e.value), str(e.value)


# -- the public functions ---------------------------------------------------------------------
def _cache(rng, bf16, B, S_max, H_kv, D, page=None):
    if page is None:
        dims = (B, S_max, H_kv, D)
        table = None
    else:
        mp = -(-S_max // page)
        dims = (B * mp + 1, page, H_kv, D)
        table = rng.permutation(B * mp + 1)[:B * mp].reshape(B, mp).astype(np.int32)
    return (rng.standard_normal(dims).astype(bf16), rng.standard_normal(dims).astype(bf16),
            table)


@pytest.mark.parametrize("page", [None, 16])
def test_numpy_append_then_decode_matches_float64(page):
    ml = pytest.importorskip("ml_dtypes")
    from ptxgen.ops.attention import UNIT_ROUNDOFF, attention_reference
    rng = np.random.default_rng(1)
    B, S_q, H, H_kv, D, S_max = 2, 2, 4, 2, 64, 50
    k, v, table = _cache(rng, ml.bfloat16, B, S_max, H_kv, D, page)
    q = rng.standard_normal((B, S_q, H, D)).astype(ml.bfloat16)
    kn, vn = (rng.standard_normal((B, S_q, H_kv, D)).astype(ml.bfloat16) for _ in range(2))
    lens = np.array([7, 48], np.int32)
    ptxgen.kv_cache_append(k, v, kn, vn, lens, table)
    o, lse = ptxgen.attention_decode(q, k, v, lens + S_q, table, return_lse=True)
    assert o.dtype == ml.bfloat16 and o.shape == q.shape and lse.shape == (B, S_q, H)
    for b in range(B):
        n = int(lens[b]) + S_q
        if table is None:
            kb, vb = k[b, :n], v[b, :n]
        else:
            kb, vb = (x[table[b]].reshape(-1, H_kv, D)[:n] for x in (k, v))
        assert (kb[lens[b]:n] == kn[b]).all()
        kk, vv = (np.repeat(x.astype(np.float64).transpose(1, 0, 2), H // H_kv, 0)
                  for x in (kb, vb))
        ref = attention_reference(q[b].astype(np.float64).transpose(1, 0, 2), kk, vv, D ** -0.5,
                                  True, UNIT_ROUNDOFF["bf16"], rows=np.arange(n - S_q, n))
        err = np.abs(o[b].astype(np.float64).transpose(1, 0, 2) - ref["O"])
        assert (err <= ref["O_bound"]).all()
        assert (np.abs(lse[b].T - ref["LSE"]) <= ref["LSE_bound"]).all()


def test_torch_cpu_matches_numpy_and_refuses_gradients():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    B, S_q, H, H_kv, D, S_max = 2, 1, 4, 1, 64, 40
    k, v, _ = (torch.from_numpy(x.astype(np.float32)).bfloat16() if x is not None else None
               for x in _cache(rng, np.float32, B, S_max, H_kv, D))
    kn, vn = (torch.randn(B, S_q, H_kv, D).bfloat16() for _ in range(2))
    q = torch.randn(B, S_q, H, D).bfloat16()
    lens = torch.tensor([3, 39], dtype=torch.int32)
    ptxgen.kv_cache_append(k, v, kn, vn, lens)                     # in place
    assert torch.equal(k[1, 39], kn[1, 0]) and torch.equal(v[0, 3], vn[0, 0])
    o = ptxgen.attention_decode(q, k, v, lens + 1)
    assert o.dtype == torch.bfloat16 and o.shape == q.shape
    want = torch.nn.functional.scaled_dot_product_attention(
        q[1].transpose(0, 1).float(), k[1, :40].transpose(0, 1).float().expand(H, -1, -1),
        v[1, :40].transpose(0, 1).float().expand(H, -1, -1)).transpose(0, 1)
    assert (o[1].float() - want).abs().max() < 2e-2
    with pytest.raises(PtxgenError, match="inference only"):
        ptxgen.attention_decode(q.requires_grad_(), k, v, lens + 1)


def test_custom_ops_and_torch_compile():
    torch = pytest.importorskip("torch")
    q = torch.randn(2, 1, 4, 64).bfloat16()
    k, v = (torch.randn(2, 32, 2, 64).bfloat16() for _ in range(2))
    lens = torch.tensor([3, 32], dtype=torch.int32)
    o = ptxgen.attention_decode(q, k, v, lens)
    f = torch.compile(lambda *a: ptxgen.attention_decode(*a), fullgraph=True, backend="eager")
    assert torch.equal(f(q, k, v, lens), o)
    torch.ops.ptxgen.kv_cache_append(k, v, q[:, :, :2], q[:, :, :2],
                                     torch.tensor([3, 5], dtype=torch.int32), None)
    assert torch.equal(k[0, 3], q[0, 0, :2]) and torch.equal(v[1, 5], q[1, 0, :2])


@pytest.mark.parametrize("call, words", [
    (lambda q, k, l: ptxgen.attention_decode(q, k, k, l.astype(np.int64)), "cache_seqlens"),
    (lambda q, k, l: ptxgen.attention_decode(q, k, k, l + 100), "cache_seqlens must lie"),
    (lambda q, k, l: ptxgen.attention_decode(q[..., :48], k, k, l), "H_kv, D"),
    (lambda q, k, l: ptxgen.attention_decode(q, k, k, l, np.zeros((2, 3), np.int32)),
     "page_size"),
    (lambda q, k, l: ptxgen.attention_decode(q, k, k, l, softmax_scale=-1.0), "softmax_scale"),
    (lambda q, k, l: ptxgen.kv_cache_append(k, k, q, q, l), "H_kv"),
])
def test_function_errors_are_one_line(call, words):
    ml = pytest.importorskip("ml_dtypes")
    q = np.ones((2, 1, 4, 64), ml.bfloat16)
    k = np.ones((2, 40, 2, 64), ml.bfloat16)
    with pytest.raises(PtxgenError) as e:
        call(q, k, np.array([5, 40], np.int32))
    assert "\n" not in str(e.value) and words in str(e.value), str(e.value)


# -- command line and ptxas -------------------------------------------------------------------
def test_cli_emits_and_runs_the_decode(cli):
    rc, out, err = cli("emit", "attention", "--B", "16", "--H", "32", "--kv-heads", "8", "--D",
                       "128", "--dtype", "bf16", "--decode", "--kv-len", "32768",
                       "--page-size", "64", "--arch", "sm_90a")
    assert rc == 0 and ".entry decode_split" in out and ".entry decode_combine" in out, err
    rc, out, err = cli("run", "attention", "--B", "2", "--H", "4", "--kv-heads", "2", "--D",
                       "64", "--decode", "--kv-len", "70", "--page-size", "16", "--S", "2",
                       "--backend", "emu", "--check", "--quiet")
    assert rc == 0 and "check: PASS" in out, (out, err)
    rc, out, err = cli("emit", "attention", "--page-size", "64")
    assert rc != 0 and "--decode" in err and "\n" not in err.strip()


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("page", [None, 64])
def test_ptxas_sm90a_no_spills_at_d128(page):
    op = AttentionDecode("bf16", page_size=page)
    shape = op.shape(B=16, S_q=1, H=32, H_kv=8, D=128, S_max=32768)
    asm = toolchain.assemble(emit_module(op.build(shape, "sm_90a"), "sm_90a"), "sm_90a")
    for name in ("decode_split", "decode_combine"):
        r = asm.resources[name]
        assert r.spills == 0 and r.stack_bytes == 0, (name, r)
    app = KvCacheAppend("bf16", page_size=page)
    shape = app.shape(B=16, S_q=4, H_kv=8, D=128, S_max=32768)
    r = toolchain.assemble(emit_module(app.build(shape, "sm_90a"), "sm_90a"),
                           "sm_90a").resources["kv_append"]
    assert r.spills == 0
