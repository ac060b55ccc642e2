"""Tensor-core timing: the calibration kernels (ptxas, SASS contents), the raw → model
arithmetic and file update for MMA / WGMMA, the classes in the machine model, and the cost
models' use of them (analyze classes wgmma as WGMMA; the emitted sm_90a GEMM is tensor-bound)."""
import json
import tomllib

import pytest

from ptxgen import isa
from ptxgen.arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET, isa_dir
from ptxgen.calibrate import derive, update_file
from ptxgen.calibrate import kernels_tensor as KT
from ptxgen.calibrate.run import Plan
from ptxgen.emit import emit_module
from ptxgen.ir import Instr
from ptxgen.ir.verify import verify_module
from ptxgen.parse import parse_ptx
from ptxgen.toolchain import assemble, disassemble

PLAN = Plan()
TABLE = isa.load(DEFAULT_TARGET)


def _sass(module, arch):
    verify_module(module)
    res = assemble(emit_module(module, arch), arch)
    assert res.resources[module.kernels[0].name].spills == 0
    return disassemble(res.cubin)


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("chains,rounds", [(1, PLAN.mma_chain_ops), (1, 0),
                                           (PLAN.mma_tput_chains, PLAN.mma_tput_rounds)])
def test_mma_kernels_keep_every_mma(chains, rounds):
    # every chain must survive ptxas: identical chains were once merged into one
    sass = _sass(KT.mma_chains(chains, rounds), DEFAULT_TARGET)
    assert sass.count("HMMA.16816.F32.BF16") == chains * rounds


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("n", KT.WGMMA_NS)
def test_wgmma_kernels_assemble_for_sm90a(n):
    arch = DEFAULT_ARCH_SPECIFIC_TARGET
    lat = _sass(KT.wgmma_latency(n, PLAN.wgmma_lat_reps, arch), arch)
    assert lat.count(f"HGMMA.64x{n}x16.F32.BF16") == PLAN.wgmma_lat_reps
    assert lat.count("WARPGROUP.DEPBAR.LE") >= PLAN.wgmma_lat_reps
    tput = _sass(KT.wgmma_stream(n, PLAN.wgmma_count, arch), arch)
    assert tput.count(f"HGMMA.64x{n}x16.F32.BF16") == PLAN.wgmma_count


