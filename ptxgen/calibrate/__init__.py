"""Microbenchmarks that measure the machine model on the GPU at hand.

    raw = measure("sm_90")                      # runs on the GPU (ptxgen.calibrate.run)
    cal = derive(raw, isa.load("sm_90"))        # model values, CPU only
    print(cal.to_text())
    update_file("isa/sm_90.toml", cal.updates())
"""
from .results import Calibration, Measurement, derive
from .run import Plan, measure
from .tomlfile import update_file, update_text

__all__ = ["Calibration", "Measurement", "derive", "Plan", "measure", "update_file",
           "update_text"]
