"""The emulator's native engine against its interpreter on this CPU (no GPU needed).

    python benchmarks/emu_native.py [--json FILE]

FP32 matmul at 512x512x512 and saxpy at 2^24 elements (ptxgen's operators, check='off' for
both engines so neither pays for racecheck), the same fresh inputs for both; each engine's
output is compared bit for bit with the other's and checked against the float64 reference.
Times: the first call (the native engine's includes lowering and JIT compilation, the
interpreter's its compilation to ops) and the best of 3 further calls, as this process's CPU
time (time.process_time: the CPU machine is shared, and wall time there includes waiting for
a core) and as wall time; only the emulate() calls are timed.
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxgen.emu import emulate  # noqa: E402
from ptxgen.ir.verify import verify_module  # noqa: E402
from ptxgen.ops import OPERATORS  # noqa: E402

CASES = [("matmul", {"M": 512, "N": 512, "K": 512}), ("saxpy", {"n": 1 << 24})]
ARCH = "sm_90"


# (label, engine, check): the interpreter as the native engine runs (no racecheck) and as
# emulate() runs by default (memcheck and racecheck)
ENGINES = [("interp", "interp", "off"), ("interp_checked", "interp", "error"),
           ("native", "native", "off")]


def run(op, shape, module, arrays, engine, check):
    """(outputs, cpu seconds, wall seconds) of the operator's launches on one engine."""
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
    count = [0]

    def observe(batch, p, mask):
        lanes = batch.n if mask is None else int(np.count_nonzero(mask))
        count[0] += lanes * batch.prog.code[p].span
    for step in op.steps(shape, ARCH):
        cfg = step.launch
        emulate(module, step.kernel, cfg.grid, cfg.block, *step.args(arrays),
                shared_bytes=cfg.shared_bytes, check="off", engine="interp", observer=observe)
    return count[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--only", help="run this operator only (matmul or saxpy)")
    args = ap.parse_args()
    rows = []
    for name, given in CASES:
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
                outs[label], cpu, wall = run(op, shape, module, arrays, engine, check)
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
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "llvmlite": llvmlite.__version__}
    print(json.dumps(meta))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
