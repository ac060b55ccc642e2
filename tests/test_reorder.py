"""Scheduler: dependence rules, list scheduling, the debug view, whole kernels."""
import dataclasses
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxgen.emit import emit_module
from ptxgen.ir import Builder, Instr, Label, Module, Param, Verbatim, ptr
from ptxgen.ir import types as T
from ptxgen.ir.values import Addr, Special, Sym
from ptxgen.ir.verify import verify_module
from ptxgen.ops import get_operator
from ptxgen.reorder import (Candidate, access, build_graph, conflict, critical_path_first,
                          schedule_block, schedule_kernel, split_body)
from ptxgen.toolchain import have_tool


# -- random straight-line blocks --------------------------------------------------------------
OPS = ("iadd", "isub", "imul", "imad", "ixor", "ishl", "fadd", "fmul", "ffma", "fex2", "cvt",
       "setp", "ldg", "stg", "lds", "sts", "ldgen", "stgen", "ldparam", "mov_over", "bar",
       "atom", "clock")


def _block_kernel(steps):
    """A kernel whose body (after a fixed prologue) is the straight-line block `steps`
    describes; returns (module, kernel, index where the block starts)."""
    m = Module(target="sm_90")
    k = m.add_kernel("blk", [Param("g", T.u64, ptr(T.f32)), Param("h", T.u64, ptr(T.u32)),
                             Param("s", T.u32), Param("oi", T.u64, ptr(T.u32)),
                             Param("of", T.u64, ptr(T.f32))])
    b = Builder(k)
    g, h, s = b.param("g"), b.param("h"), b.param("s")
    oi, of = b.param("oi"), b.param("of")
    sm = b.shared("sm", T.f32, 64)
    sbase = b.address_of(sm)
    ints = [b.special("tid.x"), s, b.const(7, T.u32)]
    flts = [b.const(1.5, T.f32), b.const(-0.25, T.f32)]
    preds = [b.setp("lt", ints[0], 16)]
    start = len(k.body)
    for op, i, j, c, guarded, neg in steps:
        x, y = ints[i % len(ints)], ints[j % len(ints)]
        fx, fy = flts[i % len(flts)], flts[j % len(flts)]
        p = preds[c % len(preds)]
        goff = b.and_(x, 63, name="gi")                 # keeps addresses inside 64 elements
        # a barrier is never predicated (the whole CTA must reach it)
        with b.predicated(p, neg) if guarded and op != "bar" else _nullctx():
            if op == "iadd":
                ints.append(b.add(x, y))
            elif op == "isub":
                ints.append(b.sub(x, c))
            elif op == "imul":
                ints.append(b.mul(x, y))
            elif op == "imad":
                ints.append(b.mad(x, y, c))
            elif op == "ixor":
                ints.append(b.xor(x, y))
            elif op == "ishl":
                ints.append(b.shl(x, c % 5))
            elif op == "fadd":
                flts.append(b.add(fx, fy))
            elif op == "fmul":
                flts.append(b.mul(fx, fy))
            elif op == "ffma":
                flts.append(b.fma(fx, fy, flts[c % len(flts)]))
            elif op == "fex2":
                flts.append(b.unary("ex2", fx, mods=("approx", "ftz")))
            elif op == "cvt":
                flts.append(b.cvt(T.f32, x))
            elif op == "setp":
                preds.append(b.setp("lt", x, y))
            elif op == "ldg":
                flts.append(b.ld("global", T.f32, b.element_addr(g, goff, 4)))
            elif op == "stg":
                b.st("global", b.element_addr(g, goff, 4), fx)
            elif op == "lds":
                flts.append(b.ld("shared", T.f32, b.add(sbase, b.shl(goff, 2))))
            elif op == "sts":
                b.st("shared", b.add(sbase, b.shl(goff, 2)), fx)
            elif op == "ldgen":
                r = b.reg(T.u32)
                b.emit(Instr("ld", ("u32",), (r, Addr(b.element_addr(h, goff, 4)))))
                ints.append(r)
            elif op == "stgen":
                b.emit(Instr("st", ("u32",), (Addr(b.element_addr(h, goff, 4)), x)))
            elif op == "ldparam":
                r = b.reg(T.u32)
                b.emit(Instr("ld", ("param", "u32"), (r, Addr(Sym("s")))))
                ints.append(r)
            elif op == "mov_over":
                # overwrite an existing register: write-after-read and write-after-write
                b.add(x, 1, out=ints[j % len(ints)])
            elif op == "bar":
                b.bar_sync(0)
            elif op == "atom":
                ints.append(b.atom("global", "add", b.element_addr(h, goff, 4), x))
            elif op == "clock":
                b.special("clock")
    # the last values computed become visible: thread t writes slots 4t..4t+3
    slot = b.shl(b.special("tid.x"), 2, name="slot")
    for j, v in enumerate(ints[-4:]):
        b.st("global", b.element_addr(oi, b.add(slot, j), 4), v, type=T.u32)
    for j, v in enumerate(flts[-4:]):
        b.st("global", b.element_addr(of, b.add(slot, j), 4), v)
    b.ret()
    return m, k, start


