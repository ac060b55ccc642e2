"""Calibration: the microbenchmark kernels (verifier, ptxas, what they contain), the
arithmetic from raw numbers to model values, and the machine-model file update."""
import json
import shutil
import tomllib

import pytest

from ptxgen import isa
from ptxgen.arch import isa_dir
from ptxgen.calibrate import Plan, derive, update_file, update_text
from ptxgen.calibrate import kernels as K
from ptxgen.emit import emit_module
from ptxgen.errors import IsaDataError, PtxgenError
from ptxgen.ir import Instr
from ptxgen.ir.verify import verify_module
from ptxgen.toolchain import assemble

PLAN = Plan()


def _instrs(module):
    return [s for s in module.kernels[0].body if isinstance(s, Instr)]


def all_modules(plan=PLAN):
    mods = [K.latency_chain(c, plan.chain_ops) for c in K.ARITH_CLASSES]
    mods += [K.latency_chain(c, 0) for c in K.ARITH_CLASSES]
    mods += [K.throughput_streams(c, plan.tput_rounds, plan.tput_chains)
             for c in K.ARITH_CLASSES]
    mods += [K.chase_global("ca", plan.chase_steps), K.chase_global("cg", plan.chase_steps),
             K.chase_shared(plan.chase_steps, plan.shared_nodes),
             K.barrier_loop(plan.bar_count), K.copy_v4(), K.ffma_peak(), K.scatter_u64(),
             K.empty_kernel()]
    return mods


N_MODULES = 3 * len(K.ARITH_CLASSES) + 8


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("index", range(N_MODULES))
def test_microbenchmarks_verify_and_assemble(index):
    # the kernels at the sizes calibrate runs them
    mods = all_modules()
    assert len(mods) == N_MODULES
    m = mods[index]
    verify_module(m)
    res = assemble(emit_module(m, "sm_90"), "sm_90")
    name = m.kernels[0].name
    assert res.resources[name].spills == 0


@pytest.mark.parametrize("cls", K.ARITH_CLASSES)
def test_latency_chain_is_one_dependent_chain(cls):
    m = K.latency_chain(cls, PLAN.chain_ops)
    ins = _instrs(m)
    clocks = [i for i, s in enumerate(ins) if any(str(o) == "%clock64" for o in s.operands)]
    assert len(clocks) == 2
    timed = ins[clocks[0] + 1:clocks[1]]
    assert len(timed) == PLAN.chain_ops >= 1024
    opcode = K.CHAIN_PTX[cls].split()[0].split(".")[0]
    assert timed[0].opcode == opcode
    # each instruction reads what the one before wrote
    for a, b in zip(timed, timed[1:]):
        assert set(a.defs()) & set(b.uses()), f"{a} -> {b} is not dependent"


@pytest.mark.parametrize("cache", ["ca", "cg"])
def test_global_chase(cache):
    m = K.chase_global(cache, PLAN.chase_steps)
    ins = _instrs(m)
    loads = [s for s in ins if s.opcode == "ld" and s.space == "global"]
    timed = loads[1:]                      # the first is the untimed warm-up loop's
    assert len(timed) == PLAN.chase_steps >= 4096
    assert all(cache in s.mods and s.type.bits == 64 for s in loads)
    for a, b in zip(timed, timed[1:]):
        assert a.defs()[0] is b.uses()[0]  # the loaded value is the next address
    assert sum(any(str(o) == "%clock64" for o in s.operands) for s in ins) == 2


def test_shared_chase_and_plan_sizes(sm90):
    m = K.chase_shared(PLAN.chase_steps, PLAN.shared_nodes)
    lds = [s for s in _instrs(m) if s.opcode == "ld" and s.space == "shared"]
    assert len(lds) == PLAN.chase_steps
    assert PLAN.l1_bytes < sm90.header.l1_shared_per_sm
    assert sm90.header.l1_shared_per_sm < PLAN.l2_bytes < sm90.header.l2_bytes
    assert PLAN.dram_bytes >= 10 * sm90.header.l2_bytes
    assert PLAN.flush_bytes >= 120 << 20 and PLAN.copy_bytes >= 1 << 30
    assert PLAN.dram_nodes >= PLAN.chase_steps


def test_copy_kernel_uses_128_bit_accesses():
    ins = _instrs(K.copy_v4())
    assert {(s.opcode, s.vector_width) for s in ins if s.opcode in ("ld", "st")
            and s.space == "global"} == {("ld", 4), ("st", 4)}


