"""A TensorIR-style matmul schedule: C[1024,1024] = A @ B with 32x32 tiles and 8x4 threads, then
a tuned schedule chosen by predicted (CPU) or measured (GPU) time.

A MatmulSchedule is the schedule of a TensorIR/TVM matmul written as data: block tiles bound to
blockIdx, a warp's 8x4 threads each owning a TMxTN register tile, the K loop split into shared
memory stages. It is printed as the loop nest it lowers to; then candidate schedules are ranked
for 1024^3 with the cycle simulator (or timed on the GPU) and both kernels are run and checked
against a float64 reference: at 1024 on a GPU, at a smaller size on the CPU emulator.

    python samples/tensorir_matmul.py
"""
import time

from _common import backend, gpu_arch, say_backend

from ptxgen import isa
from ptxgen.analysis.occupancy import occupancy
from ptxgen.reports.run import run_operator
from ptxgen.ops.matmul import Matmul
from ptxgen.schedule import CANDIDATES, MatmulSchedule

BIG = {"M": 1024, "N": 1024, "K": 1024}
CHECK = {"M": 160, "N": 96, "K": 72}          # the CPU check: ragged against every tile size
# tiles 32: a 32x32 block tile, BK=8; threads 8x4: one warp of 8 rows x 4 columns of lanes,
# each lane a 4x8 register tile (32 = 8 x 4 and 32 = 4 x 8)
FIRST = MatmulSchedule(BM=32, BN=32, BK=8, WM=32, WN=32, TM=4, TN=8, min_ctas_per_sm=1)


def loop_nest(s, shape):
    """The schedule as TensorIR would print its loops (bound, serial and unrolled)."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    rows = [
        (f"for by in blockIdx.y ({-(-M // s.BM)}):", f"rows of C, {s.BM} per block"),
        (f"  for bx in blockIdx.x ({-(-N // s.BN)}):", f"columns of C, {s.BN} per block"),
        (f"    for w in warps ({s.warps_m}x{s.warps_n}):", f"a {s.WM}x{s.WN} warp tile each"),
        (f"      for ty, tx in threadIdx ({s.lanes_m}x{s.lanes_n}):",
         f"a {s.TM}x{s.TN} register tile each"),
        (f"        C_local[{s.TM},{s.TN}] = 0", "registers"),
        (f"        for ko in serial ({-(-K // s.BK)}):",
         f"K in steps of {s.BK}, {s.stages} shared buffers"),
        (f"          A_shared[{s.BK},{s.BM}+{s.pad_a}] <- A",
         f"{s.vec_global * 32}-bit loads, stored transposed"),
        (f"          B_shared[{s.BK},{s.BN}+{s.pad_b}] <- B", "bar.sync after both"),
        (f"          for ki in unroll ({s.BK}):", ""),
        (f"            A_local[{s.TM}] <- A_shared[ki, ...]", f"ld.shared.v{s.vec_shared}"),
        (f"            B_local[{s.TN}] <- B_shared[ki, ...]", f"ld.shared.v{s.vec_shared}"),
        (f"            for i, j in unroll ({s.TM}x{s.TN}):", ""),
        ("              C_local[i, j] += A_local[i] * B_local[j]", "fma.rn.f32"),
        ("        C[...] <- C_local", f"{s.vec_store * 32}-bit stores")]
    w = max(len(c) for c, _ in rows)
    return "\n".join(f"  {c:<{w}}  # {m}" if m else f"  {c}" for c, m in rows)


def facts(s, arch):
    """What decides a schedule's speed, from its numbers and the machine model."""
    h = isa.load(arch).header
    occ = occupancy(s.threads, s.registers_estimate(), s.shared_bytes, arch)
    g = s.grid(BIG)
    ctas = g[0] * g[1] * g[2]
    return {"ctas": ctas, "grid": g, "warps": s.threads // 32, "occ": occ,
            "waves": -(-ctas // (h.sm_count * occ.active_blocks_per_sm)),
            "sms": min(ctas, h.sm_count), "sm_count": h.sm_count,
            "reuse": s.TM * s.TN / (s.TM + s.TN)}


def describe(s, arch):
    f = facts(s, arch)
    occ = f["occ"]
    print(f"  grid {f['grid']}, block {s.block()}: {f['ctas']} CTAs of {f['warps']} warp(s) "
          f"on {f['sm_count']} SMs ({f['waves']} wave(s)), {s.shared_bytes} B shared, "
          f"~{s.registers_estimate()} registers/thread")
    print(f"  occupancy {occ.occupancy:.0%} ({occ.active_blocks_per_sm} CTAs/SM, limited by "
          f"{occ.limiter}); {f['reuse']:.1f} FMAs per value loaded from shared memory")


def score(s, arch):
    """Microseconds for 1024^3: measured on the GPU, else predicted by the simulator."""
    op = Matmul(s)
    if backend() == "gpu":
        r = run_operator(op, BIG, backend="gpu", check=False, time_it=True)
        return r.time_ms * 1e3, "measured"
    from ptxgen.sim import simulate_operator
    rep = simulate_operator(op, BIG, arch=arch)
    return (getattr(rep, "device_us", 0.0) or rep.time_us), "simulated"


def main():
    arch = gpu_arch()
    where = backend()
    flops = 2 * BIG["M"] * BIG["N"] * BIG["K"]
    print(f"matmul {BIG['M']}x{BIG['N']}x{BIG['K']} on {arch}, running on {say_backend(where)}")
    print(f"\n1. the first schedule, {FIRST} (tiles 32, threads 8x4):")
    FIRST.validate(arch, BIG)
    print(loop_nest(FIRST, BIG))
    describe(FIRST, arch)

    print("\n2. tuning: candidate schedules ranked by time for 1024^3")
    pool = {"32x32 (8x4 threads)": FIRST} | dict(CANDIDATES)
    ranked = []
    t0 = time.perf_counter()
    for name, s in pool.items():
        us, how = score(s, arch)
        ranked.append((us, name, s))
    ranked.sort(key=lambda r: r[0])
    for us, name, s in ranked:
        print(f"  {name:<22} {us:9.1f} us {how}  {flops / us / 1e3:8,.0f} GFLOP/s")
    best_us, best_name, best = ranked[0]
    first_us = next(us for us, n, s in ranked if s is FIRST)
    print(f"  ({len(ranked)} schedules in {time.perf_counter() - t0:.1f} s)")
    print(f"\ntuned schedule: {best_name} = {best}, {first_us / best_us:.2f}x faster than the "
          f"first ({how})")
    print(loop_nest(best, BIG))
    describe(best, arch)
    a, b = facts(FIRST, arch), facts(best, arch)
    print(f"  why: {b['reuse']:.1f} FMAs per shared-memory value instead of {a['reuse']:.1f}, "
          f"{b['warps']} warps per CTA instead of {a['warps']} to hide latency, "
          f"{b['ctas']} CTAs over {b['sm_count']} SMs instead of {a['ctas']}: the "
          f"{'GPU' if how == 'measured' else 'simulator'} weighs them")

    check = BIG if where == "gpu" else CHECK
    print(f"\n3. correctness at {check['M']}x{check['N']}x{check['K']} against a float64 "
          f"reference" + ("" if where == "gpu" else " (the emulator runs a smaller size)"))
    for label, s in (("first", FIRST), ("tuned", best)):
        r = run_operator(Matmul(s), check, backend=where, seed=1)
        print(f"  {label}: {'ok' if r.ok else 'WRONG'}, max relative error "
              f"{r.max_rel_error:.1e} ({r.backend})")
        if not r.ok:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
