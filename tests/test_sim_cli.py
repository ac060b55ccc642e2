"""`ptxgen simulate`: library kernels, PTX files, outputs, and one-line errors."""
import json
import os

import pytest

DATA = os.path.join(os.path.dirname(__file__), "data", "ptx")
KEYS = ("cycles", "time_us", "ipc", "issue_utilization", "unit_utilization", "stalls")


def test_library_kernel_json(cli):
    rc, out, err = cli("simulate", "saxpy", "--n", "65536", "--json", "--regs", "24")
    assert rc == 0, err
    d = json.loads(out)
    for k in KEYS:
        assert k in d
    assert d["cycles"] > 0 and d["time_us"] > d["device_us"] > 0
    assert set(d["stalls"]) == {"dependency", "memory", "throughput", "barrier",
                                "not_selected"}
    assert d["grid"] == [64, 1, 1] and d["block"] == [256, 1, 1]


def test_text_trace_and_png(cli, tmp_path):
    trace, png = tmp_path / "t.json", tmp_path / "t.png"
    rc, out, err = cli("simulate", "saxpy", "--n", "1048576", "--trace", str(trace),
                       "--png", str(png), "--warps", "4")
    assert rc == 0, err
    assert "device time:" in out and "warp stalls:" in out and "IPC" in out
    # launch overhead apart from the device time, and what bounds it
    assert "launch overhead (cuda.core):" in out and "bound by:" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["tid"] for e in events if e.get("ph") == "X"} == {0, 1, 2, 3}
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_schedule_option(cli):
    base = ("simulate", "matmul", "--M", "256", "--N", "256", "--K", "256", "--json")
    rc, out, err = cli(*base, "--schedule")
    assert rc == 0, err
    assert json.loads(out)["cycles"] > 0
    path = os.path.join(DATA, "numba_matmul_shared_sm90.ptx")
    rc, out, err = cli("simulate", path, "--grid", "16,16", "--block", "16,16", "--trip", "16",
                       "--schedule", "--json")
    assert rc == 0, err


def test_ptxas_order_by_default_and_ptx_order_on_request(cli):
    """The simulator runs each block list-scheduled, as ptxas would: the library matmul as
    built and as `--schedule`d predict the same; read in its PTX order it predicts otherwise."""
    base = ("simulate", "matmul", "--M", "512", "--N", "512", "--K", "512", "--json")
    cycles = {}
    for extra in ((), ("--schedule",), ("--ptx-order",)):
        rc, out, err = cli(*base, *extra)
        assert rc == 0, err
        cycles[extra] = json.loads(out)["cycles"]
    assert cycles[()] == pytest.approx(cycles[("--schedule",)], rel=0.01)
    assert abs(cycles[("--ptx-order",)] / cycles[()] - 1) > 0.05


def test_ptx_file_with_arguments(cli):
    path = os.path.join(DATA, "ptxgen_saxpy_sm90.ptx")
    base = ("simulate", path, "--grid", "1056", "--block", "256", "--json", "--regs", "24")
    rc, out, err = cli(*base, "--arg", "n=16777216")
    assert rc == 0, err
    big = json.loads(out)
    assert not big["warnings"]
    rc, out, err = cli(*base, "--arg", "n=1048576")
    small = json.loads(out)
    assert big["cycles"] > 8 * small["cycles"]
    rc, out, err = cli(*base)                 # no n: the loop's trip count is unknown
    assert rc == 0 and json.loads(out)["warnings"]
    rc, out, err = cli(*base, "--trip", "50")
    assert rc == 0 and not json.loads(out)["warnings"]


def test_assumed_trip_count_is_said_first_in_the_clis_words(cli):
    """Without --arg the loop's trip count is assumed 1: a warning on stderr says so before the
    result is read, naming the flags that give it; the result no longer ends with it."""
    path = os.path.join(DATA, "ptxgen_saxpy_sm90.ptx")
    rc, out, err = cli("simulate", path, "--grid", "1056", "--block", "256", "--regs", "24")
    assert rc == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("ptxgen: warning: ")]
    assert len(warnings) == 1 and "assumed 1" in warnings[0], err
    assert "--arg NAME=VALUE or --trip N" in warnings[0] and "trip=" not in warnings[0]
    assert "warning" not in out and out.startswith("saxpy on sm_90")
    from ptxgen.parse import parse_ptx
    from ptxgen.sim import simulate
    with open(path) as f:
        module = parse_ptx(f.read())
    rep = simulate(module.kernels[0], 1056, 256, module=module, registers=24)
    assert "trip=N" in rep.warnings[0] and "--trip" not in rep.warnings[0]   # Python's words


