"""The tensor-core GEMM tuner on the CPU: its space, the static stages of a dry run (ptxas,
occupancy, the simulator with the tensor pipe) and the CLI. GPU trials are not run here."""
import dataclasses
import json
import subprocess
import sys

import pytest

from ptxgen import toolchain
from ptxgen.errors import PtxgenError
from ptxgen.schedule.tc_matmul import TcMatmulSchedule
from ptxgen.tune import tc_space as T
from ptxgen.tune.tc import tune_tc_matmul

ARCH = "sm_90a"
needs_ptxas = pytest.mark.skipif(not toolchain.have_tool("ptxas"), reason="ptxas not found")


@pytest.fixture(autouse=True)
def no_tune_caches(tmp_path, monkeypatch):
    """Neither the user's nor the shipped tune cache: `auto` is default_tc_schedule here
    unless a test stores an entry (tests/test_tc_tune_cache.py reads the shipped one)."""
    from ptxgen.schedule import tuned as cachemod
    from ptxgen.tune import ptxas_cache
    ptxas_dir = ptxas_cache.cache_dir()                  # keep assembling from the disk cache
    monkeypatch.setattr(ptxas_cache, "cache_dir", lambda: ptxas_dir)
    monkeypatch.setenv("PTXGEN_TUNE_CACHE", str(tmp_path / "user"))
    monkeypatch.setattr(cachemod, "PACKAGE_DIR", tmp_path / "package")


def test_space_counts_and_shared_memory_rule():
    sp = T.tc_space(ARCH, "bf16")
    assert sp.raw == 240 and len(sp) + sum(sp.rejected.values()) == sp.raw
    assert all("shared memory" in r for r in sp.rejected)
    # the staged C tile (64 KB) leaves room for 3 stages of 48 KB, not 4
    tma = {s.stages for s in sp.points if s.epilogue == "tma" and s.BN == 256}
    assert tma == {2, 3}
    assert TcMatmulSchedule(cluster_m=2, inflight=0, epilogue="tma", stages=3) in sp.points
    assert all(s.BK == 32 for s in T.tc_space(ARCH, "tf32").points)


def test_bound_counts_whole_rounds_of_tiles():
    s128x256, s256x128 = TcMatmulSchedule(), TcMatmulSchedule(BM=256, BN=128, wgmma_n=128)
    odd = dict(M=4095, N=4097, K=4093)                 # 544 vs 528 tiles on 132 SMs
    assert T.bound_us(s128x256, odd, ARCH) == pytest.approx(
        5 / 4 * T.bound_us(s256x128, odd, ARCH))
    even = dict(M=4096, N=4096, K=4096)
    assert T.bound_us(s128x256, even, ARCH) == T.bound_us(s256x128, even, ARCH)


def test_schedule_dict_round_trip():
    s = TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, epilogue="tma", stages=3)
    assert TcMatmulSchedule.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(PtxgenError, match="unknown TcMatmulSchedule field"):
        TcMatmulSchedule.from_dict(dict(s.to_dict(), tile=1))


@needs_ptxas
def test_dry_run_ranks_the_turned_tile_first_at_a_ragged_n():
    """4095 x 4097: the simulator (wgmma cost by N, the persistent tile loop) predicts 256x128
    tiles (4 rounds) ahead of 128x256 (5 rounds); stages and the other timed-only fields share
    their class's prediction."""
    space = T.TcSpace([TcMatmulSchedule(**kw) for kw in (
        dict(), dict(stages=3, epilogue="tma"), dict(stages=3, epilogue="tma", cluster_m=2),
        dict(BM=256, BN=128, wgmma_n=128, stages=3, epilogue="tma"),
        dict(BM=256, BN=128, wgmma_n=128, stages=2, epilogue="tma"))])
    space.raw = len(space)
    rep = tune_tc_matmul(dict(M=4095, N=4097, K=4093), ARCH, budget=4, dry_run=True, jobs=1,
                         progress=False, space=space)
    stages = [st["stage"] for st in rep.stages]
    assert stages == ["validate", "ptxas", "occupancy", "simulator", "round 1"]
    assert rep.exhaustive == 5 and rep.gpu_trials == 4
    t = rep.trials
    assert t[0].baseline and t[0].schedule.BM == 256        # the operator's auto choice
    assert all(p.registers and p.ctas_per_sm == 1 for p in t)
    pred = {(p.schedule.BM, p.schedule.stages, p.schedule.cluster_m): p.predicted_us
            for p in rep.simulated}
    assert pred[(256, 3, 1)] == pred[(256, 2, 1)]            # one simulation per class
    assert pred[(128, 3, 1)] == pred[(128, 3, 2)]
    # measured on the H200 (docs/data/tc_matmul_2026-12-01_odd2.json): 256x128 over 128x256
    # at 4096 x 4097 x 4096 0.903, at 4095 x 4097 x 4093 (pad copies included) 0.936
    assert pred[(256, 3, 1)] < 0.95 * pred[(128, 3, 1)]
    text = rep.to_text()
    assert "dry run" in text and "tc256x128x64_s3" in text
    d = rep.to_dict()
    assert d["trials"][0]["schedule"] == t[0].schedule.to_dict()


