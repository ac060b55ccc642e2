"""Memory instructions: ld/ldu/st, atom/red, cp.async, cvta, isspacep.

A memory op works on the lanes its mask selects: it gathers their addresses, resolves them to
buffers (global allocations, the batch's shared or local memory, const or param space; generic
addresses by window), checks bounds and alignment, runs the shared-memory shadow checks, and then
gathers or scatters with numpy fancy indexing on a typed view of each buffer.
"""
import numpy as np

from ..ir.values import Addr, Imm, Reg, Sym, Vec
from . import cluster, memory
from .values import UNSIGNED, storage

ATOMIC_OPS = ("add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec")
_U64 = np.dtype(np.uint64)
_I64 = np.dtype(np.int64)


def shared_granule(body):
    """The smallest width of any access that may touch shared memory (granule of the shadow)."""
    from ..ir.instr import Instr
    g = 16
    for s in body:
        if not isinstance(s, Instr) or s.opcode not in ("ld", "st", "atom", "red", "ldu", "cp"):
            continue
        space = s.space
        if space not in ("shared", "generic", None):
            continue
        if s.opcode == "cp":
            sizes = [o.value for o in s.operands[2:3] if isinstance(o, Imm)]
            g = min([g] + [int(x) for x in sizes if int(x) > 0])
            continue
        t = s.type
        size = t.nbytes if t is not None else 1
        while size & (size - 1):
            size &= size - 1
        g = min(g, max(1, size))
    return g


# -- addresses -----------------------------------------------------------------------------------
def address_fetch(ctx, a, space):
    """fn(state) -> uint64 addresses (array over all lanes, or a scalar) of an Addr operand in
    `space` addressing (a symbol in a generic access means its generic address)."""
    if not isinstance(a, Addr):
        ctx.fail(f"expected a [address] operand, got {a}")
    off = np.uint64(a.offset % (1 << 64))
    base = a.base
    if isinstance(base, Reg):
        s = ctx.prog.slot(base)
        sd = ctx.prog.slot_dtypes[s]
        if sd == np.dtype(bool):
            ctx.fail("a predicate register used as an address")
        if sd.itemsize == 8:
            if off:
                return lambda st: st.R[s].view(_U64) + off
            return lambda st: st.R[s].view(_U64)
        uns = UNSIGNED[sd.itemsize]
        return lambda st: st.R[s].view(uns).astype(_U64) + off
    if isinstance(base, Sym):
        sp, addr = ctx.symbol(base.name)
        window = np.uint64(memory.WINDOWS[sp]) if space == "generic" else np.uint64(0)
        if addr is None:
            name = base.name
            return lambda st: np.uint64(st.global_addr[name]) + off
        c = np.uint64(addr) + window + off
        return lambda st: c
    if isinstance(base, Imm):
        c = np.uint64(int(base.value) % (1 << 64)) + off
        return lambda st: c
    ctx.fail(f"address base {base} is not emulated")


def access_space(ctx, ins, a):
    """The space an access really touches: ld/st.param on a call-sequence parameter (or an
    inlined function's own parameter) goes to the thread's local memory."""
    if any(m.startswith("shared::") for m in ins.mods):
        return "shared"                 # shared::cta and shared::cluster (emu.cluster)
    space = ins.space or "generic"
    if space == "param" and isinstance(a, Addr) and isinstance(a.base, Sym) and \
            ctx.symbol(a.base.name)[0] == "local":
        return "local"
    return space


def _lanes(m):
    if m is None:
        return None
    lanes = np.flatnonzero(m)
    return lanes if lanes.size else False


def _select(st, a, lanes):
    """Addresses of the active lanes as a uint64 array."""
    if np.ndim(a) == 0:
        return np.full(st.n if lanes is None else lanes.size, a, _U64)
    return a if lanes is None else a[lanes]


def _lane_ids(st, lanes, sel):
    ids = st.lane_ids if lanes is None else lanes
    return ids if sel is None else ids[sel]


