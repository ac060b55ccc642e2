"""PTX analyzer: counts against an independent count, CFG and loops, dependency and timing figures
derived from the machine model, register pressure against brute force, memory traffic."""
import collections
import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ptxgen.analysis import analyze
from ptxgen.analysis.analyzer import analyze_kernel
from ptxgen.emit import emit_module
from ptxgen.errors import PtxgenError
from ptxgen.ir.instr import instructions
from ptxgen.ops import OPERATORS
from ptxgen.parse import parse_ptx
from ptxgen.toolchain import assemble, disassemble, sass_instructions
from test_parse import independent_opcodes

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "ptx"
FILES = sorted(DATA.glob("*.ptx"))
HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"


def kernel_text(body, regs=".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .f32 %f<80>;\n"
                            ".reg .b64 %rd<8>;", params=".param .u64 a, .param .u32 n"):
    return f"{HEAD}.visible .entry k({params})\n{{\n{regs}\n{body}\n}}\n"


# -- counts --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_counts_match_independent_count(path):
    text = path.read_text()
    d = analyze(text).to_dict()
    theirs = collections.Counter(independent_opcodes(text))
    ours = collections.Counter()
    for k in d["kernels"]:
        ours.update(k["opcodes"])
        assert sum(k["classes"].values()) == k["instructions"]
        assert sum(k["opcodes"].values()) == k["instructions"]
        assert sum(b["instructions"] for b in k["blocks"]) == k["instructions"]
    assert ours == theirs
    assert sum(k["instructions"] for k in d["kernels"]) == sum(theirs.values())


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_memory_counts_match_regex(path):
    text = re.sub(r"//[^\n]*", "", path.read_text())
    d = analyze(text).to_dict()
    for space in ("global", "shared", "local", "param", "const"):
        # ld/st and the matrix forms (ldmatrix.sync.aligned.m8n8.x4.shared.b16); a
        # '::' suffix narrows the space (st.shared::cluster is a shared store)
        loads = len(re.findall(rf"(?:^|[;{{}}])\s*(?:@!?%\w+\s+)?ld(?:matrix(?:\.\w+)*?)?"
                               rf"\.{space}(?:::\w+)?\.", text, re.M))
        stores = len(re.findall(rf"(?:^|[;{{}}])\s*(?:@!?%\w+\s+)?st(?:matrix(?:\.\w+)*?)?"
                                rf"\.{space}(?:::\w+)?\.", text, re.M))
        got = [k["memory"]["by_space"].get(space, {}) for k in d["kernels"]]
        assert sum(g.get("loads", 0) for g in got) == loads, space
        assert sum(g.get("stores", 0) for g in got) == stores, space


def test_builder_module_is_analyzed_directly():
    op = OPERATORS["saxpy"]
    module = op.build(op.shape(), "sm_90")
    r = analyze(module)
    k = module.kernels[0]
    assert r.kernels[0].instructions == len(instructions(k.body))
    assert r.kernels[0].instructions == len(independent_opcodes(emit_module(module)))
    # vector accesses count at their full width (checked against the emitted text)
    text = emit_module(module)
    v4 = len(re.findall(r"\b(?:ld|st)\.global(?:\.\w+)*\.v4\.(?:f32|b32|u32)", text))
    assert r.kernels[0].memory["by_width_bits"].get("128", 0) == v4
    assert len(r.kernels[0].loops) == text.count("bra.uni $loop")


def test_kernel_selection_and_unknown_kernel():
    text = (DATA / "hand_features.ptx").read_text()
    r = analyze(text, kernel="twice")
    assert [k.name for k in r.kernels] == ["twice"] and r.kernels[0].instructions == 4
    assert [k.name for k in analyze(text).kernels] == ["stop", "add_one", "twice", "features"]
    with pytest.raises(PtxgenError, match="no kernel named 'nope'"):
        analyze(text, kernel="nope")


def test_result_is_json_and_text():
    r = analyze((DATA / "hand_loops.ptx").read_text(), arch="sm_80")
    d = json.loads(json.dumps(r.to_dict()))
    k = d["kernels"][0]
    for key in ("name", "instructions", "opcodes", "classes", "blocks", "loops",
                "register_pressure", "memory"):
        assert key in k
    assert d["arch"] == "sm_80"
    text = r.to_text()
    assert "loops" in text and "Basic blocks" in text and "Register pressure" in text


# -- control flow --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def loops_kernel():
    return analyze((DATA / "hand_loops.ptx").read_text()).kernels[0]


