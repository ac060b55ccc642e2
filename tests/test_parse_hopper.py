"""Constructs of real Hopper PTX: labels repeated in separate scopes, scaled addresses, .reg
parameters of a .func, cluster special registers and directives, tensor-map parameters.
(tests/data/ptx/hand_hopper_*.ptx run through the parse → emit → ptxas round trip of
test_parse.py.)"""
from pathlib import Path

import pytest

from ptxgen.emit import emit_module
from ptxgen.errors import ParseError
from ptxgen.ir import opcodes
from ptxgen.ir.instr import Label, instructions
from ptxgen.ir.values import LabelRef, Raw, Reg, Special
from ptxgen.ir.verify import verify_module
from ptxgen.parse import parse_ptx
from ptxgen.toolchain import assemble

DATA = Path(__file__).parent / "data" / "ptx"
HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _entry(body, params="", directives=""):
    return (HEAD + f".visible .entry k({params})\n{directives}{{\n .reg .pred %p<3>;\n"
            f" .reg .b32 %r<8>;\n .reg .b64 %rd<4>;\n{body}\n ret;\n}}\n")


WAIT = """ {
 .reg .pred P1;
 waitLoop:
 setp.eq.s32 P1, %r1, 0;
 @!P1 bra waitLoop;
 }
"""


def _branches(kernel):
    return [(i, i.operands[-1].name) for i in instructions(kernel.body) if i.opcode == "bra"]


def test_labels_repeat_in_separate_scopes():
    m = parse_ptx(_entry(" mov.u32 %r1, %tid.x;\n" + WAIT + WAIT + WAIT))
    k = m.kernels[0]
    labels = [s.name for s in k.body if isinstance(s, Label)]
    assert labels[0] == "waitLoop" and len(set(labels)) == 3      # unique in the IR
    # each branch targets the label of its own scope: the label just before it
    assert [name for _, name in _branches(k)] == labels
    out = emit_module(m)
    again = parse_ptx(out)
    assert [s.name for s in again.kernels[0].body if isinstance(s, Label)] == labels


def test_inner_label_shadows_outer_and_outer_branches_see_their_own():
    body = (" bra done;\n {\n bra done;\n done:\n mov.u32 %r2, 1;\n }\n"
            " mov.u32 %r3, 2;\n done:\n")
    k = parse_ptx(_entry(body)).kernels[0]
    labels = [s.name for s in k.body if isinstance(s, Label)]
    first, inner = _branches(k)
    assert inner[1] == labels[0]            # the inner branch: the inner label
    assert first[1] == labels[1] != labels[0]   # the outer branch: the outer label, renamed


def test_a_repeated_label_in_one_scope_is_still_an_error():
    with pytest.raises(ParseError, match="label L is defined twice"):
        parse_ptx(_entry(" {\n L:\n L:\n }\n"))


def test_a_branch_to_a_label_of_a_closed_scope_is_an_error():
    with pytest.raises(ParseError, match="branch target inner is not a label in k"):
        parse_ptx(_entry(" {\n inner:\n mov.u32 %r1, 0;\n }\n bra inner;\n"))


def test_generated_names_do_not_collide_with_source_labels():
    body = " {\n a:\n bra a;\n }\n {\n a:\n bra a;\n }\n a$1:\n bra a$1;\n"
    k = parse_ptx(_entry(body)).kernels[0]
    labels = [s.name for s in k.body if isinstance(s, Label)]
    assert len(set(labels)) == 3
    assert [name for _, name in _branches(k)] == labels


def test_scaled_address_expression():
    k = parse_ptx(_entry(" mov.u32 %r1, 0;\n ld.shared.u32 %r2, [%r1+288*2];\n")).kernels[0]
    ld = [i for i in instructions(k.body) if i.opcode == "ld"][0]
    assert str(ld.operands[1]) == "[%r1+288*2]" and isinstance(ld.operands[1], Raw)
    with pytest.raises(ParseError, match="undeclared register %q"):
        parse_ptx(_entry(" ld.shared.u32 %r2, [%q+4*2];\n"))


