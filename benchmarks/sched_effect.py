"""What ptxgen's list scheduler (ptxgen.reorder) changes once ptxas has scheduled again.

    python benchmarks/sched_effect.py [--json FILE] [--no-sim]     # CPU: SASS, registers, model
    python benchmarks/sched_effect.py --gpu [--json FILE]          # GPU: H200 time of both orders

For every library operator at its default shape and every PTX file of the test corpus
(Numba's and Triton's kernels for sm_90): the PTX as emitted and list-scheduled
(`ptxgen emit --schedule`), both assembled by ptxas for sm_90: registers, SASS instruction
count, and how much of the SASS instruction sequence differs (1 - difflib ratio of the opcode
sequences); for the operators also the simulator's device time of both orders.

--gpu (on the GPU machine): every library kernel at a shape that runs 20 µs or more (the
fp32 operators, the tensor-core GEMM and the fused attention, sm_90a), emitted as built and
list-scheduled; both loaded by the driver (ptxas re-schedules), run once on the same fresh random
inputs and checked against the float64 reference, outputs compared bit for bit, then timed
(ptxgen.runtime.time_calls: GPU time without launch latency), the two orders taking turns
over ROUNDS rounds, median over rounds; the driver's register counts beside.
"""
import argparse
import difflib
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ptxgen.emit import emit_module  # noqa: E402
from ptxgen.ops import OPERATORS  # noqa: E402
from ptxgen.parse import parse_ptx  # noqa: E402
from ptxgen.reorder import schedule_module  # noqa: E402
from ptxgen.toolchain import assemble, disassemble, sass_instructions  # noqa: E402

ARCH = "sm_90"


def sass_of(module):
    asm = assemble(emit_module(module, ARCH), ARCH)
    return asm.resources, sass_instructions(disassemble(asm.cubin))


def compare(name, module, sim=None):
    base_res, base_sass = sass_of(module)
    sch = schedule_module(module, ARCH)
    sch_res, sch_sass = sass_of(sch)
    rows = []
    for k in module.kernels:
        a, b = base_sass.get(k.name, []), sch_sass.get(k.name, [])
        row = dict(case=name, kernel=k.name[:40],
                   registers=(base_res[k.name].registers, sch_res[k.name].registers),
                   sass=(len(a), len(b)),
                   sass_changed=1 - difflib.SequenceMatcher(None, a, b, autojunk=False).ratio())
        if sim is not None:
            row["sim_us"] = sim
        rows.append(row)
    return rows


GPU_CASES = [("saxpy", {"n": 1 << 24}), ("add", {"n": 1 << 24}), ("scale", {"n": 1 << 24}),
             ("matmul", {"M": 2048, "N": 2048, "K": 2048}),
             ("transpose", {"M": 8191, "N": 8193}), ("row_reduce", {"M": 16384, "N": 1000}),
             ("row_max", {"M": 16384, "N": 1000}), ("softmax", {"M": 4096, "N": 4096}),
             ("tc_matmul bf16", {"M": 4096, "N": 4096, "K": 4096}),
             ("attention bf16", {"B": 1, "H": 8, "S": 4096, "D": 128})]
ROUNDS = 3


def library_op(name):
    """(operator, arch) of a GPU_CASES name: the fp32 library for sm_90, the tensor-core
    operators for sm_90a."""
    if name.startswith("tc_matmul"):
        from ptxgen.ops.tc_matmul import TcMatmul
        return TcMatmul("bf16", "f32"), ARCH + "a"
    if name.startswith("attention"):
        from ptxgen.ops.attention import Attention
        return Attention("bf16"), ARCH + "a"
    return OPERATORS[name], ARCH


def gpu_case(name, given, seed):
    """Both orders of one library kernel on the GPU: registers, check, bit equality, times.
    Device copies of fresh inputs, outputs NaN-filled before each order's checked run."""
    import numpy as np
    from numba import cuda

    from ptxgen.ir.verify import verify_module
    from ptxgen.runtime import bound_steps, load_steps, time_calls
    from ptxgen.runtime.driver import synchronize
    op, arch = library_op(name)
    shape = op.shape(**given)
    module = verify_module(op.build(shape, arch))
    orders = {"as built": module, "scheduled": schedule_module(module, arch)}
    arrays = dict(op.make_inputs(shape, np.random.default_rng(seed)),
                  **op.workspace_arrays(shape, arch))
    ref = op.reference(shape, arrays)
    dev = {n: cuda.to_device(v) if isinstance(v, np.ndarray) else v for n, v in arrays.items()}
    row, runs, outs = dict(case=f"{name} {shape}", arch=arch), {}, {}
    for label, m in orders.items():
        kernels = load_steps(op, shape, m, arch, emit_module(m, arch))
        for n in op.outputs:
            dev[n].copy_to_device(np.full_like(arrays[n], np.nan))
        go = bound_steps(op, shape, kernels, dev, arch)
        go()
        synchronize(name)
        outs[label] = {n: dev[n].copy_to_host() for n in op.outputs}
        ok, worst = op.check(shape, {**arrays, **outs[label]}, ref)
        row[label] = dict(registers=kernels[op.kernel_name()].registers, ok=bool(ok),
                          max_rel_error=worst, ms=[])
        runs[label] = go
    row["bit_equal"] = all(np.array_equal(outs["as built"][n].view(np.uint8),
                                          outs["scheduled"][n].view(np.uint8))
                           for n in op.outputs)
    for _ in range(ROUNDS):
        for label, go in runs.items():
            row[label]["ms"].append(time_calls(go))
    for label in runs:
        row[label]["median_ms"] = float(np.median(row[label]["ms"]))
    row["speedup"] = row["as built"]["median_ms"] / row["scheduled"]["median_ms"]
    return row


