"""Lowering of the attention forward over packed variable-length sequences (flash-attn's varlen
layout; ops/attention_varlen.py), on both instruction paths: an MmaAttentionSchedule gives the
mma.sync kernel (lower), an AttentionSchedule the sm_90a wgmma one (lower_wgmma, at the end).

    attention_varlen(Q, K, V, O, LSE, cu_seqlens_q, cu_seqlens_k, total_q, scale_log2)
        Q, O: total_q x H x D;  K, V: total_k x H_kv x D (bf16 bits or f16, row-major)
        LSE: H x total_q f32 (natural log)
        cu_seqlens_q, cu_seqlens_k: B + 1 int32 prefix sums (sequence b holds tokens
        cu[b] .. cu[b+1]-1)

The sm_80 forward (lower/mma_attention.py: mma.sync, ldmatrix, cp.async ring, online softmax)
with its sequence hooks replaced. Grid (ceil(max_seqlen_q / BM), H, B): CTA (x, h, b) reads
sequence b's starts and lengths S_q, S_k from cu_seqlens, takes its query block
nctaid.x-1-x (longest causal rows first) and returns at once when that block starts at or
past S_q. A token's row of one head is H·D (K, V: H_kv·D) elements after the previous
token's: the cp.async loads and O's stores use those strides; rows past S_q (S_k) are
clamped to the sequence's last as in the dense kernel, keys >= S_k masked to -inf, the key
loop runs to the sequence's S_k (causal: to its last row's limit).

Causal: bottom-right aligned (flash-attn's convention): query i sees keys j <= i + S_k - S_q.
A row that sees no key (S_k = 0, or causal with i + S_k - S_q < 0) gets O = 0 and
LSE = -inf.
"""
from ..errors import ScheduleError
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from ..ir.builder import pow2_exponent
from .attention import WGMMA_M, WgmmaForwardLowering, add_forward_kernel
from .mma_attention import SWIZZLE_ALIGN, ForwardLowering, array_params
from .online_softmax import OnlineSoftmax


