"""MatmulSchedule: validation messages, hashing and JSON round trips, ptxas resources and SASS of
every benchmark candidate, and emulated correctness of the lowered kernels at shapes that are
not tile multiples."""
import functools
import importlib.util
import json
import re

import numpy as np
import pytest

from ptxgen import emit_module, toolchain
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ir.verify import verify_module
from ptxgen.ops import get_operator
from ptxgen.ops.matmul import Matmul
from ptxgen.lower import lower_matmul
from ptxgen.schedule import (CANDIDATES, MatmulSchedule, default_schedule,
                             target_limits)

needs_emu = pytest.mark.skipif(importlib.util.find_spec("ptxgen.emu") is None,
                               reason="the CPU emulator (ptxgen.emu) is not in this build")

ALIGNED = {"M": 4096, "N": 4096, "K": 4096}
ODD = {"M": 4095, "N": 4097, "K": 513}          # K and N odd: scalar global accesses


# -- validation -------------------------------------------------------------------------------
BAD = [
    (dict(BM=96), "BM=96 must be a power of two"),
    (dict(WM=256), "warp tile 256x64 must divide block tile"),
    (dict(WM=64), "must give 32 lanes"),
    (dict(vec_shared=2), "vec_shared and vec_global must be 1 or 4"),
    (dict(vec_store=4, vec_shared=1, TM=8), "vec_store must be 1, 2 or 4 and at most"),
    (dict(BK=2), "BK=2 must be a multiple of 4"),
    (dict(pad_a=2), "must stay multiples of 4"),
    (dict(stages=3), "register-staged loads use 1 or 2 stages"),
    (dict(use_cp_async=True, stages=1), "cp.async pipelines need 2..8 stages"),
    (dict(BK=32, use_cp_async=True, stages=4), "exceed the 49152-byte static limit"),
    (dict(BM=256, WM=64, TM=16), "registers per thread, over the cap of 128"),
    (dict(BM=256, BN=256, WN=32, TN=4, min_ctas_per_sm=1), "2048 threads per CTA exceed"),
    (dict(BM=128, BN=256, min_ctas_per_sm=5), "5 CTAs of 512 threads exceed"),
    (dict(ffma_order="zigzag"), "ffma_order must be"),
    (dict(group_m=-1), "must be >= 0"),
    (dict(unroll=3), "unroll must be 1, 2 or 4"),
    (dict(BM=32, BN=128, WM=32, WN=32, TM=4, TN=8, BK=4), "cannot share the 32x4 A tile"),
]


@pytest.mark.parametrize("kw,msg", BAD, ids=[m[:30] for _, m in BAD])
def test_validation_names_the_broken_rule(kw, msg):
    s = MatmulSchedule(**kw)
    with pytest.raises(ScheduleError, match=msg):
        s.validate("sm_90")
    with pytest.raises(ScheduleError):
        lower_matmul(s, "sm_90")


def test_unknown_target_and_bad_shape():
    with pytest.raises(PtxgenError, match="unknown arch"):
        MatmulSchedule().validate("sm_99")
    with pytest.raises(ScheduleError, match="shape K must be a positive int"):
        MatmulSchedule().validate("sm_90", {"M": 4, "N": 4, "K": 0})
    with pytest.raises(ScheduleError, match="32-bit offsets"):
        MatmulSchedule().validate("sm_90", {"M": 70000, "N": 4, "K": 70000})


def test_limits_follow_the_isa_tables():
    from ptxgen import isa
    for arch in isa.available():
        h = isa.load(arch).header
        lim = target_limits(arch)
        assert lim["max_shared_per_block"] == h.shared_per_block_optin
        assert lim["regs_per_sm"] == h.registers_per_sm
    assert target_limits("sm_86")["max_threads_per_sm"] == 1536


def test_register_cap_follows_occupancy_target():
    s = MatmulSchedule()
    assert s.threads == 256 and s.register_cap("sm_90") == 128
    assert s.replace(min_ctas_per_sm=1).register_cap("sm_90") == 255
    assert s.replace(min_ctas_per_sm=3).register_cap("sm_90") == 80


# -- identity and serialization ---------------------------------------------------------------
def test_hash_equality_and_json_round_trip():
    seen = set()
    for name, s in CANDIDATES.items():
        t = MatmulSchedule.from_json(s.to_json())
        assert t == s and hash(t) == hash(s) and str(t) == str(s)
        assert json.loads(s.to_json())["BM"] == s.BM
        seen.add(s)
    assert len(seen) == len(CANDIDATES) == len({str(s) for s in CANDIDATES.values()})
    assert MatmulSchedule(BK=16) != MatmulSchedule()
    with pytest.raises(Exception):
        MatmulSchedule().BM = 64                       # frozen


