"""On a GPU: library kernels run correctly, compare runs both sides, launches are validated."""
import numpy as np
import pytest

from ptxgen.reports.run import run_operator
from ptxgen.errors import LaunchError, PtxgenError
from ptxgen.ops import get_operator

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name,dims", [("saxpy", {"n": 1}), ("saxpy", {"n": 1_000_003}),
                                       ("matmul", {"M": 67, "N": 45, "K": 33}),
                                       ("matmul", {"M": 256, "N": 256, "K": 256}),
                                       ("matmul", {"M": 1, "N": 300, "K": 17})])
def test_library_kernels_correct_on_gpu(name, dims):
    op = get_operator(name)
    res = run_operator(op, op.shape(**dims), "gpu", check=True)
    assert res.backend == "gpu" and res.ok, res


def test_compare_runs_both_kernels():
    from ptxgen.reports.compare import compare
    op = get_operator("matmul")
    c = compare(op, op.shape(M=100, N=70, K=50), "sm_90", gpu=True)
    ours, theirs = c.ours, c.theirs
    assert "PASS" in c.to_text() and c.to_dict()["ours"]["ok"]
    assert ours.ok and theirs.ok and ours.time_ms > 0 and theirs.time_ms > 0


def test_launch_validation_names_kernel_and_parameter():
    from ptxgen import emit_module
    from ptxgen.runtime import launch, load_kernel
    op = get_operator("saxpy")
    m = op.build(op.shape(n=16))
    k = load_kernel(emit_module(m), "saxpy", m.kernel("saxpy").params)
    x = np.zeros(16, np.float32)
    with pytest.raises(PtxgenError, match="saxpy takes 5 arguments"):
        launch(k, 1, 32, [np.uint32(16), x])
    with pytest.raises(PtxgenError, match=r"parameter a is \.f32; pass np\.float32"):
        launch(k, 1, 32, [np.uint32(16), 2.0, x, x, x])
    with pytest.raises(PtxgenError, match="parameter x must be 16-byte aligned"):
        buf = np.zeros(20, np.float32)
        launch(k, 1, 32, [np.uint32(16), np.float32(2), buf[1:17], x, x])
    with pytest.raises(PtxgenError, match="more than 1024 threads"):
        launch(k, 1, 2048, [np.uint32(16), np.float32(2), x, x, x])


FAULT_SCRIPT = """
import numpy as np
from ptxgen import emit_module
from ptxgen.errors import LaunchError
from ptxgen.ops import get_operator
from ptxgen.runtime import load_kernel
from ptxgen.runtime.driver import raw_launch, synchronize
op = get_operator("saxpy")
m = op.build(op.shape(n=16))
k = load_kernel(emit_module(m), "saxpy", m.kernel("saxpy").params)
try:
    # 2^30 elements through null pointers: an illegal address
    raw_launch(k, (64, 1, 1), (256, 1, 1), [np.uint32(1 << 30), np.float32(1), 0, 0, 0], 0)
    synchronize("saxpy")
except LaunchError as e:
    print("REPORTED", e)
"""


def test_gpu_fault_is_reported_with_kernel_name():
    """In a child process: a fault poisons the CUDA context for the rest of that process."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", FAULT_SCRIPT], capture_output=True, text=True,
                       timeout=120)
    # the Python API's hint names a Python call, not the command line's --backend flag
    assert "REPORTED kernel saxpy faulted" in p.stdout and "ptxgen.emulate" in p.stdout \
        and "--backend" not in p.stdout, \
        p.stdout + p.stderr[-2000:]


def test_time_calls_sees_gpu_time_not_launch_latency():
    """A kernel that spins 5 µs: one event pair around one Python launch also measures the
    host's launch latency; held batches give the kernel's own time."""
    from ptxgen.runtime import time_calls
    from ptxgen.runtime.timing import hold
    t = time_calls(lambda: hold(0.005), batch=200, repeat=3)
    assert 0.004 < t < 0.012, t
    t = time_calls(lambda: hold(0.2), batch=10, repeat=3)
    assert 0.19 < t < 0.23, t


def test_bound_launch_checks_once_and_runs():
    from numba import cuda

    from ptxgen import emit_module
    from ptxgen.runtime import bound_launch, load_kernel
    op = get_operator("saxpy")
    shape = op.shape(n=1000)
    m = op.build(shape)
    k = load_kernel(emit_module(m), "saxpy", m.kernel("saxpy").params)
    rng = np.random.default_rng()
    x, y = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    dx, dy, do = cuda.to_device(x), cuda.to_device(y), cuda.to_device(np.full(1000, np.nan,
                                                                              np.float32))
    cfg = op.launch(shape)
    go = bound_launch(k, cfg.grid, cfg.block, [np.uint32(1000), np.float32(2.0), dx, dy, do])
    go()
    cuda.synchronize()
    np.testing.assert_allclose(do.copy_to_host(), 2.0 * x.astype(np.float64) + y, rtol=1e-6)
    with pytest.raises(LaunchError, match="not numpy arrays"):
        bound_launch(k, cfg.grid, cfg.block, [np.uint32(1000), np.float32(2.0), x, dy, do])
