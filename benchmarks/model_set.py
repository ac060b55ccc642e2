"""The simulator's benchmark set: kernels ptxgen did not write, measured on a GPU in one run.

    python benchmarks/model_set.py collect $OUT/model_set.json   # GPU machine
    python benchmarks/model_eval.py docs/data/model_set_<date>.json   # CPU: simulate, compare

Each case is a kernel (Numba, Triton, hand-written PTX) at one size. On the GPU machine this
script compiles every kernel there and saves the PTX that ran, its launch (grid, block, dynamic
shared memory), its arguments (arrays by shape and dtype, scalars by value) and its GPU time
without launch overhead (ptxgen.runtime.timing held batches: back-to-back launches queued behind
a spin kernel, median of 5 batches). Beside the cases it measures the launch overhead of each
launch path (cuda.core on raw PTX, Numba's dispatcher, Triton's launcher): the CUDA-event time
of one launch on an idle stream minus the same kernel's held-batch GPU time.

The split into a fitting part and a held-out part is fixed here, before any model change, by
kernel family: the model may be fitted on `fit` cases only; `held` cases only report. Two later
held-out groups of new kinds followed: held2 (below), held3 (model_set_held3.py: its cases
were never simulated before the model was frozen) and held4 .. held11
(model_set_held4.py .. model_set_held11.py, built the same blind way: BLIND below);
model_eval.py reports each group apart.
"""
import json
import os
import platform
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import model_set_held2 as H2  # noqa: E402
import model_set_held3 as H3  # noqa: E402
import model_set_held4 as H4  # noqa: E402
import model_set_held5 as H5  # noqa: E402
import model_set_held6 as H6  # noqa: E402
import model_set_held7 as H7  # noqa: E402
import model_set_held8 as H8  # noqa: E402
import model_set_held9 as H9  # noqa: E402
import model_set_held10 as H10  # noqa: E402
import model_set_held11 as H11  # noqa: E402
import model_set_fit_l1 as FL  # noqa: E402  (round sim10a's fitting cases)
import model_set_fit_dram as FD  # noqa: E402  (round sim10b's fitting cases)
import model_set_fit14a as F14  # noqa: E402  (round sim14a's fitting cases)
import model_set_fit15b as F15  # noqa: E402  (round sim15b's fitting cases)
import model_set_fit15c as F15C  # noqa: E402  (round sim15c's fitting cases)

MB = 1 << 20
HELD_FAMILIES = {"block_scan", "gather", "stencil2d", "layernorm", "divergent",
                 "triton_softmax", "triton_layernorm", "transpose_padded", "hist_global",
                 "smem_stride8"}
# The second held-out group: kinds of kernel not in the set before, added before the second
# round of model changes; model_eval.py --hide held2 keeps their errors out of sight meanwhile.
HELD2_FAMILIES = H2.FAMILIES
# The third held-out group (model_set_held3.py): kinds of kernel added after every error of the
# three groups above had been seen; evaluated once, after the model is frozen.
HELD3_FAMILIES = H3.FAMILIES
# The fourth (model_set_held4.py): new kinds again, none simulated before the lead's one look.
HELD4_FAMILIES = H4.FAMILIES
# The fifth (model_set_held5.py): new kinds again, built blind as held4.
HELD5_FAMILIES = H5.FAMILIES
HELD6_FAMILIES = H6.FAMILIES     # the sixth (model_set_held6.py), built blind as held4
HELD7_FAMILIES = H7.FAMILIES     # the seventh (model_set_held7.py), built blind as held4
HELD8_FAMILIES = H8.FAMILIES     # the eighth (model_set_held8.py), built blind as held4
HELD9_FAMILIES = H9.FAMILIES     # the ninth (model_set_held9.py), built blind as held4
HELD10_FAMILIES = H10.FAMILIES   # the tenth (model_set_held10.py), built blind as held4
HELD11_FAMILIES = H11.FAMILIES   # the eleventh (model_set_held11.py), built blind as held4
# The blind groups on one interface (numba_case / triton_case / ptx_case / ptx_kernel returning
# argument inits; kernels in model_set_<split>_numba.py and _triton.py): split -> case module.
BLIND = {"held4": H4, "held5": H5, "held6": H6, "held7": H7, "held8": H8, "held9": H9,
         "held10": H10, "held11": H11}


