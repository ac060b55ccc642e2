"""Microbenchmark kernels, written with ptxgen's own Builder.

Every kernel reads the values it computes on from parameters, so ptxas can fold nothing, and
stores its final value, so nothing is dead. Timed regions sit between two reads of %clock64
(cycles of the SM the warp runs on); chains are unrolled, so the only instructions between the
clock reads are the ones measured.
"""
from ..arch import DEFAULT_TARGET
from ..ir import Builder, Module, Param, ptr
from ..ir import types as T

# Op classes with a dependent-chain / independent-stream kernel, and the PTX each one repeats.
ARITH_CLASSES = ("FMA", "FADD", "FMUL", "IALU", "IMAD", "CONV", "SFU", "FP64")
CHAIN_PTX = {
    "FMA": "fma.rn.f32", "FADD": "add.rn.f32", "FMUL": "mul.rn.f32",
    "IALU": "add.s32 / xor.b32", "IMAD": "mad.lo.s32", "CONV": "cvt.rzi.s32.f32 / cvt.rn.f32.s32",
    "SFU": "ex2.approx.ftz.f32", "FP64": "fma.rn.f64",
}
_VALUE_TYPE = {"FMA": T.f32, "FADD": T.f32, "FMUL": T.f32, "IALU": T.s32, "IMAD": T.s32,
               "CONV": T.f32, "SFU": T.f32, "FP64": T.f64}


def value_type(cls):
    return _VALUE_TYPE[cls]


def _rounds(b, cls, xs, a, c, n):
    """n rounds of one `cls` operation on every register of xs (independent chains, interleaved
    round by round; each chain's operations depend on each other)."""
    tmp = [None] * len(xs)
    for k in range(n):
        for j, x in enumerate(xs):
            if cls in ("FMA", "FP64"):
                b.fma(x, a, c, out=x)
            elif cls == "FADD":
                b.add(x, a, out=x)
            elif cls == "FMUL":
                b.mul(x, a, out=x)
            elif cls == "IALU":
                # add and xor alternate: neither folds into the other (IADD3 adds, LOP3 is
                # bitwise), so every one stays a dependent instruction
                if k % 2 == 0:
                    b.add(x, a, out=x)
                else:
                    b.xor(x, c, out=x)
            elif cls == "IMAD":
                b.mad(x, a, c, out=x)
            elif cls == "CONV":
                # f32 → s32 → f32: the chain alternates F2I and I2F, one conversion per round
                if k % 2 == 0:
                    tmp[j] = b.cvt(T.s32, x, name="ci")
                else:
                    b.cvt(T.f32, tmp[j], out=x)
            elif cls == "SFU":
                b.unary("ex2", x, mods=("approx", "ftz"), out=x)
            else:
                raise ValueError(f"no chain for op class {cls!r}")


def _start(b, name, t):
    return b.mov(b.param(name), type=t, name="x")


def latency_chain(cls, n, arch=DEFAULT_TARGET):
    """One warp: n dependent ops of `cls` between two clock reads.
    params (out: u64[2 * threads], a, c); out[2t] = cycles, out[2t+1] = the final value's bits."""
    t = value_type(cls)
    m = Module(target=arch)
    k = m.add_kernel(f"lat_{cls.lower()}", [Param("out", T.u64, ptr(T.u64, align=8)),
                                            Param("a", t), Param("c", t)])
    b = Builder(k)
    out, a, c = b.param("out"), b.param("a"), b.param("c")
    x = _start(b, "a", t)
    t0 = b.special("clock64")
    _rounds(b, cls, [x], a, c, n)
    t1 = b.special("clock64")
    _store_result(b, out, t0, t1, x)
    b.ret()
    return m


def _store_result(b, out, t0, t1, x):
    tid = b.special("tid.x")
    base = b.element_addr(out, b.shl(tid, 1, name="slot"), 8)
    b.st("global", base, b.sub(t1, t0, name="dt"))
    b.st("global", b.add(base, 8, type=T.u64, name="vaddr"), x)