def gpu_main(path):
    """Each case in its own process (a fault in one must not poison the others' context)."""
    import subprocess
    import tempfile
    rows = []
    for i, (name, given) in enumerate(GPU_CASES):
        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            p = subprocess.run([sys.executable, __file__, "--gpu-case", str(i), "--json",
                                tmp.name], capture_output=True, text=True, timeout=300)
            try:
                with open(tmp.name) as f:
                    rows.append(json.load(f))
            except ValueError:
                rows.append(dict(case=f"{name} {given}", error=(p.stderr or p.stdout)[-1500:]))
        if path:
            with open(path, "w") as f:
                json.dump(rows, f, indent=1)
    print(f"{'kernel':58s} {'regs':>7s} {'as built ms':>11s} {'scheduled ms':>12s} "
          f"{'x':>6s}  check  bit-equal")
    for r in rows:
        if "error" in r:
            print(f"{r['case'][:58]:58s} error: {r['error'][-300:]}")
            continue
        a, b = r["as built"], r["scheduled"]
        print(f"{r['case'][:58]:58s} {a['registers']:3d}>{b['registers']:<3d} "
              f"{a['median_ms']:11.4f} {b['median_ms']:12.4f} {r['speedup']:6.3f}  "
              f"{'ok' if a['ok'] and b['ok'] else 'FAIL':5s}  {r['bit_equal']}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--gpu", action="store_true", help="time both orders on the GPU")
    ap.add_argument("--gpu-case", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.gpu_case is not None:                 # one case, in a process of its own
        name, given = GPU_CASES[a.gpu_case]
        try:
            row = gpu_case(name, given, seed=1000 + a.gpu_case)
        except Exception:
            import traceback
            row = dict(case=f"{name} {given}", error=traceback.format_exc()[-1500:])
        with open(a.json, "w") as f:
            json.dump(row, f)
        return 0
    if a.gpu:
        return gpu_main(a.json)
    rows = []
    for name, op in sorted(OPERATORS.items()):
        shape = op.shape()
        module = op.build(shape, ARCH)
        sim = None
        if not a.no_sim:
            from ptxgen.sim import simulate_operator
            sim = tuple(simulate_operator(op, shape, arch=ARCH, schedule=s).device_us
                        for s in (False, True))
        rows += compare(f"{name} {shape}", module, sim)
    corpus = os.path.join(os.path.dirname(HERE), "tests", "data", "ptx")
    for path in sorted(glob.glob(os.path.join(corpus, "*.ptx"))):
        base = os.path.basename(path)
        if "sm80" in base or "debug" in base or base.startswith(("hand_", "ptxgen_")):
            continue
        try:
            rows += compare(base, parse_ptx(open(path).read(), filename=base))
        except Exception as e:                  # one file's failure must not lose the table
            rows.append(dict(case=base, error=f"{type(e).__name__}: {e}"[:200]))
    print(f"{'case':44s} {'regs':>9s} {'SASS instrs':>13s} {'SASS changed':>12s} "
          f"{'sim us (as emitted, scheduled)':>30s}")
    for r in rows:
        if "error" in r:
            print(f"{r['case']:44s} error: {r['error']}")
            continue
        sim = (f"{r['sim_us'][0]:9.2f} {r['sim_us'][1]:9.2f} {100 * (r['sim_us'][1] / r['sim_us'][0] - 1):+6.1f}%"
               if r.get("sim_us") else "")
        print(f"{r['case'][:44]:44s} {r['registers'][0]:4d}>{r['registers'][1]:<4d} "
              f"{r['sass'][0]:6d}>{r['sass'][1]:<6d} {100 * r['sass_changed']:11.1f}% {sim}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