def fake_tensor_raw(mma_cycle=4.0, wgmma_cycles=(33.0, 65.0, 129.0)):
    plan = PLAN
    per_sp = plan.mma_tput_warps * plan.mma_tput_chains * plan.mma_tput_rounds / 4
    raw = {"device": "NVIDIA H200", "arch": DEFAULT_TARGET, "date": "2026-12-01",
           "tensor": {"MMA": {"n": 256, "cycles": 256 * 24 + 50, "base": 50,
                              "tput_cycles": int(per_sp * mma_cycle),
                              "warps": plan.mma_tput_warps, "chains": plan.mma_tput_chains,
                              "rounds": plan.mma_tput_rounds}}}
    for n, c in zip(KT.WGMMA_NS, wgmma_cycles):
        raw["tensor"][f"WGMMA{n}"] = {"n": n, "reps": 32, "cycles": 32 * (80 + n // 4) + 30,
                                      "base": 30, "tput_cycles": int(2 * 64 * c), "count": 64,
                                      "warpgroups": 2}
    return raw


def test_derive_and_write_tensor_classes(tmp_path):
    cal = derive(fake_tensor_raw(), TABLE)
    by = {m.name: m for m in cal.measurements}
    assert by["MMA latency"].value == 24.0
    assert by["MMA issue interval"].value == pytest.approx(4.0)
    assert by["WGMMA n128 interval"].value == 65.0
    assert by["WGMMA n256 tensor FLOP/cycle/SM"].value == pytest.approx(2 * 64 * 256 * 16 / 129)
    up = cal.updates()
    assert up["ops.WGMMA.latency"][0] == 80 + 128 // 4
    assert up["ops.WGMMA.unit"] == ("TENSOR", None)
    # into a model lacking the classes (they are added with their pipe), and again into the
    # result (the entries, the unit line included, are replaced, not repeated)
    text = (isa_dir() / "sm_90.toml").read_text()
    start, end = text.index("\n# mma.sync m16n8k16"), text.index("\n# -- memory levels")
    path = tmp_path / "sm_90.toml"
    path.write_text(text[:start] + text[end:])
    assert "MMA" not in isa.load_path(path).ops
    for _ in range(2):
        update_file(str(path), up)
        t = isa.load_path(path)
        assert t.ops["WGMMA"].unit == "TENSOR" and t.ops["WGMMA"].issue_interval == 65.0
        assert t.ops["MMA"].latency == 24.0
        assert t.ops["WGMMA"].source.startswith("measured 2026-12-01 on NVIDIA H200 by "
                                                "ptxgen calibrate: wgmma.fence")
    assert tomllib.loads(path.read_text())["ops"]["MMA"]["unit"] == "TENSOR"


def test_model_has_measured_tensor_classes():
    for cls in ("MMA", "WGMMA"):
        op = TABLE.ops[cls]
        assert op.unit == "TENSOR" and op.unit in TABLE.units
        assert op.latency > 0 and op.issue_interval > 0
        assert "H200 by ptxgen calibrate" in op.source
    assert TABLE.ops["WGMMA"].issue_source.startswith("measured ")
    # a wgmma m64n128k16 (the GEMM's) is slower than one mma.sync m16n8k16
    assert TABLE.ops["WGMMA"].issue_interval > TABLE.ops["MMA"].issue_interval


def _gemm_ptx(tmp_path, cli):
    out = tmp_path / "g.ptx"
    rc, _, err = cli("emit", "matmul", "--dtype", "bf16", "--M", "2048", "--N", "2048", "--K",
                     "2048", "--arch", DEFAULT_ARCH_SPECIFIC_TARGET, "-o", str(out))
    assert rc == 0, err
    return out


def test_tensor_instructions_cost_by_their_class(tmp_path, cli):
    module = parse_ptx(_gemm_ptx(tmp_path, cli).read_text())
    ins = [s for s in module.kernels[0].body if isinstance(s, Instr)]
    wg = [i for i in ins if i.opcode == "wgmma" and i.mods[0] == "mma_async"]
    assert wg and all(isa.op_class(i) == "WGMMA" for i in wg)
    assert all(TABLE.op_for(i) is TABLE.ops["WGMMA"] for i in wg)
    # the accumulator chains inside the tensor pipe: a cost model does not wait for the
    # previous wgmma's completion, but ordering (uses) still sees the read
    acc = set(map(id, wg[1].defs()))
    assert acc <= set(map(id, wg[1].uses()))
    assert not acc & set(map(id, wg[1].timing_uses()))


@pytest.mark.needs_nvdisasm
def test_emitted_gemm_is_tensor_bound(tmp_path, cli):
    ptx = _gemm_ptx(tmp_path, cli)
    rc, out, err = cli("simulate", "--arch", DEFAULT_ARCH_SPECIFIC_TARGET, "--json", "--grid",
                       str(TABLE.header.sm_count), "--block", "384", "--arg", "M=2048",
                       "--arg", "N=2048", "--arg", "K=2048", "--footprint",
                       str(3 * 2048 * 2048 * 2), str(ptx))
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["unit_utilization"]["TENSOR"] > 0.5
    assert rep["details"]["bound"]["resource"] == "pipe TENSOR"


def test_emitted_gemm_blocks_are_tensor_bound_in_the_static_analysis(tmp_path, cli):
    ptx = _gemm_ptx(tmp_path, cli)
    rc, out, err = cli("analyze", "--sass", "--arch", DEFAULT_ARCH_SPECIFIC_TARGET, str(ptx))
    assert rc == 0, err
    assert "TENSOR" in out and "HGMMA" in out
    rows = [line for line in out.splitlines() if line.rstrip().endswith(" TENSOR")]
    assert rows, "no block of the GEMM is tensor-bound"


def test_tensor_peak_is_measured_and_a_roofline_ceiling():
    from ptxgen.reports.roofline import ceilings
    h = TABLE.header
    src = TABLE.sources["header.tensor_flops_per_cycle_per_sm"]
    assert src.startswith("measured ") and "wgmma" in src
    # the peak is the best rate of the measured N, consistent with the WGMMA class's interval
    assert h.tensor_flops_per_cycle_per_sm >= 2 * 64 * 128 * 16 / TABLE.ops["WGMMA"].issue_interval
    _, roofs, missing = ceilings(DEFAULT_TARGET)
    tensor = next(r for r in roofs if r.name == "tensor peak")
    assert tensor.kind == "compute" and "header.tensor_flops_per_cycle_per_sm" not in missing
    assert tensor.value == pytest.approx(h.sm_count * h.tensor_flops_per_cycle_per_sm
                                         * h.clock_mhz / 1e3)
    # a model without the optional key loads and has no tensor ceiling (the older ones)
    others = [a for a in isa.available() if a != DEFAULT_TARGET]
    assert others
    for arch in others:
        assert isa.load(arch).header.tensor_flops_per_cycle_per_sm is None
        assert "tensor peak" not in [r.name for r in ceilings(arch)[1]]
