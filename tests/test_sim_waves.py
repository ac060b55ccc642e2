"""The simulator's grid: CTAs sampled over both axes, further waves of unequal CTAs, grids of short
CTAs bound by their dispatch, and one-wave grids as long as their longest data-dependent loop."""
from types import SimpleNamespace

import pytest

from model_data import measured_case, predicted
from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import simulate, waves
from ptxgen.sim.engine import SmResult
from ptxgen.sim.waves import extrapolate, spread_ctas


DATA = "model_set_2026-12-01f_sim7_held8.json.gz"
TABLE = isa.load("sm_90")
MM = TABLE.memory_model


def _sm(cta_finish, issued=100.0):
    end = max(cta_finish)
    return SmResult(cycles=end, issued=issued, unit_busy=[issued], stalls={}, warp_cycles=0.0,
                    events=[], finish=end, cta_finish=list(cta_finish))


def _case(name):
    return measured_case("model_set_2026-12-01l_fit10ab.json", name)


def _predict(name):
    return predicted(_case(name))


def test_cta_sample_spreads_over_both_axes_of_a_2d_grid():
    # 1-D: the middles of equal parts, as before
    assert spread_ctas(1000, 1000, 4) == [125, 375, 625, 875]
    # 47 CTAs per row, 112 rows (Mandelbrot 1000×1500's full waves), 8 CTAs
    ids = spread_ctas(47 * 112, 47, 8)
    cols, rows = [i % 47 for i in ids], [i // 47 for i in ids]
    assert rows == sorted(rows) and len(set(rows)) == 8 and rows[0] > 0 and rows[-1] < 111
    # columns in every eighth of the width (evenly spaced ids gave 1, 3, …, 15 only)
    assert sorted(c * 8 // 47 for c in cols) == list(range(8))
    assert all(0 <= i < 47 * 112 for i in ids)


def test_further_waves_pay_the_mean_ctas_left_out_trips():
    # a wave whose sampled loop left out 8 trips in its slowest CTA but 2 on average: with
    # slots refilled as CTAs end, a further wave adds the mean CTA's trips, not the slowest's
    def sm(cycles, skipped):
        return (SimpleNamespace(cycles=cycles, finish=cycles, busy={}, issued=100,
                                unit_busy=[10.0], stalls={}, warp_cycles=1.0, loads={},
                                bytes={}, events=[]), skipped)
    big, small = sm(1000.0, 8), sm(600.0, 16)          # 50 cycles a trip
    lockstep = waves.extrapolate("full", 4, 8, 132, big, small, again=1900.0)
    refill = waves.extrapolate("full", 4, 8, 132, big, small, again=1900.0, balance=0.25)
    assert lockstep.steady == pytest.approx(900 + 400)
    assert refill.steady == pytest.approx(900 + 100)
    assert refill.cycles == lockstep.cycles == pytest.approx(1400)


def test_a_further_wave_of_unequal_ctas_adds_the_mean_cta_not_a_second_slowest():
    # seven CTAs end at 1000 cycles, one at 5000; a second set of the same CTAs (`again`)
    # places the slow one's copy in the slot that frees last: 10000 cycles
    sm = _sm([1000] * 7 + [5000])
    uneven = extrapolate("full", 10, 8, 132, (sm, 0), None, again=10000, balance=0.3,
                         relaunch=500, cta_skipped=[0] * 8, nsched=4)
    assert uneven.steady == (7 * 1000 + 5000) / 8 + 500
    # CTAs of equal work (balance 1) that end staggered share a saturated resource: `again`
    even = extrapolate("full", 10, 8, 132, (sm, 0), None, again=10000, balance=1.0,
                       relaunch=500, cta_skipped=[0] * 8, nsched=4)
    assert even.steady == 5000
    # the wave's issue slots bound it from below (4 sub-partitions issue 16000 instructions)
    busy = extrapolate("full", 10, 8, 132, (_sm([1000] * 7 + [5000], 16000), 0), None,
                       again=10000, balance=0.3, relaunch=500, cta_skipped=[0] * 8, nsched=4)
    assert busy.steady == 4000
    # given the second set's run, its CTAs stand for the steady state: they start staggered
    # (no first-wave burst of every warp's first load) and here last 600 and 3000 cycles
    rerun = SmResult(cycles=10000, issued=200.0, unit_busy=[200.0], stalls={}, warp_cycles=0.0,
                     events=[], finish=10000, cta_finish=[1000] * 7 + [5000] + [1700] * 7
                     + [10000], cta_start=[0.0] * 8 + [1100.0] * 7 + [7000.0])
    staggered = extrapolate("full", 10, 8, 132, (sm, 0), None, again=rerun, balance=0.3,
                            relaunch=500, cta_skipped=[0] * 8, nsched=4)
    assert staggered.steady == (7 * 600 + 3000) / 8 + 500


def test_a_row_search_with_data_dependent_exits_lands_nearer_its_h200_time():
    """find_first_vote 100000x1200 (held5, SEEN): one warp per row stops at its first value
    above 2.5, so CTAs last from 6 to 15 thousand cycles; the second copy of the slowest CTA
    made every further wave as long as it (+75 %). The rule was written from that cause, not
    fitted to the case; the test guards its wiring (the old rule fails it)."""
    import model_eval
    case = measured_case(DATA, "find_first_vote 100000x1200 thresh=2.5")
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    assert rep.device_us < 1.6 * case["gpu_us"]


def test_a_grid_of_short_ctas_lasts_as_long_as_the_gpu_takes_to_start_them(sm90):
    """One store a thread, 256-thread CTAs: the H200 takes 0.6 ns a CTA of the grid whatever
    the size (store_lanes k=1: 16 MiB 11.7 us, 512 MiB 317.5 us), which the waves of the SM
    (549 cycles for 8 such CTAs) do not see: 145 us (-54 %) before the dispatch floor."""
    case = _case("store_lanes k=1 16MiB")            # one st.global.u32 a thread
    kernel = parse_ptx(case["ptx"]).kernel(case["entry"])
    ctas = 1 << 17
    rep = simulate(kernel, (ctas,), (256,), args={"n": ctas * 256}, arch="sm_90")
    floor_us = ctas * MM["cta_dispatch_ns"] * 1e-3
    assert rep.device_us == pytest.approx(floor_us + sm90.kernel_gap_us, rel=0.01)
    assert rep.to_dict()["details"]["bound"]["resource"] == "CTA dispatch"
    # a small grid is bound by its work, not by the dispatch
    small = simulate(kernel, (8,), (256,), args={"n": 8 * 256}, arch="sm_90")
    assert small.to_dict()["details"]["bound"]["resource"] != "CTA dispatch"
    assert small.device_us - sm90.kernel_gap_us > 4 * 8 * MM["cta_dispatch_ns"] * 1e-3


@pytest.mark.parametrize("name", ["store_lanes k=1 512MiB", "fit10a_store_gen k=1 256MiB"])
def test_store_lanes_one_word_a_thread_is_dispatch_bound(name):
    _, err = _predict(name)
    assert abs(err) < 0.05


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
