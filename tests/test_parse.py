"""PTX parser: real PTX from Numba, Triton, ptxgen and by hand; the round trip through the emitter
and ptxas; error positions; robustness against arbitrary input."""
import collections
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ptxgen.emit import emit_module
from ptxgen.errors import ParseError
from ptxgen.ir import types as T
from ptxgen.ir.instr import Instr, Label, Verbatim, instructions
from ptxgen.ir.values import Addr, Imm, LabelRef, PredPair, Raw, Reg, Special, Sym, Vec
from ptxgen.parse import parse_ptx
from ptxgen.toolchain import assemble, disassemble, sass_instructions

DATA = Path(__file__).parent / "data" / "ptx"
FILES = sorted(DATA.glob("*.ptx"))


# -- an independent instruction counter: plain text processing, no tokens, no IR ------------------
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_NO_SEMICOLON = re.compile(r"^[ \t]*\.(loc|file)\b[^\n]*$", re.M)
_LEADING_LABELS = re.compile(r"^(\s*[A-Za-z_$][\w$]*\s*:(?!:))+")
_GUARD = re.compile(r"^@!?\s*%?[\w$]+\s+")


def independent_opcodes(text):
    """Full opcodes of the instruction statements, in order. Statements end at ';', '{' or '}'
    (a vector operand's braces only split off pieces that do not start with a letter); a piece
    is an instruction when, after labels and a guard, it starts with a letter."""
    text = _BLOCK_COMMENT.sub(" ", text)
    text = _LINE_COMMENT.sub("", text)
    text = re.sub(r'"[^"\n]*"', '""', text)
    text = _NO_SEMICOLON.sub("", text)
    out = []
    for piece in re.split(r"[;{}]", text):
        piece = _LEADING_LABELS.sub("", piece).strip()
        piece = _GUARD.sub("", piece)
        if piece[:1].isalpha():
            out.append(piece.split()[0])
    return out


def ids(paths):
    return [p.name for p in paths]


# -- real files ----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_instruction_counts_match_independent_count(path):
    text = path.read_text()
    module = parse_ptx(text, path.name)
    ours = [i.full_opcode for k in module.kernels for i in instructions(k.body)]
    theirs = independent_opcodes(text)
    assert len(ours) > 0
    assert ours == theirs


def test_independent_counter_is_not_trivial():
    # the reference itself must see the constructs that would fool a naive count
    text = ("$L1: @%p1 bra $L1; { .reg .b32 t; mov.b64 %rd1, {%r1, %r2}; }\n"
            "\t.loc 1 2 3\n/* add.s32 x; */ call.uni (r), f, (a);\n")
    assert independent_opcodes(text) == ["bra", "mov.b64", "call.uni"]


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_round_trip_keeps_instruction_sequence(path):
    text = path.read_text()
    module = parse_ptx(text, path.name)
    out = emit_module(module)
    again = parse_ptx(out, "roundtrip.ptx")
    assert [str(i) for k in module.kernels for i in instructions(k.body)] == \
        [str(i) for k in again.kernels for i in instructions(k.body)]
    assert independent_opcodes(out) == independent_opcodes(text)
    assert [k.name for k in again.kernels] == [k.name for k in module.kernels]


def _archs(module):
    # a .target sm_80 module also runs on sm_90; sm_90a and sm_90 code only there
    return ["sm_80", "sm_90"] if module.target == "sm_80" else [module.target]


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_round_trip_assembles_to_the_same_sass(path):
    text = path.read_text()
    module = parse_ptx(text, path.name)
    out = emit_module(module)
    for arch in _archs(module):
        # debug PTX only assembles at -O0, and the round trip drops the debug target option
        opt = 0 if "debug" in text.split(".address_size")[0] else 3
        mine = assemble(out, arch)
        assert set(mine.resources) >= {k.name for k in module.entries}
        if opt:
            orig = assemble(text, arch)
            assert sass_instructions(disassemble(mine.cubin)) == \
                sass_instructions(disassemble(orig.cubin))
            assert {k: r.registers for k, r in mine.resources.items()} == \
                {k: r.registers for k, r in orig.resources.items()}


def test_numba_files_cover_both_targets():
    targets = {parse_ptx(p.read_text()).target for p in FILES if p.name.startswith("numba_")}
    assert {"sm_80", "sm_90"} <= targets


# -- constructs ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def features():
    return parse_ptx((DATA / "hand_features.ptx").read_text(), "hand_features.ptx")


def _kernel(module, name):
    return next(k for k in module.kernels if k.name == name)


def _find(kernel, prefix):
    return [i for i in instructions(kernel.body) if str(i).startswith(prefix)]


