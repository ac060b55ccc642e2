"""What the samples share: run a kernel on the GPU when Numba finds one, else on ptxgen's CPU
emulator, and say which. PTXGEN_SAMPLES_BACKEND=emu forces the emulator on a GPU machine."""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:                     # run from a checkout without installing
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from ptxgen.emit import emit_module  # noqa: E402
from ptxgen.ir.verify import verify_module  # noqa: E402


def backend():
    """'gpu' when a CUDA GPU is usable (and not overridden), else 'emu'."""
    want = os.environ.get("PTXGEN_SAMPLES_BACKEND", "auto")
    if want in ("gpu", "emu"):
        return want
    from ptxgen.runtime import gpu_available
    return "gpu" if gpu_available() else "emu"


def gpu_arch(default="sm_90"):
    if backend() != "gpu":
        return default
    from ptxgen.runtime.device import device_arch
    return device_arch()


def run_kernel(module, name, grid, block, args, shared_bytes=0):
    """Launch kernel `name` of `module` once; numpy arrays in `args` receive the results.
    Returns (backend, seconds of wall time for the launch)."""
    where = backend()
    t0 = time.perf_counter()
    if where == "gpu":
        from ptxgen.runtime import launch, load_kernel
        kir = module.kernel(name)
        k = load_kernel(emit_module(verify_module(module), gpu_arch()), name, kir.params)
        launch(k, grid, block, list(args), shared_bytes)
    else:
        from ptxgen.emu import emulate
        emulate(verify_module(module), name, grid, block, *args, shared_bytes=shared_bytes)
    return where, time.perf_counter() - t0


def run_op(op, shape, arrays=None, seed=0):
    """Run a library operator on fresh random inputs (or the given arrays); returns the arrays
    (outputs written) and the backend used."""
    arrays = arrays if arrays is not None else op.make_inputs(shape, np.random.default_rng(seed))
    cfg = op.launch(shape)
    module = op.build(shape, gpu_arch())
    where, _ = run_kernel(module, op.kernel_name(), cfg.grid, cfg.block,
                          op.kernel_args(shape, arrays), cfg.shared_bytes)
    return arrays, where


def say_backend(where):
    return ("the GPU" if where == "gpu" else
            "ptxgen's CPU emulator (no GPU found; PTXGEN_SAMPLES_BACKEND=emu forces it)")
