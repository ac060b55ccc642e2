"""Measured defaults as data: the choices the operators make when the tune cache has no entry
for a shape (the tensor-core GEMM's schedule by waves and its odd-K packing, attention's
schedule per head dim, the SGEMM's tile pool), read from the shipped schedule/data/defaults.json.
Each entry holds the value the code uses, one line of why, and its source: the docs section
with the measurement, the command that reproduces it and its data file. A new measurement
changes that file and that section, not code."""
import copy
import functools
import json
from pathlib import Path

from ..errors import PtxgenError

PATH = Path(__file__).resolve().parent / "data" / "defaults.json"


@functools.lru_cache(maxsize=1)
def entries():
    """{name: {"value", "why", "source"}} of the shipped file."""
    with open(PATH, encoding="utf-8") as f:
        return json.load(f)["entries"]


def choice(name):
    """The value of measured default `name` ("tc_matmul.k_pack", ...), a copy."""
    try:
        return copy.deepcopy(entries()[name]["value"])
    except KeyError:
        raise PtxgenError(f"no measured default {name!r} in {PATH}") from None