def test_module_directives(features):
    assert features.version == "7.8" and features.target == "sm_80"
    assert features.address_size == 64
    names = {v.name: v for v in features.vars}
    assert names["fmt"].count == 4 and names["fmt"].init == "{37, 100, 10, 0}"
    assert names["coeffs"].space == "const" and names["coeffs"].type == T.f32
    assert names["table"].count == 6 and names["table"].init == "{1, 2, 3, 4, 5, 6}"
    assert names["dyn_smem"].extern and names["dyn_smem"].count == 0
    assert names["counter"].align == 8 and names["counter"].type == T.u64
    assert any("vprintf" in h for h in features.header)      # prototype kept verbatim


def test_functions_params_and_directives(features):
    assert [k.name for k in features.kernels] == ["stop", "add_one", "twice", "features"]
    stop, add_one, twice, k = (_kernel(features, n) for n in ("stop", "add_one", "twice",
                                                               "features"))
    assert stop.directives == [".noreturn"]
    assert add_one.linkage == "weak" and add_one.kind == "func"
    assert [p.name for p in add_one.returns] == ["retval"]
    assert twice.linkage == "" and k.linkage == "visible" and k.kind == "entry"
    assert k.directives == [".maxntid 128, 1, 1", ".minnctapersm 2"]
    out, gen, pair, n, scale = k.params
    assert out.pointer.space == "global" and out.pointer.align == 16
    assert gen.pointer.space == "" and gen.pointer.align == 8
    assert pair.array == 16 and pair.align == 8 and pair.type == T.b8
    assert n.type == T.u32 and scale.type == T.f32
    assert {v.name: v.count for v in k.vars} == {"depot": 16, "tile": 72}


def test_register_ranges(features):
    k = _kernel(features, "features")
    by_name = {r.name: r for r in k.regs}
    assert [r.name for r in k.regs if r.name.startswith("%r") and not
            r.name.startswith("%rd") and not r.name.startswith("%rs")] == \
        [f"%r{i}" for i in range(20)]
    assert by_name["%p3"].type == T.pred and by_name["%rd11"].type == T.b64
    assert by_name["%fd2"].type == T.f64 and "%p4" not in by_name


def test_operands(features):
    k = _kernel(features, "features")
    ld4 = _find(k, "ld.global.nc.v4.f32")[0]
    assert ld4.opcode == "ld" and ld4.mods == ("global", "nc", "v4", "f32")
    assert isinstance(ld4.operands[0], Vec) and len(ld4.operands[0].items) == 4
    assert all(isinstance(r, Reg) for r in ld4.operands[0].items)
    neg = _find(k, "ld.global.f32")[0].operands[1]
    assert isinstance(neg, Addr) and neg.offset == -4 and isinstance(neg.base, Reg)
    sym = _find(k, "st.shared.f32 [tile")[0].operands[0]
    assert sym == Addr(Sym("tile"), 36)
    fma = _find(k, "fma.rn.f32")[0]
    assert fma.operands[3] == Imm(1.0, T.f32)
    assert _find(k, "mul.f32")[0].operands[2] == Imm(-0.5, T.f32)
    assert _find(k, "mov.f64")[0].operands[1] == Imm(1.5, T.f64)
    assert _find(k, "mov.b32 %r6")[0].operands[1] == Imm(255)
    assert _find(k, "and.b32")[0].operands[2] == Imm(-16)
    pair = _find(k, "setp.lt.s32")[0].operands[0]
    assert isinstance(pair, PredPair) and pair.first.name == "%p2"
    assert [r.name for r in _find(k, "setp.lt.s32")[0].defs()] == ["%p2", "%p3"]
    assert isinstance(_find(k, "mov.u32 %r2")[0].operands[1], Special)
    bra = [i for i in instructions(k.body) if i.opcode == "bra"]
    assert bra[1].guard.name == "%p2" and bra[1].guard_negated
    assert isinstance(bra[1].operands[0], LabelRef)
    call = _find(k, "call.uni")[0]
    assert [type(o) for o in call.operands] == [Raw, Sym, Raw]
    assert str(call) == "call.uni (retval0), twice, (param0);"
    shfl = _find(k, "shfl.sync")[0]
    assert shfl.operands[-1] == Imm(-1)


def test_several_statements_on_one_line(features):
    k = _kernel(features, "twice")
    assert [i.line for i in instructions(k.body)] == [k.line + 3] * 4


