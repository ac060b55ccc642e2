"""Warp execution efficiency from the emulator: partial warps, exited threads, divergence and
predication, each counted against hand-computed figures for small kernels."""
import numpy as np
import pytest

import ptxgen
from ptxgen.reports.warp_efficiency import warp_efficiency
from ptxgen.emu import emulate
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T


def _module(body, params=(("x", True), ("n", False))):
    m = Module(target="sm_90")
    k = m.add_kernel("k", [Param(n, T.u64, ptr(T.f32)) if p else Param(n, T.u32)
                           for n, p in params])
    b = Builder(k)
    body(b)
    b.ret()
    return m


def _scale(b):
    """x[i] *= 2 for every thread (no bounds check)."""
    i = b.global_index()
    a = b.element_addr(b.param("x"), i, 4)
    b.st("global", a, b.mul(b.ld("global", T.f32, a), 2.0))


def test_28_of_32_lanes():
    m = _module(_scale)
    x = np.arange(28 * 5, dtype=np.float32)
    rep = warp_efficiency(m, "k", 5, 28, x, np.uint32(0))
    assert np.array_equal(x, 2 * np.arange(28 * 5, dtype=np.float32))   # it really ran
    n_instr = len([s for s in m.kernel("k").body if hasattr(s, "opcode")])
    assert rep.issued == 5 * n_instr                     # one warp per block, every instruction
    assert rep.efficiency == rep.nonpredicated_efficiency == 28 / 32
    assert rep.lost == {"partial_warps": 4 * rep.issued, "exited": 0, "diverged": 0,
                        "predicated_off": 0}
    assert "87.5%" in rep.to_text()


def test_bounds_check_branch_diverges_only_in_the_edge_warp():
    def body(b):
        i = b.global_index()
        with b.if_(b.setp("lt", i, b.param("n"))):
            a = b.element_addr(b.param("x"), i, 4)
            b.st("global", a, b.mul(b.ld("global", T.f32, a), 2.0))
    m = _module(body)
    x = np.ones(100, np.float32)
    rep = warp_efficiency(m, "k", 1, 128, x, np.uint32(100))
    (br,) = rep.branches
    assert br.executions == 4 and br.divergent == 1              # lanes 96..127: 4 in, 28 out
    assert br.lanes == 128 and br.taken == 28                     # the branch skips the body
    body_ops = [i for i in rep.instructions if i["index"] > br.index and i["opcode"] != "ret"]
    assert body_ops and all(i["active"] == 100 and i["issued"] == 4 for i in body_ops)
    assert rep.lost["diverged"] == 28 * len(body_ops)
    assert x[:100].tolist() == [2.0] * 100


def test_if_else_on_lane_parity_runs_both_paths_at_half_width():
    def body(b):
        tid = b.special("tid.x")
        odd = b.setp("ne", b.and_(tid, 1), 0)
        a = b.element_addr(b.param("x"), tid, 4)
        other, end = b.new_label("else"), b.new_label("end")
        b.branch(other, odd)
        b.st("global", a, b.const(1.0, T.f32))
        b.branch(end)
        b.label(other)
        b.st("global", a, b.const(2.0, T.f32))
        b.label(end)
    m = _module(body)
    x = np.zeros(64, np.float32)
    rep = warp_efficiency(m, "k", 1, 64, x, np.uint32(0))
    assert x.tolist() == [1.0, 2.0] * 32
    cond = rep.branches[0]
    assert cond.executions == 2 and cond.divergent == 2 and cond.taken == 32
    stores = [i for i in rep.instructions if i["opcode"].startswith("st")]
    assert [(s["issued"], s["active"]) for s in stores] == [(2, 32), (2, 32)]
    assert rep.efficiency < 1 and rep.lost["diverged"] > 0


def test_predication_and_exited_threads():
    def body(b):
        tid = b.special("tid.x")
        b.emit(ptxgen.ir.Instr("ret", guard=b.setp("ge", tid, 20)))   # threads 20.. exit
        a = b.element_addr(b.param("x"), tid, 4)
        with b.predicated(b.setp("lt", tid, 5)):                        # 5 of 20 store
            b.st("global", a, b.const(3.0, T.f32))
    m = _module(body)
    x = np.zeros(32, np.float32)
    rep = warp_efficiency(m, "k", 1, 32, x, np.uint32(0))
    assert x.tolist() == [3.0] * 5 + [0.0] * 27
    st = next(i for i in rep.instructions if i["opcode"].startswith("st"))
    assert (st["issued"], st["active"], st["predicated_on"]) == (1, 20, 5)
    ret = next(i for i in rep.instructions if i["opcode"] == "ret")       # the guarded one
    after = [i for i in rep.instructions if i["index"] > ret["index"]]
    assert after and all(i["active"] == 20 for i in after)
    assert rep.lost["exited"] == 12 * sum(i["issued"] for i in after)
    assert rep.nonpredicated_efficiency < rep.efficiency < 1


def test_operator_run_is_checked_and_lines_match_the_emitted_ptx(cli):
    rep = ptxgen.warp_efficiency("saxpy", shape={"n": 1000})
    assert rep.check["ok"]
    emitted = cli("emit", "saxpy", "--n", "1000")[1].splitlines()
    for b in rep.branches:
        assert emitted[b.line - 1].strip() == b.text
    assert 0 < rep.efficiency <= 1 and rep.to_dict()["efficiency"] == rep.efficiency


def test_the_observer_changes_nothing():
    m = _module(_scale)
    a = np.arange(70, dtype=np.float32)
    b = a.copy()
    emulate(m, "k", 1, 70, a, np.uint32(0))
    warp_efficiency(m, "k", 1, 70, b, np.uint32(0))
    assert np.array_equal(a, b)


def test_bad_arguments():
    with pytest.raises(ptxgen.PtxgenError, match="kernel name"):
        warp_efficiency(_module(_scale), "k")
