"""Round sim15c's fitting cases (benchmarks/model_set_fit15c.py): every kernel passes ptxas for
sm_90 where ptxas is found and is exact on ptxgen's emulator with the launch the GPU collect
makes, at a small size; a wrong word fails the check; the cases are fitting cases."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def _variants():
    import model_set_fit15c as F
    return F.VARIANTS


@pytest.mark.parametrize("variant", _variants())
def test_fit15c_kernel_assembles_and_is_exact(variant):
    import model_set_fit15c as F
    from ptxgen.toolchain import assemble, have_tool
    case = F.small(dict(family="fit15c_sort", variant=variant, n=1 << 20))
    text = F.ptx_kernel(case["family"], case)[0]
    assert not have_tool("ptxas") or assemble(text, "sm_90").cubin
    assert F.emulate_ptx(case) == 0.0


def test_fit15c_checks_catch_a_wrong_word():
    import model_set_fit15c as F
    from model_set_held3 import HostArrays
    for v in ("net", "net_nold", "thin_early"):
        c = dict(family="fit15c_sort", variant=v, n=999)
        args, _g, _b, check, _ = F.ptx_case(HostArrays(1), c)
        x, out = (None, args[1]) if v == "net_nold" else (args[1], args[2])
        out[:] = F.sort_ref(x, v, 999).reshape(-1)
        assert check() == 0.0
        out[7], out[6] = out[6], out[7]         # two words of one thread swapped
        assert check() > 0.0 or out[7] == out[6]


def test_fit15c_reference_sorts_and_the_network_sorts():
    """The network is a sorting network (checked on all 0/1 inputs: the zero-one principle)."""
    import model_set_fit15c as F
    for bits in range(256):
        v = [(bits >> j) & 1 for j in range(8)]
        for a, c in F.NETWORK:
            v[a], v[c] = min(v[a], v[c]), max(v[a], v[c])
        assert v == sorted(v), bits
    x = np.random.default_rng(2).standard_normal(80).astype(np.float32)
    got = F.sort_ref(x, "net", 10)
    assert (np.diff(got, axis=1) >= 0).all() and sorted(got[3]) == sorted(x[24:32])


def test_fit15c_cases_are_fitting_cases_named_apart():
    import model_set
    fit = [c for c in model_set.cases() if c["family"].startswith("fit15c_")]
    assert len(fit) == 18 and {c["split"] for c in fit} == {"fit"}
    assert len({c["name"] for c in fit}) == 18