def test_inline_scope_keeps_braces_and_local_registers(features):
    k = _kernel(features, "features")
    texts = [s.text for s in k.body if isinstance(s, Verbatim)]
    assert texts.count("{") == 2 and texts.count("}") == 2
    local = [s for s in k.body if isinstance(s, Verbatim) and s.regs]
    assert [r.name for s in local for r in s.regs] == ["%p0", "%p1", "tmp"]
    # the scope's %p1 shadows the function's: a different register object
    setp = _find(k, "setp.ne.u32")[0]
    outer_p1 = next(r for r in k.regs if r.name == "%p1")
    assert setp.operands[0] is local[0].regs[1] and setp.operands[0] is not outer_p1
    assert isinstance(_find(k, "selp.u32")[0].operands[0], Reg)
    assert ".pragma \"nounroll\";" in texts
    assert any(t.startswith(".param .b32 param0") for t in texts)


def test_labels_and_loc_lines():
    text = (DATA / "numba_saxpy_lineinfo_sm80.ptx").read_text()
    m = parse_ptx(text)
    k = m.entries[0]
    locs = [s for s in k.body if isinstance(s, Verbatim) and s.text.startswith(".loc")]
    assert len(locs) == len(re.findall(r"^\s*\.loc\b", text, re.M))
    assert any(h.startswith(".file") for h in m.header)
    labels = [s.name for s in k.body if isinstance(s, Label)]
    assert labels == re.findall(r"^(\$?[\w$]+):", text, re.M)


def test_debug_sections_kept_in_header():
    text = (DATA / "numba_block_reduce_debug_sm90.ptx").read_text()
    m = parse_ptx(text)
    sections = [h for h in m.header if h.startswith(".section")]
    assert len(sections) == text.count(".section")
    assert all(h.rstrip().endswith("}") for h in sections)


def test_instr_lines_point_at_source():
    text = (DATA / "hand_loops.ptx").read_text()
    lines = text.splitlines()
    for ins in instructions(parse_ptx(text).kernels[0].body):
        assert lines[ins.line - 1].strip().startswith(ins.full_opcode.split(".")[0]) or \
            lines[ins.line - 1].strip().startswith("@")


def test_hex_float_nan_payload_kept_exactly():
    m = parse_ptx(_wrap(".reg .f32 %f<2>;\n mov.f32 %f1, 0f7F800001;\n mov.f32 %f0, 0fFF800000;"))
    a, b, _ = instructions(m.kernels[0].body)
    assert str(a.operands[1]) == "0f7F800001"
    assert b.operands[1] == Imm(float("-inf"), T.f32)


def test_bytes_input_is_decoded():
    m = parse_ptx(_wrap(".reg .b32 %r<2>;\n mov.u32 %r1, 7;").encode())
    assert instructions(m.kernels[0].body)[0].operands[1] == Imm(7)


# -- errors --------------------------------------------------------------------------------------
HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n"


def _wrap(body):
    return HEAD + ".visible .entry k()\n{\n " + body + "\n ret;\n}\n"


def _error(text):
    with pytest.raises(ParseError) as e:
        parse_ptx(text, "bad.ptx")
    err = e.value
    assert "\n" not in str(err)
    assert str(err).startswith(f"bad.ptx:{err.line}:{err.col}: ")
    return err


@pytest.mark.parametrize("text", ["", "   \n\n", "// only a comment\n/* and this */"])
def test_empty_input(text):
    err = _error(text)
    assert (err.line, err.col) == (1, 1) and "empty" in err.message


def test_truncated_inside_operands():
    text = HEAD + ".entry k()\n{\n .reg .b32 %r<3>;\n add.s32 %r1, %r2,"
    err = _error(text)
    assert (err.line, err.col) == (7, 19) and "end of input" in err.message


def test_truncated_inside_body():
    text = (DATA / "hand_loops.ptx").read_text()
    cut = text[:text.index("st.global.f32")]
    err = _error(cut)
    assert err.line == cut.count("\n") + 1 and "not closed" in err.message


@pytest.mark.parametrize("cut", [0.1, 0.25, 0.5, 0.75, 0.9, 0.99])
def test_truncated_real_file(cut):
    text = (DATA / "numba_matmul_shared_sm80.ptx").read_text()
    part = text[:int(len(text) * cut)]
    err = _error(part)
    assert 1 <= err.line <= part.count("\n") + 1


def test_garbage_character():
    err = _error(_wrap(".reg .b32 %r<2>;\n add.s32 %r1, %r0, 1 # 2;"))
    assert (err.line, err.col) == (7, 22) and "'#'" in err.message


def test_binary_garbage():
    err = _error(bytes(range(256)) * 4)
    assert err.line == 1


def test_unmodelled_opcode_is_parsed():
    """A real PTX instruction the IR has no rules for is kept as an opaque instruction."""
    m = parse_ptx(_wrap(".reg .b32 %r<3>;\n sured.b.add.u32 [%r0+8], %r1, %r2;"))
    ins = instructions(m.kernels[0].body)[0]
    assert ins.opcode == "sured" and ins.mods == ("b", "add", "u32")
    assert str(ins.operands[0]) == "[%r0+8]"


