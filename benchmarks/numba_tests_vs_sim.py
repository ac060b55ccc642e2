"""numba-cuda's own test kernels on ptxgen's emulator against Numba's CUDA simulator (CPU only).

    python benchmarks/numba_tests_vs_sim.py [--modules test_atomics,test_sync,...] [--json FILE]
                                           [--work DIR (reuses DIR/comp.pkl when there)]

The kernels are collected at run time from the numba-cuda test modules installed with numba-cuda
(numba/cuda/tests/cudapy/test_*.py; nothing of them is copied here), in three subprocesses:

1. record (NUMBA_ENABLE_CUDASIM=1): the test modules run under the simulator with its kernel
   launch wrapped; the first launch of each kernel (Python function and argument types) is
   recorded: launch shape, the arguments before the launch, the simulator's outputs after it,
   and the launch's time. Kernels whose arguments are not numpy arrays or scalars (records,
   tuples, complex, device functions in closures) are counted as skipped.
2. compile (real numba-cuda, no GPU): each recorded function is rebuilt from its code object in
   its test module's globals and compiled to PTX by numba.cuda.compile_ptx (NVVM runs on the
   CPU), with the signature of the recorded arguments.
3. emulate (a fresh process that imports no numba): each kernel's PTX is parsed and launched
   once with ptxgen.emu.emulate (engine auto; memcheck, racecheck and initcheck on, as
   warnings: a few test kernels read shared memory they never wrote), Numba's array ABI for
   arrays; its outputs are compared with the simulator's. Then it is launched again from the
   same parsed module ("warm": parse and compilation cached).
   This stage runs twice, each time in a fresh process with PTXGEN_CACHE_DIR set to one new
   directory: first with the program cache empty ("cold"; it fills it), then with the cache the
   first run filled ("disk": the parsed modules come from ptxgen.progcache instead of the
   parser).

"Cold", on both sides, is the first launch of that kernel in a fresh process after the
interpreter started, the packages were imported and one warm-up kernel (not counted) ran on
that side: the simulator's time is its dispatcher call (it compiles nothing); ptxgen's is
Numba's array ABI for the arguments + parse_ptx of the kernel's text + emulate (compilation to
ops, argument packing, launch). NVVM's compile time is reported apart (a GPU pays it too).
Before each timed launch, on both sides, a garbage collection runs (untimed): hundreds of kernels
in one process leave garbage whose collection would otherwise land in some later launch.
The emulator's outputs must equal the
simulator's: integers and booleans exactly, floats to 1e-5 relative (the simulator computes
float32 math in Python doubles and libdevice differs in the last bits; the tests' own tolerances
are looser).
"""
import argparse
import collections
import gc
import json
import math
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ["test_atomics", "test_sync", "test_intrinsics", "test_idiv", "test_minmax",
           "test_powi", "test_localmem", "test_sm_creation", "test_warp_ops", "test_print",
           "test_cooperative_groups", "test_math", "test_operator", "test_fastmath",
           "test_array", "test_boolean", "test_casting", "test_constmem", "test_globals",
           "test_freevar", "test_lang", "test_laplace", "test_matmul", "test_montecarlo",
           "test_transpose", "test_userexc", "test_slicing", "test_sync", "test_iterators",
           "test_py2_div_issue", "test_vector_type", "test_flow_control", "test_mandel",
           "test_blackscholes", "test_random", "test_frexp_ldexp", "test_alignment",
           "test_record_dtype", "test_complex", "test_nondet"]
PKG = "numba.cuda.tests.cudapy"
CC = (9, 0)


def _stub_filecheck():
    """numba.cuda.testing imports the `filecheck` package (for its FileCheck tests of
    generated code, which need a GPU toolchain anyway); when it is not installed, empty stand-ins
    let the test modules import (those tests then fail and record nothing)."""
    import importlib.util
    import types
    if importlib.util.find_spec("filecheck") is not None:
        return
    names = {"matcher": ["Matcher"], "options": ["Options"],
             "parser": ["Parser", "pattern_for_opts"], "finput": ["FInput"]}
    sys.modules["filecheck"] = types.ModuleType("filecheck")
    for sub, attrs in names.items():
        m = types.ModuleType(f"filecheck.{sub}")
        for a in attrs:
            setattr(m, a, None)
        sys.modules[f"filecheck.{sub}"] = m