class _nullctx:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


STEPS = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 40), st.integers(0, 40),
                           st.integers(0, 40), st.booleans(), st.booleans()),
                 min_size=1, max_size=40)


def _region_instrs(kernel):
    """The instructions of the kernel's one region (the body is straight-line)."""
    return [s for s in kernel.body if isinstance(s, Instr)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_schedule_keeps_every_dependence(sm90, steps):
    m, k, _ = _block_kernel(steps)
    instrs = _region_instrs(k)
    res = schedule_block(instrs, sm90)
    assert sorted(map(id, res.order)) == sorted(map(id, instrs))       # a permutation
    pos = {id(ins): p for p, ins in enumerate(res.order)}
    for i in range(len(instrs)):
        for j in range(i + 1, len(instrs)):
            if conflict(instrs[i], instrs[j]):
                assert pos[id(instrs[i])] < pos[id(instrs[j])], \
                    f"{instrs[i]}  must stay before  {instrs[j]}"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_graph_implies_every_conflict(sm90, steps):
    """Every conflicting pair is ordered by a path of graph edges (the graph may leave out
    edges that others imply, never an order)."""
    _, k, _ = _block_kernel(steps)
    instrs = _region_instrs(k)
    g = build_graph(instrs, lambda ins: sm90.op_for(ins).latency)
    n = len(instrs)
    reach = [set() for _ in range(n)]
    for i in range(n - 1, -1, -1):
        for j, _d in g.succs[i]:
            assert j > i
            reach[i].add(j)
            reach[i] |= reach[j]
    for i in range(n):
        for j in range(i + 1, n):
            if conflict(instrs[i], instrs[j]):
                assert j in reach[i], f"{instrs[i]} → {instrs[j]} not implied"
            if (i, j) in g.kinds:
                assert conflict(instrs[i], instrs[j])                  # no spurious edges


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_scheduled_kernel_verifies_and_keeps_instructions(steps):
    m, k, start = _block_kernel(steps)
    k2 = schedule_kernel(k, "sm_90")
    assert k2 is not k and k2.body is not k.body
    assert sorted(map(id, k2.body)) == sorted(map(id, k.body))
    assert k2.body[-1].opcode == "ret"
    verify_module(dataclasses.replace(m, kernels=[k2]))


def _emulate(m, k, seed=0):
    import numpy as np
    from ptxgen import emulate
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(64).astype(np.float32)
    h = rng.integers(0, 1 << 16, 64).astype(np.uint32)
    oi = np.zeros(128, dtype=np.uint32)
    of = np.zeros(128, dtype=np.float32)
    emulate(m, k.name, (1,), (32,), g, h, np.uint32(5), oi, of, check="off")
    return [a.view(np.uint32).copy() for a in (g, h, oi, of)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_emulator_gives_identical_results_scheduled(steps):
    """One warp (lockstep, so no inter-warp races decide the result) runs the block as built
    and as scheduled: every output word is the same."""
    import numpy as np
    pytest.importorskip("ptxgen.emu")
    m, k, _ = _block_kernel(steps)
    # clock values differ from run to run, so only blocks without clock reads compare
    if any(op == "clock" for op, *_ in steps):
        return
    k2 = schedule_kernel(k, "sm_90")
    m2 = dataclasses.replace(m, kernels=[k2])
    before, after = _emulate(m, k), _emulate(m2, k2)
    for a, b2 in zip(before, after):
        assert np.array_equal(a, b2)


# -- the rules, one by one --------------------------------------------------------------------
def _kernel():
    m = Module(target="sm_90")
    k = m.add_kernel("t", [Param("g", T.u64, ptr(T.f32))])
    return m, k, Builder(k)


def test_access_rules():
    _, k, b = _kernel()
    g = b.param("g")
    x = b.ld("global", T.f32, g)
    ld_param = k.body[0]
    st_g = b.st("global", g, x)
    st_s = b.st("shared", b.const(0, T.u32), b.const(1.0, T.f32))
    gen = Instr("ld", ("f32",), (b.reg(T.f32), Addr(g)))
    assert access(ld_param).kind == "load" and access(ld_param).spaces == ("param",)
    assert access(st_g).spaces == ("global",) and access(gen).spaces == ("global", "shared",
                                                                         "local")
    ld_g = k.body[2]
    assert conflict(ld_g, st_g) and not conflict(st_s, ld_g)
    assert conflict(gen, st_s)                         # generic may read shared memory
    assert access(b.bar_sync()).kind == "fence"
    assert access(Instr("wgmma", ("fence",))).kind == "fence"      # unknown: a fence
    b.atom("global", "add", g, x)
    assert access(k.body[-1]).kind == "fence"
    clock = Instr("mov", ("u64",), (b.reg(T.u64), Special("clock64")))
    assert access(clock).kind == "fence"


def test_loads_pass_loads_but_not_stores(sm90):
    _, k, b = _kernel()
    g = b.param("g")
    base = len(k.body)
    a = b.ld("global", T.f32, g)
    f = b.fma(a, a, a)                                 # long chain on the first load
    f = b.fma(f, f, f)
    b.st("global", Addr(g, 64), f)
    c = b.ld("global", T.f32, Addr(g, 4))              # may not pass the store
    d = b.ld("shared", T.f32, b.const(0, T.u32))       # other space: may pass it
    b.fma(c, d, d)
    instrs = [s for s in k.body[base:] if isinstance(s, Instr)]
    res = schedule_block(instrs, sm90)
    order = [str(i) for i in res.order]
    st_pos = next(p for p, t in enumerate(order) if t.startswith("st.global"))
    assert order.index(str(instrs[4])) > st_pos        # ld.global [g+4] after the store
    assert order.index(str(instrs[6])) < st_pos        # ld.shared hoisted above it


def test_critical_path_hoists_long_latency_load(sm90):
    """A load whose result is needed last still issues first: its path is longest."""
    _, k, b = _kernel()
    g = b.param("g")
    base = len(k.body)
    x = b.const(1.0, T.f32, name="x")
    for _ in range(6):
        x = b.fma(x, x, x)
    y = b.ld("global", T.f32, Addr(g, 8))
    b.add(x, y)
    instrs = [s for s in k.body[base:] if isinstance(s, Instr)]
    res = schedule_block(instrs, sm90)
    assert res.order[0].opcode == "ld"
    assert res.cycles < res.original_cycles
    lat = sm90.op_for(instrs[-2]).latency
    # the load's latency now overlaps the fma chain: the block ends one add after it arrives
    assert res.cycles == pytest.approx(lat + sm90.op_for(instrs[-1]).latency)


def test_policy_is_one_key_function():
    a = Candidate(index=3, height=100.0, fanout=1)
    b = Candidate(index=0, height=10.0, fanout=5)
    c = Candidate(index=1, height=10.0, fanout=2)
    assert sorted([b, c, a], key=critical_path_first) == [a, b, c]
    # program order breaks full ties, so an unconstrained block keeps its order
    assert critical_path_first(Candidate(0, 4.0, 0)) < critical_path_first(Candidate(1, 4.0, 0))


def test_pipe_throughput_limits_issue(sm90):
    """Independent SFU ops wait for the XU pipe; FMAs fill the cycles between."""
    _, k, b = _kernel()
    base = len(k.body)
    x = b.const(1.0, T.f32)
    sfu = [b.unary("ex2", x, mods=("approx", "ftz")) for _ in range(3)]
    fmas = [b.fma(x, x, x) for _ in range(4)]
    instrs = [s for s in k.body[base:] if isinstance(s, Instr)]
    res = schedule_block(instrs, sm90, debug=True)
    interval = sm90.ops["SFU"].issue_interval
    issue_cycle = {v.issued: v.cycle for v in res.debug if v.issued is not None}
    ex2 = sorted(issue_cycle[i] for i, ins in enumerate(instrs) if ins.opcode == "ex2")
    assert all(b2 - a2 >= interval - 1e-9 for a2, b2 in zip(ex2, ex2[1:]))
    waits = [w for v in res.debug for _i, _k, w in v.ready if w.startswith("pipe:")]
    assert f"pipe:{sm90.ops['SFU'].unit}" in waits
    assert len(res.order) == len(instrs) and sfu and fmas


def test_debug_view(sm90):
    _, k, b = _kernel()
    base = len(k.body)
    x = b.const(2.0, T.f32, name="x")
    y = b.fma(x, x, x, name="y")
    b.add(y, 1.0, name="z")
    instrs = [s for s in k.body[base:] if isinstance(s, Instr)]
    out = io.StringIO()
    res = schedule_block(instrs, sm90, debug=out)
    views = res.debug
    assert views[0].cycle == 0 and views[0].issued == 0
    assert [i for i, _k, _w in views[0].ready] == [0]
    # the add waits on the fma's result: a cycle with it listed as waiting on operands
    assert any(v.issued is None and v.ready == [(2, v.ready[0][1], "operands")] for v in views)
    lat = sm90.op_for(instrs[1]).latency
    issue = {v.issued: v.cycle for v in views if v.issued is not None}
    assert issue[2] - issue[1] == pytest.approx(lat)
    text = out.getvalue()
    assert text == res.format_debug() + "\n"
    assert "cycle       0: issue #0" in text and "wait operands" in text and "add.rn.f32" in text
    assert schedule_block(instrs, sm90).debug is None


def test_regions_stop_at_labels_branches_and_structure():
    _, k, b = _kernel()
    x = b.const(1, T.u32)
    b.comment("rides along")
    b.add(x, 1)
    b.label("$L")
    b.add(x, 2)
    b.branch("$L", b.setp("lt", x, 3))
    k.body.append(Verbatim("{"))
    b.add(x, 3)
    k.body.append(Verbatim("}"))
    items = split_body(k.body)
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["Region", "Label", "Region", "Verbatim", "Region", "Verbatim"]
    r0 = items[0]
    assert [str(v) for v in r0.riders[-1]] == ["// rides along"]
    sched = schedule_kernel(k, "sm_90")
    texts = [str(s) for s in sched.body]
    assert texts.index("// rides along") + 1 == texts.index("add.u32 %r1, %r0, 1;")


def test_matmul_scheduled_same_statements_and_ptxas():
    op = get_operator("matmul")
    shape = op.shape(M=64, N=64, K=64)
    m = op.build(shape)
    k = m.kernels[0]
    k2 = schedule_kernel(k, "sm_90")
    labels = [s.name for s in k.body if isinstance(s, Label)]
    assert [s.name for s in k2.body if isinstance(s, Label)] == labels
    assert sorted(map(id, k2.body)) == sorted(map(id, k.body))
    moved = sum(a is not b2 for a, b2 in zip(k.body, k2.body))
    assert moved > 0
    m2 = verify_module(dataclasses.replace(m, kernels=[k2]))
    if have_tool("ptxas"):
        from ptxgen.toolchain import assemble
        assemble(emit_module(m2, "sm_90"), "sm_90")


def test_unknown_arch_is_an_error():
    _, k, b = _kernel()
    b.ret()
    from ptxgen.errors import PtxgenError
    with pytest.raises(PtxgenError):
        schedule_kernel(k, "sm_99")