def test_blocks_and_successors(loops_kernel):
    blocks = {b["label"]: b for b in loops_kernel.blocks}
    assert list(blocks) == ["B0", "$L__outer", "$L__inner", "B3", "B4", "$L__tail", "B6"]
    idx = {name: b["index"] for name, b in blocks.items()}
    assert blocks["B0"]["succs"] == [idx["$L__outer"]]
    assert sorted(blocks["$L__inner"]["succs"]) == sorted([idx["$L__inner"], idx["B3"]])
    assert sorted(blocks["B3"]["succs"]) == sorted([idx["$L__outer"], idx["B4"]])
    assert sorted(blocks["$L__tail"]["succs"]) == sorted([idx["$L__tail"], idx["B6"]])
    assert blocks["B6"]["succs"] == []
    assert [b["loop_depth"] for b in loops_kernel.blocks] == [0, 1, 2, 1, 0, 1, 0]


def test_loops_and_nesting(loops_kernel):
    by = {l["label"]: l for l in loops_kernel.loops}
    assert set(by) == {"$L__outer", "$L__inner", "$L__tail"}
    assert by["$L__outer"]["depth"] == 1 and not by["$L__outer"]["innermost"]
    assert by["$L__inner"]["depth"] == 2
    assert loops_kernel.loops[by["$L__inner"]["parent"]]["label"] == "$L__outer"
    assert by["$L__tail"]["depth"] == 1 and by["$L__tail"]["parent"] is None
    assert by["$L__outer"]["instructions"] == 2 + 8 + 3
    assert by["$L__outer"]["timing"] is None and by["$L__inner"]["timing"] is not None


def test_dominators(loops_kernel):
    blocks = loops_kernel.blocks
    idom = [b["idom"] for b in blocks]

    def dominates(a, b):
        while True:
            if a == b:
                return True
            if b == 0:
                return False
            b = idom[b]
    for l in loops_kernel.loops:
        assert all(dominates(l["header"], b) for b in l["blocks"])
    assert idom[0] == 0


def test_diamond_dominators_and_no_loop():
    body = """
	ld.param.u32 %r1, [n];
	setp.lt.u32 %p1, %r1, 4;
	@%p1 bra $L_else;
	add.s32 %r2, %r1, 1;
	bra.uni $L_join;
$L_else:
	add.s32 %r2, %r1, 2;
$L_join:
	add.s32 %r3, %r2, 1;
	ret;"""
    k = analyze(kernel_text(body)).kernels[0]
    by = {b["label"]: b for b in k.blocks}
    assert by["$L_join"]["idom"] == 0 and by["$L_else"]["idom"] == 0
    assert sorted(by["$L_join"]["preds"]) == [1, 2]
    assert k.loops == []


# -- dependency graph and timing ------------------------------------------------------------------
def _block(k, label):
    return next(b for b in k.blocks if b["label"] == label)


def test_dependency_kinds(sm90):
    body = """
	ld.param.u32 %r0, [n];
$L_b:
	add.s32 %r1, %r0, 1;
	add.s32 %r2, %r1, 1;
	add.s32 %r1, %r0, 2;
	add.s32 %r3, %r1, %r2;
	ret;"""
    t = _block(analyze(kernel_text(body)).kernels[0], "$L_b")["timing"]
    assert t["dependencies"] == {"RAW": 3, "WAR": 1, "WAW": 1}
    ialu = sm90.ops["IALU"].latency
    # %r1 → %r2 → %r3 is the longest chain; ret depends on nothing
    assert t["critical_path"] == pytest.approx(max(3 * ialu, sm90.ops["BRANCH"].latency))


def test_dependent_chain_is_latency_bound(sm90):
    n = 16
    chain = "\n".join(f"\tfma.rn.f32 %f{i + 1}, %f{i}, %f{i}, %f{i};" for i in range(n))
    body = f"\tld.param.f32 %f0, [a];\n$L_b:\n{chain}\n\tret;"
    k = analyze(kernel_text(body, params=".param .f32 a, .param .u32 n")).kernels[0]
    t = _block(k, "$L_b")["timing"]
    fma = sm90.ops["FMA"]
    assert t["critical_path"] == pytest.approx(n * fma.latency)
    assert t["bound_by"] == "latency"
    assert t["cycles_per_iteration"] >= n * fma.latency
    assert t["critical_path_lines"][:n] == list(range(t["critical_path_lines"][0],
                                                      t["critical_path_lines"][0] + n))


