"""Round 8 of the simulator on kernels it was not written for (issue 14, branch sim8): a global
load whose lanes start together and part as its loop runs (a binary search: every lane's first
probe is the table's middle, its last ones a line per lane) is priced over every recorded
execution, not its first one; the L1 miss rate is the share of sectors no earlier recorded
execution brought in."""
import os
import sys

from ptxgen.sim.access import Access
from ptxgen.sim.reuse import spread_cost, spreading
from model_data import measured_case

ROOT = os.path.dirname(os.path.dirname(__file__))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
DATA = "model_set_2026-12-01f_sim7_held7.json.gz"


def _bsearch_execs(warp, levels, n=1 << 20):
    """Per level, the byte address each of a warp's 32 lanes probes in a binary search of a
    sorted table of n int32 for distinct keys (lane keys spread evenly over the table)."""
    out = []
    keys = [((warp * 32 + lane) * 7919 % 4096) * (n // 4096) + 3 for lane in range(32)]
    lo = [0] * 32
    hi = [n] * 32
    for _ in range(levels):
        ex = []
        for j in range(32):
            mid = (lo[j] + hi[j]) // 2
            ex.append(4 * mid)
            if mid < keys[j]:
                lo[j] = mid + 1
            else:
                hi[j] = mid
        out.append(ex)
    return out


def test_a_binary_search_load_spreads_and_a_streaming_one_does_not():
    assert spreading(_bsearch_execs(0, 12), 4, 32)
    stream = [[4 * (32 * k + j) for j in range(32)] for k in range(12)]
    assert not spreading(stream, 4, 32)
    assert not spreading(_bsearch_execs(0, 2), 4, 32)     # two executions: nothing to tell


def test_spread_cost_is_the_mean_over_executions_and_reuse_lowers_the_miss_rate():
    by_warp = {w: _bsearch_execs(w, 16) for w in range(4)}
    acc = Access(bytes=32)
    spread_cost(acc, by_warp, 4, 32, 128)
    # level 0 is one sector, levels 5 and on one per lane: the mean lies well between
    assert 16 * 32 < acc.bytes < 32 * 32
    assert acc.l1_bytes >= acc.bytes
    # the first probes are the same for all four warps: they hit after the first warp's
    assert 0.3 < acc.miss < 1.0
    one = Access(bytes=32)
    spread_cost(one, {0: by_warp[0]}, 4, 32, 128)
    assert one.miss > acc.miss                  # fewer warps, less reuse


def test_the_l2_resident_binary_search_lands_near_its_h200_time():
    """bsearch_keys (held7, SEEN now) with a 4 MB table: −57 % before this rule (the first
    probe, one sector for the warp, stood for all 21); the rule was written from its cause,
    not fitted to it — the test guards its wiring."""
    import model_eval
    case = measured_case(DATA, "bsearch_keys table=1000003 keys=4000037")
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    assert abs(rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.25


def _div_kernel(op):
    from ptxgen.parse import parse_ptx
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p){
.reg .f32 %f<4>; .reg .b64 %rd<2>;
ld.param.u64 %rd1, [p];
ld.global.f32 %f1, [%rd1];
ld.global.f32 %f2, [%rd1+4];
""" + op + """ %f3, %f1, %f2;
st.global.f32 [%rd1+8], %f3;
ret;}
"""
    return parse_ptx(ptx).kernel("k")


def test_ieee_f32_divide_costs_ptxas_fast_path_and_approx_does_not():
    """div.rn.f32 is MUFU.RCP plus FCHK, five dependent FFMA and a branch in ptxas's SASS
    (isa numbers measured with ptxas 13); div.approx.f32 is one MUFU: the IEEE one issues 7
    more instructions and its result comes 5 FFMA latencies later."""
    from ptxgen import isa
    from ptxgen.sim.program import compile_kernel
    table = isa.load("sm_90")
    rn, ap = (next(st for st in compile_kernel(_div_kernel(op), table).instrs
                   if st.instr.opcode == "div") for op in ("div.rn.f32", "div.approx.f32"))
    mm = table.memory_model
    assert sum(n for n, _, _ in rn.extra) - sum(n for n, _, _ in ap.extra) == \
        mm["ptxas_f32_divide_ffma_instructions"] + mm["ptxas_f32_divide_other_instructions"]
    fma = table.ops["FMA"].latency
    assert abs(rn.latency - ap.latency - mm["ptxas_f32_divide_ffma_instructions"] * fma) < 1e-6