def lower(s, arch, geom, dtype="bf16", causal=False, name="attention_varlen"):
    """The varlen forward's Module for schedule s; geom: {"D", "H", "H_kv"}."""
    D = geom["D"]
    s.validate(arch, dtype, D)
    m = Module(target=arch)
    k = m.add_kernel(name, array_params() + [
        Param("cu_seqlens_q", T.u64, ptr(T.u32, align=4)),
        Param("cu_seqlens_k", T.u64, ptr(T.u32, align=4)),
        Param("total_q", T.u32), Param("scale_log2", T.f32)])
    k.directives.append(f".maxntid {s.threads}, 1, 1")
    _Varlen(Builder(k), s, dtype, D, causal, geom["H"] // geom["H_kv"], geom["H"]).run()
    return m


def sequence_bounds(b):
    """(first query token, query tokens, first key token, key tokens) of sequence ctaid.z, from
    the cu_seqlens parameters."""
    seq = b.special("ctaid.z")
    out = []
    for name in ("cu_seqlens_q", "cu_seqlens_k"):
        cu = b.element_addr(b.param(name), seq, 4, name="cu")
        start = b.ld("global", T.u32, cu, cache="nc", name="start")
        end = b.ld("global", T.u32, Addr(cu, 4), cache="nc", name="end")
        out += [start, b.sub(end, start, name="len")]
    return out


class _PackedRows:
    """What both varlen forwards add to their dense lowering: the head count, rows that may see
    no key, per-row key limits (bottom-right causal) and the packed LSE."""
    empty_rows = True               # S_k = 0, or causal rows before the diagonal's start
    mask = OnlineSoftmax.limit_mask     # per-row key limits (row_limits)

    def __init__(self, b, s, dtype, D, causal, kv_group, H):
        super().__init__(b, s, dtype, D, causal, None, kv_group)
        self.H = H

    def packed_tail(self, h):
        """LSE's index offset of head h (H x total_q) and, causal, the diagonal's shift."""
        b = self.b
        self.lse_head = b.mul(h, b.param("total_q"), name="lhead")
        if self.causal:                         # query i sees keys <= i + diag
            self.diag = b.sub(self.keys, self.S, type=T.s32, name="diag")

    def key_limit(self, end, name):
        """max(0, min(S_k, end + diag)): the keys the rows before `end` see."""
        b = self.b
        lim = b.min(self.keys, b.add(end, self.diag, type=T.s32), type=T.s32, name="klim")
        return b.max(lim, 0, type=T.s32, name=name)

    def row_limits(self):
        """self.lim (keys each of this lane's two rows sees) and their minimum self.lmin."""
        b = self.b
        if not self.causal:
            self.lim, self.lmin = [self.keys, self.keys], self.keys
            return
        self.lim = [b.min(self.keys, b.add(b.add(r, 1), self.diag, type=T.s32), type=T.s32,
                          name="rlim") for r in self.rows]
        self.lmin = self.lim[0]                 # the lower row's


class _Varlen(_PackedRows, ForwardLowering):
    def sequence(self):
        b, s = self.b, self.s
        h = b.special("ctaid.y")
        q_start, self.S, k_start, self.keys = sequence_bounds(b)
        q0 = b.shl(b.sub(b.sub(b.special("nctaid.x"), 1), b.special("ctaid.x"), name="qblk"),
                   pow2_exponent(s.BM), name="q0")
        with b.if_(b.setp("ge", q0, self.S, type=T.u32)):       # past this sequence's rows
            b.ret()
        self.c = b.param("scale_log2")
        self.base = b.address_of(b.dynamic_shared("smem", align=SWIZZLE_ALIGN))
        H_kv = self.H // self.kv_group
        kv_h = h if self.kv_group == 1 else b.div(h, self.kv_group, type=T.u32, name="kvh")
        self.row0 = q_start
        self.q_head = b.mad(q_start, self.H, h, name="qhead")      # in rows of D elements
        self.kv_head = b.mad(k_start, H_kv, kv_h, name="kvhead")
        self.q_stride, self.kv_stride = self.H * self.RB, H_kv * self.RB
        self.o_stride = self.H * self.D
        self.o_head = b.mul(h, self.D, name="ohead")
        self.packed_tail(h)
        return q0



# -- sm_90a: the wgmma forward (lower/attention.py) over packed sequences --------------------------
def lower_wgmma(s, arch, geom, dtype="bf16", causal=False, name="attention_varlen"):
    """The varlen forward's Module on wgmma for AttentionSchedule s:

    attention_varlen(Q_map, K_map, V_map, O, LSE, cu_seqlens_q, cu_seqlens_k, total_q,
                     scale_log2)
        Q_map: Q as a total_q x (H·D) row-major array (K_map, V_map: total_k x (H_kv·D)),
            boxes of BM (BN) rows x 64 columns, 128-byte swizzle: head h's column block c of
            tokens t.. is the box at (h·D + 64c, t), so one 2-D map serves every head
        O, LSE, cu_seqlens_*, total_q, scale_log2: as the mma.sync kernel's

    The dense kernel with its sequence taken from cu_seqlens (grid (ceil(max_seqlen_q / BM),
    H, B), CTAs past their sequence's rows return at once): rows and keys of the next
    sequence that a box reads are masked (keys) or not stored (rows), per-row key limits give
    the bottom-right causal mask."""
    D = geom["D"]
    s.validate(arch, dtype, D)
    if s.persistent:
        raise ScheduleError(f"attention varlen schedule {s}: persistent=True is for the dense "
                            f"forward (a sequence's query blocks come from the grid here)")
    m = Module(target=arch)
    k = add_forward_kernel(m, name, s, [
        Param("cu_seqlens_q", T.u64, ptr(T.u32, align=4)),
        Param("cu_seqlens_k", T.u64, ptr(T.u32, align=4)),
        Param("total_q", T.u32), Param("scale_log2", T.f32)])
    _WgmmaVarlen(Builder(k), s, dtype, D, causal, geom["H"] // geom["H_kv"], geom["H"]).run()
    return m


class _WgmmaVarlen(_PackedRows, WgmmaForwardLowering):

    def sequence(self):
        b, s = self.b, self.s
        h = b.special("ctaid.y")
        q_start, self.S, k_start, self.keys = sequence_bounds(b)
        qblk = b.sub(b.sub(b.special("nctaid.x"), 1), b.special("ctaid.x"), name="qblk")
        self.q0 = b.mul(qblk, s.BM, name="q0")
        with b.if_(b.setp("ge", self.q0, self.S, type=T.u32)):       # past this sequence's rows
            b.ret()
        kv_h = h if self.kv_group == 1 else b.div(h, self.kv_group, type=T.u32, name="kvh")
        self.row0, self.kv_row0 = q_start, k_start                     # tokens: the maps' rows
        self.q_col0 = b.mul(h, self.D, name="qcol")
        self.kv_col0 = b.mul(kv_h, self.D, name="kvcol")
        self.o_stride, self.o_head = self.H * self.D, self.q_col0
        self.packed_tail(h)
        return qblk

    def cta_keys(self):
        return self.key_limit(self.b.add(self.q0, self.s.BM), "keys") if self.causal \
            else self.keys

    def own_keys(self, first):
        return self.key_limit(self.b.add(first, WGMMA_M), "ownkeys")

    def rows_known(self):
        self.row_limits()
