"""Lowering of an AttentionBackwardSchedule to the attention backward over packed
variable-length sequences (ops/attention_varlen_backward.py):

    attn_varlen_bwd_pre(O, dO, Delta, rows)       the dense Delta kernel over total_q·H rows
    attn_varlen_bwd_dkdv(Q, K, V, dO, LSE, Delta, dK, dV, cu_seqlens_q, cu_seqlens_k,
                         total_q, scale_log2, scale)
        grid (ceil(max_seqlen_k / BK), H_kv, B)
    attn_varlen_bwd_dq(Q, K, V, dO, LSE, Delta, dQ, cu_seqlens_q, cu_seqlens_k, total_q,
                       scale_log2, scale)
        grid (ceil(max_seqlen_q / BQ), H, B)

Q, O, dO, dQ: total_q x H x D; K, V, dK, dV: total_k x H_kv x D (bf16 bits); LSE: H x total_q
f32 (the forward's); Delta: total_q x H f32 (the Delta kernel's rows). The dense kernels
(lower/attention_backward.py) with their sequence hooks replaced: CTA (x, h, b) reads sequence
b's starts and lengths S_q, S_k from cu_seqlens and returns at once when its block starts at
or past its sequence's rows; token t's row of head h is row t·H + h (K/V: t·H_kv + h) of D
elements; query rows are clamped to S_q - 1, key rows to S_k - 1.

Causal: bottom-right aligned, query i sees keys j <= i + S_k - S_q (comparisons signed). A
query row that sees no key has LSE = -inf: -LSE·log2 e is clamped to 3e38 so its P is
2^-inf = 0, as with the dense kernels' mods.

sm_90a, for a WgmmaBackwardSchedule (lower_wgmma, at the end): the dense wgmma kernels
(lower/attention_backward_wgmma.py) with the same sequence hooks, their Q, K, V, dO maps over
the packed rows as the wgmma varlen forward's (tokens x H·D, head h's column block c at
column h·D + 64c, row = token).
"""
from collections import namedtuple

from ..ir import Addr, Builder, Param, ptr
from ..ir import types as T
from ..ir.builder import pow2_exponent
from ..ir.builder_tensor import tensor_map_param
from .attention_backward import LOG2E, BackwardLowering, backward_module, main_params
from .attention_backward_wgmma import MAPS, WgmmaBackwardLowering

KERNELS = ("attn_varlen_bwd_pre", "attn_varlen_bwd_dkdv", "attn_varlen_bwd_dq")

# the rows of one head of one sequence: token `start` on, `heads` rows apart, head h
_Rows = namedtuple("_Rows", "start heads h last count")


def _tail():
    return [Param("cu_seqlens_q", T.u64, ptr(T.u32, align=4)),
            Param("cu_seqlens_k", T.u64, ptr(T.u32, align=4)),
            Param("total_q", T.u32), Param("scale_log2", T.f32), Param("scale", T.f32)]


def lower(s, arch, geom, causal=False):
    """The varlen backward's Module for schedule s; geom: {"D", "H", "H_kv"}."""
    D = geom["D"]
    m, _ = backward_module(s, arch, D, KERNELS[0])
    tail = _tail()
    for name, outs in ((KERNELS[1], ["dK", "dV"]), (KERNELS[2], ["dQ"])):
        kind = name.removeprefix("attn_varlen_bwd_")
        k = m.add_kernel(name, main_params(outs) + tail)
        warps, own, step = s.kernel_tiles(D)[kind]
        k.directives.append(f".maxntid {32 * warps}, 1, 1")
        low = _Varlen(Builder(k), s, D, causal, geom["H"] // geom["H_kv"], warps, own, step,
                      geom["H"])
        low.run_dkdv() if kind == "dkdv" else low.run_dq()
    return m


