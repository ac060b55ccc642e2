"""ptxgen IR → LLVM IR → PTX through LLVM's NVPTX back end and through libNVVM.

Every library operator and random programs from tests/irgen.py lower, both compilers turn the
LLVM IR into PTX that ptxas accepts, and that PTX — parsed back and run on ptxgen's emulator —
computes what the direct PTX computes (the operators: against their float64 references; the
random programs: bit for bit against the reference interpreter).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import irgen
from case_args import case_arguments
from ptxgen import toolchain
from ptxgen.emu import emulate
from ptxgen.errors import LoweringError
from ptxgen.ir import Builder, Instr, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.reports.paths import emit_via, llvm_ir
from ptxgen.llvm.lower import RULES
from ptxgen.llvm.table import LOWERING
from ptxgen.ops import OPERATORS
from ptxgen.parse import parse_ptx

PATHS = ("llvm", "nvvm")
SEED = np.random.SeedSequence().entropy
_DTYPE = {"b32": "uint32", "b64": "uint64", "u32": "uint32", "s32": "int32", "u64": "uint64",
          "s64": "int64", "f32": "float32", "f64": "float64", "b16": "uint16", "u16": "uint16",
          "s16": "int16"}


def _as_params(kernel, args):
    """Arguments retyped to another compiler's parameter declarations (LLVM declares an s32
    parameter .u32 or .b32): same bytes, the dtype the emulator wants."""
    out = []
    for p, a in zip(kernel.params, args):
        if isinstance(a, np.generic):
            a = np.array(a).view(_DTYPE[p.type.name])[()]
        out.append(a)
    return out


def _run_op_via(op, shape, arrays, via, arch="sm_90"):
    module = op.build(shape, arch)
    parsed = parse_ptx(emit_via(module, arch, via), f"{via}.ptx")
    for name, buf in op.workspace_arrays(shape, arch).items():
        arrays.setdefault(name, buf)
    for step in op.steps(shape, arch):
        cfg = step.launch
        k = parsed.kernel(step.kernel)
        emulate(parsed, step.kernel, cfg.grid, cfg.block, *_as_params(k, step.args(arrays)),
                shared_bytes=cfg.shared_bytes)


def test_table_rows_name_rules():
    rules = {row.rule for row in LOWERING.values()} - {"control"}
    assert rules <= set(RULES), rules - set(RULES)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operator_assembles_through_both_compilers(name, arch):
    op = OPERATORS[name]
    module = op.build(op.shape(), arch)
    for via in PATHS:
        ptx = emit_via(module, arch, via)
        asm = toolchain.assemble(ptx, arch)
        for k in {s.kernel for s in op.steps(op.shape(), arch)}:
            assert k in asm.resources, f"{name} via {via}: ptxas saw no kernel {k}"


@pytest.mark.parametrize("via", PATHS)
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operator_via_compiler_matches_reference(name, via):
    op = OPERATORS[name]
    rng = np.random.default_rng([SEED, sorted(OPERATORS).index(name)])
    given = ({"n": 1003} if op.shape_names == ("n",) else
             dict(M=67, N=45, K=33) if op.shape_names == ("M", "N", "K") else
             dict(zip(op.shape_names, (67, 45))))
    shape = op.shape(**given)
    arrays = op.make_inputs(shape, rng)
    for out in op.outputs:
        arrays[out][...] = np.nan
    _run_op_via(op, shape, arrays, via)
    ok, err = op.check(shape, arrays)
    assert ok, f"{name} via {via} {shape}: max relative error {err} (seed {SEED})"


def _run_case(case, module):
    k = module.kernel(case.kernel.name)
    arrays, args = case_arguments(case)
    emulate(module, k.name, (case.grid, 1, 1), (case.block, 1, 1), *_as_params(k, args))
    return {name: arr.tobytes() for name, arr in arrays.items()}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(irgen.programs())
def test_random_programs_compute_the_same_through_both_compilers(case):
    want = case.run_reference()
    for via in PATHS:
        ptx = emit_via(case.module, "sm_90", via)
        got = _run_case(case, parse_ptx(ptx, f"{via}.ptx"))
        diff = case.outputs_equal(want, got)
        assert diff is None, f"via {via}: {diff}\n{case.describe()}\n{via} PTX:\n{ptx}"


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(irgen.programs(max_stmts=20), irgen.programs(max_stmts=20), irgen.programs(max_stmts=20))
def test_random_programs_assemble(a, b, c):
    m = irgen.merged_module([a, b, c])
    for via in PATHS:
        for arch in ("sm_80", "sm_90"):
            toolchain.assemble(emit_via(m, arch, via), arch)


def _kernel(body):
    m = Module(target="sm_90")
    k = m.add_kernel("k", [Param("x", T.u64, ptr(T.f32))])
    b = Builder(k)
    body(b)
    b.ret()
    return m


def test_unknown_opcode_is_a_one_line_error_naming_the_instruction():
    def body(b):
        r = b.reg(T.b32)
        b.emit(Instr("bfind", ("u32",), (r, b.const(5, T.u32)), line=42))
    with pytest.raises(LoweringError) as e:
        llvm_ir(_kernel(body))
    msg = str(e.value)
    assert "\n" not in msg and "line 42" in msg and "bfind.u32" in msg and "'bfind'" in msg


def test_separate_roundings_are_not_fused():
    """add.rn(mul.rn(a, b), c) rounds twice in PTX; an FMA would round once."""
    def body(b):
        x = b.param("x")
        v = b.ld("global", T.f32, x)
        b.st("global", x, b.add(b.mul(v, v), v))
    m = _kernel(body)
    for via in PATHS:
        ptx = emit_via(m, "sm_90", via)
        assert "fma" not in ptx and "mul.rn.f32" in ptx, f"via {via}:\n{ptx}"


def test_lowering_uses_nvvm_intrinsics_and_address_spaces():
    def body(b):
        x = b.param("x")
        s = b.shared("buf", T.f32, 32)
        tid = b.special("tid.x")
        a = b.add(b.address_of(s), b.shl(tid, 2), type=T.u32)
        b.st("shared", a, b.cvt(T.f32, tid))
        b.bar_sync()
        v = b.ld("shared", T.f32, a)
        with b.if_(b.setp("lt", tid, 4)):
            b.st("global", x, v)
    text = llvm_ir(_kernel(body))
    assert '@"llvm.nvvm.read.ptx.sreg.tid.x"()' in text
    assert '@"llvm.nvvm.barrier0"()' in text
    assert '@"buf" = internal addrspace(3) global [128 x i8] undef, align 16' in text
    assert "float addrspace(1)*" in text            # the global store
    assert "float addrspace(3)*" in text            # the shared store and load
    assert 'void (i64)* @"k", !"kernel", i32 1' in text


def test_lowering_rules_are_keyed_by_opcode_table_rows():
    """The LLVM lowering keeps no opcode list of its own: every rule names a row of the one
    opcode table (ptxgen/ir/opcodes.py)."""
    from ptxgen.ir import opcodes
    assert set(LOWERING) <= set(opcodes.ROWS), sorted(set(LOWERING) - set(opcodes.ROWS))
