"""The third held-out group (held3) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel not in the set before (checked against every family of fit, held and held2),
added after every error of those splits had been seen; the lead evaluates them once, after the
model is frozen. Each case's arguments, launch and correctness check are written once, against a
small array interface (`g`: randn, rand, randint, empty, zeros, host) that model_set.Gpu provides
with torch tensors on the GPU and `HostArrays` with numpy arrays on the CPU, so
tests/test_model_set.py runs the very same launch at a small size on ptxgen's emulator.
Checks compare with float64 numpy references on the host, over a slice where the whole would
cost more than the kernel (the result is the relative error, 0 for exact results).
"""
from functools import partial

import numpy as np

NUMBA_FAMILIES = {"gemv_warp", "conv3x3_smem", "hist_warp_bytes", "poly_horner", "sfu_trig",
                  "nbody_tiled", "permute_nchw", "block_compact"}
TRITON_FAMILIES = {"triton_transpose", "triton_colsum", "triton_bmm_small"}
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES
SMS_X8 = 132 * 8          # grid-stride kernels: 8 blocks per SM of an H200, as hist_shared


def cases():
    """(family, source, size label, parameters) of every held3 case: two sizes per family,
    from ~10 us to ~1 ms of H200 time by a rough bandwidth/throughput estimate."""
    out = []
    for r, c in ((8192, 2048), (131072, 512)):
        out.append(("gemv_warp", "numba", f"{r}x{c}", dict(rows=r, cols=c)))
    for m in (2048, 8192):
        out.append(("conv3x3_smem", "numba", f"{m}^2", dict(m=m)))
    for n in (1 << 24, 1 << 26):
        out.append(("hist_warp_bytes", "numba", f"words={n}", dict(n=n)))
    for n, reps in ((1 << 24, 1), (1 << 22, 64)):
        out.append(("poly_horner", "numba", f"n={n} reps={reps}", dict(n=n, reps=reps)))
    for n, reps in ((1 << 24, 4), (1 << 22, 64)):
        out.append(("sfu_trig", "numba", f"n={n} reps={reps}", dict(n=n, reps=reps)))
    for n in (8192, 32768):
        out.append(("nbody_tiled", "numba", f"n={n}", dict(n=n)))
    for shape in ((32, 64, 56, 56), (16, 256, 64, 64)):
        out.append(("permute_nchw", "numba", "x".join(map(str, shape)), dict(shape=shape)))
    for n in (1 << 22, 1 << 25):
        out.append(("block_compact", "numba", f"n={n}", dict(n=n)))
    for m, n in ((4096, 4096), (16384, 8192)):
        out.append(("triton_transpose", "triton", f"{m}x{n}", dict(rows=m, cols=n)))
    for m, n in ((4096, 16384), (16384, 2048)):
        out.append(("triton_colsum", "triton", f"{m}x{n}", dict(rows=m, cols=n)))
    for b, s in ((8192, 32), (8192, 64)):
        out.append(("triton_bmm_small", "triton", f"batch={b} {s}^3", dict(batch=b, s=s)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples where
    the kernel allows it)."""
    fam, c = c["family"], dict(c)
    c.update({"gemv_warp": dict(rows=19, cols=100), "conv3x3_smem": dict(m=37),
              "hist_warp_bytes": dict(n=3000), "poly_horner": dict(n=1000, reps=3),
              "sfu_trig": dict(n=1000, reps=5), "nbody_tiled": dict(n=300),
              "permute_nchw": dict(shape=(2, 3, 5, 7)), "block_compact": dict(n=1000),
              "triton_transpose": dict(rows=100, cols=72),
              "triton_colsum": dict(rows=70, cols=200),
              "triton_bmm_small": dict(batch=3, s=32)}[fam])
    return c


class HostArrays:
    """numpy arrays behind the interface held3 cases build their arguments with (CPU side)."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)

    def randn(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def rand(self, *shape):
        return self.rng.random(shape).astype(np.float32)

    def randint(self, low, high, n):
        return self.rng.integers(low, high, size=n).astype(np.int32)

    def empty(self, *shape):
        return np.full(shape, np.nan, np.float32)

    def zeros(self, *shape, integer=False):
        return np.zeros(shape, np.int32 if integer else np.float32)

    def host(self, a):
        return a


def _rel(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held3 Numba case."""
    fam, inits = c["family"], {}
    if fam == "gemv_warp":
        r, k = c["rows"], c["cols"]
        a, x, y = g.randn(r, k), g.randn(k), g.empty(r)
        args, grid, block = [a, x, y], ((r * 32 + 255) // 256,), (256,)

        def check():
            rows = g.host(a[:256]).astype(np.float64)
            return _rel(g.host(y[:256]), rows @ g.host(x).astype(np.float64))
    elif fam == "conv3x3_smem":
        m = c["m"]
        a, w, b = g.randn(m, m), g.randn(3, 3), g.empty(m, m)
        args, grid, block = [a, w, b], ((m + 15) // 16, (m + 15) // 16), (16, 16)

        def check():                      # the first 64 rows (zero padding above and beside)
            top = min(64, m)
            rows = g.host(a[:top + 1]).astype(np.float64)
            pad = np.zeros((top + 2, m + 2))
            pad[1:1 + len(rows), 1:-1] = rows
            wh = g.host(w).astype(np.float64)
            ref = sum(wh[dy, dx] * pad[dy:dy + top, dx:dx + m]
                      for dy in range(3) for dx in range(3))
            return _rel(g.host(b[:top]), ref)
    elif fam == "hist_warp_bytes":
        words, bins = g.randint(-2 ** 31, 2 ** 31, c["n"]), g.zeros(256, integer=True)
        args, grid, block = [words, bins], (SMS_X8,), (256,)
        inits = {0: dict(kind="randint", low=-2 ** 31, high=2 ** 31)}

        def check():
            ref = np.bincount(np.ascontiguousarray(g.host(words)).view(np.uint8), minlength=256)
            return _rel(g.host(bins), ref)
    elif fam in ("poly_horner", "sfu_trig"):
        n, reps = c["n"], c["reps"]
        x = g.rand(n) * 2 - 1 if fam == "poly_horner" else g.randn(n)
        out = g.empty(n)
        args, grid, block = [x, out, reps], ((n + 255) // 256,), (256,)

        def check():
            v = g.host(x[:65536]).astype(np.float64)
            if fam == "poly_horner":
                coef = [0.5 * (-0.4) ** k for k in range(17)]
                for _ in range(reps):
                    v = np.polyval(coef[::-1], v)
                return _rel(g.host(out[:65536]), v)
            acc = np.zeros_like(v)
            for _ in range(reps):
                acc = 0.5 * acc + np.sin(v) * np.cos(acc)
                v = np.exp(-0.5 * v * v)
            return _rel(g.host(out[:65536]), acc)
    elif fam == "nbody_tiled":
        n = c["n"]
        pos, acc = g.rand(n, 4), g.empty(n, 3)
        args, grid, block = [pos, acc, 1e-3], ((n + 255) // 256,), (256,)

        def check():                      # the first 128 bodies against all n
            p = g.host(pos).astype(np.float64)
            d = p[None, :, :3] - p[:128, None, :3]
            inv = 1 / np.sqrt((d * d).sum(2) + 1e-3)
            ref = (d * (p[None, :, 3] * inv ** 3)[:, :, None]).sum(1)
            return _rel(g.host(acc[:128]), ref)
    elif fam == "permute_nchw":
        nn, ch, h, w = c["shape"]
        total = nn * ch * h * w
        x, y = g.randn(total), g.empty(total)
        args, grid, block = [x, y, ch, h, w], ((total + 255) // 256,), (256,)

        def check():
            ref = g.host(x).reshape(nn, ch, h, w).transpose(0, 2, 3, 1).reshape(-1)
            return _rel(g.host(y), ref)
    elif fam == "block_compact":
        n = c["n"]
        nb = (n + 255) // 256
        x, out, counts = g.randn(n), g.empty(nb * 256), g.zeros(nb, integer=True)
        args, grid, block = [x, out, counts, 0.0], (nb,), (256,)

        def check():
            xh, cnt = g.host(x), g.host(counts)
            ref_cnt = np.bincount(np.nonzero(xh > 0)[0] // 256, minlength=nb)
            if not np.array_equal(cnt, ref_cnt):
                return 1.0
            slots = np.arange(256)[None, :] < cnt[:, None]
            return _rel(g.host(out).reshape(nb, 256)[slots], xh[xh > 0])
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def triton_case(g, c):
    """(kernel name in model_set_triton, args, constexpr/launch keywords, grid, check) of a
    held3 Triton case (a name: the CPU side builds the arguments without importing Triton)."""
    fam = c["family"]
    if fam == "triton_transpose":
        m, n = c["rows"], c["cols"]
        x, y = g.randn(m, n), g.empty(n, m)
        kern, args = "transpose_kernel", [x, y, m, n, n, m]
        kw, grid = dict(BM=64, BN=64, num_warps=4), ((m + 63) // 64, (n + 63) // 64)

        def check():
            return _rel(g.host(y[:256]), g.host(x[:, :256]).T)
    elif fam == "triton_colsum":
        m, n = c["rows"], c["cols"]
        x, out = g.randn(m, n), g.empty(n)
        kern, args = "colsum_kernel", [x, out, m, n, n]
        kw, grid = dict(BM=32, BN=128, num_warps=4), ((n + 127) // 128,)

        def check():
            return _rel(g.host(out[:256]), g.host(x[:, :256]).astype(np.float64).sum(0))
    elif fam == "triton_bmm_small":
        b, s = c["batch"], c["s"]
        a, bb, o = g.randn(b, s, s), g.randn(b, s, s), g.empty(b, s, s)
        kern, args, kw, grid = "bmm_small_kernel", [a, bb, o], dict(S=s, num_warps=4), (b,)

        def check():
            k = min(b, 64)
            ref = g.host(a[:k]).astype(np.float64) @ g.host(bb[:k]).astype(np.float64)
            return _rel(g.host(o[:k]), ref)
    else:
        raise KeyError(fam)
    return kern, args, kw, grid, check


# -- CPU checks (tests/test_model_set.py); model_set_held4.py passes its own case builders ----
TRITON_TYPES = {"float32": "fp32", "int32": "i32", "float64": "fp64", "float16": "fp16"}


def compile_triton(c, case_fn=triton_case, kernels="model_set_triton"):
    """Triton's compiled kernel of case c for sm_90 without a GPU, specialised as Triton's JIT
    specialises a launch with these arguments (pointers and ints divisible by 16 marked so);
    case_fn builds the case, `kernels` is the module its kernel name is in."""
    import importlib
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kname, args, kw = case_fn(HostArrays(), c)[:3]
    kern = getattr(importlib.import_module(kernels), kname)
    sig, attrs = {}, {}
    for i, (name, a) in enumerate(zip(inspect.signature(kern.fn).parameters, args)):
        if isinstance(a, np.ndarray):
            sig[name], attrs[(i,)] = "*" + TRITON_TYPES[str(a.dtype)], [["tt.divisibility", 16]]
        elif isinstance(a, float):
            sig[name] = "fp32"
        else:
            assert a != 1, "Triton specialises ints equal to 1 away"
            sig[name] = "i32"
            if a % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    consts = {k: v for k, v in kw.items() if k.isupper()}
    sig.update({k: "constexpr" for k in consts})
    return triton.compile(ASTSource(kern, sig, constexprs=consts, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": kw.get("num_warps", 4)})


def save_triton_small(path, case_list=cases, small_fn=small, compile_fn=compile_triton):
    """The small cases' PTX and launch metadata (needs Triton, no GPU), for the CPU test."""
    import json
    out = {}
    for fam, src, _size, kw in case_list():
        if src == "triton" and fam not in out:
            c = small_fn(dict(family=fam, **kw))
            ck = compile_fn(c)
            out[fam] = dict(case=c, ptx=ck.asm["ptx"], entry=ck.name,
                            shared=int(ck.metadata.shared), warps=int(ck.metadata.num_warps),
                            triton=__import__("triton").__version__)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


def emulate_numba(c, ptx, case_fn=numba_case):
    """Run a Numba case on ptxgen's emulator (Numba's array ABI); its check's result."""
    from ptxgen.emu import numba_array_args
    from ptxgen.parse import parse_ptx
    g = HostArrays(1)
    args, grid, block, check, _inits = case_fn(g, c)
    flat = []
    for a in args:
        flat += numba_array_args(a) if isinstance(a, np.ndarray) else [a]
    return _emulate(parse_ptx(ptx), None, grid, block, flat, 0, check)


def emulate_triton(saved, case_fn=triton_case):
    """Run a saved small Triton case on ptxgen's emulator: the non-constexpr arguments, then
    Triton 3.6's two scratch pointers (null: these kernels need none)."""
    from ptxgen.parse import parse_ptx
    g = HostArrays(2)
    _kname, args, _kw, grid, check = case_fn(g, saved["case"])[:5]
    return _emulate(parse_ptx(saved["ptx"]), saved["entry"], grid, 32 * saved["warps"],
                    args + [0, 0], saved["shared"], check)


def _emulate(module, entry, grid, block, args, shared, check):
    from ptxgen.emu import emulate
    k = module.kernel(entry) if entry else module.entries[0]
    if len(args) != len(k.params):
        raise ValueError(f"{k.name}: {len(args)} arguments for {len(k.params)} parameters")
    kinds = {"u": "uint", "b": "uint", "s": "int", "f": "float"}
    typed = [a if isinstance(a, np.ndarray) else
             np.dtype(kinds[p.type.name[0]] + p.type.name[1:]).type(a)
             for p, a in zip(k.params, args)]
    emulate(module, k.name, grid, block, *typed, shared_bytes=shared, check="error")
    return check()


def _emulate_ptx_with(kernel_fn, case_fn, c):
    """Run a small PTX case (kernel_fn's text, case_fn's launch) on ptxgen's emulator; its
    check's result."""
    from ptxgen.parse import parse_ptx
    text, entry = kernel_fn(c["family"])
    args, grid, block, check, _inits = case_fn(HostArrays(3), c)
    return _emulate(parse_ptx(text), entry, grid, block, args, 0, check)


def cpu_checks(name, case_list, small_fn, numba_fn, triton_fn, ptx_fn, kernel_fn):
    """These CPU checks bound to the case builders of the blind group `name` (its Triton
    kernels in model_set_<name>_triton.py): compile_triton (c -> compiled kernel for sm_90, no
    GPU), save_triton_small (path), emulate_numba (c, ptx), emulate_triton (saved) and
    emulate_ptx (c), each giving its check's result where it emulates."""
    compile_fn = partial(compile_triton, case_fn=triton_fn, kernels=f"model_set_{name}_triton")
    return (compile_fn,
            partial(save_triton_small, case_list=case_list, small_fn=small_fn,
                    compile_fn=compile_fn),
            partial(emulate_numba, case_fn=numba_fn),
            partial(emulate_triton, case_fn=triton_fn),
            partial(_emulate_ptx_with, kernel_fn, ptx_fn))


def save_triton_main(name, save_fn):
    """A blind group's `python model_set_<name>.py save-triton FILE` (with Triton, no GPU)."""
    import sys
    if len(sys.argv) != 3 or sys.argv[1] != "save-triton":
        sys.exit(f"usage: model_set_{name}.py save-triton tests/data/model_set_{name}_triton.json")
    save_fn(sys.argv[2])


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "save-triton":
        save_triton_small(sys.argv[2])          # python with Triton (/work/tvenv), no GPU
    else:
        sys.exit("usage: model_set_held3.py save-triton tests/data/model_set_held3_triton.json")