# -- resolving addresses to buffers ---------------------------------------------------------------
def resolve(st, space, lanes, addr, width, opi, what):
    """Segments (buffer, positions or None, int64 byte offsets) for accesses of `width` bytes.
    Invalid accesses are reported (raising in check='error' mode) and left out."""
    if space == "generic":
        return _resolve_generic(st, lanes, addr, width, opi, what)
    if width > 1:
        mis = (addr & np.uint64(width - 1)) != 0
        if mis.any():
            bad = np.flatnonzero(mis)
            _report_bad(st, "misaligned", space, lanes, addr, bad, width, opi, what)
            return _drop(st, space, lanes, addr, width, opi, what, bad)
    if space == "global":
        segs, bad = st.gmem.locate(addr, width)
    elif space in ("shared", "local"):
        ls = st.shared if space == "shared" else st.local
        off, bad = ls.locate(lanes, addr, width)
        if bad.size and space == "shared":      # shared::cluster addresses of other CTAs
            off, bad = cluster.locate_remote(st, lanes, addr, width, off, bad, opi, what)
        segs = [(ls, None, off)]
    elif space in ("const", "param"):
        reg = st.const if space == "const" else st.params
        lim = reg.size - width
        badm = np.ones(addr.shape, bool) if lim < 0 else addr > np.uint64(lim)
        bad = np.flatnonzero(badm)
        segs = [(reg, None, addr.view(_I64))]
    else:
        raise AssertionError(space)
    if bad.size:
        _report_bad(st, "oob", space, lanes, addr, bad, width, opi, what)
        return _drop(st, space, lanes, addr, width, opi, what, bad)
    return segs


def _drop(st, space, lanes, addr, width, opi, what, bad):
    keep = np.ones(addr.shape[0], bool)
    keep[bad] = False
    pos = np.flatnonzero(keep)
    if not pos.size:
        return []
    sub_lanes = pos if lanes is None else lanes[pos]
    out = []
    for reg, sel, off in resolve(st, space, sub_lanes, addr[pos], width, opi, what):
        out.append((reg, pos if sel is None else pos[sel], off))
    return out


def _resolve_generic(st, lanes, addr, width, opi, what):
    w = addr >> np.uint64(memory.WINDOW_SHIFT)
    w0 = int(w[0])
    if (w == w0).all():
        space = memory.WINDOW_OF.get(w0, "global")
        base = np.uint64(memory.WINDOWS[space])
        return resolve(st, space, lanes, addr - base if base else addr, width, opi, what)
    out = []
    for u in np.unique(w):
        pos = np.flatnonzero(w == u)
        space = memory.WINDOW_OF.get(int(u), "global")
        base = np.uint64(memory.WINDOWS[space])
        sub_lanes = pos if lanes is None else lanes[pos]
        for reg, sel, off in resolve(st, space, sub_lanes, addr[pos] - base, width, opi, what):
            out.append((reg, pos if sel is None else pos[sel], off))
    return out


def _report_bad(st, kind, space, lanes, addr, bad, width, opi, what):
    i = int(bad[0])
    lane = int(i if lanes is None else lanes[i])
    a = int(addr[i])
    if kind == "misaligned":
        detail = f"misaligned {space} {what} of {width} bytes"
        extra = f"address is not a multiple of {width}"
    else:
        detail = f"out-of-bounds {space} {what} of {width} bytes"
        if space == "global":
            extra = st.gmem.describe(a, width)
        else:
            size = {"shared": st.shared.size, "local": st.local.size, "const": st.const.size,
                    "param": st.params.size}[space]
            extra = f"the {space} space of this {'thread' if space == 'local' else 'CTA'} " \
                    f"has {size} bytes" if space in ("shared", "local") else \
                f"{space} space has {size} bytes"
        if len(bad) > 1:
            extra += f"; {len(bad)} lanes of this instruction fault"
    st.report(kind, opi, lane, a, detail, extra=extra, space=space)


