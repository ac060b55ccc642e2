"""Roofline: ceilings from the machine model only, points from operator counts or the
emulator, time from the simulator (no GPU needed), the binding roof, the chart and the CLI."""
import dataclasses
import json

import pytest

from ptxgen import isa
from ptxgen.reports import roofline as rl
from ptxgen.errors import PtxgenError
from ptxgen.ops import get_operator
from ptxgen.ops.matmul import Matmul


def test_ceilings_come_from_the_isa_table():
    t = isa.load("sm_90")
    h = t.header
    _, roofs, missing = rl.ceilings("sm_90")
    by = {r.name: r for r in roofs}
    assert missing == []
    assert by["FP32 FMA peak"].value == pytest.approx(
        h.sm_count * h.fp32_lanes_per_sm * 2 * h.clock_mhz / 1e3)
    assert by["HBM peak"].value == h.hbm_bandwidth_gbs
    assert by["L2"].value == t.memory["L2"].bandwidth_gbs
    assert by["shared"].value == t.memory["SHARED"].bandwidth_gbs
    assert by["DRAM sustained"].source == t.memory["DRAM"].bandwidth_source


def test_a_missing_number_is_reported_not_invented(monkeypatch):
    t = isa.load("sm_90")
    broken = dataclasses.replace(t, header=dataclasses.replace(t.header, hbm_bandwidth_gbs=0))
    monkeypatch.setattr(rl.isamod, "load", lambda arch: broken)
    _, roofs, missing = rl.ceilings("sm_90")
    assert missing == ["header.hbm_bandwidth_gbs"]
    assert "HBM peak" not in [r.name for r in roofs]
    with pytest.raises(PtxgenError, match="hbm_bandwidth_gbs"):
        rl.roofline(["saxpy"], time="sim")


def test_saxpy_is_memory_bound_and_a_large_matmul_compute_bound():
    r = rl.roofline(["saxpy", (Matmul(), {"M": 1024, "N": 1024, "K": 1024})], time="sim",
                    shape={"n": 1 << 24})
    sx, mm = r.points
    op = get_operator("saxpy")
    assert (sx.flops, sx.bytes) == (op.flops({"n": 1 << 24}), op.bytes_moved({"n": 1 << 24}))
    assert sx.intensity < r.ridge < mm.intensity
    assert (sx.bound, mm.bound) == ("memory", "compute")
    assert sx.roof == "HBM peak"                       # 200 MB do not fit in L2
    assert mm.roof == "FP32 FMA peak"
    peak = r.roof("FP32 FMA peak").value
    for p in r.points:
        assert p.time_source == "simulated" and p.seconds == p.simulated_seconds > 0
        assert p.gflops == pytest.approx(p.flops / p.seconds / 1e9)
        assert p.roof_gflops == pytest.approx(min(peak, p.intensity * r.roof(p.roof).value)
                                              if p.bound == "memory" else peak)
        assert p.fraction == pytest.approx(p.gflops / p.roof_gflops)
    assert "memory-bound" in r.to_text() and "compute-bound" in r.to_text()


def test_small_footprints_meet_the_l2_roof():
    r = rl.roofline(["saxpy"], time="sim", shape={"n": 1 << 16})
    assert r.points[0].roof == "L2"


def test_emulator_counts_match_the_operators():
    mm = get_operator("matmul")
    shape = {"M": 64, "N": 64, "K": 40}
    flops, nbytes = rl.emulator_counts(mm, shape)
    assert flops == mm.flops(shape)
    assert nbytes >= mm.bytes_moved(shape)              # tiles may be read more than once
    # a ragged edge: the 64-wide tile still runs its FMAs on clamped columns
    ragged = {"M": 64, "N": 48, "K": 40}
    assert rl.emulator_counts(mm, ragged)[0] == 2 * 64 * 64 * 40 > mm.flops(ragged)
    sx = get_operator("saxpy")
    assert rl.emulator_counts(sx, {"n": 4099}) == (sx.flops({"n": 4099}),
                                                    sx.bytes_moved({"n": 4099}))


def test_counts_from_the_emulator():
    r = rl.roofline([("transpose", {"M": 64, "N": 96})], time="sim", counts="emulator")
    p = r.points[0]
    assert p.counts_source == "emulator" and p.flops == 0 and p.bytes == 8 * 64 * 96
    assert p.bound == "memory" and p.intensity == 0


def test_operators_without_counts_are_counted_on_the_emulator():
    class Uncounted(type(get_operator("saxpy"))):
        def flops(self, shape):
            return 0

        def bytes_moved(self, shape):
            return 0
    r = rl.roofline([(Uncounted(), {"n": 1000})], time="sim")
    p = r.points[0]
    assert p.counts_source == "emulator" and (p.flops, p.bytes) == (2000, 12000)


def test_a_workload_adds_its_launches():
    parts = [(get_operator("matmul"), {"M": 128, "N": 128, "K": 64}),
             (get_operator("softmax"), {"M": 128, "N": 128})]
    r = rl.roofline([rl.Workload("attention", parts)], time="sim")
    p = r.points[0]
    assert p.flops == sum(op.flops(s) for op, s in parts)
    assert p.bytes == sum(op.bytes_moved(s) for op, s in parts)
    assert [q["kernel"] for q in p.parts] == ["matmul", "softmax"]


def test_bad_arguments():
    with pytest.raises(PtxgenError, match="time"):
        rl.roofline(["saxpy"], time="now")
    with pytest.raises(PtxgenError, match="unknown kernel"):
        rl.roofline(["nope"], time="sim")


def test_cli_png_and_json(cli, tmp_path):
    png = tmp_path / "r.png"
    rc, out, err = cli("roofline", "saxpy", "matmul", "--arch", "sm_90", "--png", str(png))
    assert rc == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000
    assert "FP32 FMA peak" in out and "saxpy" in out and "matmul" in out
    rc, out, err = cli("roofline", "saxpy", "--time", "sim", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["points"][0]["kernel" if "kernel" in d["points"][0] else "name"] == "saxpy"
    assert d["ridge_flop_per_byte"] > 1
    rc, _, err = cli("roofline", "nope")
    assert rc == 1 and "unknown kernel" in err
