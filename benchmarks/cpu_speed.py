"""CPU speed of ptxgen's emulator, simulator and analyzer (no GPU needed), one subcommand each.

    python benchmarks/cpu_speed.py emulator [--json FILE]   # the interpreter vs Numba's simulator
    python benchmarks/cpu_speed.py native [--json FILE] [--only matmul|saxpy]
    python benchmarks/cpu_speed.py sim                      # table; $OUT/sim_speed.json
    python benchmarks/cpu_speed.py analyze [--instructions N] [--repeat R] [--out FILE]

emulator: ptxgen's matmul operator at 128x128x128 and its saxpy operator at 65 536 elements, run
by the emulator (build IR, verify, compile to ops, execute; first call and best of three
repeats), against the Numba twins (ptxgen/runtime/twin_sources.py: a 16x16 shared-memory tiled
matmul and a grid-stride saxpy, launched with ptxgen's launch shape; also a one-thread-per-element
saxpy, for scale) run by Numba's simulator in a subprocess with NUMBA_ENABLE_CUDASIM=1, each
launched once (the simulator has no compile step to warm up). Both sides check their result
against numpy.

native: the emulator's native engine against its interpreter. FP32 matmul at 512x512x512 and
saxpy at 2^24 elements (check='off' for both engines so neither pays for racecheck; the
interpreter also as emulate() runs by default, checked), the same fresh inputs for both; each
engine's output is compared bit for bit with the other's and checked against the float64
reference. Times: the first call (the native engine's includes lowering and JIT compilation,
the interpreter's its compilation to ops) and the best of 3 further calls, as this process's CPU
time (time.process_time: on a shared machine wall time includes waiting for a core) and as wall
time; only the emulate() calls are timed.

sim: wall time of whole-launch simulations, the 4096³ matmul above all (the target is under
10 s). Registers are fixed per case so ptxas time is not part of the measurement (the simulator
otherwise asks ptxas once per kernel); each case runs three times and the median is reported.

analyze: parse + analyze of a generated PTX file of N instructions (default 10 000; target:
under 1 s). The kernel mixes what real kernels contain: a loop of unrolled fma chains over vector
loads and shared-memory traffic, branches with guards, a few hundred registers. It prints the
instruction count the analyzer found and the best of R timings in seconds.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

ARCH = "sm_90"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# -- emulator: the interpreter against Numba's CUDA simulator --------------------------------------
MATMUL = {"M": 128, "N": 128, "K": 128}
SAXPY = {"n": 65536}


# Numba's simulator runs in a subprocess: NUMBA_ENABLE_CUDASIM must be set before import
def simulator_main():
    # the twins' kernels (module-level functions: the simulator swaps `cuda` in their module's
    # globals for its per-thread fake); the extra one-thread-per-element saxpy lives here, with
    # `cuda` a module global for the same reason
    global cuda
    from numba import cuda

    from ptxgen.runtime import twin_sources
    from ptxgen.runtime.twins import TILE
    matmul = cuda.jit(twin_sources.matmul)
    saxpy = cuda.jit(twin_sources.saxpy)

    @cuda.jit
    def saxpy_per_element(n, a, x, y, out):
        i = cuda.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    rng = np.random.default_rng(0)
    M, N, K = MATMUL["M"], MATMUL["N"], MATMUL["K"]
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.full((M, N), np.nan, np.float32)
    t = time.perf_counter()
    matmul[(-(-N // TILE), -(-M // TILE)), (TILE, TILE)](A, B, C)
    t_mm = time.perf_counter() - t
    ok_mm = bool(np.allclose(C, A.astype(np.float64) @ B, atol=1e-3))

    n = SAXPY["n"]
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n, np.nan, np.float32)
    a = np.float32(1.5)
    grid, block = _saxpy_launch()
    t = time.perf_counter()
    saxpy[grid, block](np.int32(n), a, x, y, out)
    t_sx = time.perf_counter() - t
    ok_sx = bool(np.allclose(out, np.float64(a) * x + y, atol=1e-5))
    out[:] = np.nan
    t = time.perf_counter()
    saxpy_per_element[-(-n // 256), 256](np.int32(n), a, x, y, out)
    t_pe = time.perf_counter() - t
    ok_pe = bool(np.allclose(out, np.float64(a) * x + y, atol=1e-5))
    print(json.dumps({"matmul": t_mm, "saxpy": t_sx, "saxpy_per_element": t_pe,
                      "ok": ok_mm and ok_sx and ok_pe}))


def _saxpy_launch():
    from ptxgen.ops import get_operator
    op = get_operator("saxpy")
    cfg = op.launch(op.shape(**SAXPY))
    return cfg.grid[0], cfg.block[0]


def emulator_times(name, given, repeats=3):
    from ptxgen.emu import api
    from ptxgen.emu.backend import run_operator
    from ptxgen.ops import get_operator
    op = get_operator(name)
    shape = op.shape(**given)
    arrays = op.make_inputs(shape, np.random.default_rng(0))
    api._programs.clear()
    t = time.perf_counter()
    res = run_operator(op, shape, arrays)
    first = time.perf_counter() - t
    ok, err = op.check(shape, arrays)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        run_operator(op, shape, arrays)
        best = min(best, time.perf_counter() - t)
    return {"first": first, "best": best, "ok": bool(ok), "max_rel_error": err,
            "steps": res.steps, "ctas": res.ctas, "block": list(res.block)}


def versions():
    import numba
    out = {"python": platform.python_version(), "numpy": np.__version__,
           "numba": numba.__version__}
    try:
        from importlib.metadata import version
        out["numba-cuda"] = version("numba-cuda")
    except Exception:
        pass
    return out


def emulator_main(args):
    if args.simulator:
        simulator_main()
        return 0
    emu = {"matmul": emulator_times("matmul", MATMUL), "saxpy": emulator_times("saxpy", SAXPY)}
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "emulator",
                           "--simulator"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return 1
    sim = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [("matmul 128x128x128", "matmul"), ("saxpy n=65536", "saxpy")]
    print(f"{'workload':<22}{'emulator first':>16}{'emulator best':>15}{'simulator':>12}"
          f"{'ratio (first)':>15}{'ratio (best)':>14}")
    for label, key in rows:
        e = emu[key]
        print(f"{label:<22}{e['first']:>15.3f}s{e['best']:>14.3f}s{sim[key]:>11.2f}s"
              f"{sim[key] / e['first']:>14.0f}x{sim[key] / e['best']:>13.0f}x")
    e, t = emu["saxpy"], sim["saxpy_per_element"]
    print(f"{'  (simulator: 1 thread':<22}{'':>16}{'':>15}{t:>11.2f}s"
          f"{t / e['first']:>14.0f}x{t / e['best']:>13.0f}x")
    print("   per element, 256 blocks of 256)")
    ok = all(e["ok"] for e in emu.values()) and sim["ok"]
    print(f"results checked against numpy: {'ok' if ok else 'MISMATCH'}")
    info = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "cores": os.cpu_count(),
            "versions": versions(), "emulator": emu, "simulator": sim}
    print(f"{info['date']}, {info['cpu']} ({info['cores']} cores), "
          + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(info, f, indent=2)
    return 0 if ok else 1


# -- native: the native engine against the interpreter ---------------------------------------------
NATIVE_CASES = [("matmul", {"M": 512, "N": 512, "K": 512}), ("saxpy", {"n": 1 << 24})]

# (label, engine, check): the interpreter as the native engine runs (no racecheck) and as
# emulate() runs by default (memcheck and racecheck)
ENGINES = [("interp", "interp", "off"), ("interp_checked", "interp", "error"),
           ("native", "native", "off")]


def run_engine(op, shape, module, arrays, engine, check):
    """(outputs, cpu seconds, wall seconds) of the operator's launches on one engine."""
    from ptxgen.emu import emulate
    cpu, wall = time.process_time(), time.perf_counter()
    for step in op.steps(shape, ARCH):
        cfg = step.launch
        r = emulate(module, step.kernel, cfg.grid, cfg.block, *step.args(arrays),
                    shared_bytes=cfg.shared_bytes, check=check, engine=engine)
        assert r.engine == engine, (r.engine, engine)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {n: arrays[n].copy() for n in op.outputs}, cpu, wall


