"""Instruction-level analysis of a PTX kernel: its LDG / FMA / STG / BAR (and shared-memory)
instructions against the latency and throughput table of the machine model, the theoretical
peak, and what the inner loop can reach.

The kernel is the library's simple shared-memory tiled matmul (16x16 threads, one output each):
per k-tile every thread loads one A and one B value from global memory (LDG), stores them to
shared memory (STS), waits at a barrier (BAR), then does 16 FMAs, each fed by two shared loads
(LDS), and finally stores C (STG). Every number below comes from isa/<arch>.toml or the analyzer.

    python samples/ptx_analysis.py
"""
from _common import backend, gpu_arch, say_backend

import ptxgen
from ptxgen import isa
from ptxgen.reports.run import run_operator
from ptxgen.emit import emit_module
from ptxgen.ops.matmul import Matmul

CLASSES = ("LDG", "STS", "BAR", "LDS", "FMA", "STG")


def main():
    arch = gpu_arch()
    table = isa.load(arch)
    h = table.header
    op = Matmul(schedule=None)
    shape = op.shape(M=512, N=512, K=512)
    module = op.build(shape, arch)
    ptx = emit_module(module, arch)
    print(f"tiled matmul {shape['M']}x{shape['N']}x{shape['K']} (16x16 threads, 16x16 tiles), "
          f"machine model {arch}: {table.name}")

    print("\n1. the instruction classes it uses, from the machine model:")
    print(f"  {'class':<5} {'latency':>8} {'issue':>6} {'pipe':<5} source of the latency")
    for c in CLASSES:
        o = table.ops[c]
        print(f"  {c:<5} {o.latency:>8.1f} {o.issue_interval:>6.2f} {o.unit:<5} "
              f"{o.source[:72]}")
    print("  (latency: cycles until a dependent instruction may issue; issue: cycles one warp "
          "instruction holds its pipe in a sub-partition)")

    print("\n2. theoretical peak:")
    fma = table.ops["FMA"]
    peak = h.sm_count * h.fp32_lanes_per_sm * 2 * h.clock_mhz / 1e3
    print(f"  FP32: {h.sm_count} SMs x {h.fp32_lanes_per_sm} lanes x 2 FLOP x {h.clock_mhz:g} MHz"
          f" = {peak:,.0f} GFLOP/s")
    print(f"  = {h.schedulers_per_sm} sub-partitions x one FMA warp instruction every "
          f"{fma.issue_interval:g} cycles per SM; HBM {h.hbm_bandwidth_gbs:,.0f} GB/s, so a "
          f"kernel needs {peak / h.hbm_bandwidth_gbs:.1f} FLOP per DRAM byte to be compute-bound")

    rep = ptxgen.analyze(ptx, arch=arch).kernels[0]
    loop = next(lp for lp in rep.loops if lp["innermost"])
    t = loop["timing"]
    mix = t["op_classes"]
    print(f"\n3. the inner (k-tile) loop, PTX line {loop['line']}: {loop['instructions']} "
          f"instructions per iteration for one warp")
    print("  " + ", ".join(f"{c} x{mix.get(c, 0)}" for c in CLASSES) + " (STG is after the "
          "loop)")
    for unit, cycles in t["unit_cycles"].items():
        if cycles:
            print(f"  {unit:<4} pipe busy {cycles:6.1f} cycles per iteration")
    fma_cycles = mix.get("FMA", 0) * fma.issue_interval
    busiest = max(t["unit_cycles"], key=t["unit_cycles"].get)
    ceiling = fma_cycles / t["throughput_bound"]
    print(f"  throughput bound {t['throughput_bound']:.0f} cycles ({busiest}), dependency chain "
          f"{t['latency_bound']:.0f} cycles for one warp: {t['bound_by']}-bound, "
          f"{t['warps_to_hide_latency']} warps per sub-partition hide the latency")
    print(f"  why it stays far from the peak: {mix.get('LDS', 0)} shared loads for "
          f"{mix.get('FMA', 0)} FMAs keep the {busiest} pipe busy {t['throughput_bound']:.0f} "
          f"cycles against {fma_cycles:.0f} of FMA work, so even with every latency hidden the "
          f"loop reaches at most {100 * ceiling:.0f}% of the FP32 peak "
          f"({ceiling * peak:,.0f} GFLOP/s); register tiling (samples/tensorir_matmul.py) "
          f"raises FMAs per shared load")

    where = backend()
    run_shape = shape if where == "gpu" else op.shape(M=200, N=136, K=120)
    r = run_operator(op, run_shape, backend=where, seed=0)
    print(f"\n4. run at {run_shape['M']}x{run_shape['N']}x{run_shape['K']} on "
          f"{say_backend(where)}: result {'ok' if r.ok else 'WRONG'} against the float64 "
          f"reference (max relative error {r.max_rel_error:.1e})")
    return 0 if r.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