def throughput_streams(cls, rounds, chains=8, arch=DEFAULT_TARGET):
    """Every thread runs `chains` independent chains of `cls`, `rounds` interleaved rounds
    unrolled per loop trip (the loop keeps the code in the instruction cache), `trips` trips.
    params (out: u64[2 * warps] = (start, end) clock per warp, sink: u64[threads], a, c,
    trips: u32)."""
    t = value_type(cls)
    m = Module(target=arch)
    k = m.add_kernel(f"tput_{cls.lower()}", [
        Param("out", T.u64, ptr(T.u64, align=8)), Param("sink", T.u64, ptr(T.u64, align=8)),
        Param("a", t), Param("c", t), Param("trips", T.u32)])
    b = Builder(k)
    out, sink, a, c = b.param("out"), b.param("sink"), b.param("a"), b.param("c")
    trips = b.param("trips")
    tid = b.special("tid.x")
    xs = []
    for j in range(chains):
        x = _start(b, "a", t)
        xs.append(b.add(x, j + 1, out=x) if t.is_int else b.add(x, float(j + 1), out=x))
    t0 = b.special("clock64")
    with b.for_range(0, trips, 1, type=T.u32, name="trip"):
        _rounds(b, cls, xs, a, c, rounds)
    t1 = b.special("clock64")
    acc = xs[0]
    for x in xs[1:]:
        acc = b.add(acc, x, name="acc")
    warp = b.shr(tid, 5, name="warp")
    base = b.element_addr(out, b.shl(warp, 1, name="slot"), 8)
    b.st("global", base, t0)
    b.st("global", b.add(base, 8, type=T.u64, name="eaddr"), t1)
    b.st("global", b.element_addr(sink, tid, 8), acc)
    b.ret()
    return m


def chase_global(cache, steps, arch=DEFAULT_TARGET):
    """One thread follows a pointer chain: `warm` untimed steps, then `steps` timed ones.
    params (start: u64 address of the first node, warm: u32, out: u64[2])."""
    m = Module(target=arch)
    k = m.add_kernel(f"chase_{cache}", [Param("start", T.u64), Param("warm", T.u32),
                                        Param("out", T.u64, ptr(T.u64, align=8))])
    b = Builder(k)
    start, warm, out = b.param("start"), b.param("warm"), b.param("out")
    p = b.mov(start, type=T.u64, name="p")
    with b.for_range(0, warm, 1, type=T.u32, name="w"):
        b.ld("global", T.u64, p, cache=cache, out=p)
    t0 = b.special("clock64")
    for _ in range(steps):
        b.ld("global", T.u64, p, cache=cache, out=p)
    t1 = b.special("clock64")
    b.st("global", out, b.sub(t1, t0, name="dt"))
    b.st("global", b.add(out, 8, type=T.u64, name="vaddr"), p)
    b.ret()
    return m


def chase_shared(steps, nodes, arch=DEFAULT_TARGET):
    """One thread builds a chain in shared memory from `next` (node i → next[i]) and follows
    it for `steps` timed loads. params (next: u32[nodes], out: u64[2])."""
    m = Module(target=arch)
    k = m.add_kernel("chase_shared", [Param("next", T.u64, ptr(T.u32)),
                                      Param("out", T.u64, ptr(T.u64, align=8))])
    b = Builder(k)
    nxt, out = b.param("next"), b.param("out")
    chain = b.shared("chain", T.u32, nodes, align=16)
    base = b.address_of(chain)
    with b.for_range(0, nodes, 1, type=T.u32, name="i") as i:
        to = b.ld("global", T.u32, b.element_addr(nxt, i, 4), name="to")
        b.st("shared", b.add(base, b.shl(i, 2, name="o")),
             b.add(base, b.shl(to, 2, name="o"), name="ptr"))
    p = b.mov(base, name="p")
    t0 = b.special("clock64")
    for _ in range(steps):
        b.ld("shared", T.u32, p, out=p)
    t1 = b.special("clock64")
    b.st("global", out, b.sub(t1, t0, name="dt"))
    b.st("global", b.add(out, 8, type=T.u64, name="vaddr"), b.cvt(T.u64, p))
    b.ret()
    return m


def barrier_loop(n, arch=DEFAULT_TARGET):
    """The CTA passes n bar.sync in a row; thread 0 stores the cycles. params (out: u64[2])."""
    m = Module(target=arch)
    k = m.add_kernel("bar_cost", [Param("out", T.u64, ptr(T.u64, align=8))])
    b = Builder(k)
    out = b.param("out")
    tid = b.special("tid.x")
    t0 = b.special("clock64")
    for _ in range(n):
        b.bar_sync(0)
    t1 = b.special("clock64")
    with b.predicated(b.setp("eq", tid, 0)):
        b.st("global", out, b.sub(t1, t0, name="dt"))
        b.st("global", b.add(out, 8, type=T.u64, name="vaddr"), b.cvt(T.u64, tid))
    b.ret()
    return m


