"""The emulator's special-function unit (emu/sfu.py) against the GPU's results on random
inputs of every exponent (tests/data/sfu_gpu_sample.npz: 24 000 inputs held out from the table
grids, ex2/lg2/rcp.approx.ftz.f32 on an H100, benchmarks/numerics.py)."""
import numpy as np
import pytest

from ptxgen.emu import sfu
from ptxgen.kernel_object import kernel

DATA = np.load(__import__("pathlib").Path(__file__).parent / "data" / "sfu_gpu_sample.npz")


def same(got, want):
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


@pytest.mark.parametrize("name", ["ex2", "rcp", "lg2"])
def test_the_unit_is_bit_equal_to_the_gpu_on_held_out_inputs(name):
    x = DATA["x"]
    assert same(getattr(sfu, name)(x), DATA[name]).all()


def test_lg2_below_one_half_needs_the_units_extra_bits():
    """e + L(m) rounded toward zero with the table's L alone misses where the sum lands on the
    f32 grid; the unit's L lies above the table's."""
    x = DATA["x"]
    below = (x > 2.0 ** -126) & (x < 0.25)
    m, e = np.frexp(x[below].astype(np.float64))
    k = np.clip((m * 2 * sfu.GRID).astype(np.int64) - sfu.GRID, 0, sfu.GRID - 1)
    naive = sfu._toward_zero((e - 1) + sfu.table("lg2")[k].astype(np.float64))
    assert not same(naive, DATA["lg2"][below]).all()
    assert same(sfu.lg2(x[below]), DATA["lg2"][below]).all()


def test_tables_differ_from_correct_rounding_so_the_check_can_fail():
    x = DATA["x"]
    with np.errstate(over="ignore"):
        rounded = np.exp2(x.astype(np.float64)).astype(np.float32)
    assert not same(rounded, DATA["ex2"]).all()


def test_the_ptx_instructions_use_the_tables():
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry f(.param .u64 px, .param .u64 py)
{
  .reg .b32 %r<2>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<6>;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd1, %r1, 4;
  ld.param.u64 %rd2, [px];
  ld.param.u64 %rd3, [py];
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3;
  add.s64 %rd4, %rd2, %rd1;
  add.s64 %rd5, %rd3, %rd1;
  ld.global.f32 %f1, [%rd4];
  ex2.approx.ftz.f32 %f2, %f1;
  st.global.f32 [%rd5], %f2;
  ret;
}
"""
    x = np.ascontiguousarray(DATA["x"][:256])
    y = np.zeros_like(x)
    kernel(ptx)[1, 256](x, y, backend="emu")
    assert same(y, DATA["ex2"][:256]).all()


@pytest.mark.parametrize("name", ["ex2_pos", "ex2_neg", "rcp", "lg2", "lg2_half"])
def test_a_lookup_of_some_points_equals_the_whole_table_there(name):
    """Results are computed for the points asked for only; numpy's vector loops must give each
    point the value it has in the whole table, for any count and order of points."""
    whole = sfu.table(name)
    rng = np.random.default_rng(7)
    for n in (1, 3, 17, 1000, 65537):
        k = rng.integers(0, sfu.GRID, n)
        assert np.array_equal(sfu.lookup(name, k).view(np.uint32), whole[k].view(np.uint32))
    ends = np.array([sfu.GRID - 1, 0, sfu.GRID // 2])
    assert np.array_equal(sfu.lookup(name, ends).view(np.uint32), whole[ends].view(np.uint32))


def test_the_instructions_never_build_a_whole_table(monkeypatch):
    def whole(name):
        raise AssertionError(f"built the whole {name} table")
    monkeypatch.setattr(sfu, "table", whole)
    x = DATA["x"][:64]
    for name in ("ex2", "rcp", "lg2"):
        assert same(getattr(sfu, name)(x), DATA[name][:64]).all()
