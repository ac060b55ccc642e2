"""The model set's fitting microbenchmarks (benchmarks/model_micro.py): every kernel passes
ptxas for sm_90 where ptxas is found and is right on ptxgen's emulator with the launch the GPU
collect makes, at a small size (stores and integer results exact, sums to float32 rounding); a
wrong word fails a check; the cases are fitting cases, named apart, and reported apart from
the kernels."""
import os
import subprocess
import tempfile

import numpy as np
import pytest

import model_micro as F
from model_common import FAMILIES, HostArrays, emulate_ptx


def small(c):
    """Case c at its family's small size (its other parameters kept)."""
    return FAMILIES[c["family"]].small_case(c)


def cases_of(prefix):
    """(family, source, size label, parameters) of the microbenchmark families named so."""
    return [(f.name, f.source, label, dict(kw)) for f in FAMILIES.values()
            if f.name.startswith(prefix) for label, kw in f.sizes]


def _fit10a_small():
    seen = {}
    for fam, _src, size, kw in cases_of('fit10a_'):
        seen.setdefault((fam, kw.get("k"), kw.get("lanes")), small(dict(family=fam, **kw)))
    return list(seen.values())


@pytest.mark.parametrize("case", _fit10a_small(),
                         ids=lambda c: f"{c['family']}-{c.get('k', c.get('lanes'))}")
def test_fit10a_kernel_assembles_and_is_right(case):
    """The store_lines kernels (thin stores after a load, generic stores, loads over many
    lines) pass ptxas for sm_90 where it is found and are right on the emulator with the
    collect's launch at a small size (stores exact; sums to float32 rounding)."""
    from ptxgen.toolchain import assemble, have_tool
    text, entry = FAMILIES[case["family"]].kernel(case)
    assert entry in text
    if have_tool("ptxas"):
        assert assemble(text, "sm_90").cubin
    assert emulate_ptx(case) <= FAMILIES[case["family"]].limit


def test_fit10a_cases_are_fitting_cases_named_apart():
    import model_set
    fit = [c for c in model_set.cases() if c["family"].startswith("fit10a_")]
    assert len(fit) == 34 and {c["split"] for c in fit} == {"fit"}
    assert all(sum(d["family"] == c["family"] for d in fit) >= 2 for c in fit)


def _small():
    seen = {}
    for fam, _src, _size, kw in cases_of('fitd_'):
        c = small(dict(family=fam, **kw))
        seen.setdefault((fam, kw.get("op"), kw.get("piece"), c.get("buckets")), c)
    return [seen[k] for k in sorted(seen, key=str)]


@pytest.mark.parametrize("case", _small(), ids=str)
def test_fit_dram_kernel_assembles_and_is_exact(case):
    from ptxgen.toolchain import assemble, have_tool
    if have_tool("ptxas"):
        assert assemble(FAMILIES[case["family"]].kernel(case)[0], "sm_90").cubin
    assert emulate_ptx(case) == 0.0


def test_fit_dram_checks_catch_a_wrong_word():
    for c in (dict(family="fitd_atom", op="max_u32", n=999, buckets=7),
              dict(family="fitd_rows", piece=256, pitch=512, rows=128)):
        args, _grid, _block, check, _ = FAMILIES[c["family"]].setup(HostArrays(1), c)
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


def _small():
    """One small case per kernel (the case's parameters but its size)."""
    kernels = {tuple(sorted((k, v) for k, v in kw.items() if k not in ("n", "lines")))
               + (("family", fam),): small(dict(family=fam, **kw))
               for fam, _src, _size, kw in cases_of('fit14a_')}
    return list(kernels.values())


@pytest.mark.parametrize("case", _small(), ids=str)
def test_fit14a_kernel_assembles_and_is_exact(case):
    from ptxgen.toolchain import assemble, have_tool
    text = FAMILIES[case["family"]].kernel(case)[0]
    assert not have_tool("ptxas") or assemble(text, "sm_90").cubin
    assert emulate_ptx(case) == 0.0