class _Varlen(BackwardLowering):
    ctype = T.s32

    def __init__(self, b, s, D, causal, kv_group, warps, own, step, H):
        super().__init__(b, s, D, causal, kv_group, warps, own, step)
        self.H, self.H_kv = H, H // kv_group

    def bounds(self):
        b = self.b
        seq = b.special("ctaid.z")

        def bounds(name):                       # (first token, tokens) of this sequence
            cu = b.element_addr(b.param(name), seq, 4, name="cu")
            start = b.ld("global", T.u32, cu, cache="nc", name="start")
            end = b.ld("global", T.u32, Addr(cu, 4), cache="nc", name="end")
            return start, b.sub(end, start, name="len")
        self.q_start, self.S_q = bounds("cu_seqlens_q")
        self.k_start, self.S_k = bounds("cu_seqlens_k")
        self.c, self.total_q = b.param("scale_log2"), b.param("total_q")
        self.last_q = b.sub(self.S_q, 1, name="lastq")
        self.last_k = b.sub(self.S_k, 1, name="lastk")
        self.S = self.last = None                   # the dense kernels' only
        if self.causal:
            self.diag = b.sub(self.S_k, self.S_q, type=T.s32, name="diag")

    def shift(self, q):
        return self.b.add(q, self.diag, type=T.s32, name="qd")

    def unshift0(self, k):
        b = self.b
        return b.max(b.sub(k, self.diag, type=T.s32), 0, type=T.s32, name="kq")

    def keys_before(self, end, name=None):
        b = self.b
        lim = b.min(self.S_k, self.shift(end), type=T.s32, name="klim")
        return b.max(lim, 0, type=T.s32, name=name)

    def query_rows(self, h):
        return _Rows(self.q_start, self.H, h, self.last_q, self.S_q)

    def head_rows(self, head, name):
        return self.query_rows(head)

    def row_index(self, rows, r, name):
        return self.b.mad(self.b.add(rows.start, r), rows.heads, rows.h, name=name)

    def row_last(self, rows):
        return rows.last

    def row_count(self, rows):
        return rows.count

    def _past(self, first, count):
        b = self.b
        with b.if_(b.setp("ge", first, count, type=T.u32)):     # past this sequence's rows
            b.ret()

    def dkdv_block(self):
        b = self.b
        k0 = b.shl(b.special("ctaid.x"), pow2_exponent(self.own), name="k0")
        self._past(k0, self.S_k)
        bh = b.special("ctaid.y")                                   # the K/V head
        kv = _Rows(self.k_start, self.H_kv, bh, self.last_k, self.S_k)
        return k0, bh, kv, self.query_rows(bh)

    def dq_block(self):
        b, lq = self.b, pow2_exponent(self.own)
        nq = b.special("nctaid.x")
        q0 = b.shl(b.sub(b.sub(nq, 1), b.special("ctaid.x")), lq, name="q0")   # longest first
        self._past(q0, self.S_q)
        h = b.special("ctaid.y")
        kvh = h if self.G == 1 else b.div(h, self.G, type=T.u32, name="kvh")
        return nq, q0, self.query_rows(h), _Rows(self.k_start, self.H_kv, kvh, self.last_k,
                                                 self.S_k)

    def stat(self, param, rows, idx):
        """-LSE·log2 e (clamped to 3e38) or Delta of query idx (clamped to S_q - 1)."""
        b = self.b
        i = b.min(idx, rows.last)
        if param == "LSE":
            g = b.mad(rows.h, self.total_q, b.add(rows.start, i), name="srow")
        else:
            g = self.row_index(rows, i, "srow")
        x = b.ld("global", T.f32, b.element_addr(b.param(param), g, 4), cache="nc", name="st")
        if param != "LSE":
            return x
        return b.min(b.mul(x, -LOG2E, name="nl"), 3.0e38, name="nl")


# -- sm_90a: the wgmma backward (lower/attention_backward_wgmma.py) over packed sequences ----------
def lower_wgmma(s, arch, geom, causal=False):
    """The varlen backward's Module on wgmma for WgmmaBackwardSchedule s:

    attn_varlen_bwd_dkdv(Q_map, K_map, V_map, dO_map, LSE, Delta, dK, dV, cu_seqlens_q,
                         cu_seqlens_k, total_q, scale_log2, scale)
        grid (ceil(max_seqlen_k / BK), H_kv, B)
    attn_varlen_bwd_dq(Q_map, K_map, V_map, dO_map, LSE, Delta, dQ, cu_seqlens_q,
                       cu_seqlens_k, total_q, scale_log2, scale)
        grid (ceil(max_seqlen_q / BQ), H, B)

    Q_map, dO_map: total_q x (H·D) (K_map, V_map: total_k x (H_kv·D)) in boxes of the kernel's
    own or streamed rows x 64 columns, 128-byte swizzle. A box's rows past its sequence are
    the next sequence's tokens (zeros past the last): as keys or query columns they are masked
    to P = 0 and add exactly 0; as own rows they are computed and not stored."""
    D = geom["D"]
    m, _ = backward_module(s, arch, D, KERNELS[0])
    for name, outs in ((KERNELS[1], ["dK", "dV"]), (KERNELS[2], ["dQ"])):
        kind = name.removeprefix("attn_varlen_bwd_")
        k = m.add_kernel(name, [tensor_map_param(n) for n in MAPS] +
                         [Param(n, T.u64, ptr(T.f32, align=4)) for n in ("LSE", "Delta")] +
                         [Param(n, T.u64, ptr(T.b16, align=4)) for n in outs] + _tail())
        # setmaxnreg only takes effect under a register cap at entry (.maxnreg)
        k.directives += [f".maxntid {s.threads}, 1, 1", f".maxnreg {s.entry_regs()}"]
        _WgmmaVarlen(Builder(k), s, D, causal, geom["H"] // geom["H_kv"], kind,
                     geom["H"]).run()
    return m


class _WgmmaVarlen(WgmmaBackwardLowering, _Varlen):
    """The wgmma kernels with _Varlen's sequence hooks (bounds, rows, stats, causal shift) and
    its blocks (CTAs past their sequence return); TMA boxes at the sequence's tokens."""
    dkdv_block = _Varlen.dkdv_block         # the MRO would take the dense wgmma ones
    dq_block = _Varlen.dq_block

    def __init__(self, b, s, D, causal, kv_group, kind, H):
        WgmmaBackwardLowering.__init__(self, b, s, D, causal, kv_group, kind)
        self.H, self.H_kv = H, H // kv_group

    def box(self, rows, first, name):
        """Head rows.h's D columns start at column h·D; token start + first is the row."""
        b = self.b
        return (b.mul(rows.h, self.D, name="mcol0"),
                b.add(rows.start, first, name=name))
