"""Every library operator through the three paths from ptxgen IR to PTX, on the GPU.

    python benchmarks/llvm_paths.py --emit DIR    # CPU: compile the llvm and nvvm PTX into DIR
    python benchmarks/llvm_paths.py [--ptx DIR]   # GPU: run, check, time; $OUT/llvm_paths.json

Paths: direct (ptxgen's emitter), llvm (the IR lowered by ptxgen.llvm and compiled by LLVM's
NVPTX back end in llvmlite), nvvm (the same lowering compiled by libNVVM through numba-cuda).
The llvm/nvvm PTX can be compiled beforehand (--emit) so the GPU machine needs neither compiler
and the PTX is exactly what the CPU machine's llvmlite and libNVVM produce.

Per operator: one fresh random input set; each path's output poisoned with NaN before its run,
checked against the float64 reference (the operator's tolerances) and compared bit for bit with
the direct path's output. Timing: ptxgen.runtime.time_calls (held batches: GPU time without
launch latency), the paths taking turns over ROUNDS rounds, median over rounds. Registers:
the driver's figure for the loaded kernel.
"""
import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ptxgen.ir.verify import verify_module  # noqa: E402
from ptxgen.reports.paths import VIAS, emit_via  # noqa: E402
from ptxgen.ops import OPERATORS  # noqa: E402

ARCH = "sm_90"
ROUNDS = 3
SHAPES = {"saxpy": {"n": 1 << 24}, "add": {"n": 1 << 24}, "scale": {"n": 1 << 24},
          "matmul": {"M": 2048, "N": 2048, "K": 2048},
          "transpose": {"M": 8191, "N": 8193}, "row_reduce": {"M": 16384, "N": 1000},
          "row_max": {"M": 16384, "N": 1000}, "softmax": {"M": 4096, "N": 4096}}


def _cases():
    for name in sorted(OPERATORS):
        op = OPERATORS[name]
        yield name, op, op.shape(**SHAPES[name])


def emit(out_dir):
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    for name, op, shape in _cases():
        module = verify_module(op.build(shape, ARCH))
        for via in ("llvm", "nvvm"):
            t = time.perf_counter()
            (d / f"{name}.{via}.ptx").write_text(emit_via(module, ARCH, via))
            print(f"{name:11s} {via:5s} {1e3 * (time.perf_counter() - t):7.1f} ms")
    import llvmlite
    import llvmlite.binding as llvm
    from ptxgen.runtime.nvvm import ir_version
    (d / "versions.json").write_text(json.dumps({
        "llvmlite": llvmlite.__version__, "llvm": ".".join(map(str, llvm.llvm_version_info)),
        "nvvm_ir_version": list(ir_version()), "arch": ARCH}))


def _equal(a, b):
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def run(ptx_dir):
    from numba import cuda

    from ptxgen.runtime import bound_steps, load_steps, time_calls
    from ptxgen.runtime.driver import synchronize
    rows, rng = [], np.random.default_rng()
    for name, op, shape in _cases():
        module = verify_module(op.build(shape, ARCH))
        arrays = op.make_inputs(shape, rng)
        ref = op.reference(shape, arrays)
        arrays.update(op.workspace_arrays(shape, ARCH))
        dev = {n: cuda.to_device(v) if isinstance(v, np.ndarray) else v
               for n, v in arrays.items()}
        calls, res = {}, {}
        for via in VIAS:
            f = Path(ptx_dir or "") / f"{name}.{via}.ptx"
            ptx = f.read_text() if ptx_dir and via != "direct" and f.exists() else \
                emit_via(module, ARCH, via)
            try:
                kernels = load_steps(op, shape, module, ARCH, ptx)
            except Exception as e:          # a path the driver refuses is reported, not fatal
                res[via] = {"error": str(e).splitlines()[0][:200]}
                print(f"{name} {via}: {res[via]['error']}", flush=True)
                continue
            for n in op.outputs:
                dev[n] = cuda.to_device(np.full_like(arrays[n], np.nan))
            call = bound_steps(op, shape, kernels, dev, ARCH)
            call()
            synchronize(name)
            outs = {n: dev[n].copy_to_host() for n in op.outputs}
            ok, err = op.check(shape, {**arrays, **outs}, ref)
            res[via] = {"ok": ok, "max_rel_error": err, "outs": outs, "times": [],
                        "registers": kernels[op.kernel_name()].registers}
            calls[via] = call
        for _ in range(ROUNDS):
            for via in calls:
                res[via]["times"].append(time_calls(calls[via]))
        base = res["direct"]["outs"]
        row = {"operator": name, "shape": shape}
        for via in VIAS:
            r = res[via]
            if "error" in r:
                row[via] = r
                continue
            row[via] = {"ok": r["ok"], "max_rel_error": r["max_rel_error"],
                        "identical_to_direct": all(_equal(r["outs"][n], base[n]) for n in base),
                        "registers": r["registers"], "ms": float(np.median(r["times"])),
                        "ms_rounds": r["times"]}
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(row):
    parts = [f"{row['operator']:11s}"]
    d = row["direct"]["ms"]
    for via in VIAS:
        r = row[via]
        if "error" in r:
            parts.append(f"{via}: not loaded")
            continue
        parts.append(f"{via}: {'PASS' if r['ok'] else 'FAIL'} "
                     f"{'=' if r['identical_to_direct'] else '≠'} {r['registers']:3d} regs "
                     f"{r['ms']:8.4f} ms ({d / r['ms']:.2f}x)")
    return "  ".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--emit", metavar="DIR", help="write the llvm and nvvm PTX into DIR")
    ap.add_argument("--ptx", metavar="DIR", help="PTX written by --emit (else compile here)")
    args = ap.parse_args()
    if args.emit:
        return emit(args.emit)
    t = time.time()
    rows = run(args.ptx)
    import llvmlite
    from numba import cuda
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "device": cuda.get_current_device().name.decode()
            if isinstance(cuda.get_current_device().name, bytes)
            else str(cuda.get_current_device().name),
            "python": platform.python_version(), "numpy": np.__version__,
            "llvmlite_here": llvmlite.__version__, "ptx_from": args.ptx or "compiled here",
            "seconds": round(time.time() - t, 1)}
    out = os.environ.get("OUT")
    if out:
        Path(out, "llvm_paths.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                           indent=1))
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
