"""Emulator speed: ptxgen's CPU emulator against Numba's CUDA simulator (no GPU needed).

    python benchmarks/emu_speed.py              # table on stdout; --json FILE writes the numbers

Workloads: ptxgen's matmul operator at 128x128x128 and its saxpy operator at 65 536 elements,
run by the emulator (build IR, verify, compile to ops, execute; first call and best of three
repeats), against the Numba twins (ptxgen/runtime/twin_sources.py: a 16x16 shared-memory tiled
matmul and a grid-stride saxpy, launched with ptxgen's launch shape; also a one-thread-per-element
saxpy, for scale)
run by Numba's simulator in a subprocess with NUMBA_ENABLE_CUDASIM=1, each launched once (the
simulator has no compile step to warm up). Both sides check their result against numpy.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ptxgen.runtime.twins import TILE  # noqa: E402  (the twin matmul's tile)

MATMUL = {"M": 128, "N": 128, "K": 128}
SAXPY = {"n": 65536}


# -- Numba's simulator (runs in a subprocess: NUMBA_ENABLE_CUDASIM must be set before import) --
def simulator_main():
    # the twins' kernels (module-level functions: the simulator swaps `cuda` in their module's
    # globals for its per-thread fake); the extra one-thread-per-element saxpy lives here, with
    # `cuda` a module global for the same reason
    global cuda
    from numba import cuda

    from ptxgen.runtime import twin_sources
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


# -- ptxgen's emulator ----------------------------------------------------------------------------
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


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--simulator", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.simulator:
        simulator_main()
        return 0
    emu = {"matmul": emulator_times("matmul", MATMUL), "saxpy": emulator_times("saxpy", SAXPY)}
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--simulator"],
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
    info = {"date": time.strftime("%Y-%m-%d"), "cpu": _cpu_name(), "cores": os.cpu_count(),
            "versions": versions(), "emulator": emu, "simulator": sim}
    print(f"{info['date']}, {info['cpu']} ({info['cores']} cores), "
          + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(info, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
