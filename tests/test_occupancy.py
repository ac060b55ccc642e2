"""Occupancy calculator: hand-worked cases, invariants, and the driver's answers when recorded
(tests/data/occupancy_sweep_<arch>.json, written on a GPU by benchmarks/occupancy_sweep.py)."""
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ptxgen import isa
from ptxgen.analysis.occupancy import occupancy
from ptxgen.cli import main
from ptxgen.errors import PtxgenError

DATA = Path(__file__).parent / "data"
KB = 1024


@pytest.mark.parametrize("arch, threads, regs, smem, carveout, blocks, limiter", [
    # 8 warps x 32 regs: warp slots and the register file both run out at 8 blocks
    ("sm_90", 256, 32, 0, None, 8, "warps"),
    # 64 regs: 2048 per warp, 16384 per sub-partition → 8 warps each, 32 per SM, 8 blocks of 4
    ("sm_90", 128, 64, 0, None, 8, "registers"),
    # 48 regs: 1536 per warp → 10 warps per sub-partition (not 42 per SM): 40 warps, 20 blocks
    ("sm_90", 64, 48, 0, None, 20, "registers"),
    # 33 regs round up to 1280 per warp → 12 warps per sub-partition, 48 per SM
    ("sm_90", 256, 33, 0, None, 6, "registers"),
    # 255 regs (8192 per warp): a 256-thread block fills the register file, 288 threads don't fit
    ("sm_90", 256, 255, 0, None, 1, "registers"),
    ("sm_90", 288, 255, 0, None, 0, "registers"),
    ("sm_90", 32, 256, 0, None, 0, "registers"),
    # 48 KB + 1 KB reserved = 50176 B per block; 228 KB per SM holds 4
    ("sm_90", 256, 16, 48 * KB, None, 4, "shared"),
    ("sm_80", 256, 16, 48 * KB, None, 3, "shared"),
    # rounding to 128 B: 1 B of shared → 1152 B per block → 233472 // 1152 = 202, not limiting
    ("sm_90", 32, 16, 1, None, 32, "blocks"),
    # the largest block allowed (227 KB opt-in) fits once; one byte more does not
    ("sm_90", 128, 32, 227 * KB, None, 1, "shared"),
    ("sm_90", 128, 32, 227 * KB + 1, None, 0, "shared"),
    ("sm_80", 128, 32, 163 * KB + 1, None, 0, "shared"),
    # 25% carveout → 57 KB rounded up to the 64 KB configuration; 9216 B per block → 7
    ("sm_90", 64, 16, 8 * KB, 25, 7, "shared"),
    # 0% carveout: a block still gets the smallest configuration that holds it (16 KB) → 1
    ("sm_90", 64, 16, 8 * KB, 0, 1, "shared"),
    ("sm_90", 64, 16, 8 * KB, None, 25, "shared"),
    # 32 threads, few registers: the 32-block cap binds at half occupancy
    ("sm_90", 32, 16, 0, None, 32, "blocks"),
    ("sm_90", 100, 16, 0, None, 16, "warps"),       # 100 threads take 4 warps
    ("sm_90", 1024, 16, 0, None, 2, "warps"),
    ("sm_90", 1025, 16, 0, None, 0, "warps"),
    ("sm_90", 32, 0, 0, None, 32, "blocks"),        # no registers: no register limit
])
def test_hand_checked(arch, threads, regs, smem, carveout, blocks, limiter):
    r = occupancy(threads, regs, smem, arch=arch, carveout=carveout)
    assert r.active_blocks_per_sm == blocks
    assert r.limiter == limiter
    warps = -(-threads // 32)
    assert r.active_warps_per_sm == blocks * warps
    h = isa.load(arch).header
    assert r.occupancy == pytest.approx(blocks * warps / h.max_warps_per_sm)


def test_ties_are_all_reported():
    r = occupancy(256, 32, 0)
    assert r.limiters == ["warps", "registers"]
    assert r.block_limits == {"warps": 8, "registers": 8, "shared": 228, "blocks": 32}
    assert r.registers_per_block == 8192 and r.shared_per_block == 1024


@pytest.mark.parametrize("args", [(0, 32, 0), (32, -1, 0), (32, 32, -5), (32.5, 32, 0),
                                  (True, 32, 0)])
def test_invalid_input(args):
    with pytest.raises(PtxgenError):
        occupancy(*args)
    with pytest.raises(PtxgenError):
        occupancy(32, 32, 0, carveout=150)
    with pytest.raises(PtxgenError):
        occupancy(32, 32, 0, arch="sm_99")


@settings(max_examples=300, deadline=None)
@given(threads=st.integers(1, 1100), regs=st.integers(0, 260), smem=st.integers(0, 240 * KB),
       arch=st.sampled_from(["sm_80", "sm_90"]),
       carveout=st.one_of(st.none(), st.integers(0, 100)))
def test_invariants(threads, regs, smem, arch, carveout):
    h = isa.load(arch).header
    r = occupancy(threads, regs, smem, arch=arch, carveout=carveout)
    b = r.active_blocks_per_sm
    assert 0 <= b <= h.max_blocks_per_sm
    assert r.active_warps_per_sm <= h.max_warps_per_sm
    assert b * r.registers_per_block <= h.registers_per_sm
    assert b * r.shared_per_block <= h.shared_per_sm
    assert r.block_limits[r.limiter] == b
    # more of any resource never fits more blocks
    assert occupancy(threads, min(regs + 8, 255), smem, arch=arch,
                     carveout=carveout).active_blocks_per_sm <= b or regs + 8 > 255
    assert occupancy(threads, regs, smem + 4 * KB, arch=arch,
                     carveout=carveout).active_blocks_per_sm <= b
    # a carveout preference never beats the default (the maximum)
    assert b <= occupancy(threads, regs, smem, arch=arch).active_blocks_per_sm


# -- the driver's answers (recorded on a GPU) ---------------------------------------------------
def _sweep(arch):
    path = DATA / f"occupancy_sweep_{arch}.json"
    if not path.exists():
        pytest.skip(f"{path.name} missing: run `python benchmarks/occupancy_sweep.py` on a "
                    f"{arch} GPU to record the driver's occupancy answers")
    data = json.loads(path.read_text())
    entries = data["entries"] if isinstance(data, dict) else data
    return path, entries


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_matches_driver_sweep(arch):
    path, entries = _sweep(arch)
    answered = [e for e in entries if e.get("blocks") is not None]
    assert len(answered) >= 200, f"{path.name}: only {len(answered)} answered configurations"
    wrong = []
    for e in answered:
        r = occupancy(e["threads"], e["regs"], e["smem"], arch=arch, carveout=e.get("carveout"))
        if r.active_blocks_per_sm != e["blocks"]:
            wrong.append((e, r.active_blocks_per_sm))
    assert not wrong, (f"{len(wrong)}/{len(answered)} configurations differ from the driver, "
                       f"first: {wrong[0][0]} → ptxgen {wrong[0][1]}")
    # the sweep must exercise every limiter, or agreement proves little
    seen = {occupancy(e["threads"], e["regs"], e["smem"], arch=arch,
                      carveout=e.get("carveout")).limiter for e in answered}
    assert seen == {"warps", "registers", "shared", "blocks"}


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_header_matches_recorded_device(arch):
    path = DATA / f"occupancy_sweep_{arch}.meta.json"
    if not path.exists():
        pytest.skip(f"{path.name} missing: written by benchmarks/occupancy_sweep.py on a GPU")
    meta = json.loads(path.read_text())
    h = isa.load(arch).header
    assert meta["max_shared_memory_per_multiprocessor"] == h.shared_per_sm
    assert meta["max_shared_memory_per_block_optin"] == h.shared_per_block_optin
    assert meta["reserved_shared_memory_per_block"] == h.reserved_shared_per_block
    assert meta["max_registers_per_multiprocessor"] == h.registers_per_sm
    assert meta["max_threads_per_multiprocessor"] == h.max_threads_per_sm
    assert meta["max_blocks_per_multiprocessor"] == h.max_blocks_per_sm


# -- CLI -----------------------------------------------------------------------------------------
def test_cli_json(capsys):
    assert main(["occupancy", "--threads", "128", "--regs", "64", "--smem", "0", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {"active_blocks_per_sm", "active_warps_per_sm", "occupancy", "limiter"} <= set(d)
    assert d["active_blocks_per_sm"] == 8 and d["limiter"] == "registers"
    assert d["occupancy"] == 0.5


def test_cli_text_and_errors(capsys):
    assert main(["occupancy", "--threads", "256", "--regs", "32", "--smem", "49152",
                 "--arch", "sm_80"]) == 0
    out = capsys.readouterr().out
    assert "active blocks per SM  3" in out and "shared" in out
    assert main(["occupancy", "--threads", "0", "--regs", "32"]) == 1
    assert main(["occupancy", "--threads", "32", "--regs", "32", "--arch", "sm_99"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 2
