"""TMA timing: the calibration kernels (on the emulator, and through ptxas: one UTMALDG per copy),
the raw → model arithmetic and its file update (a class and a [memory_model] key the file may
lack), the TMA class in the machine model, and the simulator charging it to the TMA pipe."""
import json
import tomllib

import numpy as np
import pytest

from ptxgen import isa
from ptxgen.arch import DEFAULT_TARGET, isa_dir
from ptxgen.arrays import TiledMap
from ptxgen.calibrate import derive, update_file
from ptxgen.calibrate import kernels_tma as KM
from ptxgen.calibrate.run import Plan
from ptxgen.emit import emit_module
from ptxgen.emu import emulate
from ptxgen.ir import Instr
from ptxgen.ir.verify import verify_module
from ptxgen.parse import parse_ptx
from ptxgen.toolchain import assemble, disassemble

PLAN = Plan()
TABLE = isa.load(DEFAULT_TARGET)
BOX, BOXES = 16, 3          # small boxes for the emulator: 2 KB each, 3 distinct


def _run(module, slots, src):
    out, sink = np.zeros(2, np.uint64), np.zeros(32, np.float32)
    tmap = TiledMap(src, "bf16", BOX, KM.SWIZZLE // 2, swizzle=KM.SWIZZLE)
    emulate(module, module.kernels[0].name, 1, 32, out, sink, tmap,
            shared_bytes=KM.shared_bytes(BOX, slots))
    return out, sink


@pytest.mark.parametrize("kind, n, slots", [("latency", 5, 1), ("latency", 0, 1),
                                            ("stream", 11, 4), ("stream", 3, 4)])
def test_tma_kernels_run_on_the_emulator(kind, n, slots):
    """Every copy lands (a wait that never completes would be a deadlock error) and the word
    read back is the first of the last box copied (box n-1 mod BOXES; row 0 of a box is not
    moved by the swizzle)."""
    src = np.random.default_rng().integers(0, 1 << 16, (BOXES * BOX, 64)).astype(np.uint16)
    m = KM.tma_latency(n, BOX, BOXES) if kind == "latency" else \
        KM.tma_stream(n, slots, BOX, BOXES)
    verify_module(m)
    out, sink = _run(m, slots, src)
    assert out[1] >= out[0]
    if n:
        last = (n - 1) % BOXES
        assert sink[:1].view(np.uint32)[0] == src[last * BOX, :2].copy().view(np.uint32)[0]
    assert (sink[1:] == 0).all()            # one thread issues and reads


def test_stream_keeps_every_slot_busy_before_waiting():
    """The ring's waits: slot s is waited on (parity of its previous copy) only before its
    next copy, so `slots` copies are in flight; the tail waits for the last `slots`."""
    m = KM.tma_stream(10, 4, BOX, BOXES)
    body = [s for s in m.kernels[0].body if isinstance(s, Instr)]
    seq = [("cp" if s.opcode == "cp" else "wait") for s in body
           if s.opcode == "cp" or (s.opcode == "mbarrier" and s.mods[0] == "try_wait")]
    assert seq == ["cp"] * 4 + ["wait", "cp"] * 6 + ["wait"] * 4


@pytest.mark.needs_nvdisasm
def test_tma_kernels_assemble_with_one_copy_each():
    for m, n in ((KM.tma_latency(PLAN.tma_lat_reps, PLAN.tma_box_rows, PLAN.tma_boxes),
                  PLAN.tma_lat_reps),
                 (KM.tma_stream(PLAN.tma_base_count, PLAN.tma_slots, PLAN.tma_box_rows,
                                PLAN.tma_boxes), PLAN.tma_base_count)):
        verify_module(m)
        res = assemble(emit_module(m, DEFAULT_TARGET), DEFAULT_TARGET)
        assert res.resources[m.kernels[0].name].spills == 0
        assert disassemble(res.cubin).count("UTMALDG.2D") == n
    assert KM.shared_bytes(PLAN.tma_box_rows, PLAN.tma_slots) <= \
        TABLE.header.shared_per_block_optin


class EmulatedGpu:
    """calibrate.run's Gpu with the emulator in place of the device: the measurement code's
    launches (arguments, tensor maps, shared memory) must be ones the kernels accept."""
    arch = DEFAULT_TARGET

    def device_array(self, nbytes, dtype=np.uint64):
        return np.zeros(nbytes // np.dtype(dtype).itemsize, dtype)

    def run(self, module, grid, block, args, arch=None, shared_bytes=0):
        emulate(module, module.kernels[0].name, grid, block, *args, shared_bytes=shared_bytes)


def test_tma_measurement_launches_run_on_the_emulator():
    from ptxgen.calibrate.run import _measure_tma
    raw, names = {"errors": {}}, []

    def attempt(name, fn):
        names.append(name)
        fn()
    _measure_tma(EmulatedGpu(), Plan(repeats=1), raw, attempt)
    assert names == ["TMA latency", "TMA latency (small box)", "TMA stream"]
    assert raw["tma"]["stream"]["slots"] == PLAN.tma_slots
    # the emulator's clock says nothing about time: derive reports, never divides by zero
    raw["tma"]["stream"]["base_cycles"] = raw["tma"]["stream"]["cycles"]
    cal = derive(dict(raw, device="emulator", arch=DEFAULT_TARGET, date="-"), TABLE)
    assert "TMA bandwidth" in cal.errors and "TMA interval" in cal.errors


def fake_tma_raw(lat=600.0, small=450.0, interval=100.0):
    p = PLAN
    return {"device": "NVIDIA H200", "arch": DEFAULT_TARGET, "date": "2026-12-01",
            "tma": {"latency": {"box_rows": 128, "bytes": 16384, "reps": 32, "base": 40,
                                "cycles": int(32 * lat) + 40},
                    "latency_small": {"box_rows": 8, "bytes": 1024, "reps": 32, "base": 40,
                                      "cycles": int(32 * small) + 40},
                    "stream": {"box_rows": 128, "bytes": 16384, "slots": p.tma_slots,
                               "count": p.tma_count, "base_count": p.tma_base_count,
                               "cycles": 1000 + int(p.tma_count * interval),
                               "base_cycles": 1000 + int(p.tma_base_count * interval)}}}


def test_derive_and_write_tma_entries(tmp_path):
    cal = derive(fake_tma_raw(), TABLE)
    by = {m.name: m for m in cal.measurements}
    assert by["TMA latency"].value == 600.0
    assert "8x128-byte box (1024 B): 450.0" in by["TMA latency"].what
    assert by["TMA interval"].value == pytest.approx(100.0)
    assert by["TMA bandwidth"].value == pytest.approx(163.84)
    up = cal.updates()
    assert up["ops.TMA.unit"] == ("TMA", None)
    assert up["memory_model.tma_bytes_per_cycle_per_sm"][0] == 163.8
    # into a model without the class and the key (added), then again (replaced, not repeated)
    text = (isa_dir() / "sm_90.toml").read_text()
    start, end = text.index("\n# cp.async.bulk / cp.async.bulk.tensor"), \
        text.index("\n# -- memory levels")
    text = text[:start] + text[end:]
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("tma_bytes")) + "\n"
    path = tmp_path / "sm_90.toml"
    path.write_text(text)
    assert "TMA" not in isa.load_path(path).ops
    for _ in range(2):
        update_file(str(path), up)
        t = isa.load_path(path)
        assert t.ops["TMA"].unit == "TMA" and t.ops["TMA"].issue_interval == 100.0
        assert t.ops["TMA"].latency == 600.0
        assert t.memory_model["tma_bytes_per_cycle_per_sm"] == 163.8
        assert t.ops["TMA"].source.startswith("measured 2026-12-01 on NVIDIA H200 by ptxgen "
                                              "calibrate: mbarrier.arrive.expect_tx")
    assert tomllib.loads(path.read_text())["ops"]["TMA"]["unit"] == "TMA"


def test_calibrate_cli_derives_tma_from_raw(tmp_path, cli):
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"raw": fake_tma_raw(interval=128.0)}))
    model = tmp_path / "sm_90.toml"
    model.write_text((isa_dir() / "sm_90.toml").read_text())
    rc, out, err = cli("calibrate", "--arch", DEFAULT_TARGET, "--raw", str(raw), "-o",
                       str(model))
    assert rc == 0, err
    assert "TMA bandwidth" in out and "128.0 B/cycle/SM" in out
    assert isa.load_path(model).ops["TMA"].source.startswith("measured 2026-12-01")
    rc, _, err = cli("calibrate", "--arch", DEFAULT_TARGET, "--only", "tma,dma", "--raw",
                     str(raw))
    assert rc != 0 and "unknown group 'dma'" in err


