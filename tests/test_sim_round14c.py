"""Round sim14c: the engine's event loop with its common case written out
(ptxgen.sim.engine_loop.issue_loop). It must give what the loop of one `Sm.pick` and one
`Sm.step` call per issue (reference_loop) gives, to the last bit, on kernels that exercise
every way an instruction leaves the written-out path, while most issues take it."""
import os
import sys

import pytest

from model_data import measured_case
from ptxgen.sim.engine import Sm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))

SET = "model_set_2026-12-02a_held10.json.gz"
# barriers and shuffles; shared atomics; cp.async and mma.sync (async-copy roles); 64-bit
# division and remainder (ptxas's extra SASS) with local memory; a warp-aggregated atomic
# (match.any); a long-iteration DP row in local memory (16 warps a scheduler on one pipe)
CASES = ("triton_rmsnorm 65536x768", "hist_shared n=4194304",
         "triton_decode_gqa kvheads=64 S=3001", "fft_radix2 n=6291456 half=1",
         "ptx_match_hist n=2000003", "permute_nchw 16x256x64x64")


def count_issues(monkeypatch):
    """A list that collects, per event loop run (the copies of sim/fork.py included), the
    instructions it issued: their sum is what the launch simulated."""
    counts, loop = [], Sm.loop

    def counted(self, now, s0, busy):
        before = self.issued
        r = loop(self, now, s0, busy)
        counts.append(r.issued - before)
        return r

    monkeypatch.setattr(Sm, "loop", counted)
    return counts


def _predict(name, inline, monkeypatch):
    import model_eval
    monkeypatch.setattr(Sm, "inline", inline)
    steps, step = [0], Sm.step

    def counted(self, w, s, now):
        steps[0] += 1
        return step(self, w, s, now)

    monkeypatch.setattr(Sm, "step", counted)
    issues = count_issues(monkeypatch)
    case = measured_case(SET, name)
    rep, _wall = model_eval.predict(case, launch_path=case.get("path", "cuda.core"))
    monkeypatch.undo()
    d = rep.to_dict()
    d.pop("wall_s", None)
    d["details"].pop("simulation_seconds")
    d["events"] = rep.trace_events
    return d, sum(issues), steps[0]


@pytest.mark.parametrize("name", CASES)
def test_written_out_loop_equals_the_reference_loop(name, monkeypatch):
    ref, n_ref, steps_ref = _predict(name, False, monkeypatch)
    new, n_new, steps_new = _predict(name, True, monkeypatch)
    assert n_ref == n_new == steps_ref > 0
    # every figure of the report (cycles, stalls, unit busy, traced warps' events ...)
    assert new == ref
    # ... while the written-out path took the issues it is for (Sm.step only for the rest)
    assert steps_new < n_new


def test_most_issues_of_an_alu_bound_loop_skip_the_call_chain(monkeypatch):
    _d, n, steps = _predict("permute_nchw 16x256x64x64", True, monkeypatch)
    assert steps < 0.5 * n, (steps, n)