def test_reg_parameters_of_a_func():
    text = (HEAD + ".func (.reg .b32 %ret) f(.reg .b32 %a, .reg .b64 %b)\n{\n"
            " cvt.u32.u64 %ret, %b;\n add.s32 %ret, %ret, %a;\n ret;\n}\n")
    m = parse_ptx(text)
    f = m.kernels[0]
    assert [p.decl() for p in f.returns + f.params] == [".reg .b32 %ret", ".reg .b32 %a",
                                                        ".reg .b64 %b"]
    add = [i for i in instructions(f.body) if i.opcode == "add"][0]
    assert add.operands[2] is f.params[0].reg and isinstance(add.operands[2], Reg)
    verify_module(m)                        # parameters count as declared and defined
    assert ".func (.reg .b32 %ret) f(" in emit_module(m)
    with pytest.raises(ParseError, match=r"\.reg\) are only allowed on a \.func"):
        parse_ptx(HEAD + ".visible .entry k(.reg .b32 %a)\n{\n ret;\n}\n")


def test_cluster_special_registers_and_directives():
    regs = ["clusterid.x", "clusterid.w", "nclusterid.y", "cluster_ctaid.z", "cluster_nctaid.x",
            "cluster_ctarank", "cluster_nctarank"]
    body = "".join(f" mov.u32 %r1, %{r};\n" for r in regs) + \
        " mov.pred %p1, %is_explicit_cluster;\n"
    m = parse_ptx(_entry(body, directives=".reqnctapercluster 2, 1, 1\n.maxclusterrank 8\n"))
    k = m.kernels[0]
    specials = [i.operands[1] for i in instructions(k.body) if i.opcode == "mov"]
    assert all(isinstance(s, Special) for s in specials)
    assert [s.name for s in specials] == regs + ["is_explicit_cluster"]
    assert k.directives == [".reqnctapercluster 2, 1, 1", ".maxclusterrank 8"]
    verify_module(m)                        # %is_explicit_cluster is a predicate
    k2 = parse_ptx(_entry("", directives=".explicitcluster\n")).kernels[0]
    assert k2.directives == [".explicitcluster"]


def test_tensor_map_parameter():
    m = parse_ptx(_entry(" mov.u64 %rd1, tmap;\n", params=".param .align 64 .b8 tmap[128]"))
    p = m.kernels[0].params[0]
    assert (p.align, p.array, p.nbytes) == (64, 128, 128)
    assert p.decl() == ".param .align 64 .b8 tmap[128]"


@pytest.mark.needs_ptxas
def test_constructs_assemble_for_sm_90a():
    body = " mov.u32 %r1, %tid.x;\n" + WAIT + WAIT + " mov.u32 %r2, %cluster_ctarank;\n" \
        " mov.u64 %rd1, tmap;\n st.global.u32 [%rd1+4*4], %r2;\n"
    m = parse_ptx(_entry(body, params=".param .align 64 .b8 tmap[128]",
                         directives=".reqnctapercluster 2, 1, 1\n"))
    assert "k" in assemble(emit_module(m), "sm_90a").resources
    # asked for the family target, ptxas runs for the .target's arch-specific variant
    assert assemble(emit_module(m), "sm_90").arch == "sm_90a"


def test_data_files_use_the_constructs():
    wg = (DATA / "hand_hopper_wgmma.ptx").read_text()
    cl = (DATA / "hand_hopper_cluster.ptx").read_text()
    assert wg.count("waitLoop:") == 2 and "*2]" in wg and ".align 64 .b8 tmap[128]" in wg
    assert ".reg .b32 %a" in cl and "%clusterid.x" in cl and ".reqnctapercluster" in cl
    for text in (wg, cl):
        m = parse_ptx(text)
        assert m.target == "sm_90a"
        assert ".target sm_90a" in emit_module(m)
        assert all(opcodes.lookup(i.opcode, i.mods) is not None
                   for k in m.kernels for i in instructions(k.body))
    ops = {i.row.name for k in parse_ptx(wg).kernels for i in instructions(k.body)}
    assert {"wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait"} <= ops
    assert all(isinstance(o, LabelRef) for k in parse_ptx(wg).kernels
               for i in instructions(k.body) if i.opcode == "bra" for o in i.operands[-1:])
