"""Where a matmul's time goes (run on a GPU): each step alone, then all, packed or not.

    python benchmarks/matmul_steps.py [--shapes 4095x4097x513,...]

For each shape, the operator's steps (pad_copy of A, of B, the product; or the product alone)
are timed one by one and together with ptxgen.runtime.time_calls, for the default Matmul() and
for Matmul(pack=True); one line per step, TFLOP/s of the useful 2*M*N*K.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxgen.ir.verify import verify_module  # noqa: E402
from ptxgen.ops.matmul import Matmul  # noqa: E402


def step_times(op, shape, arch):
    from numba import cuda

    from ptxgen.runtime import bound_launch, bound_steps, load_steps, time_calls
    module = verify_module(op.build(shape, arch))
    arrays = op.make_inputs(shape, np.random.default_rng())
    arrays.update(op.workspace_arrays(shape, arch))
    dev = {n: cuda.to_device(v) if isinstance(v, np.ndarray) else v for n, v in arrays.items()}
    kernels = load_steps(op, shape, module, arch)
    rows = [(f"{s.kernel} {s.launch.grid}",
             time_calls(bound_launch(kernels[s.kernel], s.launch.grid, s.launch.block,
                                     s.args(dev), s.launch.shared_bytes)))
            for s in op.steps(shape, arch)]
    rows.append(("all steps", time_calls(bound_steps(op, shape, kernels, dev, arch))))
    C = dev["C"].copy_to_host()
    ref = arrays["A"].astype(np.float64) @ arrays["B"].astype(np.float64)
    ok = op.check(shape, {**arrays, "C": C}, {"C": ref})[0]
    return rows, ok


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="4095x4097x513,4096x4096x512")
    a = p.parse_args(argv)
    from ptxgen.runtime.device import device_arch
    arch = device_arch()
    for text in a.shapes.split(","):
        M, N, K = (int(v) for v in text.split("x"))
        shape = {"M": M, "N": N, "K": K}
        for label, op in (("library", Matmul()), ("packed", Matmul(pack=True))):
            rows, ok = step_times(op, shape, arch)
            for name, ms in rows:
                print(f"{text:14s} {label:9s} {name:34s} {ms:8.4f} ms "
                      f"{2 * M * N * K / ms / 1e9:7.2f} TFLOP/s {'ok' if ok else 'WRONG'}",
                      flush=True)


if __name__ == "__main__":
    main()
