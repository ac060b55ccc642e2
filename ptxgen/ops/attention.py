"""Fused attention forward: O = softmax(scale · Q Kᵀ [+ causal mask]) V and the per-row
logsumexp LSE (what a backward pass needs), for Q, K, V of shape B x H x S x D.

Inputs bf16 (numpy uint16 bit patterns: numpy has no bfloat16) or f16; O in the input type; the
softmax statistics in f32. D is 64 or 128; S anything (not a tile multiple). The kernel is
lowered from an AttentionSchedule for sm_90a (ptxgen/lower/attention.py), or on targets
without wgmma from an MmaAttentionSchedule (ops/mma_attention.py).

Programmable (FlexAttention's model, ops/attention_mods.py): Attention(..., score_mod=fn,
mask_mod=fn, block_mask=bm) with fn traced once into IR on the score fragments
(schedule/score_mods.py); a mask's block mask (made once per S when not given) drives the K/V
loop: empty tiles are never loaded, full ones skip the mask. Extra kernel arrays: BM_counts,
BM_lists (the block mask) and t0, t1, ... (the mods' ModTensors), from make_inputs /
mod_arrays. causal=True with a mask_mod is their conjunction. Without mods the kernel is the
unmodified one, PTX for PTX.

Reference: float64 of the exact 16-bit inputs. What the kernel rounds, and check()'s bound per
element of O: P = 2^(S' - m) is rounded to the input type before P·V (relative error u, the
type's unit roundoff: 2^-8 bf16, 2^-11 f16), the final O once more (u·|O|), and ex2.approx/rcp
and f32 accumulation add a few f32 ulps; so |ΔO| <= 2u · Σ p|v| / l + 2u · |O| + tiny. LSE is
f32 throughout: |ΔLSE| <= 2^-16 (1 + |LSE|) + scale · D · 2^-22 · max |q||k| sums.
"""
import math

import numpy as np

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET
from ..arrays import TiledMap
from ..errors import Arg, PtxgenError, Spelled
from ..lower import lower_attention
from ..schedule.attention import COL_BLOCK, DTYPES, HEAD_DIMS, default_attention_schedule
from .attention_mods import ProgrammableMods
from . import tile_plan
from .base import Launch, Operator, sm_count_or_default
from .mma_attention import MmaSyncAttentionPath
from .tc_matmul import TC_CHIP, bf16_bits, bf16_values
from .tensor_path import INSTRUCTIONS, MMA_SYNC, WGMMA, InstructionPaths

UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}


def check_scale_and_group(label, scale, kv_group):
    """One-line PtxgenErrors (prefixed by label) for a softmax scale that is not a positive
    number or a kv_group that is not a positive integer (attention's forward and backward)."""
    if scale is not None and not (isinstance(scale, (int, float)) and scale > 0
                                  and math.isfinite(scale)):
        raise PtxgenError(f"{label}: scale must be a positive number, got {scale!r}")
    if isinstance(kv_group, bool) or not isinstance(kv_group, int) or kv_group < 1:
        raise PtxgenError(f"{label}: kv_group (query heads per K/V head) must be a positive "
                          f"integer, got {kv_group!r}")


def check_options(label, dtype, dtypes, scale, kv_group, schedule, schedule_class):
    """check_scale_and_group, and one-line PtxgenErrors for a dtype not in dtypes or a
    schedule neither "auto" nor a schedule_class (an operator's constructor arguments)."""
    if dtype not in dtypes:
        raise PtxgenError(Spelled(f"{label}: ", Arg("dtype", "--dtype"),
                                  f" must be one of {', '.join(dtypes)}, got {dtype!r}"))
    check_scale_and_group(label, scale, kv_group)
    if schedule != "auto" and not isinstance(schedule, schedule_class):
        raise PtxgenError(f"{label}: schedule must be 'auto' or an {schedule_class.__name__}, "
                          f"got {schedule!r}")


def check_heads(label, shape, kv_group):
    """shape, or a one-line PtxgenError for a head dim other than HEAD_DIMS or H not a
    multiple of kv_group."""
    if shape["D"] not in HEAD_DIMS:
        raise PtxgenError(f"{label}: head dim D={shape['D']} must be one of "
                          f"{', '.join(map(str, HEAD_DIMS))}")
    if shape["H"] % kv_group:
        raise PtxgenError(f"{label}: H={shape['H']} query heads are not a multiple of "
                          f"kv_group={kv_group}")
    return shape


