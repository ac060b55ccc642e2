"""Round sim16: a scattered load's missed sector costs DRAM a read (dram_random_read_sector_bytes,
measured on the fitting case gather_hash 256 MiB in the one-run measurement of the whole set),
not the read-modify-write-back a random store costs (dram_random_sector_bytes)."""
import pytest

from model_data import measured_case, model_eval
from ptxgen import isa

SET = "model_set_2026-12-02h_onerun.json.gz"


def test_a_random_read_costs_less_dram_than_a_random_write():
    mm = isa.load("sm_90").memory_model
    assert 32 < mm["dram_random_read_sector_bytes"] < mm["dram_random_sector_bytes"]


@pytest.mark.parametrize("name, bound", [("gather_hash n=4194304 table=256MiB", 0.10),
                                         ("gather n=16777216", 0.15),      # held-out (seen)
                                         ("scatter n=16777216", 0.10)])    # stores: unchanged
def test_random_gathers_and_scatters_land_near_their_h200_time(name, bound):
    case = measured_case(SET, name)
    pred = model_eval._one(case)
    assert abs(pred["device_us"] / case["gpu_us"] - 1) < bound, (name, pred["device_us"])