def fake_raw(**over):
    raw = {
        "device": "NVIDIA H200", "arch": "sm_90", "date": "2026-12-01", "sm_count": 132,
        "errors": {},
        "latency": {c: {"n": 1024, "cycles": 1024 * 4 + 30, "base": 30}
                    for c in K.ARITH_CLASSES},
        "throughput": {c: {"cycles": 16 * 8 * 1024 // 4 * 2, "warps": 16, "chains": 8,
                           "ops_per_chain": 1024} for c in K.ARITH_CLASSES},
        "chase": {"SHARED": {"cycles": 4096 * 30, "steps": 4096},
                  "L1": {"cycles": 4096 * 33, "steps": 4096, "bytes": 16384},
                  "L2": {"cycles": 4096 * 280, "steps": 4096, "bytes": 8 << 20},
                  "DRAM": {"cycles": 4096 * 660, "steps": 4096, "bytes": 1 << 30,
                           "flush_bytes": 256 << 20}},
        "barrier": {"cycles": 1024 * 24, "n": 1024, "warps": 8},
        "copy": {"DRAM": {"bytes": 2 << 30, "ms": 0.5}, "L2": {"bytes": 1 << 30, "ms": 0.1}},
        "ffma": {"flops": int(6.0e10), "ms": 1.0, "sm_count": 132},
        "launch_us": 2.5,
    }
    raw.update(over)
    return raw


def test_derive_arithmetic(sm90):
    cal = derive(fake_raw(), sm90)
    by = {m.name: m for m in cal.measurements}
    assert by["FMA latency"].value == 4.0
    assert by["FMA latency"].targets == ("ops.FMA.latency",)
    assert by["FMA latency"].model == sm90.ops["FMA"].latency
    assert by["SFU issue interval"].value == 2.0     # 16*8*1024/4 instructions per SP
    assert by["L2 load latency"].value == 280.0
    assert set(by["L2 load latency"].targets) == {"memory.L2.latency", "ops.LDG.latency"}
    # the empty kernel's 2.5 us are the launch, not the copy
    assert by["DRAM copy bandwidth"].value == pytest.approx((2 << 30) / 0.4975e-3 / 1e9)
    assert by["bar.sync"].value == 24.0
    assert by["FFMA peak"].value == pytest.approx(6.0e10 / 0.9975e-3 / 1e12)
    mhz = 6.0e10 / 2 / (128 * 132) / 0.9975e-3 / 1e6
    assert by["sustained FMA clock"].value == pytest.approx(mhz)
    assert cal.notes and "sustained" in cal.notes[0]             # 1780 MHz < 0.95 * 1980
    up = cal.updates()
    assert up["memory.DRAM.latency"][0] == 660.0
    assert up["memory.DRAM.bandwidth_gbs"][0] == round((2 << 30) / 0.4975e-3 / 1e9)
    assert up["ops.FMA.latency"][1] == ("measured 2026-12-01 on NVIDIA H200 by ptxgen "
                                        "calibrate: dependent fma.rn.f32 chain, 1024 "
                                        "instructions, one warp")
    assert not any("FFMA" in k for k in up)                     # no model entry for peaks
    text = cal.to_text()
    assert "FMA latency" in text and "ops.FMA.latency" in text and "H200" in text


def test_derive_skips_failed_and_nonsense(sm90):
    raw = fake_raw(errors={"chase DRAM": "LaunchError: boom"})
    raw["chase"].pop("DRAM")
    raw["latency"]["FMA"]["cycles"] = 0                         # negative latency
    cal = derive(raw, sm90)
    up = cal.updates()
    assert "memory.DRAM.latency" not in up and "ops.FMA.latency" not in up
    assert "FMA latency" in cal.errors and "chase DRAM" in cal.errors
    assert "failed: chase DRAM" in cal.to_text()


@pytest.fixture
def model_copy(tmp_path):
    dst = tmp_path / "sm_90.toml"
    shutil.copy(isa_dir() / "sm_90.toml", dst)
    return dst


def test_update_file_changes_only_the_measured_entries(model_copy, sm90):
    before = model_copy.read_text()
    cal = derive(fake_raw(), sm90)
    update_file(str(model_copy), cal.updates())
    after = model_copy.read_text()
    data = tomllib.loads(after)
    assert data["ops"]["FMA"]["latency"]["value"] == 4.0
    assert data["ops"]["FMA"]["latency"]["source"].startswith("measured 2026-12-01 on "
                                                              "NVIDIA H200 by ptxgen calibrate")
    assert data["memory"]["L2"]["latency"]["value"] == 280.0
    assert data["ops"]["BAR"]["latency"]["value"] == 24.0
    old = tomllib.loads(before)
    # untouched entries keep value and source; every comment line is still there
    assert data["ops"]["FMA"]["unit"] == old["ops"]["FMA"]["unit"]
    assert data["ops"]["STG"] == old["ops"]["STG"]
    assert data["header"] == old["header"]
    assert [l for l in before.splitlines() if l.lstrip().startswith("#")] == \
        [l for l in after.splitlines() if l.lstrip().startswith("#")]
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines())
    assert len(changed) == len(cal.updates())
    assert isa.load_path(model_copy).memory["DRAM"].latency == 660.0


