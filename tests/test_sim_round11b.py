"""Round sim11b of the simulator (issue 14): the held9 misses (docs/data/
model_set_2026-12-01l_fit10ab.json, measured on the H200; held9 is seen data since its blind
evaluation, docs/data/model_eval_2026-12-01l_held9_blind.json)."""
from model_data import measured_case



def _case(name):
    return measured_case("model_set_2026-12-01l_fit10ab.json", name)


def test_the_pilot_follows_bit_reversed_addresses():
    """brev.b32 of 0b1011 over 32 bits, and of every 12-bit index (the store address of
    bitrev_rows), as the PTX ISA defines it (bit i of the result is bit 31 - i)."""
    from ptxgen.ir import types as T
    from ptxgen.ir.semantics import evaluation
    f = evaluation("brev", (), T.b32)
    assert f(0b1011) == 0b1101 << 28
    assert f(1) == 1 << 31 and f(0xFFFFFFFF) == 0xFFFFFFFF
    assert [f(j) >> 20 for j in range(8)] == [0, 2048, 1024, 3072, 512, 2560, 1536, 3584]
    assert evaluation("brev", (), T.b64)(1) == 1 << 63


def test_bit_reversed_stores_are_priced_as_the_scattered_thin_writes_they_are():
    """bitrev_rows writes each row's words at bit-reversed places: a warp's 32 lanes 512 bytes
    apart, 4 bytes in each of 32 sectors. The H200 took 171.3 us (3001x4096); when the pilot
    could not follow brev, the store had no addresses, was priced as a coalesced one, and the
    prediction was 43.8 us (-74 %)."""
    case = _case("bitrev_rows 3001x4096")
    import model_eval
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    assert abs(rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.15


def test_a_sweep_reading_back_what_an_earlier_sweep_wrote_beyond_l2_comes_from_dram():
    """tridiag_thomas 160x200003 (768 MB): the forward sweep writes its intermediates, the
    backward sweep reads them back after every resident CTA has streamed its part of all six
    arrays, far more than L2 keeps. The loads of the second sweep were taken for L2 hits (data
    the launch wrote), 37 % of the loads from DRAM and 198 us where the H200 took 433 us; the
    pass from stores to later loads makes them DRAM reads again."""
    case = _case("tridiag_thomas 160x200003")
    import model_eval
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    mm = rep.to_dict()["details"]["memory_model"]
    assert mm["dram_fraction"] > 0.9
    assert -0.4 < (rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.1