# -- stage 1: record under the simulator --------------------------------------------------------

def _host(a):
    """A numpy copy of an argument, or None when it is not an array or a plain scalar."""
    if isinstance(a, np.ndarray):
        return a.copy() if a.dtype.kind in "biuf" and a.ndim > 0 else None
    if hasattr(a, "copy_to_host"):
        h = a.copy_to_host()
        return h if h.dtype.kind in "biuf" and h.ndim > 0 else None
    if isinstance(a, (bool, np.bool_)):
        return np.bool_(a)
    if isinstance(a, (int, float)):
        return a
    if isinstance(a, np.number) and a.dtype.kind in "iuf":
        return a
    return None


def record(modules, out_path):
    import unittest
    _stub_filecheck()
    from numba import cuda
    from numba.cuda.simulator import kernel as simk

    # the simulator's one-time set-up, not recorded (it swaps the kernel's global `cuda`, so the
    # kernel lives in a namespace of its own)
    ns = {"cuda": cuda}
    exec("def warm_up(x):\n    x[cuda.grid(1)] += 1\n", ns)
    cuda.jit(ns["warm_up"])[2, 32](np.zeros(64))
    seen, kept, skipped = set(), [], {}
    original = simk.FakeCUDAKernel.__call__
    current = {"test": None}

    def call(self, *args):
        if self._device or simk._kernel_context is not None:
            return original(self, *args)
        fn = self.fn
        before = [_host(a) for a in args]
        key = (fn.__code__, tuple(type(a).__name__ if b is None else
                                  (getattr(b, "dtype", type(b)).__str__(), np.ndim(b),
                                   _layout(b)) for a, b in zip(args, before)))
        first = key not in seen
        seen.add(key)
        if first:
            gc.collect()                # earlier tests' garbage is not this launch's cost
        t0 = time.perf_counter()
        r = original(self, *args)
        dt = time.perf_counter() - t0
        if first:
            why = _unsupported(fn, args, before)
            if why:
                skipped[why] = skipped.get(why, 0) + 1
            else:
                kept.append(dict(
                    test=current["test"], module=fn.__globals__.get("__name__"), name=fn.__qualname__,
                    code=fn.__code__, closure=[c.cell_contents for c in fn.__closure__ or ()],
                    defaults=fn.__defaults__, grid=tuple(self.grid_dim),
                    block=tuple(self.block_dim), shared=self.dynshared_size, args=before,
                    after=[_host(a) if isinstance(b, np.ndarray) else None
                           for a, b in zip(args, before)], sim_s=dt))
        return r
    simk.FakeCUDAKernel.__call__ = call

    class Result(unittest.TestResult):
        def startTest(self, test):
            current["test"] = test.id()
            super().startTest(test)
    loader = unittest.TestLoader()
    for name in modules:
        try:
            suite = loader.loadTestsFromName(f"{PKG}.{name}")
        except Exception as e:          # a module that does not import under the simulator
            skipped[f"module {name}: {type(e).__name__}"] = 1
            continue
        t0 = time.perf_counter()
        suite.run(Result())
        print(f"record {name}: {len(kept)} kernels so far ({time.perf_counter() - t0:.1f} s)",
              file=sys.stderr, flush=True)
    simk.FakeCUDAKernel.__call__ = original
    good = []
    for k in kept:                      # what cannot travel to the compile process is skipped
        try:
            pickle.dumps(k["closure"])
            pickle.dumps(k["defaults"])
            good.append(k)
        except Exception:
            skipped["closure not picklable"] = skipped.get("closure not picklable", 0) + 1
    import marshal
    for k in good:
        k["code"] = marshal.dumps(k["code"])
    with open(out_path, "wb") as f:
        pickle.dump({"kernels": good, "skipped": skipped}, f)


