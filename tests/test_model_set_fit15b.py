"""Round sim15b's fitting cases (benchmarks/model_set_fit15b.py): every kernel passes ptxas for
sm_90 where ptxas is found, in the SASS form it stands for (ATOMG with a reply, REDG, generic
ATOM with RZ as destination: Numba's cic_deposit), and is exact on ptxgen's emulator with the
launch the GPU collect makes, at a small size; a wrong word fails the check."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

SASS = {"atom": "ATOMG.E.ADD", "red": "REDG.E.ADD", "gen": "ATOM.E.ADD"}


@pytest.mark.parametrize("op", ["atom_u32", "red_u32", "gen_u32", "atom_f32", "red_f32",
                                "gen_f32"])
def test_fit15b_kernel_assembles_to_its_form_and_is_exact(op):
    import model_set_fit15b as F
    from ptxgen.toolchain import assemble, find_tool, have_tool
    case = F.small(dict(family="fit15b_atom", op=op, n=1 << 22, words=1 << 20))
    assert F.emulate_ptx(case) == 0.0
    if not (have_tool("ptxas") and have_tool("nvdisasm")):
        return
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(assemble(F.ptx_kernel("fit15b_atom", case)[0], "sm_90").cubin)
        sass = subprocess.run([find_tool("nvdisasm"), path], capture_output=True,
                              text=True).stdout
    form = op.split("_")[0]
    atomics = [ln for ln in sass.splitlines() if ".ADD" in ln and ("ATOM" in ln or "RED" in ln)]
    assert len(atomics) == 1 and SASS[form] in atomics[0]
    assert (", RZ," in atomics[0]) == (form == "gen")


def test_fit15b_check_catches_a_wrong_word():
    import model_set_fit15b as F
    from model_set_held3 import HostArrays
    c = dict(family="fit15b_atom", op="gen_f32", n=3001, words=1024)
    args, _g, _b, check, _ = F.ptx_case(HostArrays(1), c)
    args[0][:] = F.atom_ref("gen_f32", 3001, 1024)
    assert check() == 0.0
    args[0][7] += np.float32(1.0)
    assert check() > 0.0


def test_fit15b_cases_are_fitting_microbenchmarks():
    import model_eval
    import model_set
    fit = [c for c in model_set.cases() if c["family"].startswith("fit15b_")]
    assert len(fit) == 24 and {c["split"] for c in fit} == {"fit"}
    assert len({c["name"] for c in fit}) == 24
    assert "fit15b_atom" in model_eval.micro_families()
