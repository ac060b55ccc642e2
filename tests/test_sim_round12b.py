"""Round sim12b of the simulator (issue 14): the cases beyond +-50 % (docs/data/
model_set_2026-12-01l_fit10ab.json, measured on the H200; every case there is seen data)."""

import pytest

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import simulate
from model_data import measured_case

TABLE = isa.load("sm_90")
MM = TABLE.memory_model


def _case(name):
    return measured_case("model_set_2026-12-01l_fit10ab.json", name)




def test_a_grid_of_short_ctas_lasts_as_long_as_the_gpu_takes_to_start_them():
    """One store a thread, 256-thread CTAs: the H200 takes 0.6 ns a CTA of the grid whatever
    the size (store_lanes k=1: 16 MiB 11.7 us, 512 MiB 317.5 us), which the waves of the SM
    (549 cycles for 8 such CTAs) do not see: 145 us (-54 %) before the dispatch floor."""
    case = _case("store_lanes k=1 16MiB")            # one st.global.u32 a thread
    kernel = parse_ptx(case["ptx"]).kernel(case["entry"])
    ctas = 1 << 17
    rep = simulate(kernel, (ctas,), (256,), args={"n": ctas * 256}, arch="sm_90")
    floor_us = ctas * MM["cta_dispatch_ns"] * 1e-3
    assert rep.device_us == pytest.approx(floor_us + TABLE.kernel_gap_us, rel=0.01)
    assert rep.to_dict()["details"]["bound"]["resource"] == "CTA dispatch"
    # a small grid is bound by its work, not by the dispatch
    small = simulate(kernel, (8,), (256,), args={"n": 8 * 256}, arch="sm_90")
    assert small.to_dict()["details"]["bound"]["resource"] != "CTA dispatch"
    assert small.device_us - TABLE.kernel_gap_us > 4 * 8 * MM["cta_dispatch_ns"] * 1e-3


@pytest.mark.parametrize("name", ["store_lanes k=1 512MiB", "fit10a_store_gen k=1 256MiB"])
def test_store_lanes_one_word_a_thread_is_dispatch_bound(name):
    _, err = _predict(name)
    assert abs(err) < 0.05


def _predict(name):
    case = _case(name)
    import model_eval
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    return rep, (rep.device_us - case["gpu_us"]) / case["gpu_us"]


def test_scattered_atomics_take_an_atomic_unit_operation_per_sector():
    """One atomic a thread on hashed buckets of a 4 KiB table: a warp's 32 lanes touch ~28
    sectors in ~20 lines. Counted per line over 2 KiB slices the atomic units were 2.7x too
    slow (+173 %); per sector over 512-byte slices they land on the H200's 370.5 us. The same
    mechanism prices atomic_minmax's 1000 buckets (held5, +169 % before)."""
    for name in ("fitd_atom add_u32 n=4194304 buckets=1000", "fitd_atom red_f32 n=262144 buckets=1000",
                 "atomic_minmax n=10000019 buckets=1000"):
        rep, err = _predict(name)
        assert abs(err) < 0.12, (name, err)
        assert rep.to_dict()["details"]["bound"]["resource"] == "same-address atomics"


def test_a_block_histogram_flushed_to_global_memory_fits_at_both_sizes():
    """hist_shared ends each of its 1056 CTAs with 256 coalesced atomic adds onto one global
    1 KiB: at a sector per operation that tail costs ~12 us of the two atomic units, so the
    shared atomics of its main loop, whose cost per wavefront had been estimated on this case
    with the old ~6 us tail (5 cycles), cost at most 2 (5 gives +44 / +32 %)."""
    assert MM["shared_atomic_cycles_per_wavefront"] <= 2.0
    for name in ("hist_shared n=4194304", "hist_shared n=16777216"):
        _, err = _predict(name)
        assert abs(err) < 0.12, (name, err)


