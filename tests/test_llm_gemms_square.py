"""The small-square candidates of `benchmarks/llm_gemms.py --parts square` on the CPU: each
valid, ptxas-clean without spills at 1024^3, and on the emulator within the float64 bound at an
odd shape with the same schedule (C poisoned with NaN, persistent CTAs walking several tiles)."""
import numpy as np
import pytest

import llm_gemms
from ptxgen.emu import emulate
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.schedule.tc_matmul import TcMatmulSchedule
from ptxgen.tune.tc_space import assemble

ARCH = "sm_90a"
NAMES = sorted(llm_gemms.SQUARE)


def _op(name):
    return TcMatmul("bf16", "bf16", TcMatmulSchedule(**llm_gemms.SQUARE[name]).validate(ARCH))


def test_every_default_run_names_a_candidate():
    assert llm_gemms.square_runs(",".join(f"{n}:{v}" for n, v in llm_gemms.SQUARE_RUNS)) == \
        llm_gemms.SQUARE_RUNS


@pytest.mark.parametrize("name", NAMES)
def test_candidate_matches_float64_on_the_emulator(name):
    op = _op(name)
    shape = op.shape(M=200, N=328, K=200)       # edge tiles in M and N, a partial last k step
    arrays = op.make_inputs(shape, np.random.default_rng(7))
    assert np.isnan(op.values(arrays["C"], op.out)).all()
    arrays.update(op.workspace_arrays(shape, ARCH))
    m = op.build(shape, ARCH)
    for step in op.steps(shape, ARCH, 4):       # 4 SMs: CTAs walk several tiles through the ring
        L = step.launch
        emulate(m, step.kernel, L.grid, L.block, *step.args(arrays), shared_bytes=L.shared_bytes)
    a, b = op.matrices(arrays)
    got = op.values(arrays["C"], op.out)
    assert np.isfinite(got).all()
    assert (np.abs(got - a @ b) <= op.error_bound(shape, np.abs(a) @ np.abs(b))).all()


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("name", NAMES)
def test_candidate_assembles_without_spills(name):
    r = assemble(_op(name).schedule.to_dict(), ARCH, dict(M=1024, N=1024, K=1024), "bf16", "bf16")
    assert r.get("spills") == 0 and r.get("stack") == 0, r
