"""GPU reliability (run on a GPU): 10 000 launches do not grow device memory; a faulting
kernel is reported with its name in a clean one-line error.

    python benchmarks/reliability_gpu.py      # prints a table; writes $OUT/reliability_gpu.json
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxgen import emit_module  # noqa: E402
from ptxgen.ops import get_operator  # noqa: E402

FAULT = r"""
import sys
import numpy as np
from ptxgen import emit_module
from ptxgen.ops import get_operator
from ptxgen.runtime import launch, load_kernel
from ptxgen.errors import PtxgenError
op = get_operator("saxpy")
m = op.build(op.shape(n=16))
k = load_kernel(emit_module(m), "saxpy", m.kernel("saxpy").params)
x = np.zeros(16, np.float32)
# n claims 2^26 elements while the arrays hold 16: out-of-bounds reads and writes
try:
    launch(k, 4096, 256, [np.uint32(1 << 26), np.float32(1), x, x, x])
    print("no error raised")
except PtxgenError as e:
    print("REPORTED:", e)
    sys.exit(3)
"""


def memory_growth(launches):
    from numba import cuda

    from ptxgen.runtime import launch, load_kernel
    op = get_operator("saxpy")
    shape = op.shape(n=1 << 16)
    m = op.build(shape)
    k = load_kernel(emit_module(m), "saxpy", m.kernel("saxpy").params)
    rng = np.random.default_rng()
    arrays = op.make_inputs(shape, rng)
    cfg = op.launch(shape)
    ctx = cuda.current_context()
    # warm-up: allocator pools and module state settle before the baseline
    for _ in range(100):
        launch(k, cfg.grid, cfg.block, op.kernel_args(shape, arrays))
    cuda.synchronize()
    free0, total = ctx.get_memory_info()
    t0 = time.perf_counter()
    for _ in range(launches):
        launch(k, cfg.grid, cfg.block, op.kernel_args(shape, arrays))   # copy in, run, copy back
    cuda.synchronize()
    dt = time.perf_counter() - t0
    free1, _ = ctx.get_memory_info()
    ok, _ = op.check(shape, arrays)
    return {"launches": launches, "free_before_MiB": free0 / 2**20, "free_after_MiB": free1 / 2**20,
            "growth_MiB": (free0 - free1) / 2**20, "seconds": dt, "last_result_correct": ok}


def fault():
    p = subprocess.run([sys.executable, "-c", FAULT], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    return {"exit_code": p.returncode, "stdout": p.stdout.strip(),
            "stderr_lines": len(p.stderr.strip().splitlines()), "traceback": "Traceback" in p.stderr}


def main():
    res = {"memory": memory_growth(10_000), "fault": fault()}
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "reliability_gpu.json"), "w") as f:
            json.dump(res, f, indent=1)
    mem, f = res["memory"], res["fault"]
    print(f"10000 launches (copy in/out each): free device memory {mem['free_before_MiB']:.1f} -> "
          f"{mem['free_after_MiB']:.1f} MiB (growth {mem['growth_MiB']:.1f} MiB) in "
          f"{mem['seconds']:.1f} s; last result correct: {mem['last_result_correct']}")
    print(f"faulting kernel: exit {f['exit_code']}, traceback: {f['traceback']}, "
          f"message: {f['stdout']}")


if __name__ == "__main__":
    main()
