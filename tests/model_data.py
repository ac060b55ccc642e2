"""The measured model sets under docs/data that the simulator's tests read: one loader
(benchmarks/model_eval.load_set, .json or .json.gz), each file parsed once per session."""
import functools
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import model_eval  # noqa: E402

DATA = os.path.join(ROOT, "docs", "data")


@functools.lru_cache(maxsize=None)
def _cases(file):
    return tuple(model_eval.load_set(os.path.join(DATA, file))["cases"])


def measured_cases(file):
    """{case name: case} of docs/data/<file>, the cases copied (a test may change its own)."""
    return {c["name"]: dict(c) for c in _cases(file)}


def measured_case(file, name):
    return measured_cases(file)[name]