def test_cli_refuses_a_tensor_core_tune_off_sm_90a():
    r = subprocess.run([sys.executable, "-m", "ptxgen", "tune", "matmul", "--dtype", "bf16",
                        "--arch", "sm_90", "--dry-run"], capture_output=True, text=True)
    assert r.returncode != 0
    assert "needs --arch sm_90a" in r.stderr and "Traceback" not in r.stderr


def test_layout_of_a_dataclass_key():
    s = TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, stages=3, epilogue="tma", group_m=0)
    k = T.key_of(s, T.SIM_FIELDS)
    assert dataclasses.replace(k, stages=3, group_m=0) == s


def test_auto_schedule_reads_the_tune_cache():
    from ptxgen.ops.tc_matmul import TcMatmul, default_tc_schedule
    from ptxgen.schedule import tuned as cachemod
    shape = dict(M=4096, N=4096, K=4096)
    default = TcMatmul("bf16", "bf16").schedule_for(shape)
    assert default == default_tc_schedule(shape)
    best = TcMatmulSchedule(cluster_m=2, inflight=0, epilogue="tma", stages=2)
    assert best != default
    cachemod.store(cachemod.user_path("tc_matmul_bf16", ARCH), "tc_matmul_bf16", ARCH,
                   cachemod.tc_shape_class(shape, ARCH), {"schedule": best.to_dict()})
    assert TcMatmul("bf16", "bf16").schedule_for(shape) == best
    assert TcMatmul("f16", "bf16").schedule_for(shape) == best          # bf16's, no f16 entry
    assert TcMatmul("bf16", "f32").schedule_for(shape) == default       # another C class
    tf32 = TcMatmul("tf32", "f32").schedule_for(shape)
    assert tf32 == default.for_dtype("tf32") and tf32.BK == 32           # no fallback
    f16 = TcMatmulSchedule(epilogue="tma", stages=2)
    cachemod.store(cachemod.user_path("tc_matmul_f16", ARCH), "tc_matmul_f16", ARCH,
                   cachemod.tc_shape_class(shape, ARCH, "f16"), {"schedule": f16.to_dict()})
    assert TcMatmul("f16", "bf16").schedule_for(shape) == f16           # its own first


class FakeTcGpu:
    """Stands in for TcGpuTrials: 256x128 tiles fastest, 2-CTA clusters 3 % faster, one
    schedule wrong (never timed)."""
    broken = TcMatmulSchedule(stages=3, epilogue="tma", inflight=0)
    calls = []

    def __init__(self, shape, arch, dtype, out, seed=0):
        pass

    def device_name(self):
        return "fake"

    def check(self, s):
        FakeTcGpu.calls.append(("check", s))
        return (False, 1.0) if s == self.broken else (True, 1e-7)

    def time(self, s):
        FakeTcGpu.calls.append(("time", s))
        return (1.0 if s.BM == 256 else 1.3) * (0.97 if s.cluster_m == 2 else 1.0), 168


@needs_ptxas
def test_gpu_rounds_time_the_winning_class_and_cache_it(monkeypatch, tmp_path):
    import ptxgen.runtime
    from ptxgen.ops.tc_matmul import TcMatmul
    from ptxgen.schedule import tuned as cachemod
    from ptxgen.tune import tc
    monkeypatch.setattr(ptxgen.runtime, "gpu_available", lambda: True)
    monkeypatch.setattr(tc, "TcGpuTrials", FakeTcGpu)
    FakeTcGpu.calls = []
    shape = dict(M=4095, N=4097, K=4093)
    base = dict(BM=256, BN=128, wgmma_n=128, epilogue="tma")
    space = T.TcSpace([TcMatmulSchedule(**kw) for kw in (
        dict(stages=3, epilogue="tma"), dict(stages=3, epilogue="tma", inflight=0),
        dict(base, stages=3), dict(base, stages=2), dict(base, stages=3, cluster_m=2),
        dict(base, stages=3, cluster_m=2, inflight=0))])
    rep = tune_tc_matmul(shape, ARCH, budget=6, jobs=1, progress=False, space=space)
    assert len(rep.trials) <= 6 and rep.trials[0].baseline
    checked = [s for k, s in FakeTcGpu.calls if k == "check"]
    assert len(checked) == len(rep.trials) and ("time", FakeTcGpu.broken) not in FakeTcGpu.calls
    assert rep.best.schedule.BM == 256 and rep.best.schedule.cluster_m == 2
    auto = TcMatmul("bf16", "bf16").schedule_for(shape)      # the cache is read back
    assert auto == rep.best.schedule
    entry = json.loads(open(rep.cache_path).read())["entries"][
        cachemod.tc_shape_class(shape, ARCH)]
    assert entry["valid_points"] == 6 and entry["baseline"]["name"] == str(rep.trials[0].schedule)


