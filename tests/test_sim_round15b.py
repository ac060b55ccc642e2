"""Round sim15b of the simulator (issue 14): global atomics at addresses the simulator cannot
know (held11's cic_deposit, -65/-68 % before), and reductions, whose SASS returns nothing
(fit15b_atom, measured on the H200: docs/data/model_set_2026-12-02e_fit15b.json.gz)."""
import pytest

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import access, atomics
from ptxgen.sim.program import ATOM, compile_kernel
from model_data import measured_case

TABLE = isa.load("sm_90")
MM = TABLE.memory_model
DATA = "model_set_2026-12-02e_fit15b.json.gz"


def _predict(name):
    import model_eval
    case = measured_case(DATA, name)
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    return rep, (rep.device_us - case["gpu_us"]) / case["gpu_us"]


def _atoms(case):
    prog = compile_kernel(parse_ptx(case["ptx"]).kernel(case["entry"]), TABLE)
    return prog, [st for st in prog.instrs if st.kind == ATOM]


def test_an_atomic_at_addresses_from_unknown_data_is_a_partial_sector_scatter():
    """cic_deposit's cells come from particle positions the run recorded no values of: each
    lane is taken on a sector of its own, whose read-modify-write costs what fitd_atom's
    scattered atomics do (without it: 1 KiB of sectors a warp, 3x too fast)."""
    case = measured_case(DATA, "cic_deposit n=1000003 1001x1003")
    prog, atoms = _atoms(case)
    assert len(atoms) == 4
    warp, sector = TABLE.header.warp_size, MM["sector_bytes"]
    acc = access.analyze(prog, TABLE, {}, 8)
    for st in atoms:
        a = acc[st.index]
        assert a.indirect and a.partial_sectors == warp and a.atom_float and a.atom_reply
        assert atomics.l2_bytes(a, sector, MM["l2_partial_write_bytes"],
                                MM["l2_red_partial_bytes"]) == warp * MM["l2_partial_write_bytes"]
    for name in ("cic_deposit n=1000003 1001x1003", "cic_deposit n=12000007 2003x1999"):
        _, err = _predict(name)
        assert abs(err) < 0.1, (name, err)


@pytest.mark.parametrize("op, reply", [("atom_u32", True), ("red_u32", False),
                                       ("gen_u32", True), ("atom_f32", True),
                                       ("red_f32", False), ("gen_f32", True)])
def test_a_reduction_has_no_reply_and_costs_less_per_partial_sector(op, reply):
    """fit15b_atom: red (REDG) takes 0.75 of the time of atom whose old value is read (ATOMG)
    or generic atom with it unread (ATOM.E, RZ), u32 and f32 alike, on the same hashed words;
    each form lands within 5 %."""
    for n, mib in ((1 << 22, 4), (1 << 24, 16)):
        name = f"fit15b_atom {op} n={n} table={mib}MiB"
        prog, (st,) = _atoms(measured_case(DATA, name))
        assert atomics.replies(prog, st) is reply
        _, err = _predict(name)
        assert abs(err) < 0.05, (name, err)


def test_atom_global_with_its_old_value_unread_is_a_reduction():
    """ptxas makes atom.global whose result nothing reads a REDG (checked with ptxas 13.0);
    the generic form stays an ATOM, since its address may be shared memory's."""
    case = measured_case(DATA, "fit15b_atom gen_f32 n=4194304 table=4MiB")
    prog, (st,) = _atoms(case)
    assert atomics.replies(prog, st)
    text = case["ptx"].replace("atom.add.f32", "atom.global.add.f32")
    prog = compile_kernel(parse_ptx(text).kernel(case["entry"]), TABLE)
    (st,) = [s for s in prog.instrs if s.kind == ATOM]
    assert not atomics.replies(prog, st)
    exch = case["ptx"].replace("atom.add.f32", "atom.global.exch.b32")
    prog = compile_kernel(parse_ptx(exch).kernel(case["entry"]), TABLE)
    (st,) = [s for s in prog.instrs if s.kind == ATOM]
    assert atomics.replies(prog, st)            # no reduction form: ATOMG.E.EXCH, RZ
    assert MM["l2_red_partial_bytes"] < MM["l2_partial_write_bytes"]