def test_independent_work_is_throughput_bound(sm90):
    n = 64
    body = "\tld.param.f32 %f0, [a];\n$L_b:\n" + "\n".join(
        f"\tex2.approx.f32 %f{i + 1}, %f0;" for i in range(n)) + "\n\tret;"
    k = analyze(kernel_text(body, params=".param .f32 a, .param .u32 n")).kernels[0]
    t = _block(k, "$L_b")["timing"]
    sfu = sm90.ops["SFU"]
    assert t["unit_cycles"][sfu.unit] == pytest.approx(n * sfu.issue_interval)
    assert t["critical_path"] == pytest.approx(max(sfu.latency, sm90.ops["BRANCH"].latency))
    if sfu.issue_interval > 1:
        assert t["bound_by"] == sfu.unit
    assert t["cycles_per_iteration"] >= n * sfu.issue_interval
    assert t["ipc"] <= 1.0
    assert t["resource_pressure"][sfu.unit] == pytest.approx(
        n * sfu.issue_interval / t["cycles_per_iteration"], rel=1e-2)


def test_loop_recurrence_sets_cycles_per_iteration(sm90):
    body = """
	ld.param.f32 %f1, [a];
	ld.param.u32 %r1, [n];
	mov.u32 %r2, 0;
$L_loop:
	fma.rn.f32 %f2, %f1, %f1, %f2;
	add.s32 %r2, %r2, 1;
	setp.lt.s32 %p1, %r2, %r1;
	@%p1 bra $L_loop;
	ret;"""
    k = analyze(kernel_text(body, params=".param .f32 a, .param .u32 n")).kernels[0]
    (loop,) = k.loops
    t = loop["timing"]
    fma, ialu = sm90.ops["FMA"], sm90.ops["IALU"]
    # the counter chain add → setp → bra and the fma accumulator recur every iteration
    assert t["cycles_per_iteration"] >= max(fma.latency, ialu.latency)
    assert t["loop_carried_dependencies"] == 2
    assert t["repeats"] is True


def test_numbers_come_from_the_machine_model(sm90):
    text = (DATA / "hand_loops.ptx").read_text()
    kernel = parse_ptx(text).kernels[0]
    slow = dataclasses.replace(sm90, ops={
        **sm90.ops, "LDG": dataclasses.replace(sm90.ops["LDG"],
                                                latency=sm90.ops["LDG"].latency + 1000)})
    a = analyze_kernel(kernel, sm90)
    b = analyze_kernel(parse_ptx(text).kernels[0], slow)
    ta = {l["label"]: l["timing"] for l in a.loops if l["timing"]}
    tb = {l["label"]: l["timing"] for l in b.loops if l["timing"]}
    for name in ta:
        assert tb[name]["critical_path"] == pytest.approx(ta[name]["critical_path"] + 1000)
        assert tb[name]["cycles_per_iteration"] > ta[name]["cycles_per_iteration"]


def test_units_come_from_the_machine_model(loops_kernel, sm90):
    for b in loops_kernel.blocks:
        assert set(b["timing"]["unit_cycles"]) == set(sm90.units)


# -- register pressure ---------------------------------------------------------------------------
def test_register_pressure_known_example():
    body = """
	ld.param.u64 %rd1, [a];
	ld.global.f32 %f1, [%rd1];
	ld.global.f32 %f2, [%rd1+4];
	ld.global.f32 %f3, [%rd1+8];
	add.f32 %f4, %f1, %f2;
	add.f32 %f5, %f4, %f3;
	st.global.f32 [%rd1], %f5;
	ret;"""
    rp = analyze(kernel_text(body)).kernels[0].register_pressure
    assert rp["max_live"]["f32"] == 3 and rp["max_live"]["b64"] == 1
    assert rp["max_live_total"] == 4 and rp["max_live_32bit"] == 5
    assert rp["declared"]["f32"] == 80


def test_loop_keeps_accumulator_live(loops_kernel):
    rp = loops_kernel.register_pressure
    assert rp["max_live"]["f32"] >= 2 and rp["max_live"]["pred"] == 1


def _brute_force_max_live(instrs):
    """Straight-line code: a register is live at point i when a later instruction reads it before
    any unguarded write."""
    best = 0
    for i in range(len(instrs) + 1):
        live = set()
        for r in {r for ins in instrs[i:] for r in ins.uses()}:
            for ins in instrs[i:]:
                if r in ins.uses():
                    live.add(r)
                    break
                if r in ins.defs() and ins.guard is None:
                    break
        defs = set(instrs[i].defs()) if i < len(instrs) else set()
        after = set()
        if i < len(instrs):
            for r in {r for ins in instrs[i + 1:] for r in ins.uses()}:
                for ins in instrs[i + 1:]:
                    if r in ins.uses():
                        after.add(r)
                        break
                    if r in ins.defs() and ins.guard is None:
                        break
        best = max(best, len(live), len(after | defs))
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 7),
                          st.booleans()), min_size=1, max_size=25))