class HalfArrays:
    """bf16 (as uint16 bit patterns) or f16 numpy arrays of an operator with a `dtype`."""

    def _np_in(self):
        return np.uint16 if self.dtype == "bf16" else np.float16

    def to_input(self, x):
        return bf16_bits(x) if self.dtype == "bf16" else np.asarray(x, dtype=np.float16)

    def values(self, a):
        return bf16_values(a) if self.dtype == "bf16" else np.asarray(a).astype(np.float64)

    def check_o_lse(self, arrays, ref):
        """(ok, worst relative error) of arrays' O and LSE against the reference's values and
        bounds; a row without keys has LSE -inf in both."""
        got_o = self.values(arrays["O"])
        got_l = np.asarray(arrays["LSE"], dtype=np.float64)
        err_o = np.abs(got_o - ref["O"])
        same_l = got_l == ref["LSE"]                       # rows without keys: -inf both
        with np.errstate(invalid="ignore"):
            err_l = np.where(same_l, 0.0, np.abs(got_l - ref["LSE"]))
        ok = bool(np.isfinite(got_o).all() and (np.isfinite(got_l) | same_l).all()
                  and (err_o <= ref["O_bound"]).all() and (err_l <= ref["LSE_bound"]).all())
        worst = max(float(np.max(err_o / np.maximum(np.abs(ref["O"]), 1.0), initial=0.0)),
                    float(np.max(err_l / np.maximum(np.nan_to_num(np.abs(ref["LSE"])), 1.0),
                                 initial=0.0)))
        return ok, worst


class WgmmaAttentionPath:
    """Attention on sm_90a: TMA loads of Q, K, V, wgmma, a producer warpgroup."""
    instruction = WGMMA

    @staticmethod
    def schedule_for(op, shape):
        if op.schedule != "auto":
            return op.schedule
        if "S" not in shape:               # packed sequences (varlen): the per-D schedule
            return default_attention_schedule(shape["D"], op.causal, forms=False)
        return default_attention_schedule(shape["D"], op.causal, not op._mods.active,
                                          (shape["B"] * shape["H"], shape["S"]),
                                          sm_count_or_default(None, TC_CHIP))

    @staticmethod
    def build(op, shape):
        return lower_attention(op.schedule_for(shape), op.built_arch, shape, dtype=op.dtype,
                               causal=op.causal, name=op.kernel_name(),
                               mods=op.mod_spec(shape), kv_group=op.kv_group)

    @staticmethod
    def kernel_args(op, shape, arrays):
        s = op.schedule_for(shape)
        rows = shape["B"] * shape["H"] * shape["S"]
        mt = "bf16" if op.dtype == "bf16" else "f16"

        def tmap(name, box_rows):
            n = rows if name == "Q" else rows // op.kv_group        # K/V: H / kv_group heads
            return TiledMap(arrays[name], mt, box_rows, COL_BLOCK, rows=n, cols=shape["D"])
        plan = [arrays["tile_plan"]] if s.persistent else []
        return [tmap("Q", s.BM), tmap("K", s.BN), tmap("V", s.BN), arrays["O"], arrays["LSE"],
                np.uint32(shape["S"]), np.float32(op.softmax_scale(shape) * math.log2(math.e))
                ] + plan + op.mod_args(shape, arrays)


