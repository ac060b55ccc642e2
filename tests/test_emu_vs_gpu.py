"""On a GPU: the CPU emulator and the GPU give the same results on the same inputs."""
import numpy as np
import pytest

from ptxgen import emit_module
from ptxgen.ops import OPERATORS

pytestmark = pytest.mark.gpu

SHAPES = {"saxpy": {"n": 100_003}, "add": {"n": 70_001}, "scale": {"n": 70_001},
          "matmul": {"M": 67, "N": 45, "K": 33}, "transpose": {"M": 67, "N": 45},
          "row_reduce": {"M": 37, "N": 1001}, "row_max": {"M": 37, "N": 1001},
          "softmax": {"M": 33, "N": 777}}
# ex2.approx (softmax) is exact in the emulator and within 2 ulp on the GPU
TOLERANCE = {"softmax": 1e-6}


def _outputs(op, shape, arrays):
    return {n: arrays[n].copy() for n in op.outputs}


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_emulator_matches_gpu(name):
    from ptxgen.emu.backend import run_operator as emu_run
    from ptxgen.runtime import launch, load_kernel
    op = OPERATORS[name]
    dims = {k: v for k, v in SHAPES.get(name, {}).items() if k in op.shape_names}
    shape = op.shape(**dims)
    rng = np.random.default_rng()
    inputs = op.make_inputs(shape, rng)
    gpu_arrays = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    emu_arrays = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    module = op.build(shape, "sm_90")
    k = module.kernel(op.kernel_name())
    loaded = load_kernel(emit_module(module, "sm_90"), k.name, k.params)
    cfg = op.launch(shape)
    launch(loaded, cfg.grid, cfg.block, op.kernel_args(shape, gpu_arrays), cfg.shared_bytes)
    emu_run(op, shape, emu_arrays, "sm_90")
    tol = TOLERANCE.get(name, 0.0)
    for n in op.outputs:
        g, e = gpu_arrays[n], emu_arrays[n]
        assert np.all(np.isfinite(g)) and np.all(np.isfinite(e))
        if tol:
            np.testing.assert_allclose(e, g, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(e, g)
    assert op.check(shape, gpu_arrays)[0]


def test_emulator_matches_gpu_on_numba_ptx():
    """NVVM's PTX of the saxpy twin, run with Numba's array ABI on both."""
    from numba import cuda

    import ptxgen
    from ptxgen.emu import numba_array_args
    from ptxgen.runtime.twins import twin_kernel, twin_ptx
    ptx, entry = twin_ptx("saxpy", "sm_90")
    n = 10_007
    rng = np.random.default_rng()
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    a = np.float32(rng.uniform(-2, 2))
    out_emu = np.full(n, np.nan, np.float32)
    # NVVM declares the int32 parameter .u32
    ptxgen.emulate(ptx, entry, (40,), (256,), np.uint32(n), a, *numba_array_args(x),
                   *numba_array_args(y), *numba_array_args(out_emu))
    dx, dy, do = cuda.to_device(x), cuda.to_device(y), cuda.to_device(np.full(n, np.nan, np.float32))
    twin_kernel("saxpy")[40, 256](n, a, dx, dy, do)
    np.testing.assert_array_equal(out_emu, do.copy_to_host())
