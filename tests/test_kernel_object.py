"""Kernel objects (ptxgen.kernel) on the emulator; argument checks shared with emulate()
(issue 16, problems 3 and 4). GPU counterparts are in test_kernel_gpu.py."""
from pathlib import Path

import numpy as np
import pytest

import ptxgen
from ptxgen.errors import PtxgenError
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T

DATA = Path(__file__).parent / "data" / "ptx"


def axpy_module():
    """y[i] = a * x[i] + y[i] for i < n."""
    m = Module(target="sm_90")
    k = m.add_kernel("axpy", [Param("n", T.u32), Param("a", T.f32),
                              Param("x", T.u64, ptr(T.f32)), Param("y", T.u64, ptr(T.f32))])
    b = Builder(k)
    n, a, x, y = (b.param(p) for p in ("n", "a", "x", "y"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        xi = b.ld("global", T.f32, b.element_addr(x, i, 4))
        ya = b.element_addr(y, i, 4)
        b.st("global", ya, b.fma(a, xi, b.ld("global", T.f32, ya)))
    b.ret()
    return m


def _data(n, rng):
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def test_kernel_object_runs_on_the_emulator():
    rng = np.random.default_rng()
    n = 1000 + int(rng.integers(1, 100))              # not a multiple of the block
    x, y = _data(n, rng)
    want = 1.5 * x.astype(np.float64) + y.astype(np.float64)
    k = ptxgen.kernel(axpy_module(), "axpy")
    res = k[(n + 127) // 128, 128](np.uint32(n), np.float32(1.5), x, y, backend="emu")
    assert res.kernel == "axpy" and res.ctas == (n + 127) // 128
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    assert "axpy(n: u32, a: f32, x: f32*, y: f32*)" in repr(k)


def test_launcher_is_reused_and_shape_errors_are_one_line():
    k = ptxgen.kernel(axpy_module())               # the only entry
    assert k[4, 128] is k[4, 128]
    for bad in (lambda: k[4], lambda: k[4, 2048], lambda: k(1, 2),
                lambda: k[1, 32](np.uint32(1), np.float32(1), np.ones(32, np.float32),
                                 np.ones(32, np.float32), backend="cuda")):
        with pytest.raises(PtxgenError) as e:
            bad()
        assert "\n" not in str(e.value) and "axpy" in str(e.value)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16])
@pytest.mark.parametrize("path", ["kernel", "emulate"])
def test_wrong_element_type_is_refused(dtype, path):
    x = np.ones(64, dtype)
    y = np.zeros(64, np.float32)
    args = (np.uint32(64), np.float32(2), x, y)
    with pytest.raises(PtxgenError, match=rf"parameter x points to f32; got an array of "
                                          rf"{np.dtype(dtype)}") as e:
        if path == "kernel":
            ptxgen.kernel(axpy_module(), "axpy")[1, 64](*args, backend="emu")
        else:
            ptxgen.emulate(axpy_module(), "axpy", 1, 64, *args)
    assert "\n" not in str(e.value)
    assert not y.any()


def test_read_only_output_refused_read_only_input_accepted():
    k = ptxgen.kernel(axpy_module(), "axpy")
    x, y = np.ones(64, np.float32), np.ones(64, np.float32)
    x.flags.writeable = False                      # only read: fine
    k[1, 64](np.uint32(64), np.float32(2), x, y, backend="emu")
    np.testing.assert_array_equal(y, 3.0)
    y.flags.writeable = False
    with pytest.raises(PtxgenError, match="parameter y is written by the kernel but the array "
                                          "is read-only"):
        k[1, 64](np.uint32(64), np.float32(2), x, y, backend="emu")
    with pytest.raises(PtxgenError, match="parameter y is written"):
        ptxgen.emulate(axpy_module(), "axpy", 1, 64, np.uint32(64), np.float32(2), x, y)


def test_written_params_follow_the_addresses():
    from ptxgen.launch_shape import written_params
    assert written_params(axpy_module().kernel("axpy")) == {"y"}
    numba = ptxgen.parse_ptx((DATA / "numba_saxpy_sm90.ptx").read_text())
    names = [p.name for p in numba.entries[0].params]
    written = written_params(numba.entries[0])
    # saxpy(a, x, y, out): each array is 7 fields, the 5th its data pointer; the store's
    # address derives from out's data, shape and stride, never from x's or y's data
    data = {arr: names[1 + 7 * j + 4] for j, arr in enumerate(("x", "y", "out"))}
    assert data["out"] in written
    assert data["x"] not in written and data["y"] not in written
    # cp.async reads its source: copying x into shared memory does not write x
    m = Module(target="sm_90")
    k = m.add_kernel("stage", [Param("x", T.u64, ptr(T.f32)), Param("y", T.u64, ptr(T.f32))])
    b = Builder(k)
    x, y = b.param("x"), b.param("y")
    tile = b.address_of(b.shared("tile", T.f32, 4))
    b.cp_async(tile, x, 16)
    b.cp_async_commit()
    b.cp_async_wait()
    b.st("global", y, b.ld("shared", T.f32, tile))
    b.ret()
    assert written_params(k) == {"y"}


def test_signed_scalar_accepted_where_it_fits():
    k = ptxgen.kernel(axpy_module(), "axpy")
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    k[1, 64](np.int32(10), np.float32(1), x, y, backend="emu")       # Numba's int32 for .u32
    assert y[:10].sum() == 10 and not y[10:].any()
    k[1, 64](np.int64(20), np.float32(1), x, y, backend="emu")
    assert y[:10].sum() == 20 and y[10:20].sum() == 10
    with pytest.raises(PtxgenError, match=r"parameter n is \.u32; .*-1.* does not fit"):
        k[1, 64](np.int32(-1), np.float32(1), x, y, backend="emu")
    with pytest.raises(PtxgenError, match=r"parameter n is \.u32; pass np\.uint32"):
        k[1, 64](10, np.float32(1), x, y, backend="emu")         # a Python int: say which type


NUMBA_SAXPY = (DATA / "numba_saxpy_sm90.ptx").read_text()


def test_numba_entry_by_short_name():
    from ptxgen.emu import numba_array_args
    rng = np.random.default_rng()
    n = 300 + int(rng.integers(1, 50))
    x, y = _data(n, rng)
    out = np.zeros(n, np.float32)
    k = ptxgen.kernel(NUMBA_SAXPY, "saxpy")
    assert k.name.startswith("_ZN8__main__5saxpyB") and k.short_name == "saxpy"
    args = [np.float32(2.0)]
    for arr in (x, y, out):
        args += numba_array_args(arr)
    k[(n + 63) // 64, 64](*args, backend="emu")
    np.testing.assert_allclose(out, 2.0 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)
    # emulate() and Module.kernel resolve the same way
    out[:] = 0
    ptxgen.emulate(NUMBA_SAXPY, "saxpy", (n + 63) // 64, 64, *args)
    assert out.any()


def test_unique_substring_and_ambiguity():
    m = Module()
    for name in ("softmax_fwd", "softmax_bwd"):
        Builder(m.add_kernel(name)).ret()
    assert ptxgen.kernel(m, "fwd").name == "softmax_fwd"
    with pytest.raises(PtxgenError, match="kernel name 'softmax' is ambiguous in module; "
                                          "candidates: softmax_bwd, softmax_fwd"):
        ptxgen.kernel(m, "softmax")
    with pytest.raises(PtxgenError, match="no kernel named 'hist'"):
        ptxgen.kernel(m, "hist")


def test_cli_kernel_option_takes_the_short_name(tmp_path, capsys):
    from ptxgen.cli import main
    assert main(["analyze", str(DATA / "numba_saxpy_sm90.ptx"), "--kernel", "saxpy"]) == 0
    out = capsys.readouterr().out
    header = next(l for l in out.splitlines() if l.startswith("== "))
    assert header.startswith("== entry saxpy (line") and "_ZN" not in header
    assert main(["banks", str(DATA / "numba_matmul_shared_sm90.ptx"), "--kernel",
                 "matmul_shared"]) == 0
    assert capsys.readouterr().out.startswith("matmul_shared: block ")


def test_short_names():
    from ptxgen.names import display_name, short_name
    assert short_name("_ZN8__main__4histB2v1B92cw51cXTLSUwv1sDUaKthqaNgoKmjgOR3") == "hist"
    assert short_name("_ZN6cuda_c5inner3fooEv") == "foo"
    assert short_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"
    assert len(display_name("k" * 200)) == 48


def test_occupancy_at_top_level():
    r = ptxgen.occupancy(256, 32, 0, arch="sm_90")
    assert r.active_blocks_per_sm == 8 and r.occupancy == 1.0


def test_gpu_backend_without_gpu_is_one_line():
    from ptxgen.runtime import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present")
    k = ptxgen.kernel(axpy_module(), "axpy")
    with pytest.raises(PtxgenError, match="no CUDA GPU") as e:
        k[1, 64](np.uint32(1), np.float32(1), np.ones(64, np.float32),
                 np.ones(64, np.float32), backend="gpu")
    assert "\n" not in str(e.value)


def test_simulate_header_and_png_title_use_the_short_name(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.figure
    titles = []
    real = matplotlib.figure.Figure.suptitle
    monkeypatch.setattr(matplotlib.figure.Figure, "suptitle",
                        lambda self, t, **kw: titles.append(t) or real(self, t, **kw))
    from ptxgen.cli import main
    png = tmp_path / "t.png"
    assert main(["simulate", str(DATA / "numba_saxpy_sm90.ptx"), "--kernel", "saxpy",
                 "--grid", "2", "--block", "64", "--png", str(png)]) == 0
    assert capsys.readouterr().out.startswith("saxpy on sm_90")
    assert png.stat().st_size > 0 and titles and titles[0].startswith("saxpy: first")
