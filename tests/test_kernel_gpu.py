"""On a GPU: kernel objects with numpy, Numba and torch arguments, torch's current stream, CUDA
graph capture, the custom op under torch.compile (issue 16). CPU counterparts:
test_kernel_object.py and test_torch_op.py."""
from pathlib import Path

import numpy as np
import pytest

import ptxgen
from ptxgen.errors import PtxgenError

from test_kernel_object import _data, axpy_module

pytestmark = pytest.mark.gpu
DATA = Path(__file__).parent / "data" / "ptx"


def _want(a, x, y):
    return a * np.asarray(x, np.float64) + np.asarray(y, np.float64)


def _cfg(n, threads=128):
    return (n + threads - 1) // threads, threads


def test_numpy_arrays_on_the_gpu():
    n = 100_003
    x, y = _data(n, np.random.default_rng())
    want = _want(1.25, x, y)
    k = ptxgen.kernel(axpy_module(), "axpy")
    assert k[_cfg(n)](np.int32(n), np.float32(1.25), x, y, backend="gpu") is None
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    y64 = np.zeros(n, np.float64)
    with pytest.raises(PtxgenError, match="parameter y points to f32; got an array of float64"):
        k[_cfg(n)](np.uint32(n), np.float32(1), x, y64, backend="gpu")
    y.flags.writeable = False
    with pytest.raises(PtxgenError, match="parameter y is written by the kernel"):
        k[_cfg(n)](np.uint32(n), np.float32(1), x, y, backend="gpu")


def test_numba_device_arrays_and_auto_backend():
    from numba import cuda
    n = 4097
    x, y = _data(n, np.random.default_rng())
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    k = ptxgen.kernel(axpy_module(), "axpy")
    k[_cfg(n)](np.uint32(n), np.float32(-2), dx, dy)               # auto: on the GPU
    cuda.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), _want(-2, x, y), rtol=1e-6, atol=1e-6)
    for _ in range(3):                         # the prepared fast path, np.int32 converted
        k[_cfg(n)](np.int32(n), np.float32(1), dx, dy)
    cuda.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), _want(-2, x, y) + 3 * x, rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(PtxgenError, match="parameter x is on the GPU"):
        k[_cfg(n)](np.uint32(n), np.float32(1), dx, dy, backend="emu")


def test_numba_ptx_by_short_name_on_the_gpu():
    from ptxgen.emu import numba_array_args
    n = 1000
    x, y = _data(n, np.random.default_rng())
    out = np.zeros(n, np.float32)
    k = ptxgen.kernel((DATA / "numba_saxpy_sm90.ptx").read_text(), "saxpy")
    args = [np.float32(3)] + numba_array_args(x) + numba_array_args(y) + numba_array_args(out)
    k[_cfg(n)](*args, backend="gpu")
    np.testing.assert_allclose(out, _want(3, x, y), rtol=1e-6, atol=1e-6)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_torch_cuda_tensors_in_place_on_the_current_stream(torch):
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    yv = torch.randn(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    want = _want(0.5, x.cpu().numpy(), yv.cpu().numpy())
    ptr = y.data_ptr()
    k = ptxgen.kernel(axpy_module(), "axpy")
    k[_cfg(n)](np.uint32(n), np.float32(0), x, y)               # loaded outside the test
    torch.cuda.synchronize()
    s = torch.cuda.Stream()        # torch's pool streams do not wait for the default stream
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)     # ~25 ms: a launch on another stream would run first
        y.copy_(yv)
        k[_cfg(n)](np.uint32(n), np.float32(0.5), x, y)
    s.synchronize()
    assert y.data_ptr() == ptr
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(PtxgenError, match="parameter x points to f32; got an array of float16"):
        k[_cfg(n)](np.uint32(n), np.float32(1), x.half(), y)


def _axpy_op(torch, name):
    def launch(a, x, y, out):
        out.copy_(y)
        n = x.numel()
        return (n + 127) // 128, 128, (np.uint32(n), np.float32(a), x, out)
    return ptxgen.torch_op(name, ptxgen.kernel(axpy_module(), "axpy"),
                           schema="(float a, Tensor x, Tensor y) -> Tensor",
                           outputs=lambda a, x, y: torch.empty_like(y), launch=launch)


def test_cuda_graph_capture(torch):
    n = 10_000
    k = ptxgen.kernel(axpy_module(), "axpy")
    x = torch.randn(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    k[_cfg(n)](np.uint32(n), np.float32(2), x, y)                # loaded before capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        k[_cfg(n)](np.uint32(n), np.float32(2), x, y)
    y.zero_()
    x.copy_(torch.arange(n, device="cuda", dtype=torch.float32))
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), 4 * np.arange(n), rtol=1e-6)


def test_custom_op_compiled_and_graphed(torch):
    op = _axpy_op(torch, "ptxgen_gpu_test::axpy")
    n = 5000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    want = _want(2.0, x.cpu().numpy(), y.cpu().numpy())
    np.testing.assert_allclose(op(2.0, x, y).cpu().numpy(), want, rtol=1e-6, atol=1e-6)
    f = torch.compile(lambda x, y: op(2.0, x, y) + 1.0, fullgraph=True)
    np.testing.assert_allclose(f(x, y).cpu().numpy(), want + 1, rtol=1e-6, atol=1e-6)
    g = torch.cuda.CUDAGraph()
    op(2.0, x, y)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        out = op(2.0, x, y)
    x.fill_(1.0)
    y.fill_(1.0)
    g.replay()
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), 3.0)
