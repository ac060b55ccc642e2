"""Triton versions of the library operators, for benchmarks/operators.py (GPU only).

Each kernel is the straightforward Triton program (masked block loads and stores, tl.sum/tl.max),
autotuned over a few block sizes and warp counts. `launcher(name, shape, d)` returns a callable
writing d['out'], or None when triton cannot be imported.
"""
try:
    import triton
    import triton.language as tl
except Exception:            # not installed, or no usable backend
    triton = None


def version():
    return getattr(triton, "__version__", None)


if triton is not None:
    def _cfgs(pairs, **fixed):
        return [triton.Config(dict(fixed, BLOCK=b), num_warps=w) for b, w in pairs]

    _EW = _cfgs(((1024, 4), (2048, 8), (4096, 8)))

    @triton.autotune(configs=_EW, key=["n"])
    @triton.jit
    def saxpy_kernel(x, y, out, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, a * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    @triton.autotune(configs=_EW, key=["n"])
    @triton.jit
    def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    @triton.autotune(configs=_EW, key=["n"])
    @triton.jit
    def scale_kernel(x, out, s, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, s * tl.load(x + offs, mask=m), mask=m)

    @triton.autotune(configs=[triton.Config({"BM": bm, "BN": bn}, num_warps=w)
                              for bm, bn, w in ((32, 32, 4), (64, 64, 4), (64, 64, 8))],
                     key=["M", "N"])
    @triton.jit
    def transpose_kernel(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        m = (rm[:, None] < M) & (rn[None, :] < N)
        t = tl.load(x + rm[:, None].to(tl.int64) * N + rn[None, :], mask=m)
        tl.store(out + rn[:, None].to(tl.int64) * M + rm[None, :], tl.trans(t),
                 mask=tl.trans(m))

    _RED = _cfgs(((1024, 4), (2048, 8), (4096, 8)))

    @triton.autotune(configs=_RED, key=["N"])
    @triton.jit
    def row_sum_kernel(x, out, N, BLOCK: tl.constexpr):
        row = x + tl.program_id(0).to(tl.int64) * N
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(row + cols, mask=cols < N, other=0.0)
        tl.store(out + tl.program_id(0), tl.sum(acc, axis=0))

    @triton.autotune(configs=_RED, key=["N"])
    @triton.jit
    def row_max_kernel(x, out, N, BLOCK: tl.constexpr):
        row = x + tl.program_id(0).to(tl.int64) * N
        acc = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc = tl.maximum(acc, tl.load(row + cols, mask=cols < N, other=float("-inf")))
        tl.store(out + tl.program_id(0), tl.max(acc, axis=0))

    @triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (4, 8, 16)], key=["N"])
    @triton.jit
    def softmax_kernel(x, out, N, BLOCK: tl.constexpr):
        # the fused-softmax tutorial: one program per row, the row in registers
        off = tl.program_id(0).to(tl.int64) * N
        cols = tl.arange(0, BLOCK)
        v = tl.load(x + off + cols, mask=cols < N, other=float("-inf"))
        v = v - tl.max(v, axis=0)
        e = tl.exp(v)
        tl.store(out + off + cols, e / tl.sum(e, axis=0), mask=cols < N)


def launcher(name, shape, d):
    if triton is None:
        return None
    x, o = d["x"], d["out"]
    if name in ("saxpy", "add", "scale"):
        n = shape["n"]

        def grid(meta):
            return (triton.cdiv(n, meta["BLOCK"]),)
        if name == "saxpy":
            a = float(d["a"])
            return lambda: saxpy_kernel[grid](x, d["y"], o, a, n)
        if name == "add":
            return lambda: add_kernel[grid](x, d["y"], o, n)
        s = float(d["s"])
        return lambda: scale_kernel[grid](x, o, s, n)
    M, N = shape["M"], shape["N"]
    if name == "transpose":
        def grid2(meta):
            return (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))
        return lambda: transpose_kernel[grid2](x, o, M, N)
    if name == "row_reduce":
        return lambda: row_sum_kernel[(M,)](x, o, N)
    if name == "row_max":
        return lambda: row_max_kernel[(M,)](x, o, N)
    if name == "softmax":
        block = triton.next_power_of_2(N)
        return lambda: softmax_kernel[(M,)](x, o, N, BLOCK=block)
    return None
