"""What the model benchmark set's families share: the family record and its registry, the
array interface on the CPU, check helpers, and the CPU emulation of a case.

A family is one kernel kind at several sizes: its record (`Family`) holds the sizes in the
collect's order, a size the emulator runs in seconds, the setup that builds a case's arguments,
launch and check against an array interface `g` (model_set.Gpu: torch tensors on the GPU;
`HostArrays`: numpy on the CPU), its kernel (PTX families) and the largest check result a
correct kernel gives. The subject modules (cases_numba, cases_triton, cases_ptx, model_micro)
register their families with `family`; model_set.SPLITS says which split each belongs to.
"""
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

SMS_X8 = 132 * 8          # grid-stride kernels: 8 blocks per SM of an H200, as hist_shared
# the largest check result a correct kernel gives where a family does not say: float results
# of Numba and Triton kernels within float32 rounding, PTX results exact
DEFAULT_TOLERANCE = {"numba": 1e-5, "triton": 1e-5, "ptx": 0.0}


@dataclass(frozen=True)
class Family:
    """One kind of kernel of the model set at its sizes.

    setup(g, case): Numba and PTX families give (args, grid, block, check, {argument index:
    init}), Triton families (kernel name in model_triton, args, constexpr and launch keywords,
    grid, check, {argument index: init}); `check()` after the launch gives the relative error
    (or the count or share of wrong elements) against a float64 or exact reference.
    kernel(case) -> (PTX text, entry) for PTX families (Numba's are model_numba.KERNELS).
    """
    name: str
    source: str                       # "numba", "triton" or "ptx"
    setup: Callable
    sizes: tuple                      # ((size label, parameters), ...) in the collect's order
    # parameters at a size the emulator runs in seconds (or case -> those parameters)
    small: Optional[object] = None
    tolerance: Optional[float] = None
    kernel: Optional[Callable] = None

    @property
    def limit(self):
        """The largest check result a correct kernel gives."""
        return DEFAULT_TOLERANCE[self.source] if self.tolerance is None else self.tolerance

    def cases(self):
        """The family's cases as the collect lists them (without split and name)."""
        return [dict(family=self.name, source=self.source, size=label, **params)
                for label, params in self.sizes]

    def small_case(self, case=None):
        """A case (the first size's by default) at the small size (shapes not tile
        multiples)."""
        c = dict(case or self.cases()[0])
        c.update((self.small(c) if callable(self.small) else self.small) or {})
        return c


FAMILIES = {}                         # name -> Family, filled by the subject modules


def registry(source, **defaults):
    """The decorator a subject module registers its setups with: @family(sizes=..., small=...,
    tolerance=..., kernel=..., name=...) above `def name(g, c)`; stacked for a setup shared by
    several families."""
    def family(sizes, name=None, **kw):
        def register(fn):
            n = name or fn.__name__
            if n in FAMILIES:
                raise ValueError(f"family {n!r} registered twice")
            FAMILIES[n] = Family(n, source, fn, tuple(sizes), **{**defaults, **kw})
            return fn
        return register
    return family


class HostArrays:
    """numpy arrays behind the interface the setups build their arguments with (CPU side)."""

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


# -- check and argument helpers (numpy arrays on the CPU, torch tensors on the GPU) ----------
def rel(out, ref):
    """Relative error of out against ref in the 2-norm, in float64."""
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def wrong(out, ref):
    """The share of elements of out that differ from ref (exact results)."""
    return float(np.mean(np.asarray(out) != np.asarray(ref)))


def double(a):
    return a.double() if hasattr(a, "double") else a.astype(np.float64)


def int_out(g, *shape):
    return g.zeros(*shape, integer=True) - 1       # -1: a slot the kernel missed shows


def pow2(n):
    return 1 << (n - 1).bit_length()


def array_module(a):
    """numpy for a numpy array, torch for a tensor."""
    if isinstance(a, np.ndarray):
        return np
    import torch
    return torch