def thread_instructions(op, shape, module, arrays):
    """Thread-instructions the launches execute (PTX instructions, guarded ones included,
    times the lanes that issue them), counted by the interpreter's observer: an op spanning a
    fused run of instructions counts each of them."""
    from ptxgen.emu import emulate
    count = [0]

    def observe(batch, p, mask):
        lanes = batch.n if mask is None else int(np.count_nonzero(mask))
        count[0] += lanes * batch.prog.code[p].span
    for step in op.steps(shape, ARCH):
        cfg = step.launch
        emulate(module, step.kernel, cfg.grid, cfg.block, *step.args(arrays),
                shared_bytes=cfg.shared_bytes, check="off", engine="interp", observer=observe)
    return count[0]


def native_main(args):
    from ptxgen.ir.verify import verify_module
    from ptxgen.ops import OPERATORS
    rows = []
    for name, given in NATIVE_CASES:
        if args.only and name != args.only:
            continue
        op = OPERATORS[name]
        shape = op.shape(**given)
        rng = np.random.default_rng()
        base = op.make_inputs(shape, rng)
        ref = op.reference(shape, base)
        row = {"operator": name, "shape": shape}
        outs = {}
        for label, engine, check in ENGINES:
            module = verify_module(op.build(shape, ARCH))     # fresh: no cached compilation
            cpus, walls = [], []
            for _ in range(4):
                arrays = {k: v.copy() for k, v in base.items()}
                arrays.update(op.workspace_arrays(shape, ARCH))
                outs[label], cpu, wall = run_engine(op, shape, module, arrays, engine,
                                                    check)
                cpus.append(cpu)
                walls.append(wall)
            ok, err = op.check(shape, {**base, **outs[label]}, ref)
            row[label] = {"first_s": cpus[0], "best_s": min(cpus[1:]), "ok": ok,
                           "first_wall_s": walls[0], "best_wall_s": min(walls[1:]),
                           "max_rel_error": err}
        arrays = {k: v.copy() for k, v in base.items()}
        arrays.update(op.workspace_arrays(shape, ARCH))
        row["thread_instructions"] = n = thread_instructions(op, shape, module, arrays)
        row["native_thread_instructions_per_s"] = n / row["native"]["best_s"]
        row["bit_identical"] = all(np.array_equal(outs["interp"][n].view(np.uint8),
                                                  outs["native"][n].view(np.uint8))
                                   for n in op.outputs)
        row["speedup_vs_checked"] = row["interp_checked"]["best_s"] / row["native"]["best_s"]
        row["speedup_best"] = row["interp"]["best_s"] / row["native"]["best_s"]
        row["speedup_first"] = row["interp"]["first_s"] / row["native"]["first_s"]
        row["speedup_best_wall"] = row["interp"]["best_wall_s"] / row["native"]["best_wall_s"]
        rows.append(row)
        print(f"{name:7s} {' '.join(f'{k}={v}' for k, v in shape.items()):22s} "
              f"CPU s: interp {row['interp']['best_s']:8.3f} (first {row['interp']['first_s']:.3f})"
              f"  native {row['native']['best_s']:8.4f} (first {row['native']['first_s']:.3f})"
              f"  speedup {row['speedup_best']:6.1f}x (first call {row['speedup_first']:.1f}x;"
              f" wall {row['speedup_best_wall']:.1f}x; vs checked interp "
              f"{row['speedup_vs_checked']:.1f}x)"
              f"  {n / 1e6:.0f} M thread-instr, native {n / row['native']['best_s'] / 1e9:.2f} G/s"
              f"  {'bit-identical' if row['bit_identical'] else 'DIFFERENT'}"
              f"  {'PASS' if row['native']['ok'] and row['interp']['ok'] else 'FAIL'}",
              flush=True)
    import llvmlite
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cpu": cpu_name(), "cores": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "llvmlite": llvmlite.__version__}
    print(json.dumps(meta))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


