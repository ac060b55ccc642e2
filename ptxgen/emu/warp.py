"""Warp-level instructions: shfl.sync, vote.sync, activemask, redux.sync, match.sync,
elect.sync, bar.warp.sync.

Lanes of a warp are consecutive in the batch's lane order (warp w of CTA c starts at lane
c*threads + 32*w), so per-warp reductions are numpy `reduceat` over the warp start offsets and
a lane's shuffle source is `warp_base + source_lane`. A lane takes part when it is in the
executing group (and its guard holds); sources outside the warp (the short last warp of a CTA
whose size is not a multiple of 32) read the lane's own value, as PTX leaves them undefined.
"""
import numpy as np

from ..ir import types as T
from ..ir.values import PredPair

_U32 = np.dtype(np.uint32)
_I64 = np.dtype(np.int64)


def _full(st, x, dt=None):
    x = np.asarray(x)
    if x.ndim == 0:
        return np.full(st.n, x, dt or x.dtype)
    return x


def build_shfl(ctx, ins):
    mode = next((m for m in ins.mods if m in ("up", "down", "bfly", "idx")), None)
    if mode is None:
        ctx.fail("shfl without a mode")
    ops = ins.operands
    if len(ops) not in (4, 5):
        ctx.fail("shfl takes d, a, b, c[, membermask]")
    dst = ops[0]
    if isinstance(dst, PredPair):
        wd, wp = ctx.write(dst.first), ctx.write(dst.second)
    else:
        wd, wp = ctx.write(dst), None
    t = ins.type or T.b32
    a = ctx.read(ops[1], _U32, t)
    b = ctx.read(ops[2], _U32, T.u32)
    c = ctx.read(ops[3], _U32, T.u32)

    def fn(st, m):
        av = _full(st, a(st), _U32)
        lane = st.special("laneid").astype(_I64)
        bv = np.asarray(b(st)).astype(_I64) & 31
        cv = np.asarray(c(st)).astype(_I64)
        clamp, seg = cv & 31, (cv >> 8) & 31
        max_lane = (lane & seg) | (clamp & ~seg)
        if mode == "up":
            j = lane - bv
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bv
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= max_lane
        else:
            j = (lane & seg) | (bv & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        inside = j < st.warp_len
        src = np.where(inside, st.warp_base + j, st.lane_ids)
        wd(st, m, av[src])
        if wp is not None:
            wp(st, m, np.broadcast_to(ok, (st.n,)))
    return fn


def _warp_sum(st, x):
    """Per-lane sum over the lane's warp of int64 x."""
    per_warp = np.add.reduceat(x, st.warp_starts)
    return per_warp[st.warp_index]


def build_vote(ctx, ins):
    mode = next((mo for mo in ins.mods if mo in ("all", "any", "uni", "ballot")), None)
    if mode is None:
        ctx.fail("vote without a mode")
    ops = ins.operands
    p = ctx.read(ops[1], bool, T.pred)
    w = ctx.write(ops[0])

    def fn(st, m):
        active = np.ones(st.n, bool) if m is None else m
        pv = _full(st, p(st), bool) & active
        if mode == "ballot":
            bits = np.where(pv, np.left_shift(np.int64(1), st.special("laneid").astype(_I64)), 0)
            w(st, m, _warp_sum(st, bits).astype(np.uint64).astype(_U32))
            return
        n_true = _warp_sum(st, pv.astype(_I64))
        n_active = _warp_sum(st, active.astype(_I64))
        if mode == "all":
            r = n_true == n_active
        elif mode == "any":
            r = n_true > 0
        else:
            r = (n_true == 0) | (n_true == n_active)
        w(st, m, r)
    return fn


def build_activemask(ctx, ins):
    w = ctx.write(ins.operands[0])

    def fn(st, m):
        active = np.ones(st.n, bool) if m is None else m
        bits = np.where(active, np.left_shift(np.int64(1), st.special("laneid").astype(_I64)), 0)
        w(st, m, _warp_sum(st, bits).astype(np.uint64).astype(_U32))
    return fn


def build_redux(ctx, ins):
    op = next((mo for mo in ins.mods if mo in ("add", "min", "max", "and", "or", "xor")), None)
    t = ins.type
    if op is None or t is None or t.is_float:
        ctx.fail("only integer redux.sync add/min/max/and/or/xor is emulated")
    dt = np.dtype(np.int32) if t.name == "s32" else _U32
    a = ctx.read(ins.operands[1], dt, t)
    w = ctx.write(ins.operands[0])
    ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    info = np.iinfo(dt)
    neutral = {"add": 0, "min": info.max, "max": info.min, "and": -1 if dt.kind == "i" else
               info.max, "or": 0, "xor": 0}[op]

    def fn(st, m):
        v = _full(st, a(st), dt)
        if m is not None:
            v = np.where(m, v, dt.type(neutral))
        r = ufunc.reduceat(v, st.warp_starts)[st.warp_index]
        w(st, m, r.astype(dt))
    return fn


def _warp_matrix(st, v, fill):
    """(warps, 32) array of a per-lane value, lanes past a short warp's end set to fill."""
    nw = st.warp_starts.size
    mat = np.full((nw, 32), fill, v.dtype)
    mat[st.warp_index, st.special("laneid").astype(_I64)] = v
    return mat


def build_match(ctx, ins):
    """match.any.sync.b32/b64 d, a, mask: the lanes (of the executing group) holding the same
    value as this lane; match.all.sync d[|p], a, mask: all those lanes when every one holds
    the same value, else 0 (p says which)."""
    mode = "all" if "all" in ins.mods else "any" if "any" in ins.mods else None
    t = ins.type
    if mode is None or t is None:
        ctx.fail("match needs .any or .all and a type")
    dst = ins.operands[0]
    if isinstance(dst, PredPair):
        wd, wp = ctx.write(dst.first), ctx.write(dst.second)
    else:
        wd, wp = ctx.write(dst), None
    dt = np.dtype(np.uint64) if t.bits == 64 else _U32
    a = ctx.read(ins.operands[1], dt, t)

    def fn(st, m):
        active = np.ones(st.n, bool) if m is None else m
        v = _full(st, a(st), dt)
        vals = _warp_matrix(st, v, 0)
        act = _warp_matrix(st, active, False)
        mine = vals[st.warp_index]                           # (lanes, 32): my warp's values
        same = (mine == v[:, None]) & act[st.warp_index]
        bits = (same.astype(_I64) << np.arange(32)).sum(1)
        if mode == "any":
            wd(st, m, bits.astype(np.uint64).astype(_U32))
            return
        n_act = act[st.warp_index].sum(1)
        equal = same.sum(1) == n_act
        wd(st, m, np.where(equal, bits, 0).astype(np.uint64).astype(_U32))
        if wp is not None:
            wp(st, m, equal)
    return fn


def build_elect(ctx, ins):
    """elect.sync d|p, mask: the lowest active lane of each warp is elected (p), d its lane."""
    dst = ins.operands[0]
    if isinstance(dst, PredPair):
        wd, wp = ctx.write(dst.first), ctx.write(dst.second)
    else:
        wd, wp = None, ctx.write(dst)

    def fn(st, m):
        active = np.ones(st.n, bool) if m is None else m
        lane = st.special("laneid").astype(_I64)
        low = np.minimum.reduceat(np.where(active, lane, 99), st.warp_starts)[st.warp_index]
        if wd is not None:
            wd(st, m, low.astype(_U32))
        wp(st, m, lane == low)
    return fn


def build_bar_warp(ctx, ins):
    def fn(st, m):
        if st.shadow is not None:
            synced = np.ones(st.n, bool) if m is None else m.copy()
            st.shadow.warp_sync(synced, st.warp_index)
    return fn


def build_bar(ctx, ins):
    """bar/barrier opcodes that reach the table: bar.warp.sync and bar.arrive (CTA barriers are
    executor ops)."""
    if "warp" in ins.mods:
        return build_bar_warp(ctx, ins)
    if "arrive" in ins.mods:
        return lambda st, m: None        # arrival without waiting: nothing to emulate
    ctx.fail(f"{ins.full_opcode} is not emulated")


def build_bar_red(ctx, ins):
    """bar.red.{popc,and,or} d, a{, b}, {!}c: a CTA barrier whose every thread gets the count
    of threads with c true (popc) or whether all (and) / any (or) have it. The executor calls
    fn(state, lanes) when the barrier releases, with the lanes that waited at it; the reduction
    is per CTA of the batch."""
    kind = next((mo for mo in ("popc", "and", "or") if mo in ins.mods), None)
    if kind is None:
        ctx.fail("bar.red needs .popc, .and or .or")
    ops = ins.operands
    if len(ops) not in (3, 4):
        ctx.fail("bar.red takes d, a{, b}, c")
    p = ctx.read(ops[-1], bool, T.pred)
    w = ctx.write(ops[0])

    def fn(st, m):
        pv = _full(st, p(st), bool) & m
        ncta = int(st.lane_cta[-1]) + 1
        n_true = np.bincount(st.lane_cta, weights=pv, minlength=ncta)[st.lane_cta]
        if kind == "popc":
            w(st, m, n_true.astype(_U32))
            return
        n_in = np.bincount(st.lane_cta, weights=m, minlength=ncta)[st.lane_cta]
        w(st, m, n_true == n_in if kind == "and" else n_true > 0)
    return fn


BUILDERS = {"shfl": build_shfl, "vote": build_vote, "activemask": build_activemask,
            "redux": build_redux, "match": build_match, "elect": build_elect, "bar": build_bar,
            "barrier": build_bar}
