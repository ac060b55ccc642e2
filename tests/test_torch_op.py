"""PyTorch on the CPU: tensors through kernel objects (the emulator, in place), a ptxgen kernel
as a torch custom op that torch.compile calls (issue 16, PyTorch). GPU: test_kernel_gpu.py."""
import subprocess
import sys

import numpy as np
import pytest

import ptxgen
from ptxgen.errors import PtxgenError

torch = pytest.importorskip("torch")

from test_kernel_object import axpy_module  # noqa: E402


def _axpy_launch(a, x, y, out):
    out.copy_(y)                  # the kernel updates its last argument in place
    n = x.numel()
    return (n + 127) // 128, 128, (np.uint32(n), np.float32(a), x, out)


@pytest.fixture(scope="module")
def axpy_op():
    k = ptxgen.kernel(axpy_module(), "axpy")
    return ptxgen.torch_op("ptxgen_test::axpy", k,
                           schema="(float a, Tensor x, Tensor y) -> Tensor",
                           outputs=lambda a, x, y: torch.empty_like(y), launch=_axpy_launch)


def test_cpu_tensors_run_in_place_on_the_emulator():
    k = ptxgen.kernel(axpy_module(), "axpy")
    n = 777
    x, y = torch.randn(n), torch.randn(n)
    want = 0.5 * x.double() + y.double()
    ptr = y.data_ptr()
    res = k[(n + 63) // 64, 64](np.uint32(n), np.float32(0.5), x, y)     # auto → emulator
    assert res is not None and res.ctas == (n + 63) // 64
    assert y.data_ptr() == ptr
    torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)


def test_tensor_argument_checks():
    k = ptxgen.kernel(axpy_module(), "axpy")
    x, y = torch.randn(64), torch.randn(64)
    with pytest.raises(PtxgenError, match="parameter x points to f32; got an array of float64"):
        k[1, 64](np.uint32(64), np.float32(1), x.double(), y)
    with pytest.raises(PtxgenError, match="parameter y: the tensor is not contiguous"):
        k[1, 64](np.uint32(32), np.float32(1), x, torch.randn(64, 2)[:, 0])


def test_custom_op_eager_and_compiled(axpy_op):
    n = 1000 + int(np.random.default_rng().integers(1, 24))
    x, y = torch.randn(n), torch.randn(n)
    out = axpy_op(2.0, x, y)
    torch.testing.assert_close(out.double(), 2 * x.double() + y.double(), rtol=1e-6,
                               atol=1e-6)
    assert torch.ops.ptxgen_test.axpy(2.0, x, y).shape == (n,)
    def f(x, y):
        return axpy_op(3.0, x, y) * 2

    # aot_eager: dynamo and AOT autograd trace through the op's fake implementation and
    # call the real one, without inductor's C++ compile (the GPU test uses inductor)
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, y).double(), 2 * (3 * x.double() + y.double()),
                               rtol=1e-6, atol=1e-6)


def test_custom_op_passes_opcheck(axpy_op):
    x, y = torch.randn(300), torch.randn(300)
    torch.library.opcheck(axpy_op, (1.5, x, y),
                          test_utils=("test_schema", "test_faketensor"))


def test_torch_is_not_imported_unless_used():
    code = ("import sys, numpy as np, ptxgen\n"
            "sys.path.insert(0, 'tests')\n"
            "from test_kernel_object import axpy_module\n"
            "k = ptxgen.kernel(axpy_module(), 'axpy')\n"
            "k[1, 32](np.uint32(8), np.float32(1), np.ones(32, np.float32),"
            " np.ones(32, np.float32), backend='emu')\n"
            "print('torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=__file__.rsplit("/tests/", 1)[0])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
