"""The realigning pad copy (ops/pack.py over lower/pad_rows.py): bit-exact against numpy at
every row misalignment, zero-filled pads, the last row's partial block read element-wise
(memcheck on), both engines; on a GPU the same against numpy."""
import numpy as np
import pytest

from ptxgen.ir import Module
from ptxgen.ir import types as T
from ptxgen.ops import pack

# (rows, cols, out_rows): every cols % 8 (16-bit) and % 4 (f32), one- and many-chunk rows,
# out_rows > rows (the f32 matmul pads B's rows too), a partial last 16-byte block
SHAPES = [(5, 41, 5), (3, 8, 3), (17, 1, 17), (9, 13, 12), (33, 100, 33), (7, 3, 9),
          (70, 1029, 70), (2, 300, 2), (11, 6, 11), (4, 7, 4), (6, 90, 6), (3, 4093, 3)]


def _run(elem, rows, cols, out_rows, rng, engine="interp"):
    from ptxgen.emu import emulate
    per = 16 // elem.nbytes
    m = pack.add_pad_copy(Module(target="sm_90a"), elem)
    oc = pack.padded(cols, per)
    if elem.bits == 16:
        src = rng.integers(1, 2 ** 16, size=(rows, cols), dtype=np.uint16)
        dst = np.full((out_rows, oc), 0xFFFF, np.uint16)
    else:
        src = rng.standard_normal((rows, cols)).astype(np.float32)
        dst = np.full((out_rows, oc), np.nan, np.float32)
    L = pack.pad_launch(out_rows, oc, per)
    name = pack.KERNEL16 if elem.bits == 16 else pack.KERNEL
    emulate(m, name, L.grid, L.block, *pack.pad_args(rows, cols, out_rows, oc, src, dst, per),
            check="error" if engine == "interp" else "off", engine=engine)
    want = np.zeros_like(dst)
    want[:rows, :cols] = src
    return dst, want


@pytest.mark.parametrize("elem", [T.b16, T.f32], ids=["b16", "f32"])
@pytest.mark.parametrize("rows, cols, out_rows", SHAPES)
def test_pad_copy_bit_exact_and_memcheck_clean(elem, rows, cols, out_rows):
    dst, want = _run(elem, rows, cols, out_rows, np.random.default_rng())
    assert np.array_equal(dst.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("elem", [T.b16, T.f32], ids=["b16", "f32"])
def test_pad_copy_native_engine_agrees(elem):
    for rows, cols, out_rows in SHAPES[:6]:
        dst, want = _run(elem, rows, cols, out_rows, np.random.default_rng(), engine="native")
        assert np.array_equal(dst.view(np.uint8), want.view(np.uint8)), (rows, cols)


def test_pad_launch_is_2d_and_capped():
    L = pack.pad_launch(4096, 4096, 8)              # 512 chunks a row: 2 x 256 threads
    assert L.block == (256, 1, 1) and L.grid == (2, 4096, 1)
    L = pack.pad_launch(10, 8, 8)                   # one chunk a row: 256 rows a block
    assert L.block == (1, 256, 1) and L.grid == (1, 1, 1)
    from ptxgen import isa
    cap = isa.launch_limits()["max_grid_dim"][1]
    assert pack.pad_launch(cap * 512, 8, 8).grid[1] == cap    # the rest by the row loop


def test_pad_copy_rows_past_the_grid_limit_loop():
    """A grid smaller than the rows (as past the y limit): the row loop covers the rest."""
    from ptxgen.emu import emulate
    rows, cols = 40, 13
    m = pack.add_pad_copy(Module(target="sm_90a"), T.b16)
    src = np.random.default_rng().integers(1, 2 ** 16, size=(rows, cols), dtype=np.uint16)
    dst = np.full((rows, 16), 0xFFFF, np.uint16)
    emulate(m, pack.KERNEL16, (1, 3, 1), (2, 4, 1), *pack.pad_args(rows, cols, rows, 16, src,
                                                                  dst, 8), check="error")
    assert np.array_equal(dst[:, :cols], src) and not dst[:, cols:].any()


@pytest.mark.gpu
@pytest.mark.parametrize("elem", [T.b16, T.f32], ids=["b16", "f32"])
def test_gpu_pad_copy_bit_exact(elem):
    from ptxgen.emit import emit_module
    from ptxgen.runtime import launch, load_kernel
    per = 16 // elem.nbytes
    m = pack.add_pad_copy(Module(target="sm_90a"), elem)
    kir = m.kernels[0]
    kern = load_kernel(emit_module(m, "sm_90a"), kir.name, kir.params, kir.directives)
    rng = np.random.default_rng()
    for rows, cols, out_rows in SHAPES + [(1000, 4093, 1000)]:
        oc = pack.padded(cols, per)
        src = (rng.integers(1, 2 ** 16, size=(rows, cols), dtype=np.uint16) if elem.bits == 16
               else rng.standard_normal((rows, cols)).astype(np.float32))
        dst = np.full((out_rows, oc), 0xFF, src.dtype)
        L = pack.pad_launch(out_rows, oc, per)
        launch(kern, L.grid, L.block, pack.pad_args(rows, cols, out_rows, oc, src, dst, per))
        want = np.zeros((out_rows, oc), src.dtype)
        want[:rows, :cols] = src
        assert np.array_equal(dst.view(np.uint8), want.view(np.uint8)), (rows, cols)