@pytest.mark.parametrize("args, needle", [
    (("nope",), "unknown kernel"),
    (("saxpy", "--grid", "4"), "--grid applies to PTX files"),
    (("saxpy", "--n", "0"), "positive"),
    (("saxpy", "--arch", "sm_99"), "sm_99"),
    (("saxpy", "--sample", "2"), "--sample"),
    (("missing.ptx", "--grid", "1"), "cannot read"),
    ((os.path.join(DATA, "hand_loops.ptx"),), "--grid"),
    ((os.path.join(DATA, "hand_loops.ptx"), "--grid", "1,x"), "grid"),
    ((os.path.join(DATA, "hand_loops.ptx"), "--grid", "1", "--block", "32",
      "--arg", "bogus"), "NAME=VALUE"),
    ((os.path.join(DATA, "hand_loops.ptx"), "--grid", "1", "--block", "32",
      "--arg", "zz=1"), "no parameter"),
    ((os.path.join(DATA, "hand_loops.ptx"), "--grid", "1", "--block", "2048"), "threads"),
    ((os.path.join(DATA, "hand_loops.ptx"), "--grid", "1", "--block", "32",
      "--kernel", "nope"), "no kernel named"),
])
def test_bad_inputs_are_one_line_errors(cli, args, needle):
    rc, out, err = cli("simulate", *args)
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert needle in lines[0]


def test_launch_path_and_explain(cli):
    from ptxgen import isa
    table = isa.load("sm_90")
    runs = {}
    for path in ("cuda.core", "triton"):
        rc, out, err = cli("simulate", "saxpy", "--n", "65536", "--launch-path", path, "--json")
        assert rc == 0, err
        runs[path] = json.loads(out)
    a, b = runs["cuda.core"], runs["triton"]
    assert a["device_us"] == b["device_us"]          # the kernel does not depend on the path
    assert a["time_us"] - a["device_us"] == pytest.approx(table.launch_overhead_for("cuda.core"))
    assert b["time_us"] - b["device_us"] == pytest.approx(table.launch_overhead_for("triton"))
    assert b["details"]["launch_path"] == "triton"
    rc, out, err = cli("simulate", "saxpy", "--n", "16777216", "--explain")
    assert rc == 0, err
    # a 200 MB stream is DRAM-bound, and the view says so with every resource's share
    assert "bound by DRAM" in out and "pipe FMA" in out and "memory level:" in out


def test_emit_schedule_reorders_and_keeps_every_instruction(cli, tmp_path):
    from ptxgen.parse import parse_ptx
    from ptxgen.toolchain import assemble, have_tool
    src = os.path.join(DATA, "numba_matmul_shared_sm90.ptx")
    out = tmp_path / "s.ptx"
    rc, _o, err = cli("emit", src, "--schedule", "-o", str(out))
    assert rc == 0, err
    rc, plain, err = cli("emit", src)
    assert rc == 0, err

    def instrs(text):
        from ptxgen.ir.instr import Instr
        return [str(i) for i in parse_ptx(text).kernels[0].body if isinstance(i, Instr)]
    a, b = instrs(plain), instrs(out.read_text())
    assert sorted(a) == sorted(b) and a != b      # the same instructions, another order
    if have_tool("ptxas"):
        assert assemble(out.read_text(), "sm_90").resources
    rc, lib, err = cli("emit", "saxpy", "--schedule")
    assert rc == 0 and ".entry saxpy" in lib


def test_data_steered_kernels_are_simulated_with_their_index_arrays():
    """Decode's sequence lengths and varlen's cu_seqlens steer the work: the simulation reads
    the operator's own choice of them (sim_arrays), not zeros."""
    from ptxgen.ops.attention import Attention
    from ptxgen.ops.attention_decode import AttentionDecode
    from ptxgen.ops.attention_varlen import AttentionVarlen
    from ptxgen.sim import simulate_operator
    dec = AttentionDecode("bf16")

    def decode_us(kv):
        shape = dec.shape(B=16, S_q=1, H=32, H_kv=8, D=128, S_max=kv)
        return simulate_operator(dec, shape, "sm_90a").device_us
    short, long = decode_us(4096), decode_us(32768)
    assert 5 < long / short < 9                 # bound by reading 8x the K/V bytes
    var = AttentionVarlen(causal=True)
    vshape = var.shape(H=8, D=128, seqlens_q=[1024] * 4)
    from ptxgen.schedule.attention import default_attention_schedule
    dense = Attention(causal=True, schedule=default_attention_schedule(128, forms=False))
    vt = simulate_operator(var, vshape, "sm_90a").device_us
    dt = simulate_operator(dense, dense.shape(B=4, H=8, S=1024, D=128), "sm_90a").device_us
    assert abs(vt / dt - 1) < 0.05


def test_grouped_matmul_is_simulated_like_the_dense_gemm_of_its_work():
    """Its rows come from sim_arrays (an even split; every expert full when masked): both
    layouts are predicted near the dense GEMM of the same FLOPs."""
    from ptxgen.ops.grouped_matmul import GroupedMatmul
    from ptxgen.ops.tc_matmul import TcMatmul
    from ptxgen.sim import simulate_operator
    dense = TcMatmul("bf16", "bf16")
    want = simulate_operator(dense, dense.shape(M=4096, N=1024, K=1024), "sm_90a").device_us
    for layout in ("offsets", "masked"):
        op = GroupedMatmul("bf16", "bf16", layout=layout)
        got = simulate_operator(op, op.shape(M=4096, N=1024, K=1024, G=4), "sm_90a").device_us
        assert abs(got / want - 1) < 0.25, (layout, got, want)