# -- loads and stores ------------------------------------------------------------------------------
def load(st, space, lanes, addr, dt, vec, opi):
    """The values (one array per vector element) of the accesses."""
    width = dt.itemsize * vec
    segs = resolve(st, space, lanes, addr, width, opi, "load")
    if len(segs) == 1 and segs[0][1] is None:
        reg, _, off = segs[0]
        if reg is st.shared and st.shadow is not None:
            st.shadow.read(st, opi, _lane_ids(st, lanes, None), off, width)
        if vec == 1:
            return [reg.view(dt)[off // width]]
        # one gather of whole vectors; the transposed copy makes each element contiguous
        return list(reg.view(dt, vec)[off // width].T.copy())
    n = addr.shape[0]
    outs = np.zeros((vec, n), dt)
    for reg, sel, off in segs:
        if reg is st.shared and st.shadow is not None:
            st.shadow.read(st, opi, _lane_ids(st, lanes, sel), off, width)
        rows = reg.view(dt, vec)[off // width]
        outs[:, sel] = rows.T if vec > 1 else rows
    return list(outs)


def _stored_bytes(values, dt, vec, n, sel):
    """The bytes a store writes, one row per access (of lanes `sel`), for the race check."""
    rows = np.empty((n, vec), dt)
    for k in range(vec):
        rows[:, k] = values[k]
    rows = rows if sel is None else rows[sel]
    return rows.view(np.uint8).reshape(len(rows), -1)


def store(st, space, lanes, addr, dt, vec, values, opi, generic=True):
    """generic=False: a write wgmma and TMA stores may read with no fence.proxy.async (cp.async's,
    see build_cp)."""
    width = dt.itemsize * vec
    segs = resolve(st, space, lanes, addr, width, opi, "store")
    n = addr.shape[0]
    data = None
    for reg, sel, off in segs:
        if reg is st.shared and st.shadow is not None:
            st.shadow.write(st, opi, _lane_ids(st, lanes, sel), off, width, generic,
                            lambda sel=sel: _stored_bytes(values, dt, vec, n, sel))
        elif reg is st.params or reg is st.const:
            st.report("oob", opi, int(_lane_ids(st, lanes, sel)[0]), 0,
                      f"store to read-only {space} space", space=space)
            continue
        if vec == 1:
            x = values[0]
            if np.ndim(x) and sel is not None:
                x = x[sel]
            reg.view(dt)[off // width] = x
            continue
        if data is None:
            data = np.empty((n, vec), dt)
            for k in range(vec):
                data[:, k] = values[k]
        reg.view(dt, vec)[off // width] = data if sel is None else data[sel]


def _value_fetchers(ctx, src, dt, vec):
    items = src.items if isinstance(src, Vec) else (src,)
    if len(items) != vec:
        ctx.fail(f"{vec}-element access with {len(items)} values")
    return [ctx.read(o, dt) for o in items]


def _elem_dtype(ctx, ins):
    t = ins.type
    if t is None:
        ctx.fail("memory access without a type")
    if t.name == "b128":
        ctx.fail(".b128 accesses are not emulated")
    return storage(t)


def _operands(ctx, ins, what):
    ops = ins.operands
    if len(ops) == 3 and any(m.startswith("L2::cache_hint") for m in ins.mods):
        ops = ops[:2]                      # the cache policy operand changes no value
    if len(ops) != 2:
        ctx.fail(f"{ins.opcode} takes {what}")
    return ops


def build_ld(ctx, ins):
    ops = _operands(ctx, ins, "a destination and an address")
    space = access_space(ctx, ins, ops[1])
    dt = _elem_dtype(ctx, ins)
    vec = ins.vector_width
    dst = ops[0]
    dests = dst.items if isinstance(dst, Vec) else (dst,)
    if len(dests) != vec:
        ctx.fail(f"{vec}-element load into {len(dests)} registers")
    writers = [ctx.write_lanes(d) for d in dests]
    af = address_fetch(ctx, ops[1], space)
    opi = ctx.code_index

    def fn(st, m):
        lanes = _lanes(m)
        if lanes is False:
            return
        vals = load(st, space, lanes, _select(st, af(st), lanes), dt, vec, opi)
        for w, v in zip(writers, vals):
            w(st, lanes, v)
    return fn


def build_st(ctx, ins):
    ops = _operands(ctx, ins, "an address and a value")
    space = access_space(ctx, ins, ops[0])
    dt = _elem_dtype(ctx, ins)
    vec = ins.vector_width
    vals = _value_fetchers(ctx, ops[1], dt, vec)
    af = address_fetch(ctx, ops[0], space)
    opi = ctx.code_index

    def fn(st, m):
        lanes = _lanes(m)
        if lanes is False:
            return
        xs = []
        for f in vals:
            x = f(st)
            xs.append(x if lanes is None or np.ndim(x) == 0 else x[lanes])
        store(st, space, lanes, _select(st, af(st), lanes), dt, vec, xs, opi)
    return fn


# -- atomics ---------------------------------------------------------------------------------------
def _atomic_fn(name, dt, type_name):
    if name == "add":
        if type_name in ("f16", "bf16"):
            from .values import from_f64, to_f64
            return lambda old, b: from_f64(to_f64(old, type_name) + to_f64(b, type_name),
                                           type_name)
        return lambda old, b: old + b
    if name in ("min", "max"):
        if dt.kind == "f":
            return np.fmin if name == "min" else np.fmax
        return np.minimum if name == "min" else np.maximum
    if name == "exch":
        return lambda old, b: np.broadcast_to(b, np.shape(old)).astype(dt)
    if name == "cas":
        return lambda old, b, c: np.where(old == b, c, old).astype(dt)
    if name in ("and", "or", "xor"):
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name]
    if name == "inc":
        return lambda old, b: np.where(old >= b, dt.type(0), old + dt.type(1)).astype(dt)
    if name == "dec":
        return lambda old, b: np.where((old == 0) | (old > b), b, old - dt.type(1)).astype(dt)
    raise AssertionError(name)


_UFUNC_AT = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor}


def _apply_atomic(v, ei, name, f, args, want_old, dt):
    """Apply the atomic to elements ei of v in lane order; the old values when wanted."""
    n = ei.shape[0]
    args = [np.broadcast_to(a, (n,)) for a in args]
    uniq = np.unique(ei)
    if uniq.size == n:
        old = v[ei]
        v[ei] = f(old, *args)
        return old
    if not want_old and name in _UFUNC_AT and not (name == "add" and dt == np.float16):
        uf = _UFUNC_AT[name]
        if dt.kind == "f" and name in ("min", "max"):
            uf = np.fmin if name == "min" else np.fmax
        uf.at(v, ei, args[0])             # unbuffered, in index (lane) order
        return None
    # rounds: a lane's rank among the lanes on its element (in lane order) is its round, so a
    # round touches each element once; the rounds come from two stable sorts, not a search per
    # round (a warp on one address is 32 rounds of a few numpy calls)
    order = np.argsort(ei, kind="stable")
    se = ei[order]
    first = np.ones(n, bool)
    first[1:] = se[1:] != se[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - start
    by_rank = np.argsort(rank, kind="stable")
    old = np.zeros(n, dt)
    bounds = np.cumsum(np.bincount(rank)).tolist()
    for lo, hi in zip([0] + bounds, bounds):
        take = by_rank[lo:hi]
        e = ei[take]
        o = v[e]
        old[take] = o
        v[e] = f(o, *(a[take] for a in args))
    return old


def _build_atomic(ctx, ins, has_dest):
    name = next((m for m in ins.mods if m in ATOMIC_OPS), None)
    if name is None:
        ctx.fail("atomic operation not recognised")
    if ins.vector_width > 1:
        ctx.fail("vector atomics are not emulated")
    ops = ins.operands
    first = 1 if has_dest else 0
    space = access_space(ctx, ins, ops[first] if len(ops) > first else None)
    t = ins.type
    if t is None:
        ctx.fail("atomic without a type")
    if t.name in ("f16x2", "bf16x2"):
        ctx.fail(f"packed {t.name} atomics are not emulated")
    dt = storage(t)
    nsrc = 2 if name == "cas" else 1
    if len(ops) != first + 1 + nsrc:
        ctx.fail(f"atom.{name} takes {nsrc} value operand(s)")
    af = address_fetch(ctx, ops[first], space)
    srcs = [ctx.read(o, dt, t) for o in ops[first + 1:]]
    write = ctx.write_lanes(ops[0]) if has_dest else None
    f = _atomic_fn(name, dt, t.name)
    opi = ctx.code_index
    width = dt.itemsize

    def fn(st, m):
        lanes = _lanes(m)
        if lanes is False:
            return
        addr = _select(st, af(st), lanes)
        args = []
        for g in srcs:
            x = g(st)
            args.append(x if lanes is None or np.ndim(x) == 0 else x[lanes])
        segs = resolve(st, space, lanes, addr, width, opi, "atomic")
        n = addr.shape[0]
        old_all = np.zeros(n, dt) if has_dest else None
        for reg, sel, off in segs:
            if reg is st.shared and st.shadow is not None:
                st.shadow.atomic(st, opi, _lane_ids(st, lanes, sel), off, width)
            elif reg is st.params or reg is st.const:
                st.report("oob", opi, int(_lane_ids(st, lanes, sel)[0]), 0,
                          f"atomic on read-only {space} space", space=space)
                continue
            sargs = [a if sel is None or np.ndim(a) == 0 else a[sel] for a in args]
            old = _apply_atomic(reg.view(dt), off // width, name, f, sargs, has_dest, dt)
            if has_dest:
                if sel is None:
                    old_all = old
                else:
                    old_all[sel] = old
        if has_dest:
            write(st, lanes, old_all)
    return fn


def build_atom(ctx, ins):
    return _build_atomic(ctx, ins, True)


def build_red(ctx, ins):
    return _build_atomic(ctx, ins, False)


# -- cp.async --------------------------------------------------------------------------------------
# Its shared-memory writes are not marked as generic-proxy writes for the proxy check: NVIDIA's
# own cp.async + wgmma pipelines (CUTLASS MainloopSm90CpAsyncGmma*) and Triton (its fence pass
# fences only register-to-shared stores) read them with wgmma after cp.async.wait_group and a
# barrier, with no fence.proxy.async, and Triton's matmul gives the same C on the H200 as here.
def build_cp(ctx, ins):
    mods = ins.mods
    if not mods or mods[0] != "async":
        ctx.fail("only cp.async is emulated")
    if "commit_group" in mods or "wait_group" in mods or "wait_all" in mods:
        return lambda st, m: None        # copies complete synchronously here
    if "bulk" in mods or "shared" not in mods or "global" not in mods:
        ctx.fail("only cp.async.{ca,cg}.shared.global is emulated")
    ops = ins.operands
    if len(ops) < 3 or not isinstance(ops[2], Imm):
        ctx.fail("cp.async needs a constant copy size")
    size = int(ops[2].value)
    if size not in (4, 8, 16):
        ctx.fail(f"cp.async copies 4, 8 or 16 bytes, not {size}")
    dst = address_fetch(ctx, ops[0], "shared")
    src = address_fetch(ctx, ops[1], "global")
    src_size = ctx.read(ops[3], np.uint32) if len(ops) > 3 else None
    u32, u8 = np.dtype(np.uint32), np.dtype(np.uint8)
    words = size // 4
    opi = ctx.code_index

    def fn(st, m):
        lanes = _lanes(m)
        if lanes is False:
            return
        d = _select(st, dst(st), lanes)
        s = _select(st, src(st), lanes)
        if src_size is None:
            vals = load(st, "global", lanes, s, u32, words, opi)
            store(st, "shared", lanes, d, u32, words, vals, opi, generic=False)
            return
        ss = np.broadcast_to(src_size(st), (st.n,))
        ss = ss if lanes is None else ss[lanes]
        ss = np.minimum(ss, size)
        n = d.shape[0]
        out = [np.zeros(n, u8) for _ in range(size)]
        for k in range(size):
            pos = np.flatnonzero(ss > k)
            if pos.size:
                sub = pos if lanes is None else lanes[pos]
                out[k][pos] = load(st, "global", sub, s[pos] + np.uint64(k), u8, 1, opi)[0]
        store(st, "shared", lanes, d, u8, size, out, opi, generic=False)
    return fn


# -- address conversion ----------------------------------------------------------------------------
def _window_space(mods):
    """The state space of cvta/isspacep (.shared::cta and .shared::cluster: the shared window,
    which holds the cluster's distributed shared memory too)."""
    for m in mods:
        m = m.split("::")[0]
        if m in memory.WINDOWS:
            return m
    return None


def build_cvta(ctx, ins):
    mods = ins.mods
    to = "to" in mods
    space = _window_space(mods)
    if space is None:
        ctx.fail("cvta without a state space")
    t = ins.type
    dt = storage(t) if t is not None else _U64
    src = ins.operands[1]
    if isinstance(src, Sym):
        f = ctx.address_of(src.name, _U64)
    else:
        f = ctx.read(src, _U64 if dt.itemsize == 8 else dt)
    w = ctx.write(ins.operands[0])
    window = np.uint64(memory.WINDOWS[space])

    def fn(st, m):
        a = np.asarray(f(st)).astype(_U64)
        a = a - window if to else a + window
        w(st, m, a.astype(dt))
    return fn


def build_isspacep(ctx, ins):
    space = _window_space(ins.mods)
    if space is None:
        ctx.fail("isspacep without a state space")
    f = ctx.read(ins.operands[1], _U64)
    w = ctx.write(ins.operands[0])
    code = {v: k for k, v in memory.WINDOW_OF.items()}.get(space)

    def fn(st, m):
        win = np.asarray(f(st)) >> np.uint64(memory.WINDOW_SHIFT)
        if code is None:            # global: outside every other window
            r = ~np.isin(win, list(memory.WINDOW_OF))
        else:
            r = win == code
        w(st, m, np.broadcast_to(r, (st.n,)))
    return fn


BUILDERS = {"ld": build_ld, "ldu": build_ld, "st": build_st, "atom": build_atom,
            "red": build_red, "cp": build_cp, "cvta": build_cvta, "isspacep": build_isspacep}
