"""Compiled once, then only launched: the kernel cache behind ptxgen's public functions.

A key names everything the kernels depend on — the operator family and its configuration, the
exact shape, the target and ptxgen's version (docs/operators.md, "Caches"). For a key the cache
keeps the IR module and its PTX, the GPU kernels loaded from it, and per stream-free launch
signature a runtime launch plan (runtime/plan.py: tensor maps encoded once per address). On disk
(`$PTXGEN_CACHE_DIR/kernels`, see ptxgen.cachedir) it keeps the PTX, the kernels' parameter lists
and, where ptxas is found, the cubin, so a new process loads a known kernel without lowering,
emitting or JIT-compiling it again.
"""
import hashlib
import logging
import pickle
from dataclasses import dataclass, field

from .. import cachedir
from ..emit import emit_module
from ..errors import PtxgenError, ToolchainError

log = logging.getLogger("ptxgen")
FORMAT = 1
_MEMORY = {}


def operator_key(op):
    """A stable text of an operator object's configuration (public attributes, sorted)."""
    items = sorted((k, getattr(v, "key", v)) for k, v in vars(op).items()
                   if not k.startswith("_"))
    return f"{type(op).__module__}.{type(op).__qualname__}({items!r})"


@dataclass
class Compiled:
    key: str
    op: object
    shape: dict
    arch: str
    ptx: str
    kernels: dict                     # name -> (params, directives)
    module: object = None             # the IR (None when loaded from disk)
    source: str = "built"             # "built", "disk" or "memory"
    gpu: dict = field(default_factory=dict)       # name -> runtime GpuKernel
    plans: dict = field(default_factory=dict)     # (sm_count, names) -> [StepPlan]
    cubin: bytes = None
    step_names: tuple = ()                        # the kernels its steps launch, in order

    def ir(self):
        """The IR module (built on demand after a disk load: the emulator needs it)."""
        if self.module is None:
            self.module = self.op.build(self.shape, self.arch)
        return self.module


def on_disk(op):
    """Whether op's kernels may be kept on disk: not when they hold traced Python functions
    with no stable identity across processes (attention's score/mask mods)."""
    mods = getattr(op, "_mods", None)
    return not getattr(mods, "active", False)


def kernel_shape(op, shape):
    """The part of `shape` op's kernels depend on: all of it, unless the operator says less
    (kernel_shape: e.g. packed variable-length attention, whose lengths, batch and totals
    are launch parameters, not code)."""
    pick = getattr(op, "kernel_shape", None)
    return shape if pick is None else pick(shape)


def cache_key(op, shape, arch):
    from .. import __version__
    ident = operator_key(op) if on_disk(op) else f"process object {id(op)}"
    text = f"{FORMAT}|{__version__}|{arch}|{sorted(kernel_shape(op, shape).items())}|{ident}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_BY_OBJECT = {}        # (id(op), arch, kernel shape) -> entry: a cached call hashes no text


def compiled(op, shape, arch):
    """The Compiled entry of (op, shape, arch): from memory, from disk, or built now."""
    fast = (id(op), arch, tuple(kernel_shape(op, shape).items()))
    hit = _BY_OBJECT.get(fast)
    if hit is not None and hit.op is op:
        hit.source = "memory"
        return hit
    entry = _compiled(op, shape, arch)
    _BY_OBJECT[fast] = entry
    return entry


def _compiled(op, shape, arch):
    key = cache_key(op, shape, arch)
    hit = _MEMORY.get(key)
    if hit is not None:
        hit.source = "memory"
        return hit
    entry = _from_disk(key, op, shape, arch)
    if entry is None:
        from ..ir.verify import verify_module
        module = verify_module(op.build(shape, arch))
        ptx = emit_module(module, arch, verify=False)
        kernels = {k.name: (list(k.params), tuple(k.directives)) for k in module.entries}
        entry = Compiled(key, op, shape, arch, ptx, kernels, module)
        _to_disk(entry)
    log.info("ptxgen: %s kernel %s for %s (%s)", entry.source, op.kernel_name(), arch, key)
    _MEMORY[key] = entry
    return entry


def _path(key, suffix):
    return cachedir.subdir("kernels") / f"{key}{suffix}"


def _from_disk(key, op, shape, arch):
    if not cachedir.enabled() or not on_disk(op):
        return None
    try:
        meta = pickle.loads(_path(key, ".pkl").read_bytes())
        if meta.get("format") != FORMAT or meta.get("key") != key:
            return None
        cubin_path = _path(key, ".cubin")
        cubin = cubin_path.read_bytes() if cubin_path.exists() else None
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
            TypeError, ValueError):
        return None                                    # a damaged file is a miss
    return Compiled(key, op, shape, arch, meta["ptx"], meta["kernels"], None, "disk",
                    cubin=cubin)


def _to_disk(entry):
    if not cachedir.enabled() or not on_disk(entry.op):
        return
    meta = {"format": FORMAT, "key": entry.key, "ptx": entry.ptx, "kernels": entry.kernels}
    try:
        cachedir.write_atomic(_path(entry.key, ".pkl"), pickle.dumps(meta))
    except OSError as e:
        log.warning("ptxgen: kernel cache not written (%s)", e)


def gpu_kernel(entry, name):
    """The loaded GpuKernel `name` of entry: from the cubin when the cache has one, else the
    PTX through the driver; a cubin assembled by ptxas (when found) is kept on disk."""
    k = entry.gpu.get(name)
    if k is not None:
        return k
    from ..runtime import load_kernel
    from ..runtime.plan import load_image
    params, directives = entry.kernels[name]
    if entry.cubin is None and cachedir.enabled():
        entry.cubin = _assemble(entry)
    if entry.cubin is not None:
        k = load_image(entry.cubin, name, params, directives)
    else:
        k = load_kernel(entry.ptx, name, params, directives)
    entry.gpu[name] = k
    return k


def _assemble(entry):
    from ..toolchain import assemble
    try:
        cubin = assemble(entry.ptx, entry.arch.removesuffix("a")).cubin
    except (ToolchainError, PtxgenError, OSError):
        return None                                   # no ptxas here: the driver JITs the PTX
    try:
        cachedir.write_atomic(_path(entry.key, ".cubin"), cubin)
    except OSError:
        pass
    return cubin


def clear_memory():
    """Forget every compiled kernel of this process (the disk cache stays)."""
    _MEMORY.clear()
    _BY_OBJECT.clear()
