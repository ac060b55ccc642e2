"""The autotuner: the schedule space, shape classes, the tune cache and how Matmul uses it, the
pruning stages on a small space, the GPU rounds with a stand-in for the device, and the CLI."""
import io
import json
import warnings

import numpy as np
import pytest

from ptxgen import emit_module, toolchain
from ptxgen.errors import PtxgenError
from ptxgen.ops.matmul import Matmul
from ptxgen.schedule import CANDIDATES, MatmulSchedule, default_schedule
from ptxgen.lower import lower_matmul
from ptxgen.schedule import tuned as cachemod
from ptxgen.tune import space as spacemod
from ptxgen.tune import stages, static, tuner
from ptxgen.tune.gpu import check_shape
from ptxgen.tune.progress import Progress

BIG = {"M": 4096, "N": 4096, "K": 4096}
SMALL = {"M": 1000, "N": 1000, "K": 1000}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Every test gets an empty user cache and no shipped one: nothing on this machine leaks
    into the schedules a test sees."""
    monkeypatch.setenv("PTXGEN_TUNE_CACHE", str(tmp_path / "user"))
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))       # the ptxas cache
    monkeypatch.delenv("PTXGEN_TUNE", raising=False)
    monkeypatch.setattr(cachemod, "PACKAGE_DIR", tmp_path / "package")
    yield


# -- the space -------------------------------------------------------------------------------
def test_space_is_a_few_hundred_valid_points():
    sp = spacemod.matmul_space("sm_90")
    assert 200 <= len(sp) <= 1500
    assert sp.raw - len(sp) == sum(sp.rejected.values())
    assert len(set(sp.points)) == len(sp)
    for s in sp.points[::7]:
        s.validate("sm_90")
    # raster order doubles every point; the model sees half of them
    keys = {spacemod.model_key(s) for s in sp.points}
    assert len(keys) * len(spacemod.GROUPS) == len(sp)


def test_space_holds_every_hand_picked_candidate():
    pts = set(spacemod.matmul_space("sm_90").points)
    for name, s in CANDIDATES.items():
        assert s in pts, name


def test_space_follows_the_target_limits():
    sp80, sp90 = spacemod.matmul_space("sm_80"), spacemod.matmul_space("sm_90")
    assert any(s.use_cp_async for s in sp80.points)
    # sm_80 has less shared memory per SM than sm_90: never more valid points
    assert len(sp80) <= len(sp90)
    with pytest.raises(PtxgenError):
        spacemod.matmul_space("sm_99")


def test_model_key_and_family():
    s = CANDIDATES["128x128x8_g8"]
    assert spacemod.model_key(s) == CANDIDATES["128x128x8"]
    assert tuner.family(s) == tuner.family(s.replace(pad_a=0, vec_store=4, WM=64, WN=32))
    assert tuner.family(s) != tuner.family(s.replace(BK=16))


# -- shape classes and the cache ---------------------------------------------------------------
def test_shape_classes():
    c = cachemod.shape_class
    assert c(BIG) == c({"M": 8192, "N": 8192, "K": 8192}) == "m4096+_n4096+_k2048+_a4x4"
    assert c(SMALL) == "m1024_n1024_k1024_a4x4"
    assert c({"M": 4095, "N": 4097, "K": 513}) == "m4096+_n4096+_k512_a1x1"
    assert c({"M": 4096, "N": 4096, "K": 512}) == "m4096+_n4096+_k512_a4x4"
    assert c({"M": 1, "N": 6, "K": 3}).endswith("_a1x2")
    assert c(BIG) != c({"M": 4096, "N": 1024, "K": 4096})


def _entry(s):
    return {"schedule": s.to_dict(), "name": str(s), "ms": 1.0}


def test_cache_round_trip_and_precedence(tmp_path):
    s64 = CANDIDATES["128x64x8"]
    cls = cachemod.shape_class(BIG)
    pkg = cachemod.package_path("matmul", "sm_90")
    cachemod.store(pkg, "matmul", "sm_90", cls, _entry(CANDIDATES["64x64x8"]))
    assert cachemod.tuned_matmul_schedule("sm_90", BIG) == CANDIDATES["64x64x8"]
    user = cachemod.user_path("matmul", "sm_90")
    cachemod.store(user, "matmul", "sm_90", cls, _entry(s64))
    assert cachemod.tuned_matmul_schedule("sm_90", BIG) == s64          # the user's first
    assert cachemod.tuned_matmul_schedule("sm_90", SMALL) is None       # another class
    assert cachemod.tuned_matmul_schedule("sm_80", BIG) is None         # another target
    data = json.loads(user.read_text())
    assert data["format"] == cachemod.FORMAT and data["arch"] == "sm_90"
    assert set(data["entries"]) == {cls}


def test_tune_and_ptxas_caches_live_under_the_cache_root(tmp_path, monkeypatch):
    """One documented root (ptxgen.cachedir, PTXGEN_CACHE_DIR): tune/ and ptxas/ below it;
    PTXGEN_TUNE_CACHE still moves the tune files; 'off' keeps nothing on disk."""
    from ptxgen.tune import ptxas_cache
    monkeypatch.delenv("PTXGEN_TUNE_CACHE")
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "root"))
    assert cachemod.user_path("matmul", "sm_90") == tmp_path / "root" / "tune" / \
        "matmul_sm_90.json"
    assert ptxas_cache.cache_dir() == tmp_path / "root" / "ptxas" and ptxas_cache.enabled()
    monkeypatch.delenv("PTXGEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cachemod.user_dir() == tmp_path / "xdg" / "ptxgen" / "tune"
    monkeypatch.setenv("PTXGEN_TUNE_CACHE", str(tmp_path / "mine"))
    assert cachemod.user_dir() == tmp_path / "mine"
    assert ptxas_cache.cache_dir() == tmp_path / "xdg" / "ptxgen" / "ptxas"
    monkeypatch.delenv("PTXGEN_TUNE_CACHE")
    monkeypatch.setenv("PTXGEN_CACHE_DIR", "off")
    assert cachemod.user_path("matmul", "sm_90") is None and not ptxas_cache.enabled()
    pkg = cachemod.package_path("matmul", "sm_90")
    cachemod.store(pkg, "matmul", "sm_90", cachemod.shape_class(BIG),
                   _entry(CANDIDATES["64x64x8"]))
    assert cachemod.tuned_matmul_schedule("sm_90", BIG) == CANDIDATES["64x64x8"]  # shipped


def test_tuning_can_be_switched_off(monkeypatch):
    cachemod.store(cachemod.user_path("matmul", "sm_90"), "matmul", "sm_90",
                   cachemod.shape_class(BIG), _entry(CANDIDATES["128x64x8"]))
    monkeypatch.setenv("PTXGEN_TUNE", "off")
    assert cachemod.tuned_matmul_schedule("sm_90", BIG) is None


def test_bad_cache_files_warn_and_fall_back():
    path = cachemod.user_path("matmul", "sm_90")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.warns(UserWarning, match="ignoring tune cache"):
        assert cachemod.tuned_matmul_schedule("sm_90", BIG) is None
    bad = MatmulSchedule().to_dict() | {"BM": 96}
    path.write_text(json.dumps({"format": 1, "entries": {
        cachemod.shape_class(BIG): {"schedule": bad}}}))
    with pytest.warns(UserWarning, match="unusable"):
        assert cachemod.tuned_matmul_schedule("sm_90", BIG) is None
    with pytest.warns(UserWarning, match="unusable"):
        assert Matmul().schedule_for(BIG) == default_schedule(BIG)
    # a malformed file is replaced whole by the next store
    path.write_text("[]")
    cachemod.store(path, "matmul", "sm_90", "x", {"schedule": {}})
    assert json.loads(path.read_text())["entries"] == {"x": {"schedule": {}}}


def test_matmul_builds_the_cached_schedule():
    op = Matmul()
    assert op.schedule_for(BIG) == CANDIDATES["128x128x8_g8"]       # the large default
    assert op.schedule_for(SMALL) == CANDIDATES["64x64x8"]
    tuned = CANDIDATES["128x64x8"].replace(group_m=8)
    cachemod.store(cachemod.user_path("matmul", "sm_90"), "matmul", "sm_90",
                   cachemod.shape_class(BIG), _entry(tuned))
    shape = {"M": 8192, "N": 8192, "K": 8192}                        # same class as 4096³
    assert op.schedule_for(shape) == tuned
    k = op.build(shape).kernel("matmul")
    assert f".reqntid {tuned.threads}, 1, 1" in k.directives
    assert op.launch(shape).grid == tuned.grid(shape) == (64 * 128, 1, 1)
    assert op.schedule_for(SMALL) == CANDIDATES["64x64x8"]            # not that class
    # an explicit schedule is never replaced
    assert Matmul(CANDIDATES["128x128x16"]).schedule_for(shape) == CANDIDATES["128x128x16"]


def test_launch_follows_the_build_target():
    """launch() has no arch: it uses the schedule build() chose for that target."""
    s80 = CANDIDATES["128x64x8"]
    cachemod.store(cachemod.user_path("matmul", "sm_80"), "matmul", "sm_80",
                   cachemod.shape_class(BIG), _entry(s80))
    op = Matmul()
    op.build(BIG, "sm_80")
    assert op.launch(BIG).block == (s80.threads, 1, 1)
    op.build(BIG, "sm_90")
    assert op.launch(BIG).grid == CANDIDATES["128x128x8_g8"].grid(BIG)


# -- the correctness check runs the timed code -----------------------------------------------
@pytest.mark.parametrize("shape", [BIG, SMALL, {"M": 4095, "N": 4097, "K": 513},
                                   {"M": 300, "N": 302, "K": 66}])
def test_check_shape_runs_the_timed_kernel(shape):
    small = check_shape(shape)
    assert cachemod.shape_class(small).split("_")[-1] == cachemod.shape_class(shape).split("_")[-1]
    for s in (CANDIDATES["128x128x8_g8"], CANDIDATES["128x256x8"], CANDIDATES["64x64x8"]):
        for d in ("M", "N"):
            assert small[d] % s.BM and small[d] % s.BN       # partial tiles on both edges
        assert small["K"] % s.BK
        assert emit_module(lower_matmul(s, "sm_90", small), "sm_90") == \
            emit_module(lower_matmul(s, "sm_90", shape), "sm_90")


# -- static models -----------------------------------------------------------------------------
@pytest.mark.needs_ptxas
def test_ffma_bound_is_below_the_prediction():
    shape = {"M": 2048, "N": 2048, "K": 128}
    for name in ("128x128x8", "64x64x8", "128x256x8"):
        s = CANDIDATES[name]
        r = static.assemble(s.to_dict(), "sm_90", shape)
        pred = static.simulate(s.to_dict(), "sm_90", shape, r["registers"])["us"]
        assert 0 < static.ffma_bound_us(s, shape, "sm_90") <= pred, name


@pytest.mark.needs_ptxas
def test_assemble_reports_spills_and_errors():
    r = static.assemble(CANDIDATES["128x128x8"].to_dict(), "sm_90", BIG)
    assert r["registers"] > 0 and r["spills"] == 0
    # 8 CTAs of 64 threads cap registers at 128; quad-aligned accumulator stores need more
    # (ptxas 13.0 spills 120 bytes): a valid point the ptxas stage must drop
    s = CANDIDATES["64x64x8"].replace(vec_store=4, stage_c=False).validate("sm_90")
    assert static.assemble(s, "sm_90", BIG)["spills"] > 0
    assert "error" in static.assemble(s.replace(BM=96), "sm_90", BIG)
    assert "error" in static.simulate(s.replace(BM=96), "sm_90", BIG, 32)


# -- the search on a small space ---------------------------------------------------------------
def _small_space():
    pts = []
    for name in ("128x128x8", "128x128x16", "128x64x8", "64x64x8", "128x128x8_cp3"):
        s = CANDIDATES[name]
        for v in (s, s.replace(pad_a=0)):
            pts += [v.validate("sm_90"), v.replace(group_m=8).validate("sm_90")]
    return spacemod.Space(list(dict.fromkeys(pts)), raw=40)


SHAPE = {"M": 4096, "N": 4096, "K": 64}      # 1024 CTAs of 128x128: raster order matters


@pytest.mark.needs_ptxas
def test_dry_run_prunes_and_plans_round_one():
    sp = _small_space()
    rep = tuner.tune_matmul(SHAPE, budget=6, dry_run=True, jobs=1, progress=False, space=sp)
    assert rep.exhaustive == len(sp.points) == 20
    kept = [st["kept"] for st in rep.stages if not st["stage"].startswith("round")]
    assert kept == sorted(kept, reverse=True)
    assert rep.trials[0].baseline and rep.trials[0].schedule == default_schedule(SHAPE)
    fams = [tuner.family(p.schedule) for p in rep.trials]
    assert len(fams) == len(set(fams)) == 4                  # budget 6 - 2 for round 2
    preds = [p.predicted_us for p in rep.trials[1:]]
    assert preds == sorted(preds)
    assert rep.gpu_trials == 6 and rep.saved == 14
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["exhaustive_trials"] == 20 and d["dry_run"] and d["best"] is None
    text = rep.to_text()
    assert "14 saved" in text and "dry run" in text


@pytest.mark.needs_ptxas
def test_simulator_failure_falls_back_to_the_bound(monkeypatch):
    monkeypatch.setattr(static, "simulate", lambda *a, **k: {"error": "Boom: broken"})
    rep = tuner.tune_matmul(SHAPE, budget=6, dry_run=True, jobs=1, progress=False,
                            space=_small_space())
    st = next(st for st in rep.stages if st["stage"] == "simulator")
    assert st["errors"] == ["Boom: broken"] and "FFMA bound" in st["note"]
    assert st["kept"] == 0 and len(rep.trials) == 4
    assert "Boom: broken" in rep.to_text()


@pytest.mark.needs_ptxas
def test_worker_processes_agree_with_one_process():
    """The pool path (fork, workers kept across the ptxas and simulator stages) gives the
    same predictions as running everything here."""
    one = tuner.tune_matmul(SHAPE, budget=6, dry_run=True, jobs=1, progress=False,
                            space=_small_space())
    stages._ptxas_memo.clear()
    two = tuner.tune_matmul(SHAPE, budget=6, dry_run=True, jobs=2, progress=False,
                            space=_small_space())
    assert [(str(p.schedule), p.registers, p.predicted_us) for p in one.simulated] == \
        [(str(p.schedule), p.registers, p.predicted_us) for p in two.simulated]
    assert all(p.predicted_us for p in two.simulated)


def test_lower_matmul_stays_a_function(tmp_path):
    """Loading the lowering submodule (lower/sgemm.py) must leave
    ptxgen.lower.lower_matmul the function (the tuner's workers import the operator after
    lowering)."""
    import subprocess
    import sys
    code = ("from ptxgen.schedule.matmul import MatmulSchedule\n"
            "from ptxgen.lower import lower_matmul\n"
            "lower_matmul(MatmulSchedule(), 'sm_90')\n"
            "import ptxgen.lower as S\n"
            "from ptxgen.ops.matmul import Matmul\n"
            "assert callable(S.lower_matmul)\n"
            "Matmul().build({'M': 64, 'N': 64, 'K': 64})\n")
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=root))
    assert p.returncode == 0, p.stderr[-500:]


def test_budget_and_gpu_errors():
    with pytest.raises(PtxgenError, match="budget must be"):
        tuner.tune_matmul(SHAPE, budget=1, dry_run=True)
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        with pytest.raises(PtxgenError, match="no CUDA GPU"):
            tuner.tune_matmul(SHAPE, space=_small_space())


class FakeGpu:
    """Stands in for GpuTrials: a time from the schedule's family (one family clearly
    fastest, grouped raster 5 % faster) and a wrong result for one schedule."""
    broken = CANDIDATES["128x64x8"]
    calls = []

    def __init__(self, shape, arch, seed=0):
        self.shape = shape

    def device_name(self):
        return "fake"

    def check(self, s):
        FakeGpu.calls.append(("check", s))
        return (False, 1.0) if s == self.broken else (True, 1e-7)

    def time(self, s):
        FakeGpu.calls.append(("time", s))
        ms = 1.0 if (s.BM, s.BN, s.BK) == (128, 128, 16) else 2.0
        return ms * (0.95 if s.group_m else 1.0) * (0.99 if s.pad_a == 0 else 1.0), 100


@pytest.mark.needs_ptxas
def test_rounds_time_the_winning_family_and_cache_it(monkeypatch, tmp_path):
    import ptxgen.runtime
    import ptxgen.tune.gpu
    monkeypatch.setattr(ptxgen.runtime, "gpu_available", lambda: True)
    monkeypatch.setattr(ptxgen.tune.gpu, "GpuTrials", FakeGpu)
    FakeGpu.calls = []
    path = tmp_path / "c.json"
    rep = tuner.tune_matmul(SHAPE, budget=8, jobs=1, progress=False, space=_small_space(),
                            cache_path=path)
    win = CANDIDATES["128x128x16"]
    assert len(rep.trials) <= 8
    # every trial is checked before it is timed; the wrong one is never timed
    checked = [s for k, s in FakeGpu.calls if k == "check"]
    assert len(checked) == len(rep.trials)
    assert ("time", FakeGpu.broken) not in FakeGpu.calls
    assert any(p.ok is False for p in rep.trials if p.schedule == FakeGpu.broken) or \
        FakeGpu.broken not in [p.schedule for p in rep.trials]
    # round 2: the rest of the winning family, raster-order variants first
    fam = [p.schedule for p in rep.trials if tuner.family(p.schedule) == tuner.family(win)]
    assert win.replace(group_m=8) in fam and win.replace(pad_a=0, group_m=8) in fam
    assert rep.best.schedule == win.replace(pad_a=0, group_m=8)
    entry = json.loads(path.read_text())["entries"][cachemod.shape_class(SHAPE)]
    assert MatmulSchedule.from_dict(entry["schedule"]) == rep.best.schedule
    assert entry["baseline"]["name"] == str(default_schedule(SHAPE))
    assert entry["gpu_trials"] == len(rep.trials) and entry["valid_points"] == 20
    assert "cached in" in rep.to_text()
    # and Matmul builds it for the class once it is in the user cache
    cachemod.store(cachemod.user_path("matmul", "sm_90"), "matmul", "sm_90",
                   cachemod.shape_class(SHAPE), entry)
    assert Matmul().schedule_for(SHAPE) == rep.best.schedule


# -- CLI and progress --------------------------------------------------------------------------
def test_cli_errors(cli):
    rc, _, err = cli("tune", "matmul", "--budget", "1", "--dry-run")
    assert rc == 1 and "--budget must be at least 2" in err
    rc, _, err = cli("tune", "softmax")
    assert rc == 1 and "invalid choice" in err
    rc, _, err = cli("tune", "matmul", "--dry-run", "--arch", "sm_99")
    assert rc == 1 and "sm_99" in err


@pytest.mark.needs_ptxas
def test_cli_dry_run_json(monkeypatch, capsys):
    from ptxgen.cli import main
    monkeypatch.setattr(tuner, "matmul_space", lambda arch, shape: _small_space())
    rc = main(["tune", "matmul", "--M", "4096", "--N", "4096", "--K", "64", "--dry-run",
               "--budget", "4", "--jobs", "1", "--json", "--no-progress", "--arch", "sm_90"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["exhaustive_trials"] == 20 and d["gpu_trials"] == 4 and d["trials_saved"] == 16
    assert d["trials"][0]["baseline"] and len(d["simulated"]) >= 3


def test_progress_without_a_terminal():
    out = io.StringIO()
    with Progress(3, "stage", file=out) as bar:
        for _ in range(3):
            bar.update()
    assert out.getvalue().startswith("stage: 3/3 in ") and out.getvalue().count("\n") == 1
    quiet = io.StringIO()
    with Progress(3, "stage", enabled=False, file=quiet) as bar:
        bar.update()
    assert quiet.getvalue() == ""


@pytest.mark.gpu
def test_tune_on_the_gpu(tmp_path):
    rep = tuner.tune_matmul({"M": 512, "N": 512, "K": 96}, budget=3, progress=False,
                            space=_small_space(), cache_path=tmp_path / "c.json")
    assert rep.best is not None and rep.best.ok and rep.best.ms > 0
    assert all(p.ok for p in rep.trials)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        entry = cachemod.load_entries(tmp_path / "c.json")
    assert np.isclose(entry[rep.shape_class]["ms"], rep.best.ms)


# -- issue 16: speed and output of the tuner ---------------------------------------------------
@pytest.mark.needs_ptxas
def test_dry_run_report_says_nothing_ran_on_a_gpu():
    rep = tuner.tune_matmul(SHAPE, budget=6, dry_run=True, jobs=1, progress=False,
                            space=_small_space())
    text = rep.to_text()
    assert "GPU trials" not in text                    # no GPU was used: nothing was a trial
    assert "to time on a GPU (dry run: none timed)" in text


def test_rejection_rules_read_without_placeholders():
    sp = spacemod.matmul_space("sm_90", BIG)
    assert sp.rejected
    for rule in sp.rejected:
        assert "N" not in rule.split(), rule           # was "216 N bytes of shared memory …"
    rep = tuner.TuneReport("matmul", "sm_90", BIG, "c", 12, True,
                           stages=[{"stage": "validate", "kept": 5,
                                    "dropped": dict(sp.rejected)}])
    line = rep.to_text().splitlines()[1]
    n = sp.rejected[next(iter(sp.rejected))]
    assert f"{next(iter(sp.rejected))}: {n}" in line


def _report(dry_run, **point):
    long = CANDIDATES["128x128x8_cp3"].replace(pad_a=0, vec_store=4, stage_c=False, group_m=8)
    p = tuner.Point(long, registers=120, ctas_per_sm=2, bound_us=2118.3, **point)
    return tuner.TuneReport("matmul", "sm_90", BIG, "c", 12, dry_run, trials=[p]), long


def test_trial_table_keeps_whole_names():
    rep, long = _report(False, predicted_us=2700.0, ms=2.9, ok=True, error=1e-7)
    assert len(str(long)) > 58                         # longer than the old fixed column
    assert str(long) in rep.to_text()


def test_dry_run_table_shows_predicted_tflops():
    rep, _ = _report(True, predicted_us=2700.0)
    lines = rep.to_text().splitlines()
    head = next(line for line in lines if "schedule" in line)
    row = lines[lines.index(head) + 1]
    assert "pred TFLOP/s" in head and "ok" not in head.split()
    want = 2 * 4096 ** 3 / 2700e-6 / 1e12
    assert row.split()[-1] == f"{want:.2f}"           # was an empty TFLOP/s cell


@pytest.mark.needs_ptxas
def test_predictions_keep_the_launch_overhead_apart():
    from ptxgen import isa
    s = CANDIDATES["128x128x8"].to_dict()
    r = static.simulate(s, "sm_90", SHAPE, 128)
    launch = isa.load("sm_90").launch_overhead_us
    assert launch > 0 and r["launch_us"] == pytest.approx(launch)
    from ptxgen.ops.matmul import Matmul as Op
    from ptxgen.sim import simulate_operator
    full = simulate_operator(Op(CANDIDATES["128x128x8"]), SHAPE, registers=128).time_us
    assert r["us"] == pytest.approx(full - launch)     # the kernel alone, not 50 us more
    rep, _ = _report(True, predicted_us=r["us"], launch_us=r["launch_us"])
    assert f"adds {launch:.1f} us" in rep.to_text()
    assert rep.trials[0].to_dict()["launch_overhead_us"] == pytest.approx(launch)


def test_progress_lines_while_a_stage_runs_without_a_terminal():
    out = io.StringIO()
    with Progress(4, "stage", file=out, interval=0.0) as bar:
        for _ in range(4):
            bar.update()
    lines = out.getvalue().splitlines()
    assert lines[:2] == [line for line in lines[:2] if line.startswith("stage: ")]
    assert "stage: 1/4 (25 %)" in lines[0] and len(lines) == 5     # 4 periodic + summary


@pytest.mark.needs_ptxas
def test_progress_and_report_count_the_same_families(capsys):
    """The static stage's progress counts schedule families, its table schedules: the report
    says how many families went through ptxas and the simulator, the same count the progress
    line ends with, and both name their unit."""
    import re
    stages._ptxas_memo.clear()
    rep = tuner.tune_matmul(SHAPE, budget=6, dry_run=True, jobs=1, progress=True,
                            space=_small_space())
    err = capsys.readouterr().err
    done = re.search(r"static models \(ptxas, simulator\): (\d+)/(\d+) schedule families"
                     r"( \([^)]*\))? in [\d.]+ s", err)             # the closing line
    said = re.search(r"(\d+) of (\d+) schedule families \(the progress bar's count\)",
                     rep.to_text())
    assert done and said and done.groups()[:2] == said.groups(), (err, rep.to_text())
    assert "schedules kept" in rep.to_text()
    seen, total = map(int, done.groups()[:2])
    assert seen <= total and (seen == total) == ("pruned by their FFMA bound" not in err)


@pytest.mark.needs_ptxas
def test_ptxas_results_are_cached_on_disk(monkeypatch):
    from ptxgen.tune import ptxas_cache
    s = CANDIDATES["64x64x8"].to_dict()
    first = static.assemble(s, "sm_90", SHAPE)
    assert ptxas_cache.count() == 1
    def no_ptxas(*a, **k):
        raise toolchain.ToolchainError("ptxas ran")
    monkeypatch.setattr(toolchain, "assemble", no_ptxas)
    assert static.assemble(s, "sm_90", SHAPE) == first
    other = CANDIDATES["64x64x8"].replace(pad_a=0).to_dict()
    assert static.assemble(other, "sm_90", SHAPE) == {"error": "ptxas ran"}   # a miss runs it
    monkeypatch.setenv("PTXGEN_PTXAS_CACHE", "off")
    assert static.assemble(s, "sm_90", SHAPE) == {"error": "ptxas ran"}


@pytest.mark.needs_ptxas
def test_one_simulation_per_family():
    """Variants of a family (warp shape, padding, epilogue, raster order) repeat its
    simulation: only the representative is simulated; round 2 assembles the rest."""
    import ptxgen.tune.static as st
    calls = []
    real = st.simulate
    sp = _small_space()
    stages._ptxas_memo.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(st, "simulate", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
        rep = tuner.tune_matmul(SHAPE, budget=6, dry_run=True, jobs=1, progress=False,
                                space=sp)
    fams = {tuner.family(s) for s in sp.points}
    assert len(calls) == len(fams) == 5
    assert len({tuner.family(MatmulSchedule.from_dict(c)) for c in calls}) == 5
    assert rep.trials[0].predicted_us                   # the baseline's row is predicted too