def test_a_one_wave_grid_lasts_as_long_as_its_longest_data_dependent_loop():
    """triton_masked_mean: CTA (b, ·) loops over length[b] rows, the lengths read from an
    array. The 192 CTAs are one partial wave, so the launch lasts as long as the SM with the
    longest batch; the first SM's CTAs (b = 0, 4) stood for all of them (-58 % on the H200).
    With one long batch among short ones the time is the long batch's."""
    import numpy as np
    case = _case("triton_masked_mean 64x1000x300")
    import model_eval
    kernel = parse_ptx(case["ptx"]).kernel(case["entry"])

    def run(lengths):
        args = model_eval.sim_args(case, kernel.params)
        k = next(i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.size == 64)
        args[k] = np.asarray(lengths, dtype=np.int32)
        return simulate(kernel, case["grid"], case["block"], args=args, registers=case.get(
            "registers"), footprint=64 * 1000 * 300 * 4 * 2).device_us

    one_long = [1] * 64
    one_long[37] = 1000
    long_us, all_long_us, short_us = run(one_long), run([1000] * 64), run([1] * 64)
    assert long_us > 5 * short_us
    assert long_us == pytest.approx(all_long_us, rel=0.35)


def test_a_test_of_an_atomics_old_value_for_equality_is_taken_as_false():
    """fitd_atom's returning u32 atomics store back only `if (old == 0xFFFFFFFF)`, never true
    on the GPU. The walk does not know `old`; as an unknown guard it ran the store, a second
    scattered partial-sector write per thread (2^22 ops on 1000003 buckets: +99 %, where the
    same case with red.f32 and no store was +33 %). Many lanes share an atomic's address and
    at most one sees a given value, so `setp.eq` on it is false and `setp.ne` true."""
    from ptxgen.sim.paths import PathPlan, follow
    from ptxgen.sim.program import compile_kernel
    from ptxgen.sim.values import Env
    case = _case("fitd_atom add_u32 n=4194304 buckets=1000003")
    kernel = parse_ptx(case["ptx"]).kernel(case["entry"])
    prog = compile_kernel(kernel, TABLE)
    plan = PathPlan(prog, Env({"buf": 1 << 32, "n": 1 << 22, "buckets": 1000003}, {}))
    from ptxgen.sim.launch import _lane_specs
    path = follow(plan, _lane_specs(5, (16384, 1, 1), (256, 1, 1), 0, 32, 132, 0, TABLE))
    stores = [i for i, st in enumerate(prog.instrs) if st.instr.opcode == "st"]
    ran = {i for e in path.trace for blk in [prog.blocks[e % len(prog.blocks)]]
           for i in range(blk.start, blk.end)}
    assert stores and not ran.intersection(stores)
    _, err = _predict(case["name"])
    assert abs(err) < 0.1


SPIN = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry spin(.param .u64 lock, .param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  .reg .pred %p<3>;
  ld.param.u64 %rd1, [lock];
  ld.param.u64 %rd2, [out];
SPIN:
  atom.global.cas.b32 %r1, [%rd1], 0, 1;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra SPIN;
  atom.global.add.u32 %r2, [%rd2], 1;
  setp.eq.u32 %p2, %r2, 7;
  @!%p2 bra DONE;
  st.global.u32 [%rd2+4], %r2;
DONE:
  ret;
}
"""


def test_a_compare_and_swap_loop_is_not_taken_for_a_sentinel_test():
    """A spin lock exits when its CAS finds the expected 0: the rule for an atomic's old value
    (different from any constant) would spin it forever, so a CAS keeps the unknown-value rule
    (the loop follows the trip count), while the atom.add's `== 7` test skips its store."""
    from ptxgen.sim.launch import _lane_specs
    from ptxgen.sim.paths import PathPlan, follow
    from ptxgen.sim.program import compile_kernel
    from ptxgen.sim.values import Env
    kernel = parse_ptx(SPIN).kernel("spin")
    prog = compile_kernel(kernel, TABLE)
    plan = PathPlan(prog, Env({"lock": 1 << 32, "out": 1 << 33}, {}))
    path = follow(plan, _lane_specs(0, (1, 1, 1), (32, 1, 1), 0, 32, 132, 0, TABLE),
                  warnings={}, budget=20_000)
    nb = len(prog.blocks)
    ran = [i for e in path.trace for i in range(prog.blocks[e % nb].start, prog.blocks[e % nb].end)]
    cas = next(i for i, st in enumerate(prog.instrs) if "cas" in st.instr.mods)
    store = next(i for i, st in enumerate(prog.instrs) if st.instr.opcode == "st")
    assert ran.count(cas) <= 2 and store not in ran
