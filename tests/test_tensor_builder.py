"""Tensor-core and Hopper async builder methods: exact PTX text, and ptxas accepts each kernel
for its own target (sm_80 mma/ldmatrix/cvt, sm_89 fp8, sm_90 TMA/mbarrier/cluster, sm_90a
wgmma/setmaxnreg)."""
import pytest

from ptxgen import arch
from ptxgen.emit.ptx import emit_module
from ptxgen.ir import Builder, Module, Param, ptr, types as T
from ptxgen.ir.builder_tensor import cluster_dims, tensor_map_param
from ptxgen.ir.instr import Instr
from ptxgen.toolchain import assemble



def kernel(target, params=()):
    m = Module(target=target)
    k = m.add_kernel("k", [Param("out", T.u64, ptr(T.f32))] + list(params))
    return m, k, Builder(k)


def lines(k, word):
    return [str(s) for s in k.body if isinstance(s, Instr) and str(s).startswith(word)]


def build_sm80():
    m, k, b = kernel("sm_80")
    base = b.address_of(b.shared("tile", T.b16, 256))
    a = b.ldmatrix(base, num=4)
    bt = b.ldmatrix(base, num=2, trans=True)
    b.ldmatrix(base, num=1)
    d = b.mma_sync("m16n8k16", a, bt, b.zeros(4), ab="bf16")
    h = b.mma_sync("m16n8k16", a, bt, b.zeros(2, T.b32), ab="f16", acc="f16")
    tf = [b.cvt_tf32(x) for x in d]
    d2 = b.mma_sync("m16n8k8", tf, tf[:2], d, ab="tf32")
    i = b.mma_sync("m16n8k32", a, bt, b.zeros(4, T.s32), ab="s8")
    pk = b.cvt_pack("bf16x2", d2[0], d2[1])
    out = b.param("out")
    for v, t in ((d2[3], T.f32), (pk, T.b32), (h[1], T.b32), (i[2], T.s32)):
        b.st("global", out, v, type=t)
    b.ret()
    return m, k


def test_mma_ldmatrix_cvt_text():
    m, k = build_sm80()
    assert lines(k, "ldmatrix") == [
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%fr0, %fr1, %fr2, %fr3}, [%sbase0];",
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%fr4, %fr5}, [%sbase0];",
        "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%fr6}, [%sbase0];"]
    mma = lines(k, "mma")
    assert mma[0] == ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%d0, %d1, %d2, %d3}, "
                      "{%fr0, %fr1, %fr2, %fr3}, {%fr4, %fr5}, {%acc0, %acc1, %acc2, %acc3};")
    assert mma[1].startswith("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%d4, %d5}, ")
    assert mma[2].startswith("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 ")
    assert mma[2].endswith("{%tf0, %tf1}, {%d0, %d1, %d2, %d3};")
    assert mma[3].startswith("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 ")
    assert lines(k, "cvt.rna") == [f"cvt.rna.tf32.f32 %tf{j}, %d{j};" for j in range(4)]
    assert lines(k, "cvt.rn.bf16x2") == ["cvt.rn.bf16x2.f32 %pk0, %d6, %d7;"]
    # the accumulators the mma writes are its destinations, A/B/C its sources
    ins = [s for s in k.body if isinstance(s, Instr) and s.opcode == "mma"][0]
    assert [r.name for r in ins.defs()] == ["%d0", "%d1", "%d2", "%d3"]


def build_sm89():
    m, k, b = kernel("sm_89")
    x = b.const(1.5, T.f32)
    e4 = b.cvt_to_fp8x2("e4m3", x, x)
    e5 = b.cvt_to_fp8x2("e5m2", x, x)
    h4 = b.cvt_from_fp8x2("e4m3", e4)
    b.cvt_from_fp8x2("e5m2", e5)
    e4h = b.cvt_to_fp8x2("e4m3", b.cvt_pack("f16x2", x, x))
    out = b.param("out")
    b.st("global", out, h4, type=T.b32)
    b.st("global", out, e4h, type=T.b16)
    b.ret()
    return m, k


def test_fp8_text_and_version():
    m, k = build_sm89()
    assert lines(k, "cvt.rn.satfinite") == [
        "cvt.rn.satfinite.e4m3x2.f32 %f8_0, %f0, %f0;",
        "cvt.rn.satfinite.e5m2x2.f32 %f8_1, %f0, %f0;",
        "cvt.rn.satfinite.e4m3x2.f16x2 %f8_2, %pk0;"]
    assert lines(k, "cvt.rn.f16x2.e") == ["cvt.rn.f16x2.e4m3x2 %h2_0, %f8_0;",
                                          "cvt.rn.f16x2.e5m2x2 %h2_1, %f8_1;"]
    assert ".version 8.1" in emit_module(m)          # sm_89 has fp8 cvt from PTX 8.1