# Fitting cases on the same interface, their kernels built per case (ptx_kernel(family, case)):
# round sim10a's stores after loads and lanes per line, round sim10b's atomics over buckets and
# strided row pieces, round sim14a's thin stores behind loads and one-sector lines, round
# sim15b's scattered atomics by form (atom, red, generic), round sim15c's sort8_network shapes.
FIT_MODULES = (FL, FD, F14, F15, F15C)


def _blind(family):
    """(split, case module) of a family of a blind group or of FIT_MODULES ("fit"), or
    (None, None)."""
    groups = [*BLIND.items(), *(("fit", m) for m in FIT_MODULES)]
    return next(((s, m) for s, m in groups if family in m.FAMILIES), (None, None))


def _case(family, source, size, **kw):
    split = ("held" if family in HELD_FAMILIES else "held2" if family in HELD2_FAMILIES
             else "held3" if family in HELD3_FAMILIES else _blind(family)[0] or "fit")
    return dict(family=family, source=source, size=size, split=split, **kw)


def cases():
    """Every case: family, source, size label and the parameters its setup needs."""
    out = []
    for n in (1 << 20, 1 << 22, 1 << 24, 1 << 26):
        out.append(_case("saxpy", "numba", f"n={n}", n=n))
    for s in (512, 1024):
        out.append(_case("matmul_naive", "numba", f"{s}^3", m=s))
    for s in (512, 1024, 2048):
        out.append(_case("matmul_shared", "numba", f"{s}^3", m=s))
    for n in (1 << 22, 1 << 24, 1 << 26):
        out.append(_case("block_reduce", "numba", f"n={n}", n=n))
    for s in (2048, 4096, 8192):
        out.append(_case("transpose_padded", "numba", f"{s}^2", m=s))
    for n in (1 << 22, 1 << 24, 1 << 26):
        out.append(_case("stencil1d", "numba", f"n={n}", n=n))
    for s in (2048, 8192):
        out.append(_case("stencil2d", "numba", f"{s}^2", m=s))
    for n in (1 << 22, 1 << 24):
        out.append(_case("hist_shared", "numba", f"n={n}", n=n))
    for n in (1 << 20, 1 << 22):
        out.append(_case("hist_global", "numba", f"n={n}", n=n))
    for n in (1 << 22, 1 << 24):
        out.append(_case("block_scan", "numba", f"n={n}", n=n))
    for n in (1 << 22, 1 << 24):
        out.append(_case("gather", "numba", f"n={n}", n=n))
    for n in (1 << 22, 1 << 24):
        out.append(_case("scatter", "numba", f"n={n}", n=n))
    for r, c in ((4096, 1024), (8192, 4096)):
        out.append(_case("layernorm", "numba", f"{r}x{c}", rows=r, cols=c))
    for n, it in ((1 << 22, 64), (1 << 24, 16)):
        out.append(_case("divergent", "numba", f"n={n} iters={it}", n=n, iters=it))
    for n in (1 << 20, 1 << 24, 1 << 26):
        out.append(_case("triton_add", "triton", f"n={n}", n=n))
    for s in (1024, 2048, 4096):
        out.append(_case("triton_matmul", "triton", f"{s}^3", m=s))
    for r, c in ((4096, 4096), (16384, 1024)):
        out.append(_case("triton_softmax", "triton", f"{r}x{c}", rows=r, cols=c))
    for r, c in ((4096, 4096), (8192, 1024)):
        out.append(_case("triton_layernorm", "triton", f"{r}x{c}", rows=r, cols=c))
    for n in (1 << 24, 1 << 26):
        out.append(_case("copy_v4", "ptx", f"n={n}", n=n))
    for it in (512, 4096):
        out.append(_case("fma_chain", "ptx", f"iters={it}", iters=it))
    for st in (1, 8, 32):
        out.append(_case("smem_stride" + ("" if st == 1 else str(st)), "ptx", f"stride={st}",
                         stride=st, kernel="smem_stride"))
    out.append(_case("atomic_one", "ptx", "n=1048576", n=1 << 20, mask=0, kernel="atomic_add"))
    out.append(_case("atomic_spread", "ptx", "n=4194304", n=1 << 22, mask=4095,
                     kernel="atomic_add"))
    # partial-sector stores a warp completes (branch sim5; k=8 and 2-byte words: sim6;
    # k=2, k=32 and k=16 u16: sim7)
    for k, b in ((1, 4), (2, 4), (4, 4), (8, 4), (16, 4), (32, 4), (8, 2), (16, 2)):
        for mib in (16, 512):
            u = "" if b == 4 else f" u{8 * b}"
            out.append(_case("store_lanes", "ptx", f"k={k}{u} {mib}MiB", k=k, b=b,
                             n=mib * MB // (b * k), kernel=f"store_lanes{k}{u.replace(' ', '_')}"))
    for n, t in ((1 << 20, 4), (1 << 22, 4), (1 << 22, 256)):   # scattered loads (sim6, sim7)
        out.append(_case("gather_hash", "ptx", f"n={n} table={t}MiB", n=n,
                         mask=(t << 18) - 1))
    out += [_case(fam, src, size, **kw) for fam, src, size, kw in FL.cases()]   # sim10a
    out += [_case(fam, src, size, **kw) for fam, src, size, kw in H2.cases()]
    out += [_case(fam, src, size, **kw) for fam, src, size, kw in H3.cases()]
    for H in (*BLIND.values(), FD, F14, F15, F15C):
        out += [_case(fam, src, size, **kw) for fam, src, size, kw in H.cases()]
    for c in out:
        c["name"] = f"{c['family']} {c['size']}"
    return out


# -- GPU side --------------------------------------------------------------------------------
class Gpu:
    def __init__(self):
        import numpy as np
        import torch
        from numba import cuda
        self.np, self.torch, self.cuda = np, torch, cuda
        self.numba_kernels = {}

    # arrays: torch tensors on the device; `desc` records them for the simulator
    def randn(self, *shape):
        return self.torch.randn(*shape, device="cuda", dtype=self.torch.float32)

    def empty(self, *shape, dtype=None):
        t = self.torch.empty(*shape, device="cuda", dtype=dtype or self.torch.float32)
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    def rand(self, *shape):
        return self.torch.rand(*shape, device="cuda", dtype=self.torch.float32)

    def randint(self, low, high, n):
        t = self.torch
        return t.randint(low, high, (n,), device="cuda", dtype=t.int64).to(t.int32)

    def zeros(self, *shape, integer=False):
        t = self.torch
        return t.zeros(*shape, device="cuda", dtype=t.int32 if integer else t.float32)

    def host(self, a):
        return a.cpu().numpy()

    def desc(self, a, init=None):
        """An argument as the simulator sees it; `init` says how the values were drawn when
        they steer addresses (index arrays: the model may draw the same kind of values)."""
        if hasattr(a, "shape") and hasattr(a, "dtype"):
            d = {"array": list(a.shape), "dtype": str(a.dtype).replace("torch.", "")}
            if init is not None:
                d["init"] = init
            return d
        return {"scalar": a, "dtype": "float32" if isinstance(a, float) else "int"}

    def numba(self, family):
        import importlib
        split = _blind(family)[0]
        if family not in self.numba_kernels:
            kernels = importlib.import_module(f"model_set_{split}_numba" if split
                                              else "model_set_numba").KERNELS
            fn, sig = kernels[family]
            k = self.cuda.jit(sig)(fn)
            try:
                ptx = k.inspect_asm(k.signatures[0])
                how = "dispatcher inspect_asm"
            except Exception:
                ptx, _ = self.cuda.compile_ptx(fn, sig, cc=(9, 0))
                how = "compile_ptx (same signature)"
            self.numba_kernels[family] = (k, ptx, how)
        return self.numba_kernels[family]


def _entry_name(ptx):
    import re
    return re.search(r"\.entry\s+([\w$]+)", ptx).group(1)


def setup(g, c):
    """(launch callable, record dict, check callable or None) of case c."""
    torch, np = g.torch, g.np
    fam, src = c["family"], c["source"]
    if src == "numba":
        return _setup_numba(g, c)
    if src == "triton":
        return _setup_triton(g, c)
    import model_set_ptx as P
    from ptxgen.parse import parse_ptx
    from ptxgen.runtime.driver import bound_launch, load_kernel
    kname = c.get("kernel", fam)
    blind = _blind(fam)[1]
    fit = blind if blind in FIT_MODULES else None
    # the fitting modules' kernels depend on the case, the blind groups' on the family only
    text, entry = (fit.ptx_kernel(fam, c) if fit else
                   blind.ptx_kernel(fam) if blind else P.KERNELS[kname])
    kir = parse_ptx(text).kernel(entry)
    k = load_kernel(text, entry, kir.params)
    check, inits = None, {}
    if blind:
        args, grid, block, check, inits = blind.ptx_case(g, c)
    elif kname == "copy_v4":
        x, y = g.randn(c["n"]), g.empty(c["n"])
        args, grid, block = [x, y, np.uint32(c["n"] // 4)], (c["n"] // 4 // 256,), (256,)
        check = lambda: float((y - x).norm() / x.norm())  # noqa: E731
    elif kname == "gather_hash":
        table, out = g.randn(c["mask"] + 1), g.empty(c["n"])
        args, grid, block = [table, out, np.uint32(c["n"]), np.uint32(c["mask"])], \
            (c["n"] // 256,), (256,)

        def check():
            ref = P.gather_hash_ref(g.host(table).astype(np.float64), c["n"], c["mask"])
            return float(np.abs(g.host(out) - ref).max() / np.abs(ref).max())
    elif kname == "fma_chain":
        out = g.empty(132 * 8 * 256)
        args, grid, block = [out, np.uint32(c["iters"])], (132 * 8,), (256,)
    elif fam == "store_lanes":
        b = c.get("b", 4)                   # int32 storage, read back as b-byte words
        out = g.zeros(c["n"] * c["k"] * b // 4, integer=True)
        args, grid, block = [out, np.uint32(c["n"])], (c["n"] // 256,), (256,)
        words = out.view(torch.int32 if b == 4 else torch.int16).view(-1, c["k"])
        want = (torch.arange(c["n"], device="cuda", dtype=torch.int64) % (1 << (8 * b)))
        check = lambda: float((words.long() % (1 << (8 * b)) != want[:, None]).sum())  # noqa
    elif kname == "smem_stride":
        out = g.empty(132 * 8 * 256)
        args, grid, block = [out, np.uint32(1024), np.uint32(c["stride"])], (132 * 8,), (256,)
    else:
        buf = torch.zeros(max(c["mask"] + 1, 1), device="cuda", dtype=torch.int32)
        args = [buf, np.uint32(c["n"]), np.uint32(c["mask"])]
        grid, block = (c["n"] // 256,), (256,)
    # parsed PTX declares pointers as plain u64: pass the tensors' addresses
    raw = [np.uint64(a.data_ptr()) if hasattr(a, "data_ptr") else a for a in args]
    go = bound_launch(k, grid, block, raw)
    rec = dict(ptx=text, entry=entry, grid=list(grid), block=list(block), shared=0,
               args=[g.desc(a.item() if isinstance(a, np.generic) else a, inits.get(i))
                     for i, a in enumerate(args)],
               path="cuda.core", registers=k.registers)
    return go, rec, check


def _setup_numba(g, c):
    torch, cuda = g.torch, g.cuda
    fam = c["family"]
    k, ptx, how = g.numba(fam)
    check, shared, inits = None, 0, {}
    if fam == "saxpy":
        x, y, o = g.randn(c["n"]), g.randn(c["n"]), g.empty(c["n"])
        args, grid, block = [2.5, x, y, o], ((c["n"] + 255) // 256,), (256,)
        check = lambda: float((o - (2.5 * x + y)).norm() / (2.5 * x + y).norm())  # noqa: E731
    elif fam in ("matmul_naive", "matmul_shared"):
        m = c["m"]
        A, B, C = g.randn(m, m), g.randn(m, m), g.empty(m, m)
        args = [A, B, C]
        if fam == "matmul_naive":
            grid, block = ((m + 15) // 16, (m + 15) // 16), (16, 16)
        else:
            grid, block = ((m + 15) // 16, (m + 15) // 16), (16, 16)

        def check():
            ref = A.double() @ B.double()
            return float((C.double() - ref).norm() / ref.norm())
    elif fam == "block_reduce":
        x, t = g.randn(c["n"]), torch.zeros(1, device="cuda")
        args, grid, block = [x, t], (c["n"] // 256,), (256,)
    elif fam == "transpose_padded":
        m = c["m"]
        a, b = g.randn(m, m), g.empty(m, m)
        args, grid, block = [a, b], (m // 32, m // 32), (32, 32)
        check = lambda: float((b - a.t()).norm() / a.norm())  # noqa: E731
    elif fam == "stencil1d":
        x, o = g.randn(c["n"]), torch.zeros(c["n"], device="cuda")
        args, grid, block = [x, o], ((c["n"] + 255) // 256,), (256,)
    elif fam == "stencil2d":
        m = c["m"]
        a, b = g.randn(m, m), torch.zeros(m, m, device="cuda")
        args, grid, block = [a, b], (m // 32, m // 8), (32, 8)
    elif fam in ("hist_shared", "hist_global"):
        d = torch.randint(0, 256, (c["n"],), device="cuda", dtype=torch.int32)
        bins = torch.zeros(256, device="cuda", dtype=torch.int32)
        args = [d, bins]
        grid, block = ((132 * 8,) if fam == "hist_shared" else (c["n"] // 256,)), (256,)
    elif fam == "block_scan":
        x, o = g.randn(c["n"]), g.empty(c["n"])
        args, grid, block = [x, o], (c["n"] // 1024,), (1024,)

        def check():
            ref = x.double().view(-1, 1024).cumsum(1).view(-1)
            return float((o.double() - ref).norm() / ref.norm())
    elif fam in ("gather", "scatter"):
        x, o = g.randn(c["n"]), g.empty(c["n"])
        idx = torch.randperm(c["n"], device="cuda", dtype=torch.int64).to(torch.int32)
        args, grid, block = [x, idx, o], (c["n"] // 256,), (256,)
    elif fam == "layernorm":
        x, y = g.randn(c["rows"], c["cols"]), g.empty(c["rows"], c["cols"])
        args, grid, block = [x, y, 1e-5], (c["rows"],), (256,)

        def check():
            ref = torch.nn.functional.layer_norm(x.double(), (c["cols"],), eps=1e-5)
            return float((y.double() - ref).norm() / ref.norm())
    elif fam == "divergent":
        x, o = g.randn(c["n"]), g.empty(c["n"])
        args, grid, block = [x, o, c["iters"]], (c["n"] // 256,), (256,)
    elif fam in HELD2_FAMILIES:
        args, grid, block, check, inits = H2.numba_case(g, c)
    elif fam in HELD3_FAMILIES:
        args, grid, block, check, inits = H3.numba_case(g, c)
    elif _blind(fam)[1]:
        args, grid, block, check, inits = _blind(fam)[1].numba_case(g, c)
    else:
        raise KeyError(fam)
    if fam in ("hist_shared", "hist_global"):
        inits = {0: dict(kind="randint", low=0, high=256)}
    elif fam in ("gather", "scatter"):
        inits = {1: dict(kind="randperm")}
    dargs = [cuda.as_cuda_array(a) if hasattr(a, "__cuda_array_interface__") else a
             for a in args]
    grid3, block3 = tuple(grid), tuple(block)

    def go():
        k[grid3, block3](*dargs)
    rec = dict(ptx=ptx, ptx_from=how, entry=_entry_name(ptx), grid=list(grid),
               block=list(block), shared=shared,
               args=[g.desc(a, inits.get(i)) for i, a in enumerate(args)], path="numba")
    try:
        rec["registers"] = int(k.get_regs_usage(k.signatures[0]))
    except Exception:
        pass
    return go, rec, check


def _setup_triton(g, c):
    import model_set_triton as T
    torch = g.torch
    fam = c["family"]
    check, inits = None, {}
    if fam == "triton_add":
        n = c["n"]
        x, y, o = g.randn(n), g.randn(n), g.empty(n)
        kern, args, kw, grid = T.add_kernel, [x, y, o, n], dict(BLOCK=1024), (n // 1024,)
        check = lambda: float((o - (x + y)).norm() / (x + y).norm())  # noqa: E731
    elif fam == "triton_matmul":
        m = c["m"]
        a, b, o = g.randn(m, m), g.randn(m, m), g.empty(m, m)
        kern = T.matmul_kernel
        args = [a, b, o, m, m, m, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                o.stride(0), o.stride(1)]
        kw = dict(BM=128, BN=128, BK=32, num_warps=8, num_stages=3)
        grid = (m // 128, m // 128)

        def check():
            ref = a.double() @ b.double()
            return float((o.double() - ref).norm() / ref.norm())
    elif fam == "triton_softmax":
        r, cc = c["rows"], c["cols"]
        x, o = g.randn(r, cc), g.empty(r, cc)
        kern, args, grid = T.softmax_kernel, [o, x, x.stride(0), cc], (r,)
        kw = dict(BLOCK=cc, num_warps=8 if cc >= 2048 else 4)
        check = lambda: float((o - torch.softmax(x, 1)).norm() / torch.softmax(x, 1).norm())  # noqa
    elif fam == "triton_fused":
        n = c["n"]
        x, y, o = g.randn(n), g.randn(n), g.empty(n)
        kern, args, kw, grid = T.fused_chain_kernel, [x, y, o, n], dict(BLOCK=1024), (n // 1024,)

        def check():
            z = x.double() * y.double() + 0.5 * x.double()
            ref = z * torch.sigmoid(z) + 0.25 * y.double().abs()
            return float((o.double() - ref).norm() / ref.norm())
    elif fam == "triton_rowmax":
        r, cc = c["rows"], c["cols"]
        x, o = g.randn(r, cc), g.empty(r)
        kern, args, grid = T.rowmax_kernel, [x, o, x.stride(0), cc], (r,)
        kw = dict(BLOCK=cc, num_warps=8 if cc >= 2048 else 4)
        check = lambda: float((o - x.amax(1)).norm() / x.amax(1).norm())  # noqa: E731
    elif fam in HELD3_FAMILIES:
        kname, args, kw, grid, check = H3.triton_case(g, c)
        kern = getattr(T, kname)
    elif _blind(fam)[1]:
        import importlib
        split, H = _blind(fam)
        kname, args, kw, grid, check, inits = H.triton_case(g, c)
        kern = getattr(importlib.import_module(f"model_set_{split}_triton"), kname)
    else:
        r, cc = c["rows"], c["cols"]
        x, y = g.randn(r, cc), g.empty(r, cc)
        w, b = g.randn(cc), g.randn(cc)
        kern, args, grid = T.layernorm_kernel, [x, y, w, b, x.stride(0), cc, 1e-5], (r,)
        kw = dict(BLOCK=cc, num_warps=8 if cc >= 2048 else 4)

        def check():
            ref = torch.nn.functional.layer_norm(x.double(), (cc,), w.double(), b.double(), 1e-5)
            return float((y.double() - ref).norm() / ref.norm())
    ck = kern[grid](*args, **kw)
    md = ck.metadata

    def go():
        kern[grid](*args, **kw)
    block = [32 * int(md.num_warps), 1, 1]
    rec = dict(ptx=ck.asm["ptx"], entry=_entry_name(ck.asm["ptx"]), grid=list(grid),
               block=block, shared=int(md.shared),
               args=[g.desc(a, inits.get(i)) for i, a in enumerate(args)],
               constexprs={k: v for k, v in kw.items() if k.isupper()},
               num_stages=kw.get("num_stages"), path="triton")
    try:
        rec["registers"] = int(ck.n_regs)
    except Exception:
        pass
    return go, rec, check


def single_launch_ms(g, go, n):
    """Median CUDA-event time of one launch on an idle stream (what a lone call sees)."""
    cuda = g.cuda
    ts = []
    for _ in range(n):
        cuda.synchronize()
        s, e = cuda.event(), cuda.event()
        s.record()
        go()
        e.record()
        e.synchronize()
        ts.append(cuda.event_elapsed_time(s, e))
    return float(g.np.median(ts))


def held_batches(g, go):
    """GPU ms per launch: 5 held batches (ptxgen.runtime.timing), all five kept."""
    from ptxgen.runtime import timing
    batch = timing.batch_for(go)
    timing._held_batch(go, max(1, batch // 4))
    return batch, [timing._held_batch(go, batch) for _ in range(5)]


def launch_paths(g):
    """Launch overhead per path: single launch (events, idle stream) minus held-batch time, and
    the host's own time per launch call."""
    import model_set_ptx as P
    import model_set_triton as T
    from ptxgen.parse import parse_ptx
    from ptxgen.runtime.driver import bound_launch, load_kernel
    np, cuda = g.np, g.cuda
    a, b, c = g.randn(1024), g.randn(1024), g.empty(1024)
    text, entry = P.KERNELS["empty"]
    k = load_kernel(text, entry, parse_ptx(text).kernel(entry).params)
    raw = bound_launch(k, (1,), (32,), [])
    nk, _, _ = g.numba("empty3")
    da = [cuda.as_cuda_array(t) for t in (a, b, c)]
    T.add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    paths = {
        "cuda.core": raw,
        "numba": lambda: nk[(1,), (32,)](*da),
        "triton": lambda: T.add_kernel[(1,)](a, b, c, 1024, BLOCK=1024),
    }
    out = {}
    for name, go in paths.items():
        for _ in range(20):
            go()
        cuda.synchronize()
        t = time.perf_counter()
        for _ in range(300):
            go()
        host_us = (time.perf_counter() - t) / 300 * 1e6
        cuda.synchronize()
        single = single_launch_ms(g, go, 201)
        _, gpu = held_batches(g, go)
        gpu_ms = float(np.median(gpu))
        out[name] = dict(single_launch_us=single * 1e3, gpu_us=gpu_ms * 1e3,
                         overhead_us=(single - gpu_ms) * 1e3, host_call_us=host_us)
    return out


def check_text(err):
    """A check's relative error as the progress line prints it, exponent included (the old
    `!s:>10.9` cut gather_hash's 1.21e-07 to "1.2147079", which read as a failed check)."""
    return "" if err is None else format(err, ".3g")


def collect(path, only=None):
    """Measure every case (only: those whose name contains it, or whose split it names;
    launch paths skipped)."""
    g = Gpu()
    np, torch = g.np, g.torch
    import numba
    import triton
    dev = g.cuda.get_current_device()
    meta = dict(date=time.strftime("%Y-%m-%d"), device=dev.name.decode()
                if isinstance(dev.name, bytes) else str(dev.name),
                python=platform.python_version(), numpy=np.__version__, torch=torch.__version__,
                triton=triton.__version__, numba=numba.__version__,
                timing="ptxgen.runtime.timing held batches, median of 5 (all 5 kept)",
                held_families=sorted(HELD_FAMILIES), held2_families=sorted(HELD2_FAMILIES),
                held3_families=sorted(HELD3_FAMILIES), held4_families=sorted(HELD4_FAMILIES),
                held5_families=sorted(HELD5_FAMILIES), held6_families=sorted(HELD6_FAMILIES),
                held7_families=sorted(HELD7_FAMILIES), held8_families=sorted(HELD8_FAMILIES),
                held9_families=sorted(HELD9_FAMILIES), held10_families=sorted(HELD10_FAMILIES),
                held11_families=sorted(HELD11_FAMILIES),
                command="python benchmarks/model_set.py "
                "collect $OUT/model_set.json")
    try:
        import subprocess
        meta["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
             "clocks.mem,power.draw,temperature.gpu", "--format=csv"],
            capture_output=True, text=True, timeout=20).stdout
    except Exception as e:
        meta["nvidia_smi"] = repr(e)
    data = dict(meta=meta, launch={}, cases=[])
    try:
        data["launch"] = {} if only else launch_paths(g)
    except Exception:
        data["launch_error"] = traceback.format_exc()[-2000:]
    for c in (c for c in cases() if not only or only in c["name"] or only == c["split"]):
        rec = dict(c)
        t0 = time.perf_counter()
        try:
            torch.manual_seed(len(data["cases"]))
            go, info, check = setup(g, c)
            rec.update(info)
            go()
            g.cuda.synchronize()
            if check is not None:
                try:                    # a broken check must not lose the case's GPU time
                    rec["rel_error"] = check()
                except Exception:
                    rec["check_error"] = traceback.format_exc()[-1500:]
            batch, ts = held_batches(g, go)
            rec.update(batch=batch, gpu_ms_all=ts, gpu_us=float(np.median(ts)) * 1e3)
            rec["single_launch_us"] = single_launch_ms(g, go, 11) * 1e3
        except Exception:
            rec["error"] = traceback.format_exc()[-1500:]
        rec["wall_s"] = time.perf_counter() - t0
        data["cases"].append(rec)
        print(f"{rec['name']:40s} {rec.get('gpu_us', float('nan')):10.2f} us "
              f"{check_text(rec.get('rel_error')):>10s} {'ERROR' if 'error' in rec else ''}",
              flush=True)
        torch.cuda.empty_cache()
        with open(path, "w") as f:
            json.dump(data, f)
    for name, v in data["launch"].items():
        print(f"launch {name:10s} overhead {v['overhead_us']:7.2f} us  host call "
              f"{v['host_call_us']:7.2f} us  gpu {v['gpu_us']:6.2f} us")
    print(f"{sum('error' not in r for r in data['cases'])}/{len(data['cases'])} cases measured")
    return 0


if __name__ == "__main__":
    if len(sys.argv) in (3, 5) and sys.argv[1] == "collect":    # [--only SUBSTRING]
        sys.exit(collect(sys.argv[2], sys.argv[4] if len(sys.argv) == 5 else None))
    for c in cases():
        print(f"{c['split']:5s} {c['source']:7s} {c['name']}")
    counts = {s: sum(c["split"] == s for c in cases()) for s in ("held", "held2", "held3", *BLIND)}
    print(len(cases()), "cases;", ", ".join(f"{n} in {s}" for s, n in counts.items()))
