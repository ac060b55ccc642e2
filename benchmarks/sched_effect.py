"""What ptxgen's list scheduler (ptxgen.reorder) changes once ptxas has scheduled again (CPU only).

    python benchmarks/sched_effect.py [--json FILE] [--no-sim]

For every library operator at its default shape and every PTX file of the test corpus
(Numba's and Triton's kernels for sm_90): the PTX as emitted and list-scheduled
(`ptxgen emit --schedule`), both assembled by ptxas for sm_90: registers, SASS instruction
count, and how much of the SASS instruction sequence differs (1 - difflib ratio of the opcode
sequences); for the operators also the simulator's device time of both orders. The H200 time of
both orders is not measured here (it needs a GPU run).
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--no-sim", action="store_true")
    a = ap.parse_args(argv)
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