def _layout(a):
    if not isinstance(a, np.ndarray):
        return ""
    return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"


def _unsupported(fn, args, before):
    if any(b is None for b in before):
        kinds = {type(a).__name__ for a, b in zip(args, before) if b is None}
        return "argument kinds " + ",".join(sorted(kinds))
    for c in fn.__closure__ or ():
        try:
            v = c.cell_contents
        except ValueError:
            return "empty closure cell"
        if callable(v) and not isinstance(v, type):
            return "closure over a function"
    return None


# -- stage 2: compile with NVVM -----------------------------------------------------------------

def compile_all(rec_path, out_path):
    import importlib
    import marshal
    import types
    from numba import cuda, typeof
    _stub_filecheck()
    # some test modules ask the current device for its compute capability at import; there is
    # none here: answer with the target the PTX is compiled for
    # (and so does the typing of a call to a device function)
    from numba.cuda import api, dispatcher
    from numba.cuda.cudadrv import devices
    device = types.SimpleNamespace(compute_capability=CC, name=b"ptxgen emulator")
    for m in (cuda, api, dispatcher):
        m.get_current_device = lambda: device
    devices.get_context = lambda *a: types.SimpleNamespace(device=device)
    with open(rec_path, "rb") as f:
        rec = pickle.load(f)
    out, failed = [], {}
    for k in rec["kernels"]:
        try:
            # a kernel made by exec() has globals without a module: its test's module's
            mod = importlib.import_module(k["module"] or k["test"].rsplit(".", 2)[0])
            code = marshal.loads(k["code"])
            fn = types.FunctionType(code, vars(mod), code.co_name, k["defaults"],
                                    tuple(types.CellType(v) for v in k["closure"]) or None)
            sig = tuple(typeof(a) for a in k["args"])
            t0 = time.perf_counter()
            ptx, _ = cuda.compile_ptx(fn, sig, cc=CC)
            k["nvvm_s"] = time.perf_counter() - t0
            k["ptx"] = ptx
            k["sig"] = str(sig)
            del k["code"], k["closure"], k["defaults"]
            out.append(k)
        except Exception as e:
            why = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
            failed[why] = failed.get(why, 0) + 1
    with open(out_path, "wb") as f:
        pickle.dump({"kernels": out, "skipped": rec["skipped"], "compile_failed": failed}, f)


# -- stage 3: emulate ---------------------------------------------------------------------------

def emulate_all(comp_path, out_path):
    sys.path.insert(0, ROOT)
    import importlib
    import pkgutil

    import ptxgen
    importlib.import_module("numpy.ma")     # numpy imports it lazily on the first np.unique
    from ptxgen.emu import as_module, emulate, numba_array_args
    for mi in pkgutil.walk_packages(ptxgen.__path__, "ptxgen."):   # imports, not launches
        if not mi.name.startswith(("ptxgen.runtime", "ptxgen.cli", "ptxgen.__main__")):
            importlib.import_module(mi.name)
    with open(comp_path, "rb") as f:
        comp = pickle.load(f)
    rows = []

    def launch(k, m=None):
        args = []
        arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in k["args"]]
        gc.collect()                    # earlier kernels' garbage is not this launch's cost
        t0 = time.perf_counter()        # the arguments' marshalling counts, as the simulator's
        for a in arrays:
            args += numba_array_args(a) if isinstance(a, np.ndarray) else [_scalar(a)]
        m = m or as_module(k["ptx"])    # parsed, or read from the disk cache when warm
        with warnings.catch_warnings():     # findings are kept in r.findings
            warnings.simplefilter("ignore")
            r = emulate(m, m.entries[0].name, k["grid"], k["block"], *args,
                        shared_bytes=k["shared"], check="warn")
        return time.perf_counter() - t0, arrays, r, m
    if comp["kernels"]:
        launch(comp["kernels"][0])      # warm-up (one-time set-up of the process), not counted
    for k in comp["kernels"]:
        row = {"test": k["test"], "kernel": k["name"], "grid": k["grid"], "block": k["block"],
               "sim_s": k["sim_s"], "nvvm_s": k["nvvm_s"]}
        if ".extern .func" in k["ptx"]:
            # Numba links these (cuda_fp16's math, compiled by NVRTC) at link time: the PTX of
            # compile_ptx alone calls a function it does not contain
            row.update(emu_s=None, error="calls an .extern function (linked by Numba later)")
            rows.append(row)
            continue
        try:
            dt, arrays, r, m = launch(k)
            row.update(emu_s=dt, engine=r.engine, findings=len(r.findings),
                       match=all(_same(a, b) for a, b in zip(arrays, k["after"])
                                 if b is not None))
            row["warm_s"] = launch(k, m)[0]     # the same text again: parsed and compiled
        except Exception as e:
            msg = str(e).split(": ", 1)[-1] if str(e).startswith("kernel ") else str(e)
            row.update(emu_s=None, error=f"{type(e).__name__}: {msg.splitlines()[0][:160]}")
        rows.append(row)
    with open(out_path, "w") as f:
        json.dump({"rows": rows, "skipped": comp["skipped"],
                   "compile_failed": comp["compile_failed"]}, f)