def test_fit14a_checks_catch_a_wrong_word():
    c = dict(family="fit14a_store", variant="coal", n=999)
    args, _g, _b, check, _ = FAMILIES[c["family"]].setup(HostArrays(1), c)
    x, out = args[1], args[2]
    out[:] = F.store_ref(x, 999, "coal", 999).reshape(-1).astype(np.int32)
    assert check() == 0.0
    out[5] ^= np.int32(1)
    assert check() > 0.0
    c = dict(family="fit14a_sector", esize=1, lanes=2, n=1001, lines=256)
    args, _g, _b, check, _ = FAMILIES[c["family"]].setup(HostArrays(1), c)
    table, out = args[1], args[2]
    out[:] = F.sector_ref(table.view(np.uint8), 1001, 1, 2, 255).astype(np.uint32).view(np.int32)
    assert check() == 0.0
    out[-1] ^= np.int32(4)
    assert check() > 0.0
    c = dict(family="fit14a_pitch", pitch=4099, repeat=3, n=1001)
    args, _g, _b, check, _ = FAMILIES[c["family"]].setup(HostArrays(1), c)
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


SASS = {"atom": "ATOMG.E.ADD", "red": "REDG.E.ADD", "gen": "ATOM.E.ADD"}


@pytest.mark.parametrize("op", ["atom_u32", "red_u32", "gen_u32", "atom_f32", "red_f32",
                                "gen_f32"])
def test_fit15b_kernel_assembles_to_its_form_and_is_exact(op):
    from ptxgen.toolchain import assemble, find_tool, have_tool
    case = small(dict(family="fit15b_atom", op=op, n=1 << 22, words=1 << 20))
    assert emulate_ptx(case) == 0.0
    if not (have_tool("ptxas") and have_tool("nvdisasm")):
        return
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(assemble(FAMILIES["fit15b_atom"].kernel(case)[0], "sm_90").cubin)
        sass = subprocess.run([find_tool("nvdisasm"), path], capture_output=True,
                              text=True).stdout
    form = op.split("_")[0]
    atomics = [ln for ln in sass.splitlines() if ".ADD" in ln and ("ATOM" in ln or "RED" in ln)]
    assert len(atomics) == 1 and SASS[form] in atomics[0]
    assert (", RZ," in atomics[0]) == (form == "gen")


def test_fit15b_check_catches_a_wrong_word():
    c = dict(family="fit15b_atom", op="gen_f32", n=3001, words=1024)
    args, _g, _b, check, _ = FAMILIES[c["family"]].setup(HostArrays(1), c)
    args[0][:] = F.form_ref("gen_f32", 3001, 1024)
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


def _variants():
    return F.VARIANTS


@pytest.mark.parametrize("variant", _variants())
def test_fit15c_kernel_assembles_and_is_exact(variant):
    from ptxgen.toolchain import assemble, have_tool
    case = small(dict(family="fit15c_sort", variant=variant, n=1 << 20))
    text = FAMILIES[case["family"]].kernel(case)[0]
    assert not have_tool("ptxas") or assemble(text, "sm_90").cubin
    assert emulate_ptx(case) == 0.0


def test_fit15c_checks_catch_a_wrong_word():
    for v in ("net", "net_nold", "thin_early"):
        c = dict(family="fit15c_sort", variant=v, n=999)
        args, _g, _b, check, _ = FAMILIES[c["family"]].setup(HostArrays(1), c)
        x, out = (None, args[1]) if v == "net_nold" else (args[1], args[2])
        out[:] = F.sort_ref(x, v, 999).reshape(-1)
        assert check() == 0.0
        out[7], out[6] = out[6], out[7]         # two words of one thread swapped
        assert check() > 0.0 or out[7] == out[6]


def test_fit15c_reference_sorts_and_the_network_sorts():
    """The network is a sorting network (checked on all 0/1 inputs: the zero-one principle)."""
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
