"""The attention backward (FlashAttention-2's algorithm): from Q, K, V, the forward's O and
LSE (natural log, ops/attention.py) and dO, the gradients dQ, dK, dV of
O = softmax(scale · Q Kᵀ [+ causal mask]) V, for Q, O, dO of shape B x H x S x D and K, V
of B x H_kv x S x D (grouped-query attention: H a multiple of H_kv, kv_group = H / H_kv).

Three kernels (lower/attention_backward.py), all on mma.sync m16n8k16 (every target from
sm_80, sm_90a included):
    attn_bwd_pre   Delta = rowsum(dO ∘ O) in f32, into the workspace array Delta (B·H·S)
    attn_bwd_dkdv  one CTA per BK keys of one (batch, K/V head): loops over the query blocks
                   of each query head of its group, recomputing S = Q Kᵀ · scale and
                   P = exp(S - LSE); dV += Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP - Delta),
                   dK += dSᵀ Q · scale. The group's heads are summed in registers in a fixed
                   order: dK and dV are deterministic, no atomics.
    attn_bwd_dq    one CTA per BQ query rows of one (batch, head): recomputes P and dS per key
                   block and accumulates dQ = dS K · scale in registers.
dQ is accumulated by its own kernel, parallel over query blocks, instead of FlashAttention-2's
f32 atomics into a dQ buffer (plus a conversion kernel): every output element is summed in
one fixed order, so the gradients are bit-deterministic and the emulator bit-equal to the GPU,
at the cost of computing Q Kᵀ and dO Vᵀ twice (7 matrix products instead of 5).
Causal: blocks above the diagonal are skipped, diagonal blocks masked. bf16 inputs and
outputs, f32 accumulation; D 64 or 128; any S.
Mods (score_mod / mask_mod, kv_group 1): both main kernels recompute mod(S) with the forward's
ModLowering (the dK/dV kernel on its transposed fragment), masked entries give P = 0, and
dS is multiplied by ∂score_mod/∂score (schedule/score_mods.derivative, lowered beside the mod;
nothing for a constant 1 such as ALiBi's); with a mask both walk block lists (the dK/dV
kernel's of the transposed mask), skipping empty tiles and the mask on full ones.

With a WgmmaBackwardSchedule (schedule=..., sm_90a only) the two main kernels are the wgmma
form (lower/attention_backward_wgmma.py): TMA loads of the streamed tiles into an mbarrier ring
filled by a producer warpgroup, warpgroup-wide m64nNk16 chains (Sᵀ = K Qᵀ with K from shared
memory, dV/dK with Pᵀ/dSᵀ as register A operands, B tiles MN-major through the transpose bit)
and setmaxnreg to give the consumers the registers dK and dV need; the dQ kernel is the
forward's structure with dO Vᵀ added. Same kernel names, the same Delta pre-pass, equally
deterministic; no score_mod / mask_mod.

Reference: float64 of the exact inputs, and per element of dQ, dK, dV a bound propagated
from what the kernels round: the scores' f32 accumulation, the given LSE's and O's deviation
from the exact ones (both known to the reference), ex2.approx, P and dS rounded to bf16 before
their products (bf16's unit roundoff u = 2^-8), f32 accumulation, and the
final bf16 rounding (see backward_reference).
"""
import math

import numpy as np

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET
from ..arrays import TiledMap
from ..lower.attention_backward import KERNELS, PRE_THREADS, lower
from ..lower.attention_backward_wgmma import lower as lower_wgmma
from ..schedule.attention import COL_BLOCK
from ..schedule.attention_backward import (DTYPES, AttentionBackwardSchedule,
                                           WgmmaBackwardSchedule, default_backward_schedule)
from .attention import UNIT_ROUNDOFF, attention_reference, check_heads, check_options
from ..errors import PtxgenError
from ..schedule.score_mods import AttentionMods, derivative, evaluate
from .attention_mods import ProgrammableMods, create_block_mask
from .attention_mods import causal as causal_mask
from .base import Launch, Operator, Step
from .tc_matmul import bf16_bits, bf16_values
from .tensor_path import MMA_SYNC, WGMMA

F32 = 2.0 ** -23         # f32 unit roundoff, taken twice the true one