def test_update_text_adds_missing_entries_and_tables():
    text = '# head\n[ops.FMA]\nunit = "FMA"\nlatency = {value = 1.0, source = "x"}\n\n' \
           '[memory.L2]\n# keep\n'
    new = update_text(text, {"ops.FMA.latency": (4.5, 'say "hi"'),
                             "ops.FMA.issue_interval": (1.0, "s"),
                             "memory.L2.bandwidth_gbs": (9000, "s"),
                             "ops.NEW.latency": (3.0, "s")})
    data = tomllib.loads(new)
    assert data["ops"]["FMA"]["latency"] == {"value": 4.5, "source": 'say "hi"'}
    assert data["ops"]["FMA"]["issue_interval"]["value"] == 1.0
    assert data["memory"]["L2"]["bandwidth_gbs"]["value"] == 9000
    assert data["ops"]["NEW"]["latency"]["value"] == 3.0
    assert new.startswith("# head\n") and "# keep" in new


def test_update_refuses_to_break_the_model(model_copy):
    before = model_copy.read_text()
    with pytest.raises(IsaDataError):
        update_file(str(model_copy), {"ops.FMA.latency": (-1.0, "bad")})
    assert model_copy.read_text() == before
    assert not list(model_copy.parent.glob(".calibrate-*"))


def test_cli_without_gpu_and_from_raw(cli, tmp_path, model_copy):
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        rc, out, err = cli("calibrate", "--arch", "sm_90")
        assert rc == 1 and len(err.strip().splitlines()) == 1 and "GPU" in err
    raw = tmp_path / "cal.json"
    raw.write_text(json.dumps({"raw": fake_raw()}))
    rc, out, err = cli("calibrate", "--arch", "sm_90", "--raw", str(raw), "-o",
                       str(model_copy), "--json", str(tmp_path / "again.json"))
    assert rc == 0, err
    assert "FMA latency" in out and "updated" in out
    assert isa.load_path(model_copy).ops["BAR"].latency == 24.0
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["raw"]["device"] == "NVIDIA H200" and again["measurements"]
    rc, out, err = cli("calibrate", "--arch", "sm_80", "--raw", str(raw))
    assert rc == 1 and "sm_90" in err and len(err.strip().splitlines()) == 1
    rc, out, err = cli("calibrate", "--only", "bogus")
    assert rc == 1 and "bogus" in err and len(err.strip().splitlines()) == 1


def test_measure_refuses_other_arch_without_gpu():
    from ptxgen.calibrate import measure
    from ptxgen.runtime import gpu_available
    if gpu_available():
        pytest.skip("has a GPU")
    with pytest.raises(PtxgenError):
        measure("sm_90")


def test_copy_and_scatter_compute_what_they_claim():
    """The bandwidth and chain-building kernels, run on the CPU emulator."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("ptxgen.emu")
    from ptxgen import emulate
    n16 = 1000                                  # not a multiple of the grid's chunk
    src = np.arange(4 * n16, dtype=np.uint32)
    dst = np.zeros_like(src)
    emulate(K.copy_v4(), "copy_v4", (3,), (64,), np.uint32(n16), np.uint32(2), src, dst)
    assert np.array_equal(src, dst)
    idx = np.array([5, 0, 9, 3], dtype=np.uint64)
    val = np.array([11, 22, 33, 44], dtype=np.uint64)
    out = np.zeros(10, dtype=np.uint64)
    emulate(K.scatter_u64(), "scatter_u64", (1,), (32,), np.uint32(4), idx, val, out)
    assert out[5] == 11 and out[0] == 22 and out[9] == 33 and out[3] == 44
    assert out.sum() == 110


def test_event_timed_results_lose_the_launch_overhead():
    """Bandwidth and sustained clock come from the kernel's own time: the empty kernel's
    event time is subtracted, and the overhead itself sets timing.launch_overhead_us."""
    from ptxgen import isa as isamod
    from ptxgen.calibrate.results import derive
    table = isamod.load("sm_90")
    raw = {"device": "X", "arch": "sm_90", "date": "d",
           "copy": {"DRAM": {"bytes": 4 * 10**9, "ms": 1.05}},
           "ffma": {"flops": 2 * 128 * 132 * 10**6, "ms": 1.05, "sm_count": 132},
           "launch_us": 50.0}
    up = derive(raw, table).updates()
    assert up["memory.DRAM.bandwidth_gbs"][0] == 4000
    assert up["timing.sustained_clock_mhz"][0] == 1000
    assert up["timing.launch_overhead_us"][0] == 50.0
    del raw["launch_us"]
    up = derive(raw, table).updates()
    assert up["memory.DRAM.bandwidth_gbs"][0] == round(4 * 10**9 / 1.05e-3 / 1e9)