def _scalar(a):
    """A scalar argument as Numba passes it: bool as a byte, f16 as its bits."""
    if isinstance(a, (bool, np.bool_)):
        return np.uint8(a)
    if isinstance(a, np.float16):
        return a.view(np.uint16)
    if isinstance(a, int):
        return np.int64(a)
    if isinstance(a, float):
        return np.float64(a)
    return a


def _same(a, b):
    if a.dtype.kind == "f":
        return bool(np.allclose(a, b, rtol=1e-5, atol=1e-30, equal_nan=True))
    return bool(np.array_equal(a, b))


# -- driver ---------------------------------------------------------------------------------------

def _stage(stage, env_extra, *paths):
    env = dict(os.environ, **env_extra)
    env.pop("NUMBA_ENABLE_CUDASIM", None) if "NUMBA_ENABLE_CUDASIM" not in env_extra else None
    subprocess.run([sys.executable, os.path.abspath(__file__), "--stage", stage, *paths],
                   env=env, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", help="comma-separated test modules (default: a fixed list)")
    ap.add_argument("--json")
    ap.add_argument("--work", help="keep the recorded, compiled and emulated kernels here")
    ap.add_argument("--markdown", help="write the per-kernel table as Markdown here")
    ap.add_argument("--stage", help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stage == "record":
        return record(args.paths[2:], args.paths[0])
    if args.stage == "compile":
        return compile_all(*args.paths)
    if args.stage == "emulate":
        return emulate_all(*args.paths)
    modules = args.modules.split(",") if args.modules else list(dict.fromkeys(MODULES))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = args.work or tmp
        rec, comp, res, res2 = (os.path.join(tmp, n) for n in
                                ("rec.pkl", "comp.pkl", "res.json", "res_disk.json"))
        if not (args.work and os.path.exists(comp)):
            _stage("record", {"NUMBA_ENABLE_CUDASIM": "1"}, rec, "-", *modules)
            _stage("compile", {}, rec, comp)
        # twice, each a fresh process: an empty program cache (cold), then the one the first
        # run filled (disk)
        cache = os.path.join(tmp, "cache")
        if os.path.isdir(cache):
            import shutil
            shutil.rmtree(cache)
        _stage("emulate", {"PTXGEN_CACHE_DIR": cache}, comp, res)
        _stage("emulate", {"PTXGEN_CACHE_DIR": cache}, comp, res2)
        with open(res) as f:
            data = json.load(f)
        with open(res2) as f:
            disk = {(r["test"], r["kernel"]): r for r in json.load(f)["rows"]}
        for r in data["rows"]:
            d = disk.get((r["test"], r["kernel"]), {})
            if r.get("emu_s") is not None and d.get("emu_s") is not None:
                r["disk_s"] = d["emu_s"]
    report(data, args.json, args.markdown)


def report(data, json_path, markdown=None):
    rows = data["rows"]
    ran = [r for r in rows if r.get("emu_s") is not None]
    ratios = [r["sim_s"] / r["emu_s"] for r in ran]
    disk = [r["sim_s"] / r["disk_s"] for r in ran if r.get("disk_s")]
    for r in sorted(rows, key=lambda r: r["test"] or ""):
        sp = f"{r['sim_s'] / r['emu_s']:8.1f}x" if r.get("emu_s") else "       -"
        status = _status(r)
        emu = f"{1e3 * r['emu_s']:8.2f}" if r.get("emu_s") is not None else "       -"
        warm = f"{1e3 * r['warm_s']:6.2f}" if r.get("warm_s") is not None else "     -"
        dk = f"{1e3 * r['disk_s']:6.2f}" if r.get("disk_s") is not None else "     -"
        print(f"{(r['test'] or '').split('.')[-1][:44]:44s} {r['kernel'][:28]:28s} "
              f"{math.prod(r['grid']) * math.prod(r['block']):7d} thr  sim {1e3 * r['sim_s']:9.2f}"
              f" ms  emu {emu} ms (disk cache {dk}, warm {warm}) {sp}  {status}")
    summary = {"kernels": len(rows), "ran": len(ran),
               "same": sum(1 for r in ran if r["match"]),
               "different_after_a_finding": sum(1 for r in ran if not r["match"] and
                                                r["findings"]),
               "with_findings": sum(1 for r in ran if r["findings"]),
               "errors": len(rows) - len(ran),
               "geomean_speedup": math.exp(sum(map(math.log, ratios)) / len(ratios))
               if ratios else None,
               "min_speedup": min(ratios) if ratios else None,
               "slower_than_sim": sum(1 for x in ratios if x < 1),
               "disk_geomean_speedup": math.exp(sum(map(math.log, disk)) / len(disk))
               if disk else None,
               "disk_min_speedup": min(disk) if disk else None,
               "disk_slower_than_sim": sum(1 for x in disk if x < 1),
               "warm_geomean_speedup": math.exp(sum(math.log(r["sim_s"] / r["warm_s"])
                                                    for r in ran) / len(ran)) if ran else None,
               "warm_max_ms": 1e3 * max((r["warm_s"] for r in ran), default=0),
               "warm_median_ms": 1e3 * sorted(r["warm_s"] for r in ran)[len(ran) // 2]
               if ran else None,
               "not_run": dict(collections.Counter(r["error"] for r in rows if "error" in r)),
               "skipped": data["skipped"], "compile_failed": data["compile_failed"]}
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "python": platform.python_version(), "numpy": np.__version__}
    print(json.dumps(summary))
    print(json.dumps(meta))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"meta": meta, "summary": summary, "rows": rows}, f, indent=1)
    if markdown:
        with open(markdown, "w") as f:
            f.write("| test | kernel | threads | simulator ms | emulator cold ms | warm ms | "
                    "cold speed-up | result |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
            for r in sorted(rows, key=lambda r: r["test"] or ""):
                if r.get("emu_s") is not None:
                    emu = (f"{1e3 * r['emu_s']:.2f} | {1e3 * r['warm_s']:.2f} | "
                           f"{r['sim_s'] / r['emu_s']:.1f}")
                else:
                    emu = "- | - | -"
                f.write(f"| {(r['test'] or '').split('.')[-1]} | {r['kernel'].split('.')[-1]} | "
                        f"{math.prod(r['grid']) * math.prod(r['block'])} | "
                        f"{1e3 * r['sim_s']:.2f} | {emu} | {_status(r)} |\n")


def _status(r):
    if r.get("emu_s") is None:
        return r["error"]
    if r.get("match"):
        return "same"
    return "different, read uninitialized memory" if r.get("findings") else "DIFFERENT"


if __name__ == "__main__":
    main()