@needs_ptxas
def test_a_static_plan_replaces_ptxas_and_the_simulator(monkeypatch):
    """A GPU run given the plan of a dry run times the same round 1 without assembling or
    simulating anything; a plan of another shape is a one-line error."""
    import ptxgen.runtime
    from ptxgen.tune import tc
    shape = dict(M=4096, N=4097, K=4096)
    space = T.TcSpace([TcMatmulSchedule(**kw) for kw in (
        dict(stages=3, epilogue="tma"), dict(stages=3, epilogue="tma", cluster_m=2),
        dict(BM=256, BN=128, wgmma_n=128, stages=3, epilogue="tma"),
        dict(BM=256, BN=128, wgmma_n=128, stages=3, epilogue="tma", cluster_m=2,
             inflight=0))])
    dry = tune_tc_matmul(shape, ARCH, budget=4, dry_run=True, jobs=1, progress=False,
                         space=space)
    plan = json.loads(json.dumps(dry.plan))
    assert len(plan["points"]) == 4 and plan["shape"] == shape

    def no_static(job):
        raise AssertionError(f"ran {job[0]} despite the plan")
    monkeypatch.setattr(T, "run_job", no_static)
    monkeypatch.setattr(ptxgen.runtime, "gpu_available", lambda: True)
    monkeypatch.setattr(tc, "TcGpuTrials", FakeTcGpu)
    rep = tune_tc_matmul(shape, ARCH, budget=4, jobs=1, progress=False, plan=plan)
    assert [p.schedule for p in rep.trials[:len(dry.trials)]] == \
        [p.schedule for p in dry.trials]
    assert [p.predicted_us for p in rep.simulated] == [p.predicted_us for p in dry.simulated]
    assert rep.best.schedule.BM == 256 and rep.best.schedule.cluster_m == 2
    assert "static plan" in rep.to_text()
    with pytest.raises(PtxgenError, match="static plan is for"):
        tune_tc_matmul(dict(shape, K=4093), ARCH, budget=4, dry_run=True, plan=plan)


def test_cli_tunes_several_shapes_and_rejects_a_bad_one(tmp_path):
    """--shapes: one report per shape and the winners' table last; a malformed shape or a
    plan of the SGEMM is a one-line error."""
    from ptxgen.cli.tune import shape_list
    assert shape_list("4096x4097x4093,128x8192X8192") == [
        dict(M=4096, N=4097, K=4093), dict(M=128, N=8192, K=8192)]
    for bad in (["--shapes", "4096x4096"], ["--shapes", "4096x0x4"], ["--plan", "p.json"]):
        r = subprocess.run([sys.executable, "-m", "ptxgen", "tune", "matmul", "--dry-run",
                            *bad], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode != 0 and "Traceback" not in r.stderr, bad
        assert ("MxNxK" in r.stderr or "positive" in r.stderr or "--dtype" in r.stderr), bad


def test_round_two_tries_the_cluster_pair_before_stages_and_raster():
    """The winning class's variants in moves from the winner: 2-CTA clusters with no group in
    flight is one move, and the cluster moves come before the raster and the stages."""
    win = TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, epilogue="tma", stages=3)
    same = [s for s in T.tc_space(ARCH, "bf16").points
            if T.key_of(s, T.SIM_FIELDS) == T.key_of(win, T.SIM_FIELDS) and s != win]
    order = sorted(same, key=lambda s: T.round_two_key(s, win))
    first = order[:3]
    assert {(s.cluster_m, s.inflight) for s in first} == {(2, 0), (2, 1), (1, 0)}
    assert all((s.stages, s.group_m) == (win.stages, win.group_m) for s in first)
    assert (order[3].group_m, order[3].stages) == (0, 3)           # then the raster
    assert order[4].stages == 2 and order[4].group_m == win.group_m
    assert T.round_two_key(order[5], win)[0] == 2                   # then two moves
