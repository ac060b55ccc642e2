"""The H200 measurements of the model set that the simulator's tests read:
tests/data/model_set_measured.json.gz holds the cases the tests use, copied whole (PTX, launch,
arguments, GPU times) from the measured sets under docs/data and keyed by the set's file name;
parsed once per session."""
import functools
import gzip
import json
import os

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                    "model_set_measured.json.gz")


@functools.lru_cache(maxsize=None)
def _sets():
    with gzip.open(DATA, "rt") as f:
        return json.load(f)


def measured_cases(file):
    """{case name: case} of the measured set `file` (its name under docs/data), the cases
    copied (a test may change its own)."""
    sets = _sets()
    if file not in sets:
        raise KeyError(f"{file}: not in {DATA} (copy the cases a test needs from docs/data)")
    return {c["name"]: dict(c) for c in sets[file]}


def measured_case(file, name):
    cases = measured_cases(file)
    if name not in cases:
        raise KeyError(f"{name!r}: not among the cases of {file} in {DATA}")
    return cases[name]


def predicted(case):
    """(the simulator's report of a measured case, the relative error of its device time
    against the case's held-batch GPU time)."""
    import model_eval
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    return rep, (rep.device_us - case["gpu_us"]) / case["gpu_us"]