def build_sm90():
    m, k, b = kernel("sm_90", [tensor_map_param("tmap")])
    cluster_dims(k, 2)
    base = b.address_of(b.shared("tile", T.b16, 64 * 64, align=1024))
    bar = b.address_of(b.shared("bar", T.b64, 1, align=8))
    b.stmatrix(base, b.ldmatrix(base, num=4), trans=True)
    _, leader = b.elect_sync()
    b.mbarrier_init(bar, 1)
    b.fence_proxy_async()
    b.cluster_sync()
    with b.if_(leader):
        b.mbarrier_arrive_expect_tx(bar, 8192)
        b.cp_async_bulk_tensor_load(base, "tmap", (0, b.const(64, T.s32)), bar)
        b.cp_async_bulk_tensor_load(base, "tmap", (0, 1, 2), bar, multicast_mask=3)
    b.mbarrier_wait_parity(bar, 0)
    b.mbarrier_arrive(bar)
    b.mbarrier_arrive(b.mapa(bar, 1), cluster=True)
    rank = b.cluster_special("cluster_ctarank")
    b.fence_proxy_async()
    b.cp_async_bulk_tensor_store("tmap", (0, rank), base)
    b.cp_async_bulk_commit_group()
    b.cp_async_bulk_wait_group(0, read=True)
    b.mbarrier_inval(bar)
    b.ret()
    return m, k


def test_hopper_async_text():
    m, k = build_sm90()
    text = emit_module(m)
    assert ".version 8.0" in text and ".reqnctapercluster 2, 1, 1" in text
    assert ".param .align 64 .b8 tmap[128]" in text
    assert lines(k, "stmatrix") == [
        "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%sbase0], {%fr0, %fr1, %fr2, %fr3};"]
    assert lines(k, "elect") == ["elect.sync %leader0|%elected0, 4294967295;"]
    assert lines(k, "mbarrier") == [
        "mbarrier.init.shared::cta.b64 [%sbase1], 1;",
        "mbarrier.arrive.expect_tx.shared::cta.b64 %state0, [%sbase1], 8192;",
        "mbarrier.try_wait.parity.shared::cta.b64 %ready0, [%sbase1], 0;",
        "mbarrier.arrive.shared::cta.b64 %state1, [%sbase1];",
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%remote0];",
        "mbarrier.inval.shared::cta.b64 [%sbase1];"]
    cp = lines(k, "cp.async.bulk")
    assert cp[0] == ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                     "[%sbase0], [%tmap0, {0, %r0}], [%sbase1];")
    assert cp[1].endswith(".multicast::cluster [%sbase0], [%tmap1, {0, 1, 2}], [%sbase1], 3;")
    assert cp[2] == ("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group "
                     "[%tmap2, {0, %cluster_ctarank0}], [%sbase0];")
    assert cp[3:] == ["cp.async.bulk.commit_group;", "cp.async.bulk.wait_group.read 0;"]
    # the map's generic address (a bare `mov` gives its .param address: it faulted on the H200)
    assert lines(k, "mov.u64 %pmap0") == ["mov.u64 %pmap0, tmap;"]
    assert lines(k, "cvta.param")[0] == "cvta.param.u64 %tmap0, %pmap0;"
    assert lines(k, "mapa") == ["mapa.shared::cluster.u32 %remote0, %sbase1, 1;"]
    assert lines(k, "barrier.cluster") == ["barrier.cluster.arrive.aligned;",
                                           "barrier.cluster.wait.aligned;"]
    assert lines(k, "fence") == ["fence.proxy.async.shared::cta;"] * 2
    # the wait loop branches back to its own label while the phase has not completed
    body = [str(s) for s in k.body]
    i = body.index("mbarrier.try_wait.parity.shared::cta.b64 %ready0, [%sbase1], 0;")
    assert body[i - 1] == "$mbar_wait_1:" and body[i + 1] == "@!%ready0 bra $mbar_wait_1;"
    # the coordinate registers of the tensor operand are uses
    ld = [s for s in k.body if isinstance(s, Instr) and str(s) == cp[0]][0]
    assert {r.name for r in ld.uses()} == {"%sbase0", "%sbase1", "%tmap0", "%r0"}


