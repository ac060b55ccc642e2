"""Round sim14a's fitting cases (benchmarks/model_set_fit14a.py): every kernel passes ptxas for
sm_90 where ptxas is found and is exact on ptxgen's emulator with the launch the GPU collect
makes, at a small size; a wrong word fails the check; the cases are fitting cases."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def _small():
    """One small case per kernel (the case's parameters but its size)."""
    import model_set_fit14a as F
    kernels = {tuple(sorted((k, v) for k, v in kw.items() if k not in ("n", "lines")))
               + (("family", fam),): F.small(dict(family=fam, **kw))
               for fam, _src, _size, kw in F.cases()}
    return list(kernels.values())


@pytest.mark.parametrize("case", _small(), ids=str)
def test_fit14a_kernel_assembles_and_is_exact(case):
    import model_set_fit14a as F
    from ptxgen.toolchain import assemble, have_tool
    text = F.ptx_kernel(case["family"], case)[0]
    assert not have_tool("ptxas") or assemble(text, "sm_90").cubin
    assert F.emulate_ptx(case) == 0.0


def test_fit14a_checks_catch_a_wrong_word():
    import model_set_fit14a as F
    from model_set_held3 import HostArrays
    c = dict(family="fit14a_store", variant="coal", n=999)
    args, _g, _b, check, _ = F.ptx_case(HostArrays(1), c)
    x, out = args[1], args[2]
    out[:] = F.store_ref(x, 999, "coal", 999).reshape(-1).astype(np.int32)
    assert check() == 0.0
    out[5] ^= np.int32(1)
    assert check() > 0.0
    c = dict(family="fit14a_sector", esize=1, lanes=2, n=1001, lines=256)
    args, _g, _b, check, _ = F.ptx_case(HostArrays(1), c)
    table, out = args[1], args[2]
    out[:] = F.sector_ref(table.view(np.uint8), 1001, 1, 2, 255).astype(np.uint32).view(np.int32)
    assert check() == 0.0
    out[-1] ^= np.int32(4)
    assert check() > 0.0
    c = dict(family="fit14a_pitch", pitch=4099, repeat=3, n=1001)
    args, _g, _b, check, _ = F.ptx_case(HostArrays(1), c)
    table, out = args[1], args[2]
    out[:] = F.pitch_ref(table.view(np.uint8), 1001, 4099, 3).astype(np.int32)
    assert check() == 0.0
    out[0] += 1
    assert check() > 0.0


def test_fit14a_cases_are_fitting_cases_named_apart():
    import model_set
    fit = [c for c in model_set.cases() if c["family"].startswith("fit14a_")]
    assert len(fit) == 60 and {c["split"] for c in fit} == {"fit"}
    assert len({c["name"] for c in fit}) == 60