class AttentionBackward(Operator):
    """dQ, dK, dV of attention (module docstring). Inputs Q, K, V, O, dO (bf16 bit patterns,
    uint16) and LSE (f32); outputs dQ, dK, dV (bf16); workspace Delta (f32)."""
    name = "attention_backward"
    shape_names = ("B", "H", "S", "D")
    defaults = {"B": 1, "H": 2, "S": 77, "D": 64}
    inputs = ("Q", "K", "V", "O", "dO", "LSE")
    outputs = ("dQ", "dK", "dV")
    instruction = MMA_SYNC

    def __init__(self, dtype="bf16", causal=False, scale=None, schedule="auto", kv_group=1,
                 score_mod=None, mask_mod=None):
        # a WgmmaBackwardSchedule selects the sm_90a wgmma kernels; "auto" stays mma.sync
        wgmma = isinstance(schedule, WgmmaBackwardSchedule)
        check_options("attention backward", dtype, DTYPES, scale, kv_group, schedule,
                      WgmmaBackwardSchedule if wgmma else AttentionBackwardSchedule)
        if wgmma:
            self.instruction = WGMMA
        self.dtype, self.causal, self.scale, self.schedule = dtype, bool(causal), scale, schedule
        self.kv_group = kv_group
        if causal and score_mod is not None and mask_mod is None:
            mask_mod = causal_mask()
        self._mods = ProgrammableMods(score_mod, mask_mod, None, self.causal)
        self.grad, self._made = None, {}
        if self._mods.active:
            self.causal = False                 # folded into the mask_mod
            if kv_group != 1:
                raise PtxgenError("attention backward: score_mod/mask_mod with grouped-query "
                                  "attention (kv_group > 1) is not implemented")
            if self._mods.score is not None:
                self.grad = derivative(self._mods.score)
            if self.wgmma:
                raise PtxgenError("attention backward: score_mod/mask_mod with a "
                                  "WgmmaBackwardSchedule is not implemented")

    @property
    def wgmma(self):
        return self.instruction == WGMMA

    def mod_spec(self, shape):
        """The lowering's AttentionMods (no block lists, with the derivative) or None."""
        if not self._mods.active:
            return None
        return AttentionMods(self._mods.score, self._mods.mask, self.softmax_scale(shape),
                             shape["H"], None, self.grad)

    @property
    def label(self):
        return "attention backward"

    def shape(self, **given):
        return check_heads("attention backward", super().shape(**given), self.kv_group)

    def schedule_for(self, shape):
        return default_backward_schedule(shape["D"]) if self.schedule == "auto" \
            else self.schedule

    def softmax_scale(self, shape):
        return 1.0 / math.sqrt(shape["D"]) if self.scale is None else float(self.scale)

    def kernel_name(self):
        return KERNELS[1]                       # the main kernel: dK and dV

    def build(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        if self.wgmma:
            return lower_wgmma(self.schedule, arch, shape, causal=self.causal,
                               kv_group=self.kv_group)
        return lower(self.schedule_for(shape), arch, shape, causal=self.causal,
                     kv_group=self.kv_group, mods=self.mod_spec(shape),
                     lists=self._lists(shape))

    def block_masks(self, shape):
        """{"dkdv": the block mask of the transposed mask_mod on (BK keys, q_step queries)
        tiles, "dq": the mask_mod's on (BQ, kv_step)}; {} without a mask_mod."""
        if self._mods.mask is None:
            return {}
        s = self.schedule_for(shape)
        key = (shape["S"], shape["B"], shape["H"], s.BK, s.q_step, s.BQ, s.kv_step)
        if key not in self._made:
            mm = self._mods.mask_mod

            def transposed(b, h, q_idx, kv_idx):
                return mm(b, h, kv_idx, q_idx)
            S, B, H = shape["S"], shape["B"], shape["H"]
            self._made[key] = {
                "dkdv": create_block_mask(transposed, B, H, S, S, (s.BK, s.q_step)),
                "dq": create_block_mask(mm, B, H, S, S, (s.BQ, s.kv_step))}
        return self._made[key]

    def _lists(self, shape):
        return {k: (bm.shape[0] > 1, bm.shape[1] > 1) + bm.shape[2:]
                for k, bm in self.block_masks(shape).items()}

    # -- launches ------------------------------------------------------------------------------
    def launches(self, shape):
        """{kernel: Launch} of the three kernels."""
        s, D = self.schedule_for(shape), shape["D"]
        B, H, S = shape["B"], shape["H"], shape["S"]
        rows = B * H * S
        pre = Launch(grid=(-(-rows * (D // 8) // PRE_THREADS), 1, 1), block=(PRE_THREADS, 1, 1))
        if self.wgmma:
            dkdv = Launch(grid=(-(-S // s.BK), B * H // self.kv_group, 1),
                          block=(s.threads, 1, 1), shared_bytes=s.shared_bytes("dkdv", D))
            dq = Launch(grid=(-(-S // s.BQ), B * H, 1), block=(s.threads, 1, 1),
                        shared_bytes=s.shared_bytes("dq", D))
            return dict(zip(KERNELS, (pre, dkdv, dq)))
        dkdv = Launch(grid=(-(-S // s.BK), B * H // self.kv_group, 1),
                      block=(32 * s.kv_warps, 1, 1), shared_bytes=s.shared_bytes("dkdv", D))
        dq = Launch(grid=(-(-S // s.BQ), B * H, 1), block=(32 * s.q_warps, 1, 1),
                    shared_bytes=s.shared_bytes("dq", D))
        return dict(zip(KERNELS, (pre, dkdv, dq)))

    def launch(self, shape, sm_count=None):
        return self.launches(shape)[KERNELS[1]]

    def steps(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET, sm_count=None):
        """Delta, then dK/dV, then dQ (the last two only read Delta)."""
        L = self.launches(shape)
        rows = np.uint32(shape["B"] * shape["H"] * shape["S"])
        return [Step(KERNELS[0], L[KERNELS[0]],
                     lambda a: [a["O"], a["dO"], a["Delta"], rows]),
                Step(KERNELS[1], L[KERNELS[1]],
                     lambda a: self._main_args(shape, a, ["dK", "dV"])),
                Step(KERNELS[2], L[KERNELS[2]],
                     lambda a: self._main_args(shape, a, ["dQ"]))]

    def _main_args(self, shape, a, outs):
        sc = self.softmax_scale(shape)
        if self.wgmma:
            return self._wgmma_args(shape, a, outs, sc)
        spec, extra = self.mod_spec(shape), []
        if spec is not None:
            kind = "dq" if outs == ["dQ"] else "dkdv"
            fresh = None
            if self._mods.mask is not None:
                names = [f"BM{kind}_counts", f"BM{kind}_lists"]
                if not all(n in a for n in names):
                    fresh = self.mod_arrays(shape)
                extra = [a[n] if fresh is None else fresh[n] for n in names]
            extra += [a[f"t{i}"] if f"t{i}" in a else t.array
                      for i, t in enumerate(spec.tensors)]
        return [a[n] for n in ("Q", "K", "V", "dO", "LSE", "Delta")] + [a[n] for n in outs] + \
            [np.uint32(shape["S"]), np.float32(sc * math.log2(math.e)), np.float32(sc)] + extra

    def _wgmma_args(self, shape, a, outs, sc):
        """Tensor maps of Q, K, V, dO in boxes of the kernel's own or streamed rows x 64
        columns, then LSE, Delta, the outputs, S, scale·log2 e, scale."""
        s = self.schedule
        own, step = s.kernel_tiles(shape["D"])["dq" if outs == ["dQ"] else "dkdv"]
        rows = shape["B"] * shape["H"] * shape["S"]
        q_box, kv_box = (own, step) if outs == ["dQ"] else (step, own)

        def tmap(name, box):
            n = rows if name in ("Q", "dO") else rows // self.kv_group
            return TiledMap(a[name], "bf16", box, COL_BLOCK, rows=n, cols=shape["D"])
        return [tmap("Q", q_box), tmap("K", kv_box), tmap("V", kv_box), tmap("dO", q_box),
                a["LSE"], a["Delta"]] + [a[n] for n in outs] + \
            [np.uint32(shape["S"]), np.float32(sc * math.log2(math.e)), np.float32(sc)]

    def kernel_args(self, shape, arrays):
        return self._main_args(shape, arrays, ["dK", "dV"])

    def workspace(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        return {"Delta": ((shape["B"] * shape["H"] * shape["S"],), np.float32)}

    # -- arrays --------------------------------------------------------------------------------
    def dims(self, shape):
        q = (shape["B"], shape["H"], shape["S"], shape["D"])
        return q, (q[0], q[1] // self.kv_group) + q[2:]

    def _inputs(self, shape, rng):
        """Random Q, K, V, dO; O and LSE of the float64 forward rounded to bf16 and f32 (what
        the forward kernel returns, within its bound); NaN-poisoned gradients."""
        qd, kd = self.dims(shape)
        q, k, v, do = (bf16_bits(rng.standard_normal(d)) for d in (qd, kd, kd, qd))
        fwd = attention_reference(*self._heads(q, k, v), self.softmax_scale(shape),
                                  self.causal, UNIT_ROUNDOFF[self.dtype],
                                  mods=self._mods.graphs())
        return {"Q": q, "K": k, "V": v, "dO": do, "O": bf16_bits(fwd["O"]),
                "LSE": fwd["LSE"].astype(np.float32),
                "dQ": np.full(qd, 0x7FC0, np.uint16), "dK": np.full(kd, 0x7FC0, np.uint16),
                "dV": np.full(kd, 0x7FC0, np.uint16)}

    def _heads(self, q, k, v):
        """float64 values, K and V repeated over their group's query heads."""
        q, k, v = (bf16_values(x) for x in (q, k, v))
        if self.kv_group > 1:
            k, v = (np.repeat(x, self.kv_group, axis=-3) for x in (k, v))
        return q, k, v

    # -- reference -----------------------------------------------------------------------------
    def reference(self, shape, arrays):
        q, k, v = self._heads(arrays["Q"], arrays["K"], arrays["V"])
        ref = backward_reference(q, k, v, bf16_values(arrays["dO"]), self.softmax_scale(shape),
                                 self.causal, bf16_values(arrays["O"]),
                                 np.asarray(arrays["LSE"], np.float64), mods=self.mods())
        if self.kv_group > 1:                   # a K/V head's gradient: its group's sum
            for n in ("dK", "dV", "dK_bound", "dV_bound"):
                x = ref[n]
                ref[n] = x.reshape(x.shape[:-3] + (-1, self.kv_group) + x.shape[-2:]).sum(-3)
        return ref

    def mod_arrays(self, shape):
        """The mods' extra tensors as kernel arrays t0, t1, ... (no block lists)."""
        spec = self.mod_spec(shape)
        out = {f"t{i}": t.array for i, t in enumerate(spec.tensors)} if spec else {}
        for kind, bm in self.block_masks(shape).items():
            arr = bm.kernel_arrays()
            out[f"BM{kind}_counts"], out[f"BM{kind}_lists"] = arr["BM_counts"], arr["BM_lists"]
        return out

    def make_inputs(self, shape, rng):
        return {**self._inputs(shape, rng), **self.mod_arrays(shape)}

    def mods(self):
        """(score graph, mask graph, derivative graph or None) or None without mods."""
        return self._mods.graphs() + (self.grad,) if self._mods.active else None

    def check(self, shape, arrays, reference=None):
        ref = reference or self.reference(shape, arrays)
        ok, worst = True, 0.0
        for n in self.outputs:
            got = bf16_values(arrays[n])
            err = np.abs(got - ref[n])
            ok = ok and bool(np.isfinite(got).all() and (err <= ref[n + "_bound"]).all())
            worst = max(worst, float(np.max(err / np.maximum(np.abs(ref[n]), 1.0))))
        return ok, worst

    def flops(self, shape):
        """2.5x the forward's (five S x S x D products: FlashAttention-2's count), halved
        when causal; the dQ kernel's recomputation is not counted."""
        f = 10 * shape["B"] * shape["H"] * shape["S"] ** 2 * shape["D"]
        return f // 2 if self.causal else f

    def bytes_moved(self, shape):
        """Q, O, dO, dQ; K, V, dK, dV of H / kv_group heads; LSE and Delta."""
        bhsd = shape["B"] * shape["H"] * shape["S"] * shape["D"]
        return 4 * bhsd * 2 + 4 * (bhsd // self.kv_group) * 2 + \
            8 * shape["B"] * shape["H"] * shape["S"]


def backward_reference(q, k, v, do, scale, causal, o=None, lse=None, u=UNIT_ROUNDOFF["bf16"],
                       mods=None, rows=None):
    """float64 dQ, dK, dV of attention over arrays (..., S, D) (k, v with q's heads), and
    their bounds for the kernels given the forward outputs o and lse (default: exact):
        P error:  |ΔP| <= P·expm1(ε), ε = f32 score error + |Δlse| + 2^-22 (|s| + |lse| + 1)
        Delta:    |ΔΔ| <= Σ|dO||o - O| + D·2^-23 Σ|dO||o|;  dP: D·2^-23 Σ|dO||V|
        dS:       |ΔdS| <= |ΔP|(|dP - Δ| + ΔdP + ΔΔ) + P(ΔdP + ΔΔ + 2^-23(|dP| + |Δ|))
        products: operands rounded to bf16 (+u each), f32 accumulation (S + D)·2^-23 of the
                  absolute sum, the result rounded to bf16 (+u).
    rows: causal, the last key each query row sees (default its index; < 0: none)."""
    D, S = q.shape[-1], k.shape[-2]
    s = scale * np.einsum("...qd,...kd->...qk", q, k)
    s_err = scale * D * 2 * F32 * np.einsum("...qd,...kd->...qk", np.abs(q), np.abs(k))
    allowed = np.ones(s.shape[-2:], bool)
    if causal:
        last = np.arange(q.shape[-2]) if rows is None else np.asarray(rows)
        allowed = np.arange(S)[None, :] <= last[:, None]
    g = g_err = None
    if mods is not None:
        score, mask, grad = mods
        lead = q.shape[:-2]
        env = {"b": np.arange(lead[0]).reshape((-1,) + (1,) * (len(lead) + 1))
               if len(lead) > 1 else np.int64(0),
               "h": np.arange(lead[-1]).reshape((-1, 1, 1)) if lead else np.int64(0),
               "q": np.arange(q.shape[-2])[:, None], "kv": np.arange(S)[None, :]}
        if score is not None:
            raw = s
            s, s_mod_err = (np.broadcast_to(x, raw.shape) for x in
                            evaluate(score, dict(env, score=raw), score_err=s_err))
            if grad is not None:
                g, g_err = (np.broadcast_to(x, raw.shape) for x in
                            evaluate(grad, dict(env, score=raw), score_err=s_err))
            s_err = s_mod_err
        if mask is not None:
            allowed = allowed & evaluate(mask, env)[0]
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m0 = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        l_exact = (m0 + np.log(np.exp(s - m0).sum(axis=-1, keepdims=True)))[..., 0]
    l0 = np.where(np.isfinite(l_exact), l_exact, 0.0)
    p = np.where(allowed, np.exp(np.where(allowed, s, 0.0) - l0[..., None]), 0.0)
    o_exact = p @ v
    o = o_exact if o is None else o
    lse = l_exact if lse is None else lse
    lse0 = np.where(np.isfinite(lse), lse, 0.0)
    dp = np.einsum("...qd,...kd->...qk", do, v)
    delta = (do * o_exact).sum(-1, keepdims=True)
    ds = p * (dp - delta)
    eps = s_err + np.abs(lse0 - l0)[..., None] + \
        4 * F32 * (np.abs(np.where(allowed, s, 0.0)) + np.abs(lse0)[..., None] + 1)
    dP_err = np.where(allowed, np.expm1(eps) * p, 0.0)
    ddelta = (np.abs(do) * np.abs(o - o_exact)).sum(-1, keepdims=True) + \
        D * F32 * (np.abs(do) * np.abs(o)).sum(-1, keepdims=True)
    ddp = D * F32 * np.einsum("...qd,...kd->...qk", np.abs(do), np.abs(v))
    ds_err = dP_err * (np.abs(dp - delta) + ddp + ddelta) + \
        p * (ddp + ddelta + F32 * (np.abs(dp) + np.abs(delta)))
    if g is not None:               # the chain rule: dS · ∂score_mod/∂score, one f32 product
        g, g_err = np.where(allowed, g, 0.0), np.where(allowed, g_err, 0.0)
        ds_err = ds_err * (np.abs(g) + g_err) + np.abs(ds) * g_err + \
            F32 * np.abs(ds) * (np.abs(g) + g_err)
        ds = ds * g
    out = {"dQ": scale * ds @ k, "dK": scale * np.swapaxes(ds, -1, -2) @ q,
           "dV": np.swapaxes(p, -1, -2) @ do}
    acc = (S + D) * F32
    ds_in = ds_err + u * (np.abs(ds) + ds_err)                  # dS rounded to bf16
    p_in = dP_err + u * (p + dP_err)                            # P rounded to bf16
    absds, absp = np.abs(ds) + ds_in, p + p_in
    bounds = {"dQ": scale * (ds_in @ np.abs(k) + acc * absds @ np.abs(k)),
              "dK": scale * (np.swapaxes(ds_in, -1, -2) @ np.abs(q)
                             + acc * np.swapaxes(absds, -1, -2) @ np.abs(q)),
              "dV": np.swapaxes(p_in, -1, -2) @ np.abs(do)
              + acc * np.swapaxes(absp, -1, -2) @ np.abs(do)}
    for n, b in bounds.items():                                 # the result rounded to bf16
        out[n + "_bound"] = b + u * (np.abs(out[n]) + b) + 1e-30
    return out