def copy_v4(unroll=1, arch=DEFAULT_TARGET):
    """dst = src over n16 16-byte elements, `reps` times, grid-stride, 128-bit accesses. With a
    grid smaller than one 16-byte chunk per thread, `unroll` > 1 keeps that many loads in
    flight per thread before it stores (the bytes in flight per SM must cover bandwidth x
    latency); calibrate launches one chunk per thread, the layout measured fastest on the
    H200. params (n16: u32, reps: u32, src: u32*, dst: u32*)."""
    m = Module(target=arch)
    k = m.add_kernel("copy_v4", [Param("n16", T.u32), Param("reps", T.u32),
                                 Param("src", T.u64, ptr(T.u32, align=16)),
                                 Param("dst", T.u64, ptr(T.u32, align=16))])
    b = Builder(k)
    n16, reps = b.param("n16"), b.param("reps")
    src, dst = b.param("src"), b.param("dst")
    gid = b.global_index()
    stride = b.mul(b.special("nctaid.x"), b.special("ntid.x"), name="stride")
    chunk = b.mul(stride, unroll, name="chunk")
    with b.for_range(0, reps, 1, type=T.u32, name="r"):
        with b.for_range(gid, n16, chunk, type=T.u32, name="i") as i:
            todo = []
            for u in range(unroll):
                j = i if u == 0 else b.mad(stride, u, i, name="j")
                ok = b.setp("lt", j, n16, name="ok")
                off = b.mul(j, 16, mode="wide", type=T.u32, name="off")
                with b.predicated(ok):
                    v = b.ld("global", T.u32, b.add(src, off, type=T.u64, name="sa"), vec=4,
                             name="v")
                todo.append((ok, off, v))
            for ok, off, v in todo:
                with b.predicated(ok):
                    b.st("global", b.add(dst, off, type=T.u64, name="da"), list(v))
    b.ret()
    return m


def ffma_peak(chains=8, unroll=16, arch=DEFAULT_TARGET):
    """Each thread: `chains` independent FMA chains, `unroll` rounds per loop trip, `iters`
    trips. params (out: f32[threads], a, c: f32, iters: u32)."""
    m = Module(target=arch)
    k = m.add_kernel("ffma_peak", [Param("out", T.u64, ptr(T.f32)), Param("a", T.f32),
                                   Param("c", T.f32), Param("iters", T.u32)])
    b = Builder(k)
    out, a, c, iters = b.param("out"), b.param("a"), b.param("c"), b.param("iters")
    gid = b.global_index()
    xs = [b.add(b.cvt(T.f32, gid, name="g"), float(j), name="x") for j in range(chains)]
    with b.for_range(0, iters, 1, type=T.u32, name="it"):
        for _ in range(unroll):
            for x in xs:
                b.fma(x, a, c, out=x)
    acc = xs[0]
    for x in xs[1:]:
        acc = b.add(acc, x, name="acc")
    b.st("global", b.element_addr(out, gid, 4), acc)
    b.ret()
    return m


def scatter_u64(arch=DEFAULT_TARGET):
    """dst[idx[i]] = val[i] for i < n: writes a pointer chain into a large device array.
    params (n: u32, idx: u64*, val: u64*, dst: u64*)."""
    m = Module(target=arch)
    k = m.add_kernel("scatter_u64", [Param("n", T.u32), Param("idx", T.u64, ptr(T.u64)),
                                     Param("val", T.u64, ptr(T.u64)),
                                     Param("dst", T.u64, ptr(T.u64))])
    b = Builder(k)
    n, idx, val, dst = b.param("n"), b.param("idx"), b.param("val"), b.param("dst")
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        j = b.ld("global", T.u64, b.element_addr(idx, i, 8), name="j")
        v = b.ld("global", T.u64, b.element_addr(val, i, 8), name="v")
        b.st("global", b.element_addr(dst, j, 8), v)
    b.ret()
    return m


def empty_kernel(arch=DEFAULT_TARGET):
    """Nothing: the launch overhead that CUDA events see around every kernel."""
    m = Module(target=arch)
    k = m.add_kernel("empty", [Param("out", T.u64, ptr(T.u32))])
    Builder(k).ret()
    return m