class Attention(HalfArrays, InstructionPaths, Operator):
    """The attention forward, one operator for both instruction paths (PATHS): wgmma on
    sm_90a, mma.sync on the other targets or for an MmaAttentionSchedule. launch() and
    kernel_args() take no target: they follow the last build()/steps() (built_arch)."""
    name = "attention"
    shape_names = ("B", "H", "S", "D")
    defaults = {"B": 1, "H": 2, "S": 77, "D": 64}
    inputs = ("Q", "K", "V")
    outputs = ("O", "LSE")
    PATHS = {WGMMA: WgmmaAttentionPath, MMA_SYNC: MmaSyncAttentionPath}

    def __init__(self, dtype="bf16", causal=False, scale=None, schedule="auto", score_mod=None,
                 mask_mod=None, block_mask=None, kv_group=1):
        if dtype not in DTYPES:
            raise PtxgenError(Spelled("attention: ", Arg("dtype", "--dtype"),
                                      f" must be one of {', '.join(DTYPES)}, got {dtype!r}"))
        check_scale_and_group("attention", scale, kv_group)
        if schedule != "auto" and getattr(schedule, "instruction", None) not in INSTRUCTIONS:
            raise PtxgenError(f"attention: schedule must be 'auto', an AttentionSchedule or an "
                              f"MmaAttentionSchedule, got {schedule!r}")
        self.dtype, self.causal, self.scale, self.schedule = dtype, bool(causal), scale, schedule
        self.kv_group = kv_group
        self._mods = ProgrammableMods(score_mod, mask_mod, block_mask, self.causal)
        if self._mods.mask is not None:
            self.causal = False             # folded into the mask_mod

    def mod_spec(self, shape):
        """The lowering's AttentionMods for shape (None without mods)."""
        s = self.schedule_for(shape)
        return self._mods.spec(shape, self.softmax_scale(shape), s.BM, s.BN)

    def shape(self, **given):
        return check_heads("attention", super().shape(**given), self.kv_group)

    def schedule_for(self, shape):
        return self.path().schedule_for(self, shape)

    def softmax_scale(self, shape):
        return 1.0 / math.sqrt(shape["D"]) if self.scale is None else float(self.scale)

    def build(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        return self.for_target(arch).build(self, shape)

    def steps(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET, sm_count=None):
        self.for_target(arch)
        # sm_90a has no isa model of its own: the chip's (sm_90) SM count
        return super().steps(shape, arch, sm_count_or_default(sm_count, TC_CHIP))

    def launch(self, shape, sm_count=None):
        """One CTA per BM query rows of one (batch, head); either path's schedule. A persistent
        schedule: one CTA per SM (sm_count: a live device's), each walking the lists of the
        tile plan (workspace "tile_plan") x, x + nctaid, ...."""
        s = self.schedule_for(shape)
        grid = (*self._tile_grid(shape), 1)
        if getattr(s, "persistent", False):
            grid = (min(grid[0] * grid[1], sm_count_or_default(sm_count, TC_CHIP)), 1, 1)
        return Launch(grid=grid, block=(s.threads, 1, 1), shared_bytes=s.shared_bytes(shape["D"]))

    # -- a persistent schedule's tile plan ---------------------------------------------------
    def workspace(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        if not self._persistent(shape):
            return {}
        nq, heads = self._tile_grid(shape)
        lists = self.launch(shape).grid[0]
        return {"tile_plan": ((2 + lists + nq * heads,), np.uint32)}  # ops/tile_plan.py's layout

    def workspace_arrays(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        """The tile plan for the chip's SMs (a grid of other size still covers every tile)."""
        if not self._persistent(shape):
            return {}
        return {"tile_plan": self.tile_plan(shape)}

    def sim_arrays(self, shape):
        """The arrays whose values steer the work: the tile plan (simulate_operator)."""
        return self.workspace_arrays(shape)

    def _tile_grid(self, shape):
        """(query blocks, heads): the (query block, head) tiles of the grid."""
        return -(-shape["S"] // self.schedule_for(shape).BM), shape["B"] * shape["H"]

    def _persistent(self, shape):
        return getattr(self.schedule_for(shape), "persistent", False)

    def tile_plan(self, shape, ctas=None):
        """The (query block, head) tiles dealt to `ctas` lists (default: the chip's SMs) by
        their key blocks (ops/tile_plan.py); tile t is head t // nq's query block
        nq - 1 - t % nq, so in tile order each head's longest causal block comes first."""
        s = self.schedule_for(shape)
        (nq, heads), nk = self._tile_grid(shape), -(-shape["S"] // s.BN)
        qblk = np.arange(nq - 1, -1, -1)
        bm = self._mods.block_mask(shape, s.BM, s.BN)
        if bm is not None:                  # (mask batch, mask head, query block) counts
            counts = (bm.kv_num_blocks + bm.full_kv_num_blocks)[..., qblk]
            blocks = np.broadcast_to(counts, (shape["B"], shape["H"], nq)).reshape(heads, nq)
        elif self.causal:
            rows_end = np.minimum(shape["S"], (qblk + 1) * s.BM)
            blocks = np.broadcast_to(np.minimum(nk, -(-rows_end // s.BN)), (heads, nq))
        else:
            blocks = np.full((heads, nq), nk)
        # a tile's own work (its Q, first step and epilogue) counted as one key block more
        costs = blocks.reshape(-1) + 1
        return tile_plan.plan(costs, sm_count_or_default(ctas, TC_CHIP))

    # -- arrays --------------------------------------------------------------------------------
    def make_inputs(self, shape, rng):
        dims = (shape["B"], shape["H"], shape["S"], shape["D"])
        kv_dims = (shape["B"], shape["H"] // self.kv_group, shape["S"], shape["D"])
        nan = 0x7FC0 if self.dtype == "bf16" else np.nan              # unwritten → fails
        return {"Q": self.to_input(rng.standard_normal(dims)),
                "K": self.to_input(rng.standard_normal(kv_dims)),
                "V": self.to_input(rng.standard_normal(kv_dims)),
                "O": np.full(dims, nan, dtype=self._np_in()),
                "LSE": np.full(dims[:3], np.nan, dtype=np.float32),
                **self.mod_arrays(shape)}

    def mod_arrays(self, shape):
        """The mods' kernel arrays: the block mask's lists, the extra tensors (t0, t1, ...)."""
        s = self.schedule_for(shape)
        return self._mods.arrays(shape, s.BM, s.BN, getattr(s, "full_apart", False))

    def mod_args(self, shape, arrays):
        spec = self._mods.spec(shape, self.softmax_scale(shape), *self._blocks(shape))
        if spec is None:
            return []
        names = (["BM_counts", "BM_lists"] if spec.block_lists else []) + \
            [f"t{i}" for i in range(len(spec.tensors))]
        out = [arrays.get(n) for n in names]
        if spec.block_lists and not self._tiles_match(arrays.get("BM_counts"), shape):
            fresh = self.mod_arrays(shape)      # made for the other path's tiles: this one's
            out[:2] = [fresh["BM_counts"], fresh["BM_lists"]]
        return out

    def _tiles_match(self, counts, shape):
        """Whether the block mask arrays given (their first row: the tile) are this path's;
        device arrays are taken as they are."""
        if not isinstance(counts, np.ndarray):
            return counts is not None
        s = self.schedule_for(shape)
        apart = getattr(s, "full_apart", False)
        return tuple(int(x) for x in counts[0]) == (s.BM, s.BN | (1 << 31 if apart else 0))

    def _blocks(self, shape):
        s = self.schedule_for(shape)
        return s.BM, s.BN

    def kernel_args(self, shape, arrays):
        return self.path().kernel_args(self, shape, arrays)

    # -- reference -----------------------------------------------------------------------------
    def reference(self, shape, arrays):
        """float64 O and LSE, and the per-element bounds (see the module docstring)."""
        q, k, v = (self.values(arrays[n]) for n in ("Q", "K", "V"))
        if self.kv_group > 1:                   # each K/V head serves kv_group query heads
            k, v = (np.repeat(x, self.kv_group, axis=-3) for x in (k, v))
        return attention_reference(q, k, v, self.softmax_scale(shape), self.causal,
                                   UNIT_ROUNDOFF[self.dtype], mods=self._mods.graphs())

    def check(self, shape, arrays, reference=None):
        return self.check_o_lse(arrays, reference or self.reference(shape, arrays))

    def flops(self, shape):
        """4·B·H·S²·D (two matrix products), halved when causal: FlashAttention's count; with
        a mask, 4·D per allowed (query, key) pair."""
        pairs = self._mods.allowed_pairs(shape, *self._blocks(shape))
        if pairs is not None:
            return 4 * shape["D"] * pairs
        f = 4 * shape["B"] * shape["H"] * shape["S"] ** 2 * shape["D"]
        return f // 2 if self.causal else f

    def bytes_moved(self, shape):
        """Q and O, K and V of H / kv_group heads, LSE."""
        bhsd = shape["B"] * shape["H"] * shape["S"] * shape["D"]
        return 2 * bhsd * 2 + 2 * (bhsd // self.kv_group) * 2 + \
            4 * shape["B"] * shape["H"] * shape["S"]


def attention_reference(q, k, v, scale, causal, u, rows=None, mods=None, bh=None):
    """float64 attention of arrays (..., S, D): O, LSE (natural log) and bounds for a kernel
    that rounds P and O to a type of unit roundoff u and keeps the statistics in f32.
    rows: the sequence positions of q's rows when q holds only some of them (default: all).
    mods: (score graph, mask graph) of traced score_mod / mask_mod (either None); bh: the
    (batch, head) indices of q's leading dimensions, broadcastable (default: q is B x H x ...)."""
    if mods is not None:
        return modded_reference(q, k, v, scale, causal, u, rows, mods, bh)
    s = scale * np.einsum("...qd,...kd->...qk", q, k)
    if causal:
        pos = np.arange(q.shape[-2]) if rows is None else np.asarray(rows)
        s = np.where(np.arange(k.shape[-2])[None, :] <= pos[:, None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    o = (p @ v) / l
    lse = (m + np.log(l))[..., 0]
    pv_abs = (p @ np.abs(v)) / l
    qk_abs = scale * np.einsum("...qd,...kd->...qk", np.abs(q), np.abs(k)).max(axis=-1)
    f32 = 2.0 ** -22
    return {"O": o, "LSE": lse,
            "O_bound": 2 * u * pv_abs + 2 * u * np.abs(o) + 64 * f32 * (pv_abs + 1e-30),
            "LSE_bound": 2.0 ** -16 * (1 + np.abs(lse)) + q.shape[-1] * f32 * qk_abs}


def modded_reference(q, k, v, scale, causal, u, rows, mods, bh):
    """attention_reference with score_mod / mask_mod: the modified score's f32 error bound δ
    (score_mods.evaluate) widens O's bound by 2(e^(2δ) - 1)(Σp|v|/l + |O|) and LSE's by δ; a
    row with no allowed key gives O = 0 and LSE = -inf (FlexAttention's convention)."""
    from ..schedule.score_mods import evaluate
    score, mask = mods
    f32 = 2.0 ** -22
    pos = np.arange(q.shape[-2]) if rows is None else np.asarray(rows)
    if bh is None:
        lead = q.shape[:-2]
        bh = (np.arange(lead[0]).reshape((-1,) + (1,) * (len(lead) + 1)) if len(lead) > 1
              else np.int64(0),
              np.arange(lead[-1]).reshape((-1, 1, 1)) if lead else np.int64(0))
    env = {"b": bh[0], "h": bh[1], "q": pos[:, None], "kv": np.arange(k.shape[-2])[None, :]}
    s = scale * np.einsum("...qd,...kd->...qk", q, k)
    s_err = scale * q.shape[-1] * f32 * np.einsum("...qd,...kd->...qk", np.abs(q), np.abs(k))
    err = s_err
    if score is not None:
        s, err = evaluate(score, dict(env, score=s), score_err=s_err)
        s, err = np.broadcast_to(s, s_err.shape), np.broadcast_to(err, s_err.shape)
    allowed = np.ones(s.shape, bool)
    if causal:
        allowed &= env["kv"] <= env["q"]
    if mask is not None:
        allowed &= evaluate(mask, env)[0]
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m0 = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m0)
    l = p.sum(axis=-1, keepdims=True)
    lsafe = np.where(l > 0, l, 1.0)
    o = (p @ v) / lsafe
    with np.errstate(divide="ignore"):
        lse = (m0 + np.log(l))[..., 0]
    pv_abs = (p @ np.abs(v)) / lsafe
    delta = np.where(allowed, err, 0.0).max(axis=-1, keepdims=True)
    grow = 2 * np.expm1(2 * delta)
    return {"O": o, "LSE": lse,
            "O_bound": 2 * u * pv_abs + 2 * u * np.abs(o) + 64 * f32 * (pv_abs + 1e-30)
            + grow * (pv_abs + np.abs(o)),
            "LSE_bound": 2.0 ** -16 * (1 + np.abs(np.nan_to_num(lse))) + s_err.max(axis=-1)
            + delta[..., 0]}