# -- sim: whole-launch simulations -----------------------------------------------------------------
TARGET_S = 10.0


def sim_cases():
    """(label, operator, shape, registers) of the simulated launches."""
    from ptxgen.ops import get_operator
    from ptxgen.ops.matmul import Matmul
    return [("matmul 4096^3 (default schedule)", get_operator("matmul"),
             {"M": 4096, "N": 4096, "K": 4096}, 128),
            ("matmul 4096^3 (16x16 tiles)", Matmul(schedule=None),
             {"M": 4096, "N": 4096, "K": 4096}, 32),
            ("saxpy 2^28", get_operator("saxpy"), {"n": 1 << 28}, 24)]


def sim_main(args):
    from ptxgen.ops import get_operator
    from ptxgen.reorder import schedule_kernel
    from ptxgen.sim import simulate_operator
    rows = []
    for name, op, shape, regs in sim_cases():
        sh = op.shape(**shape)
        times, rep = [], None
        for _ in range(3):
            t = time.perf_counter()
            rep = simulate_operator(op, sh, registers=regs)
            times.append(time.perf_counter() - t)
        rows.append({"case": name, "seconds": statistics.median(times),
                     "predicted_us": rep.time_us, "ctas": rep.details["ctas"],
                     "waves": rep.details["waves"]})
    op = get_operator("matmul")
    k = op.build(op.shape(M=4096, N=4096, K=4096)).kernels[0]
    t = time.perf_counter()
    schedule_kernel(k, ARCH)
    sched_s = time.perf_counter() - t
    print(f"{'case':<36} {'wall s':>8} {'predicted us':>13}")
    for r in rows:
        flag = "" if r["seconds"] < TARGET_S else f"  over the {TARGET_S:.0f} s target"
        print(f"{r['case']:<36} {r['seconds']:>8.2f} {r['predicted_us']:>13.1f}{flag}")
    print(f"schedule_kernel(matmul 4096^3, {len(k.body)} statements): {sched_s:.3f} s")
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "sim_speed.json"), "w") as f:
            json.dump({"cases": rows, "schedule_seconds": sched_s, "target_s": TARGET_S}, f,
                      indent=2)
    return 0 if all(r["seconds"] < TARGET_S for r in rows) else 1


