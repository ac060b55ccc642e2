"""Simulator speed (CPU only): wall time of whole-launch simulations, the 4096³ matmul above all
(the target is under 10 s).

    python benchmarks/sim_speed.py          # prints a table; writes $OUT/sim_speed.json

Registers are fixed per case so ptxas time is not part of the measurement (the simulator
otherwise asks ptxas once per kernel); each case runs three times and the median is reported.
"""
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ptxgen.ops import get_operator  # noqa: E402
from ptxgen.ops.matmul import Matmul  # noqa: E402
from ptxgen.reorder import schedule_kernel  # noqa: E402
from ptxgen.sim import simulate_operator  # noqa: E402

TARGET_S = 10.0
CASES = [
    ("matmul 4096^3 (default schedule)", get_operator("matmul"),
     {"M": 4096, "N": 4096, "K": 4096}, 128),
    ("matmul 4096^3 (16x16 tiles)", Matmul(schedule=None), {"M": 4096, "N": 4096, "K": 4096},
     32),
    ("saxpy 2^28", get_operator("saxpy"), {"n": 1 << 28}, 24),
]


def main():
    rows = []
    for name, op, shape, regs in CASES:
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
    schedule_kernel(k, "sm_90")
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


if __name__ == "__main__":
    sys.exit(main())
