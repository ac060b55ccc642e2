"""The kernel object's GPU fast path (runtime.prepared), with the driver's launch replaced by a
recorder: a signature is checked in full once, later calls still refuse what does not fit."""
import numpy as np
import pytest

import ptxgen
from ptxgen.errors import PtxgenError
from ptxgen.runtime import driver, prepared

from test_kernel_object import axpy_module


class Device:
    """A device array as far as ptxgen can see: __cuda_array_interface__ only."""

    def __init__(self, n, addr=0x7000_0000_0000, dtype="<f4", readonly=False, strides=None):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": dtype, "version": 3,
                                         "data": (addr, readonly), "strides": strides}


@pytest.fixture
def launches(monkeypatch):
    got = []
    monkeypatch.setattr(prepared.PreparedLaunch, "_launch",
                        lambda self, raw, stream: got.append((self.grid, self.block, raw)))
    monkeypatch.setattr(driver, "numba_cuda", lambda: None)
    return got


def _kernel():
    k = ptxgen.kernel(axpy_module(), "axpy")
    k._gpu = driver.GpuKernel("axpy", None, k.params, "", (), k.written)   # "loaded"
    return k


def test_signature_checked_once_then_fast(launches, monkeypatch):
    k = _kernel()
    x, y = Device(100), Device(100, addr=0x7000_0001_0000)
    k[1, 128](np.uint32(100), np.float32(2), x, y)
    calls = []
    monkeypatch.setattr(prepared, "checked_launch", lambda *a: calls.append(a))
    for _ in range(3):
        k[1, 128](np.uint32(100), np.float32(2), x, y)
    assert not calls                                       # no full check after the first
    assert len(launches) == 4
    grid, block, raw = launches[-1]
    assert (grid, block) == ((1, 1, 1), (128, 1, 1))
    assert raw[2:] == [0x7000_0000_0000, 0x7000_0001_0000] and raw[0] == np.uint32(100)


def test_fast_path_still_refuses(launches):
    k = _kernel()
    x, y = Device(100), Device(100)
    k[1, 128](np.int32(100), np.float32(2), x, y)          # int32 for .u32: converted
    assert type(launches[-1][2][0]) is np.uint32
    with pytest.raises(PtxgenError, match=r"np.int32\(-1\) does not fit"):
        k[1, 128](np.int32(-1), np.float32(2), x, y)
    with pytest.raises(PtxgenError, match="parameter y must be 4-byte aligned"):
        k[1, 128](np.uint32(1), np.float32(2), x, Device(100, addr=0x7000_0000_0002))
    with pytest.raises(PtxgenError, match="parameter y is written by the kernel but the array "
                                          "is read-only"):
        k[1, 128](np.uint32(1), np.float32(2), x, Device(100, readonly=True))
    with pytest.raises(PtxgenError, match="parameter x points to f32; got an array of float64"):
        k[1, 128](np.uint32(1), np.float32(2), Device(100, dtype="<f8"), y)
    assert len(launches) == 1


def test_strided_device_arrays_take_the_general_path(launches, monkeypatch):
    k = _kernel()
    general = []
    monkeypatch.setattr(ptxgen.kernel_object.Launcher, "_gpu",
                        lambda self, args, shared, stream: general.append(args))
    monkeypatch.setattr(ptxgen.kernel_object.Kernel, "pick_backend", lambda *a: "gpu")
    k[1, 128](np.uint32(1), np.float32(2), Device(100, strides=(8,)), Device(100))
    assert general and not launches


def test_bound_launch_keeps_its_arrays_alive(monkeypatch):
    """bound_launch keeps bare addresses: the arrays behind them must outlive the caller's
    references, else a dropped torch tensor is reused by the caching allocator while the
    callable still launches on it."""
    import gc
    import weakref
    sent = []
    monkeypatch.setattr(driver, "numba_cuda", lambda: None)
    monkeypatch.setattr(driver, "raw_launch", lambda kernel, grid, block, raw, *a: sent.append(raw))
    k = _kernel()

    def bind():
        x, y = Device(100), Device(100, addr=0x7000_0001_0000)
        go = driver.bound_launch(k._gpu, (1, 1, 1), (128, 1, 1),
                                 [np.uint32(100), np.float32(2), x, y])
        return go, weakref.ref(x), weakref.ref(y)
    go, x, y = bind()
    gc.collect()
    assert x() is not None and y() is not None
    go()
    assert [int(v) for v in sent[0][2:]] == [0x7000_0000_0000, 0x7000_0001_0000]
    del go
    gc.collect()
    assert x() is None and y() is None