# -- analyze: parse + analyze of a generated kernel ----------------------------------------------
BODY_GROUP = [   # 12 instructions per group; {g} numbers registers per group
    "ld.global.nc.v4.f32 {{%f{a}, %f{b}, %f{c}, %f{d}}}, [%rd{p}+{off}];",
    "fma.rn.f32 %f{acc0}, %f{a}, %f{b}, %f{acc0};",
    "fma.rn.f32 %f{acc1}, %f{c}, %f{d}, %f{acc1};",
    "mul.f32 %f{e}, %f{a}, 0f3F000000;",
    "st.shared.f32 [%r{s}+{soff}], %f{e};",
    "ld.shared.f32 %f{x}, [%r{s}+{soff2}];",
    "add.f32 %f{acc2}, %f{acc2}, %f{x};",
    "add.s32 %r{i}, %r{i}, 1;",
    "setp.lt.s32 %p{q}, %r{i}, %r1;",
    "@%p{q} add.f32 %f{acc3}, %f{acc3}, %f{e};",
    "shl.b32 %r{t}, %r{i}, 2;",
    "add.s32 %r{s}, %r{s}, %r{t};",
]


def generate(n_instructions):
    groups = max(1, (n_instructions - 12) // len(BODY_GROUP))
    per_loop = 64                                   # groups per loop body
    lines = [".version 7.8", ".target sm_90", ".address_size 64", "",
             ".visible .entry bench(", "\t.param .u64 .ptr .global .align 16 a,",
             "\t.param .u32 n", ")", "{",
             ".shared .align 16 .f32 buf[4096];",
             f"\t.reg .pred %p<{groups + 2}>;", f"\t.reg .b32 %r<{3 * groups + 8}>;",
             f"\t.reg .f32 %f<{6 * groups + 8}>;", "\t.reg .b64 %rd<4>;", "",
             "\tld.param.u64 %rd1, [a];", "\tld.param.u32 %r1, [n];",
             "\tcvta.to.global.u64 %rd2, %rd1;", "\tmov.u32 %r2, buf;",
             "\tmov.u32 %r3, 0;"]
    count = 5
    loop = 0
    for g in range(groups):
        if g % per_loop == 0:
            loop = g // per_loop
            if g:
                lines += ["\tadd.s32 %r3, %r3, 1;", "\tsetp.lt.s32 %p1, %r3, %r1;",
                          f"\t@%p1 bra $L_loop{g // per_loop - 1};"]
                count += 3
            lines.append(f"$L_loop{g // per_loop}:")
        f0 = 8 + 6 * g
        regs = dict(a=f0, b=f0 + 1, c=f0 + 2, d=f0 + 3, e=f0 + 4, x=f0 + 5,
                    acc0=1 + g % 2, acc1=3, acc2=4 + g % 2, acc3=6, p=2, off=16 * (g % 64),
                    s=4 + 3 * g, soff=4 * (g % 512), soff2=4 * ((g + 7) % 512), i=5 + 3 * g,
                    t=6 + 3 * g, q=2 + g)
        # each group's address and counter registers start from a defined value
        lines.append(f"\tmov.u32 %r{regs['s']}, %r2;")
        lines.append(f"\tmov.u32 %r{regs['i']}, %r3;")
        count += 2
        for tmpl in BODY_GROUP:
            lines.append("\t" + tmpl.format(**regs))
            count += 1
        if count >= n_instructions - 8:
            break
    lines += ["\tadd.s32 %r3, %r3, 1;", "\tsetp.lt.s32 %p1, %r3, %r1;",
              f"\t@%p1 bra $L_loop{loop};"]
    count += 3
    while count < n_instructions - 2:
        lines.append("\tadd.f32 %f1, %f1, %f3;")
        count += 1
    lines += ["\tst.global.f32 [%rd2], %f1;", "\tret;", "}", ""]
    return "\n".join(lines)


def analyze_main(args):
    from ptxgen.analysis import analyze
    from ptxgen.parse import parse_ptx
    text = generate(args.instructions)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    best_parse = best_total = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        module = parse_ptx(text, "bench.ptx")
        t1 = time.perf_counter()
        result = analyze(module, arch=args.arch)
        t2 = time.perf_counter()
        best_parse = min(best_parse, t1 - t0)
        best_total = min(best_total, t2 - t0)
    k = result.kernels[0]
    print(f"instructions: {k.instructions}  blocks: {len(k.blocks)}  loops: {len(k.loops)}")
    print(f"parse: {best_parse:.3f} s  parse+analyze: {best_total:.3f} s")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="part", required=True)
    emu = sub.add_parser("emulator", help="the interpreter against Numba's CUDA simulator")
    emu.add_argument("--json", help="also write the results to this file")
    emu.add_argument("--simulator", action="store_true", help=argparse.SUPPRESS)
    nat = sub.add_parser("native", help="the native engine against the interpreter")
    nat.add_argument("--json", help="also write the results to this file")
    nat.add_argument("--only", help="run this operator only (matmul or saxpy)")
    sub.add_parser("sim", help="whole-launch simulations ($OUT/sim_speed.json when OUT is set)")
    an = sub.add_parser("analyze", help="parse + analyze of a generated kernel")
    an.add_argument("--instructions", type=int, default=10_000)
    an.add_argument("--repeat", type=int, default=3)
    an.add_argument("--arch", default=ARCH)
    an.add_argument("--out", help="also write the generated PTX here")
    args = p.parse_args(argv)
    return {"emulator": emulator_main, "native": native_main, "sim": sim_main,
            "analyze": analyze_main}[args.part](args)


if __name__ == "__main__":
    sys.exit(main())