def cast(a, dtype):
    """a converted to the dtype of this numpy name (torch's of the same name on the GPU)."""
    if isinstance(a, np.ndarray):
        return a.astype(dtype)
    return a.to(getattr(array_module(a), dtype))


def copy_array(a):
    return a.copy() if isinstance(a, np.ndarray) else a.clone()


def sort_values(a):
    return np.sort(a) if isinstance(a, np.ndarray) else a.sort().values


def brev32(h):
    """The bits of each uint32 reversed."""
    h = h.astype(np.uint32)
    for s, m in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        m = np.uint32(m)
        h = ((h >> np.uint32(s)) & m) | ((h & m) << np.uint32(s))
    return (h >> np.uint32(16)) | (h << np.uint32(16))


# -- a case on ptxgen's emulator (the CPU tests) ---------------------------------------------
TRITON_TYPES = {"float32": "fp32", "int32": "i32", "float64": "fp64", "float16": "fp16"}


def compile_triton(c):
    """Triton's compiled kernel of case c for sm_90 without a GPU, specialised as Triton's JIT
    specialises a launch with these arguments (pointers and ints divisible by 16 marked so)."""
    import inspect

    import model_triton
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kname, args, kw = FAMILIES[c["family"]].setup(HostArrays(), c)[:3]
    kern = getattr(model_triton, kname)
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


def save_triton_small(path, families):
    """The small cases' PTX and launch metadata of these Triton families (needs Triton, no
    GPU), for the CPU tests."""
    import json

    import triton
    out = {}
    for name in families:
        c = FAMILIES[name].small_case()
        ck = compile_triton(c)
        out[name] = dict(case=c, ptx=ck.asm["ptx"], entry=ck.name,
                         shared=int(ck.metadata.shared), warps=int(ck.metadata.num_warps),
                         triton=triton.__version__)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


def emulate(module, entry, grid, block, args, shared, check):
    """Run one launch on ptxgen's emulator (scalars typed as the kernel's parameters); the
    check's result."""
    from ptxgen.emu import emulate as run
    k = module.kernel(entry) if entry else module.entries[0]
    if len(args) != len(k.params):
        raise ValueError(f"{k.name}: {len(args)} arguments for {len(k.params)} parameters")
    kinds = {"u": "uint", "b": "uint", "s": "int", "f": "float"}
    typed = [a if isinstance(a, np.ndarray) else
             np.dtype(kinds[p.type.name[0]] + p.type.name[1:]).type(a)
             for p, a in zip(k.params, args)]
    run(module, k.name, grid, block, *typed, shared_bytes=shared, check="error")
    return check()


def emulate_numba(c, ptx):
    """Run a Numba case on ptxgen's emulator (Numba's array ABI); its check's result."""
    from ptxgen.emu import numba_array_args
    from ptxgen.parse import parse_ptx
    args, grid, block, check, _inits = FAMILIES[c["family"]].setup(HostArrays(1), c)
    flat = []
    for a in args:
        flat += numba_array_args(a) if isinstance(a, np.ndarray) else [a]
    return emulate(parse_ptx(ptx), None, grid, block, flat, 0, check)


def emulate_triton(saved):
    """Run a saved small Triton case on ptxgen's emulator: the non-constexpr arguments, then
    Triton 3.6's two scratch pointers (null: these kernels need none)."""
    from ptxgen.parse import parse_ptx
    c = saved["case"]
    _kname, args, _kw, grid, check = FAMILIES[c["family"]].setup(HostArrays(2), c)[:5]
    return emulate(parse_ptx(saved["ptx"]), saved["entry"], grid, 32 * saved["warps"],
                   args + [0, 0], saved["shared"], check)


def emulate_ptx(c):
    """Run a PTX case (its family's kernel and launch) on ptxgen's emulator; its check's
    result."""
    from ptxgen.parse import parse_ptx
    fam = FAMILIES[c["family"]]
    text, entry = fam.kernel(c)
    args, grid, block, check, _inits = fam.setup(HostArrays(3), c)
    return emulate(parse_ptx(text), entry, grid, block, args, 0, check)