def test_name_outside_the_ptx_isa_is_a_located_error():
    err = _error(_wrap(".reg .b32 %r<3>;\n frobnicate.sat.x4 %r1, %r2, [%r0+8];"))
    assert (err.line, err.col) == (7, 2) and "unknown opcode 'frobnicate'" in err.message


def test_unmodelled_opcode_with_bad_syntax():
    err = _error(_wrap(".reg .b32 %r<3>;\n bmsk.clamp.b32 %r1 %r2;"))
    assert (err.line, err.col) == (7, 21) and "expected ',' or ';'" in err.message
    err = _error(_wrap(".reg .b32 %r<3>;\n bmsk.clamp.b32 %r1, , %r2;"))
    assert (err.line, err.col) == (7, 22) and "missing operand" in err.message


def test_unbalanced_braces():
    err = _error(_wrap("{\n trap;").replace("ret;\n}\n", "ret;\n"))
    assert "not closed" in err.message
    err = _error(_wrap("") + "}\n")
    assert (err.line, err.col) == (9, 1) and "unbalanced" in err.message
    err = _error(_wrap(".reg .b32 %r<2>;\n .reg .b64 %rd<2>;\n mov.b64 %rd1, {%r0, %r1;"))
    assert (err.line, err.col) == (8, 16) and "not closed" in err.message


def test_undeclared_register():
    err = _error(_wrap(".reg .b32 %r<2>;\n add.s32 %r1, %r7, 1;"))
    assert (err.line, err.col) == (7, 15) and "%r7" in err.message
    # a scope's registers are gone after its closing brace
    err = _error(_wrap("{\n .reg .b32 %t;\n mov.u32 %t, 1;\n }\n mov.u32 %t, 2;"))
    assert err.line == 10 and "%t" in err.message


def test_undefined_label_and_bad_guard():
    err = _error(_wrap("bra $L__nowhere;"))
    assert err.line == 6 and "$L__nowhere" in err.message
    err = _error(_wrap(".reg .b32 %r<2>;\n @%r1 bra $x;\n$x:"))
    assert "not a predicate" in err.message


def test_huge_numbers_and_ranges():
    assert "64-bit" in _error(_wrap(".reg .b32 %r<2>;\n mov.u32 %r1, " + "9" * 5000 + ";")).message
    assert "too large" in _error(_wrap(".reg .b32 %r<99999999>;")).message
    assert "range" in _error(_wrap(".reg .f32 %f<2>;\n mov.f32 %f1, 1e999999;")).message


def test_deep_nesting_does_not_recurse():
    m = parse_ptx(_wrap("{" * 20000 + "}" * 20000))
    assert len(m.kernels[0].body) == 40001
    err = _error(_wrap(".reg .b32 %r<2>;\n mov.u32 %r1, " + "(" * 20000 + ";"))
    assert "not closed" in err.message


_PIECES = ["{", "}", "[", "]", "(", ")", ";", ",", "@", "!", "%r1", "%p1", ".reg", ".b32", "<",
           ">", "0f3F800000", "0x1F", "-", "+", ":", "$L", "bra", "add.s32", "\n", " ", "//",
           "/*", "*/", '"', ".entry", ".func", "k", "\x00", "é", "99999999999999999999999"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=60), st.integers(0, len(FILES) - 1),
       st.floats(0, 1))
def test_arbitrary_input_raises_only_parse_error(pieces, which, where):
    base = FILES[which].read_text()
    cut = int(len(base) * where)
    text = base[:cut] + "".join(pieces) + base[cut:]
    try:
        parse_ptx(text)
    except ParseError as e:
        assert "\n" not in str(e) and "cannot parse" not in str(e)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None)
@given(st.text(max_size=400))
def test_random_text_raises_only_parse_error(text):
    try:
        parse_ptx(HEAD + text)
    except ParseError as e:
        assert "\n" not in str(e) and "cannot parse" not in str(e)


def test_counts_are_stable_under_reformatting():
    text = (DATA / "numba_saxpy_sm90.ptx").read_text()
    squashed = re.sub(r"\n\s*", " ", _LINE_COMMENT.sub("", text))     # everything on one line
    a = parse_ptx(text).kernels[0]
    b = parse_ptx(squashed).kernels[0]
    assert [str(i) for i in instructions(a.body)] == [str(i) for i in instructions(b.body)]
    assert collections.Counter(i.opcode for i in instructions(a.body))["ld"] == \
        len(re.findall(r"\bld\.", text))
    assert all(isinstance(i, Instr) for i in instructions(b.body))