@pytest.mark.parametrize("text,msg", [
    ('{"BM": 128, "tile": 3}', "unknown MatmulSchedule field"),
    ('{"BM": "128"}', "BM must be int"),
    ('{"use_cp_async": 1}', "use_cp_async must be bool"),
    ('{"BM": true}', "BM must be int"),
    ('[1, 2]', "must be an object"),
    ('{"BM": ', "malformed"),
])
def test_from_json_rejects_bad_input(text, msg):
    with pytest.raises(ScheduleError, match=msg):
        MatmulSchedule.from_json(text)


def test_str_names_non_default_fields():
    assert str(MatmulSchedule()) == "128x128x8_w32x64_t8x8_s2"
    assert "group_m=8" in str(CANDIDATES["128x128x8_g8"])
    assert str(CANDIDATES["128x128x8_cp3"]).endswith("cp3")


# -- ptxas and SASS ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _compiled(name, arch, dims):
    s = CANDIDATES[name]
    shape = dict(dims)
    module = verify_module(lower_matmul(s, arch, shape))
    asm = toolchain.assemble(emit_module(module, arch), arch)
    return asm.resources["matmul"], toolchain.disassemble(asm.cubin)


def _loop_body(sass):
    """SASS opcodes of the longest backward-branch loop (the k-tile loop)."""
    ops, labels, best = [], {}, None
    for line in sass.splitlines():
        m = re.match(r"^\s*(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = len(ops)
            continue
        m = re.match(r"^\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)", line)
        if m:
            ops.append((m.group(1) or "", m.group(2), m.group(3)))
    for i, (_, op, rest) in enumerate(ops):
        t = re.search(r"(\.L_x_\d+)", rest)
        if op.startswith("BRA") and t and labels.get(t.group(1), i) < i:
            if best is None or i - labels[t.group(1)] > best[1] - best[0]:
                best = (labels[t.group(1)], i)
    assert best is not None, "no loop in the kernel"
    return ops[best[0]:best[1] + 1]


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("name", list(CANDIDATES))
def test_candidates_assemble_without_spills(name, arch):
    s = CANDIDATES[name]
    for shape in (ALIGNED, ODD):
        r, _ = _compiled(name, arch, tuple(shape.items()))
        assert r.spills == 0 and r.stack_bytes == 0, (name, arch, shape, r)
        assert 0 < r.registers <= s.register_cap(arch), (name, arch, r)
        assert r.shared_bytes == s.shared_bytes


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("name", list(CANDIDATES))
def test_candidate_sass_is_ffma_bound_with_wide_accesses(name):
    s = CANDIDATES[name]
    _, sass = _compiled(name, "sm_90", tuple(ALIGNED.items()))
    body = _loop_body(sass)
    ops = [op for _, op, _ in body]
    ffma = ops.count("FFMA")
    assert ffma == s.BK * s.TM * s.TN                 # one k tile of FMAs per trip
    assert ffma >= 0.85 * len(ops), f"FFMA is {ffma} of {len(ops)} loop instructions"
    assert ops.count("LDS.128") == s.BK * (s.TM + s.TN) // 4
    # no scalar shared loads beyond the never-executed @!PT ones ptxas pads LDGSTS with
    assert not [1 for g, op, _ in body if op == "LDS" and g.strip() != "@!PT"]
    if s.use_cp_async:
        assert any(op.startswith("LDGSTS.E.BYPASS.128") for op in ops)
    else:
        assert "LDG.E.128" in ops and "STS.128" in ops


@pytest.mark.needs_nvdisasm
def test_odd_k_and_n_narrow_global_accesses():
    _, sass = _compiled("128x128x8", "sm_90", tuple(ODD.items()))
    ops = [op for _, op, _ in _loop_body(sass)]
    assert "LDG.E" in ops and "LDG.E.128" not in ops
    mix = toolchain.sass_mix(sass)["matmul"]
    assert "STG.E" in mix and "STG.E.64" not in mix        # N odd: scalar C stores
    _, sass = _compiled("128x128x16", "sm_90", tuple(ALIGNED.items()))   # stage_c=False
    assert "STG.E.64" in toolchain.sass_mix(sass)["matmul"]             # vec_store=2


@pytest.mark.needs_nvdisasm
def test_staged_c_stores_are_whole_warp_rows():
    """stage_c (the default): C goes through shared memory and each warp store is one row's
    32 consecutive floats: scalar STG, each fed by a scalar LDS."""
    _, sass = _compiled("128x128x8", "sm_90", tuple(ALIGNED.items()))
    mix = toolchain.sass_mix(sass)["matmul"]
    s = CANDIDATES["128x128x8"]
    assert mix.get("STG.E", 0) == s.TM * s.TN and "STG.E.64" not in mix
    assert mix.get("BAR.SYNC.DEFER_BLOCKING", mix.get("BAR.SYNC", 0)) >= 2 * s.TM


# -- operator ---------------------------------------------------------------------------------
def test_default_schedule_fills_the_gpu():
    assert default_schedule(ALIGNED) == CANDIDATES["128x128x8_g8"]
    assert default_schedule(ODD) == CANDIDATES["128x128x8_g8"]
    small = default_schedule({"M": 1000, "N": 1000, "K": 1000})
    assert small == CANDIDATES["64x64x8"]
    assert -(-1000 // small.BM) * -(-1000 // small.BN) >= 132


def test_operator_launch_matches_schedule():
    op = get_operator("matmul")
    shape = op.shape(M=1000, N=600, K=64)
    s = op.schedule_for(shape)
    cfg = op.launch(shape)
    assert cfg.block == (s.threads, 1, 1) and cfg.grid == s.grid(shape)
    k = op.build(shape).kernel("matmul")
    assert f".reqntid {s.threads}, 1, 1" in k.directives
    g = Matmul(CANDIDATES["128x128x8_g8"])
    assert g.launch(shape).grid == (8 * 5, 1, 1)
    simple = Matmul(None)
    assert simple.launch(shape).block == (16, 16, 1)
    with pytest.raises(PtxgenError, match="schedule must be"):
        Matmul("fast")


# -- correctness on the emulator --------------------------------------------------------------
def _emulate(s, M, N, K, seed=0):
    from ptxgen.emu import emulate
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.full((M, N), np.nan, np.float32)
    shape = {"M": M, "N": N, "K": K}
    emulate(lower_matmul(s, "sm_90", shape), "matmul", s.grid(shape), s.block(),
            np.uint32(M), np.uint32(N), np.uint32(K), A, B, C, check="error")
    ref = A.astype(np.float64) @ B.astype(np.float64)
    return np.abs(C - ref).max() / np.sqrt(K)


SHAPES = [(37, 45, 29), (130, 67, 9), (1, 1, 1), (64, 200, 3)]


@needs_emu
@pytest.mark.parametrize("name", list(CANDIDATES))
def test_candidates_correct_on_emulator(name):
    for M, N, K in SHAPES:
        err = _emulate(CANDIDATES[name], M, N, K)
        assert err < 1e-5, (name, (M, N, K), err)


VARIANTS = [dict(a_transposed=False), dict(a_transposed=False, use_cp_async=True, stages=3),
            dict(stages=1), dict(frag_double_buffer=False), dict(vec_global=1),
            dict(vec_shared=1, vec_store=1), dict(ffma_order="row", vec_store=4),
            dict(group_m=2), dict(use_cp_async=True, stages=4, pad_a=0), dict(unroll=2),
            dict(use_cp_async=True, stages=3, unroll=2),
            dict(BM=128, BN=32, WM=64, WN=32, TM=16, TN=4)]


@needs_emu
@pytest.mark.parametrize("kw", VARIANTS, ids=[str(MatmulSchedule(**v)) for v in VARIANTS])
def test_schedule_variants_correct_on_emulator(kw):
    s = MatmulSchedule(**kw).validate("sm_90")
    for M, N, K in [(300, 70, 21), (40, 129, 8)]:
        assert _emulate(s, M, N, K, seed=1) < 1e-5, (s, (M, N, K))


@needs_emu
def test_operator_default_runs_on_emulator():
    from ptxgen.reports.run import run_operator
    op = get_operator("matmul")
    for dims in ({"M": 67, "N": 45, "K": 33}, {"M": 129, "N": 1, "K": 130}):
        res = run_operator(op, op.shape(**dims), "emu", seed=3)
        assert res.ok, res


# -- shared-memory banks ----------------------------------------------------------------------
def _shared_wavefronts(s, M, N, K):
    """{instruction text: BankConflicts} of warp 0's first execution of every shared access,
    with the lane addresses the emulator computes (ptxgen.analysis.banks, the ncu-fitted
    model)."""
    from shared_access import first_shared_accesses
    shape = {"M": M, "N": N, "K": K}
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    return first_shared_accesses(lower_matmul(s, "sm_90", shape), "matmul", s.grid(shape),
                                 s.block(), np.uint32(M), np.uint32(N), np.uint32(K), A, B,
                                 np.zeros((M, N), np.float32))


@needs_emu
@pytest.mark.parametrize("name", list(CANDIDATES))
def test_shared_accesses_are_conflict_free(name):
    s = CANDIDATES[name]
    for dims, store_degree in (((256, 256, 32), 1.0), ((255, 257, 33), 2.0)):
        acc = _shared_wavefronts(s, *dims)
        frag = [r for text, r in acc if text.startswith("ld.shared.v4")]
        assert len(frag) >= s.BK * (s.TM + s.TN) // 4
        # 16-byte fragment loads: one wavefront per half-warp pass (lanes share addresses)
        assert all(r.wavefronts == r.ideal == 2 for r in frag), (name, dims)
        for text, r in acc:
            limit = 1.0 if text.startswith("ld") else store_degree
            assert r.degree <= limit, (name, dims, text, r.wavefronts, r.ideal)
