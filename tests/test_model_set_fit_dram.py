"""Round sim10b's fitting cases (benchmarks/model_set_fit_dram.py): every kernel passes ptxas
for sm_90 where ptxas is found and is exact on ptxgen's emulator with the launch the GPU
collect makes, at a small size; a wrong output fails the check; the cases are fitting cases."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def _small():
    import model_set_fit_dram as F
    seen = {}
    for fam, _src, _size, kw in F.cases():
        c = F.small(dict(family=fam, **kw))
        seen.setdefault((fam, kw.get("op"), kw.get("piece"), c.get("buckets")), c)
    return [seen[k] for k in sorted(seen, key=str)]


@pytest.mark.parametrize("case", _small(), ids=str)
def test_fit_dram_kernel_assembles_and_is_exact(case):
    import model_set_fit_dram as F
    from ptxgen.toolchain import assemble, have_tool
    if have_tool("ptxas"):
        assert assemble(F.ptx_kernel(case["family"], case)[0], "sm_90").cubin
    assert F.emulate_ptx(case) == 0.0


def test_fit_dram_checks_catch_a_wrong_word():
    import model_set_fit_dram as F
    from model_set_held3 import HostArrays
    for c in (dict(family="fitd_atom", op="max_u32", n=999, buckets=7),
              dict(family="fitd_rows", piece=256, pitch=512, rows=128)):
        args, _grid, _block, check, _ = F.ptx_case(HostArrays(1), c)
        out = args[0] if c["family"] == "fitd_atom" else args[1]
        if c["family"] == "fitd_atom":
            out[:] = F.atom_ref(c["op"], c["n"], c["buckets"])
        else:
            out[:] = args[0]
        assert check() == 0.0
        out[-1] ^= np.int32(1)
        assert check() > 0.0


def test_fit_dram_cases_are_fitting_cases():
    import model_set
    got = [c for c in model_set.cases() if c["family"].startswith("fitd_")]
    assert len(got) == 45 and {c["split"] for c in got} == {"fit"}
    # rows of whole CTAs; the reference copy (pitch = piece) moves the same bytes
    rows = [c for c in got if c["family"] == "fitd_rows"]
    assert all(c["rows"] % 64 == 0 for c in rows)
    assert len({c["rows"] * c["pitch"] for c in rows}) == 2