def build_sm90a():
    m, k, b = kernel("sm_90a")
    base = b.address_of(b.shared("tile", T.b16, 64 * 64, align=1024))
    desc = b.wgmma_descriptor(base, lbo=16, sbo=1024, swizzle=128)
    b.setmaxnreg(240)
    b.setmaxnreg(40, inc=False)
    b.wgmma_fence()
    acc = b.wgmma_mma_async(64, None, desc, desc, scale_d=0)
    acc = b.wgmma_mma_async(64, acc, desc, desc, trans_a=1, trans_b=1)
    acc = b.wgmma_mma_async(64, acc, b.ldmatrix(base), desc, trans_b=1)
    big = b.wgmma_mma_async(256, None, desc, desc, scale_d=0)
    half = b.wgmma_mma_async(8, None, desc, desc, ab="f16", acc="f16", scale_d=0)
    b.wgmma_commit_group()
    b.wgmma_wait_group(1)
    out = b.param("out")
    b.st("global", out, acc[31])
    b.st("global", out, big[127])
    b.st("global", out, half[1], type=T.b32)
    b.ret()
    return m, k, acc, big


def test_wgmma_text():
    m, k, acc, big = build_sm90a()
    assert len(acc) == 32 and len(big) == 128
    w = lines(k, "wgmma")
    assert w[0] == "wgmma.fence.sync.aligned;"
    first = "{" + ", ".join(f"%acc{j}" for j in range(32)) + "}"
    assert w[1] == (f"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {first}, %desc3, "
                    f"%desc3, %scd0, 1, 1, 0, 0;")
    assert w[2].endswith("%desc3, %desc3, %scd1, 1, 1, 1, 1;")
    assert w[3].endswith(", {%fr0, %fr1, %fr2, %fr3}, %desc3, %scd2, 1, 1, 1;")
    assert w[4].startswith("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%acc32, ")
    assert w[5] == ("wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 {%acc160, %acc161}, "
                    "%desc3, %desc3, %scd4, 1, 1, 0, 0;")
    assert w[6:] == ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 1;"]
    assert lines(k, "setmaxnreg") == ["setmaxnreg.inc.sync.aligned.u32 240;",
                                      "setmaxnreg.dec.sync.aligned.u32 40;"]
    # descriptor: 128-byte swizzle (1 << 62), SBO 1024 (64 << 32), LBO 16 (1 << 16)
    assert lines(k, "or.b64") == [f"or.b64 %desc3, %desc2, {(1 << 62) | (64 << 32) | (1 << 16)};"]
    assert ".target sm_90a" in emit_module(m) and ".version 8.0" in emit_module(m)


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("build,target", [(build_sm80, "sm_80"), (build_sm89, "sm_89"),
                                          (build_sm90, "sm_90"), (build_sm90a, "sm_90a")])
def test_ptxas_accepts(build, target):
    m = build()[0]
    assert assemble(emit_module(m), target).cubin


@pytest.mark.needs_ptxas
def test_ptxas_rejects_wgmma_without_sm_90a():
    """The target matters: the same wgmma kernel emitted for plain sm_90 is refused."""
    m = build_sm90a()[0]
    m.target, m.version = "sm_90", "8.0"
    with pytest.raises(Exception, match="not supported on .target 'sm_90'"):
        # the emitter itself would pick sm_90a for wgmma; force the plain target in the text
        assemble(emit_module(m).replace(".target sm_90a", ".target sm_90"), "sm_90")


def test_sm_90a_target():
    assert "sm_90a" in arch.targets() and arch.ptx_version("sm_90a") == "8.0"
    assert arch.sm_number("sm_90a") == 90


@pytest.mark.parametrize("call,msg", [
    (lambda b, r: b.mma_sync("m16n8k16", r[:3], r[:2], r[:4]), "A needs 4 registers"),
    (lambda b, r: b.mma_sync("m16n8k64", r[:4], r[:2], r[:4]), "m16n8k64 with bf16"),
    (lambda b, r: b.mma_sync("m16n8k16", r[:4], r[:2], r[:2], ab="bf16", acc="f16"),
     "accumulates into f32, not f16"),
    (lambda b, r: b.ldmatrix(r[0], num=3), "1, 2 or 4"),
    (lambda b, r: b.wgmma_mma_async(100, None, r[0], r[0]), "multiple of 8"),
    (lambda b, r: b.wgmma_mma_async(64, None, r[:4], r[0], trans_a=1), "no A transpose"),
    (lambda b, r: b.wgmma_mma_async(64, r[:3], r[0], r[0]), "D needs 32 registers"),
    (lambda b, r: b.setmaxnreg(100), "multiple of 8"),
    (lambda b, r: b.cvt_to_fp8x2("e3m4", r[0], r[1]), "e4m3 or e5m2"),
    (lambda b, r: b.cluster_special("tid.x"), "not a cluster special"),
    (lambda b, r: b.cp_async_bulk_tensor_load(r[0], r[0], (1,), r[0]), "2 or 3 coordinates"),
])
def test_bad_arguments_are_one_line(call, msg):
    m, k, b = kernel("sm_90a")
    regs = [b.reg(T.b32) for _ in range(4)]
    with pytest.raises(ValueError, match=msg) as e:
        call(b, regs)
    assert "\n" not in str(e.value)
