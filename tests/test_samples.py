"""Every sample in samples/ runs to completion (on the GPU when there is one, else on the CPU
emulator, where each must take under 20 s of CPU time: the child's user + system time, which
a loaded machine does not inflate as it does wall time) and prints what it computed."""
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
CPU_LIMIT_S = 20


def _run(name, *args):
    env = dict(os.environ)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, str(SAMPLES / name), *args], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p.returncode, p.stdout, p.stderr, cpu


def _on_cpu():
    if os.environ.get("PTXGEN_SAMPLES_BACKEND") == "emu":
        return True
    from ptxgen.runtime import gpu_available
    return not gpu_available()


def _check(name, *args):
    rc, out, err, seconds = _run(name, *args)
    assert rc == 0, f"{name} exited {rc}:\n{out[-2000:]}\n{err[-2000:]}"
    if _on_cpu():
        assert seconds < CPU_LIMIT_S, f"{name} took {seconds:.1f} s of CPU time"
    return out


def test_every_sample_has_a_test():
    tested = {"tensorir_matmul.py", "block_matmul.py", "ptx_analysis.py", "blocked_matmul.py",
              "roofline.py", "warp_efficiency.py", "bank_conflicts.py"}
    found = {p.name for p in SAMPLES.glob("*.py") if not p.name.startswith("_")}
    assert found == tested


def test_tensorir_matmul():
    out = _check("tensorir_matmul.py")
    assert "matmul 1024x1024x1024" in out
    assert "for by in blockIdx.y (32):" in out and "threadIdx (8x4)" in out
    ranked = re.findall(r"^  (\S+(?: \(8x4 threads\))?)\s+([\d.]+) us", out, re.M)
    assert len(ranked) >= 5
    times = [float(t) for _, t in ranked]
    assert times == sorted(times)                       # ranked fastest first
    tuned = re.search(r"tuned schedule: (\S+) = ", out).group(1)
    assert tuned == ranked[0][0]
    assert "first: ok" in out and "tuned: ok" in out


def test_block_matmul():
    out = _check("block_matmul.py", "96", "80", "40")
    assert "C[96,80] = A[96,40] @ B[40,80]" in out
    assert "lowered to the SGEMM schedule 64x64x8" in out
    assert re.search(r"fma\.rn\.f32 x\d+", out) and out.rstrip().endswith(": ok")


def test_ptx_analysis():
    out = _check("ptx_analysis.py")
    for cls in ("LDG", "FMA", "STG", "BAR"):
        assert re.search(rf"^  {cls}\s+[\d.]+\s+[\d.]+ \w+", out, re.M), cls
    from ptxgen import isa
    h = isa.load("sm_90").header
    if _on_cpu():
        peak = h.sm_count * h.fp32_lanes_per_sm * 2 * h.clock_mhz / 1e3
        assert f"= {peak:,.0f} GFLOP/s" in out
    assert "LDS x32, FMA x16" in out                  # 16x16 tile: two shared loads per FMA
    assert "result ok" in out


def test_blocked_matmul():
    out = _check("blocked_matmul.py")
    assert len(re.findall(r"% of the fp32 summation bound", out)) == 4
    assert "scalar loads" in out and "partial tiles" in out
    assert "all within the bound" in out


def test_roofline(tmp_path):
    png = tmp_path / "roof.png"
    out = _check("roofline.py", str(png))
    assert png.read_bytes()[:4] == b"\x89PNG"
    for name in ("naive matmul", "blocked matmul", "attention 1024x64"):
        assert re.search(rf"^  {name}\s", out, re.M), name
    assert "against numpy (ok)" in out
    gf = {m.group(1): float(m.group(2).replace(",", "")) for m in re.finditer(
        r"^  (naive matmul|blocked matmul)\s+\S+\s+\S+\s+\S+\s+\S+ us \w+\s+([\d,]+)", out, re.M)}
    assert gf["blocked matmul"] > 3 * gf["naive matmul"]
    assert f"chart written: {png}" in out


def test_warp_efficiency():
    out = _check("warp_efficiency.py")
    first = out.split("\n2.")[0]
    assert "block (28, 1, 1)" in first and "warp execution efficiency      87.5%" in first
    assert "lost to partial warps" in first and "4 lanes are never there" in first
    assert "100.0% divergent" in out
    assert out.count("result ok") == 3


def test_bank_conflicts():
    out = _check("bank_conflicts.py")
    assert re.search(r"stride 32\s+words 0, 32, 64, 96\s+in bank 0\s+4 wavefront\(s\), 4-way",
                     out)
    assert re.search(r"consecutive\s+words 0, 1, 2, 3 .* 1 wavefront\(s\), 1-way", out)
    assert "smem + 128*tid.x → words [0, 32, 64, 96]: 4 wavefront(s), ideal 1, 4-way" in out
    assert "stride 33: 1 wavefront(s)" in out and "(ok)" in out


@pytest.mark.parametrize("name", ["bank_conflicts.py", "warp_efficiency.py",
                                  "blocked_matmul.py"])
def test_samples_say_where_they_ran(name):
    out = _check(name)
    assert ("the GPU" in out) != ("CPU emulator" in out)