def test_model_has_a_sourced_tma_class():
    op = TABLE.ops["TMA"]
    assert op.unit == "TMA" and op.unit in TABLE.units
    assert op.latency > 0 and op.issue_interval > 0
    src = TABLE.sources["memory_model.tma_bytes_per_cycle_per_sm"]
    for s in (op.source, op.issue_source, src):
        assert s.startswith(("measured ", "estimate:")), s
    # the corpus' TMA loads (Triton's persistent matmul) cost as TMA
    module = parse_ptx((isa_dir().parent / "tests" / "data" / "ptx" /
                        "triton_matmul_tma_persistent_sm90a.ptx").read_text())
    loads = [s for s in module.kernels[0].body if isinstance(s, Instr)
             and s.opcode == "cp" and s.mods[:3] == ("async", "bulk", "tensor")]
    assert loads and all(TABLE.op_for(s) is op for s in loads)


def test_simulator_charges_each_copy_to_the_tma_pipe():
    from ptxgen.sim import simulate
    n = 24
    m = KM.tma_stream(n, 4, PLAN.tma_box_rows, PLAN.tma_boxes)
    rep = simulate(m.kernels[0], (1,), (32,), module=m, arch=DEFAULT_TARGET,
                   args=[np.zeros(2, np.uint64), np.zeros(32, np.float32), np.zeros(128, np.uint8)],
                   shared_bytes=KM.shared_bytes(PLAN.tma_box_rows, 4))
    busy = rep.unit_utilization["TMA"] * rep.cycles * TABLE.header.schedulers_per_sm
    assert busy == pytest.approx(n * TABLE.ops["TMA"].issue_interval, rel=1e-6)