def test_register_pressure_matches_brute_force(ops):
    lines = [f"\tmov.u32 %r{i}, {i};" for i in range(8)]
    for d, a, b, guarded in ops:
        g = "@%p1 " if guarded else ""
        lines.append(f"\t{g}add.s32 %r{d}, %r{a}, %r{b};")
    lines.append("\tsetp.lt.s32 %p1, %r0, %r1;")
    lines.append("\tst.global.u32 [%rd1], %r2;")
    body = "\tld.param.u64 %rd1, [a];\n\tsetp.lt.s32 %p1, %r0, 1;\n" + "\n".join(lines) + \
        "\n\tret;"
    module = parse_ptx(kernel_text(body))
    k = module.kernels[0]
    rp = analyze(module).kernels[0].register_pressure
    assert rp["max_live_total"] == _brute_force_max_live(instructions(k.body))


# -- memory --------------------------------------------------------------------------------------
def test_memory_by_space_width_and_cache():
    k = analyze((DATA / "hand_features.ptx").read_text(), kernel="features").kernels[0]
    m = k.memory
    g = m["by_space"]["global"]
    assert (g["loads"], g["stores"], g["atomics"]) == (2, 2, 2)
    assert g["load_bytes"] == 16 + 4 + 4 and g["store_bytes"] == 16 + 4 + 4 + 8
    assert m["by_width_bits"]["128"] == 2
    assert m["by_cache"]["nc"] == 1
    assert m["by_space"]["local"]["stores"] == 1
    assert m["by_space"]["const"]["loads"] == 1


def test_bytes_per_loop_iteration(loops_kernel):
    per = {l["header"]: l for l in loops_kernel.memory["loops"]}
    assert per["$L__inner"]["total_bytes_per_iteration"] == 4
    assert per["$L__tail"]["bytes_per_iteration"] == {"global": {"read": 8, "write": 0}}
    assert per["$L__outer"]["total_bytes_per_iteration"] == 0


def test_cp_async_counts_copy_bytes():
    body = """
	ld.param.u64 %rd1, [a];
	mov.u32 %r1, smem;
	cp.async.cg.shared.global [%r1], [%rd1], 16;
	cp.async.ca.shared.global [%r1+16], [%rd1+16], 8;
	cp.async.commit_group;
	cp.async.wait_group 0;
	ret;"""
    text = kernel_text(body).replace("{\n", "{\n.shared .align 16 .b8 smem[64];\n", 1)
    m = analyze(text).kernels[0].memory
    assert m["by_space"]["global"]["copies"] == 2
    assert m["by_space"]["global"]["load_bytes"] == 24
    assert m["by_space"]["shared"]["store_bytes"] == 24


# -- SASS ----------------------------------------------------------------------------------------
@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("name,arch", [("hand_loops.ptx", "sm_80"), ("hand_loops.ptx", "sm_90"),
                                       ("numba_block_reduce_debug_sm90.ptx", "sm_90")])
def test_sass_side_by_side(name, arch):
    text = (DATA / name).read_text()
    r = analyze(text, arch=arch, sass=True)
    entry = next(k for k in r.kernels if k.kind == "entry")
    s = entry.sass
    opt = 0 if "debug" in name else 3
    asm = assemble(text, arch, opt_level=opt)
    ops = sass_instructions(disassemble(asm.cubin))[entry.name]
    assert s["in_cubin"] and s["instructions"] == len(ops)
    assert s["nops"] == ops.count("NOP")
    assert s["resources"]["registers"] == asm.resources[entry.name].registers
    c = s["comparison"]
    assert c["instructions"]["ptx"] == entry.instructions
    assert sum(v["sass"] for v in c["classes"].values()) == len(ops)
    assert sum(v["ptx"] for v in c["classes"].values()) == entry.instructions
    assert "SASS" in r.to_text()


# -- speed ---------------------------------------------------------------------------------------
def test_ten_thousand_instructions_under_a_second():
    from cpu_speed import generate
    text = generate(10_000)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        r = analyze(text)
        best = min(best, time.perf_counter() - t0)
    assert r.kernels[0].instructions == 10_000
    assert best < 1.0


def test_brx_successors_come_from_the_branch_table():
    k = analyze((DATA / "hand_brx.ptx").read_text()).kernels[0]
    by = {b["label"]: b for b in k.blocks}
    assert sorted(by["$L_tab"]["succs"]) == sorted([by["$L_a"]["index"], by["$L_b"]["index"]])
    assert by["$L_end"]["preds"] == sorted([by["$L_a"]["index"], by["$L_b"]["index"]])


def test_arch_specific_target_uses_base_model():
    d = analyze((DATA / "hand_loops.ptx").read_text(), arch="sm_90a").to_dict()
    assert d["arch"] == "sm_90a" and d["model"] == "sm_90"
    with pytest.raises(PtxgenError, match="sm_75"):
        analyze((DATA / "hand_loops.ptx").read_text(), arch="sm_75")
