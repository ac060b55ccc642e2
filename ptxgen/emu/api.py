"""`emulate(...)`: run a kernel of a Module (or PTX text) on the CPU.

Arguments follow the kernel's parameter list: numpy arrays for pointers (placed in emulated
global memory and written back in place), numpy scalars typed like the parameters for the rest.
"""
import hashlib
import sys
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from ..errors import Arg, EmulationError, NativeUnsupported, PtxgenError, Spelled
from ..launch_shape import (check_array_arg, check_launch_shape, check_takes_array, launch_dims,
                            scalar_arg)
from ..ir.instr import Instr
from ..ir.module import Module
from ..ir.verify import verify_kernel
from .cluster import cluster_shape, cta_order
from .executor import Batch, Launch
from .memory import GlobalMemory, Region, var_image
from .program import Program
from ..arrays import TiledMap
from .tensormap import TensorMap, from_tiled

CHECK_MODES = ("error", "warn", "off")
ENGINES = ("interp", "native", "auto")
# Lanes per batch: enough that numpy's per-call overhead is amortised over many threads; fewer
# when the register file (one array per register, one element per lane) would pass the budget.
LANES_PER_BATCH = 16384
REGISTER_BUDGET_BYTES = 256 << 20


@dataclass
class EmulationResult:
    kernel: str
    grid: tuple
    block: tuple
    ctas: int
    steps: int                        # instructions executed, counted once per lane group
    seconds: float
    findings: list = field(default_factory=list)   # check='warn' reports
    printed: list = field(default_factory=list)    # printf output lines, in thread order
    engine: str = "interp"                          # which engine ran it


_programs = weakref.WeakKeyDictionary()
_parsed = {}


def as_module(ptx_or_module):
    """The Module emulate() runs for a Module or PTX text (parsed once per text)."""
    if isinstance(ptx_or_module, Module):
        return ptx_or_module
    if isinstance(ptx_or_module, (str, bytes)):
        text = ptx_or_module.decode() if isinstance(ptx_or_module, bytes) else ptx_or_module
        key = hashlib.sha1(text.encode()).hexdigest()
        m = _parsed.get(key)
        if m is None:
            m = _parse_cached(text)
            if len(_parsed) > 32:
                _parsed.clear()
            _parsed[key] = m
        return m
    raise PtxgenError(f"emulate() takes a Module or PTX text, not {type(ptx_or_module).__name__}")


def _parse_cached(text):
    """parse_ptx(text), kept on disk (ptxgen.progcache, `emu/`) so that another process
    starting a known kernel skips the parser."""
    from .. import progcache
    from ..parse import parse_ptx
    k = progcache.key("emu-module", text)
    m = progcache.load("emu", k)
    if m is None:
        m = parse_ptx(text)
        progcache.store("emu", k, m)
    return m


def _fingerprint(module, kernel):
    body = tuple((s.opcode, s.mods, s.operands, id(s.guard), s.guard_negated)
                 if isinstance(s, Instr) else id(s) for s in kernel.body)
    vars_ = tuple((v.name, v.space, v.type.name, v.count, v.init, v.extern)
                  for v in list(kernel.vars) + list(module.vars))
    return hash((body, vars_, tuple(kernel.params), len(kernel.regs)))


def compile_kernel(module, kernel_name, verify=True):
    """The compiled Program of a kernel (cached while the kernel is unchanged). A Builder-made
    kernel is verified first unless verify=False (see ptxgen.emit_module)."""
    kernel = module.kernel(kernel_name)
    fp = _fingerprint(module, kernel)
    hit = _programs.get(kernel)
    check = verify and not module.parsed
    if hit is not None and hit[0] == fp:
        if check and not hit[2]:
            verify_kernel(kernel)
            _programs[kernel] = (fp, hit[1], True)
        return hit[1]
    if check:
        verify_kernel(kernel)
    prog = Program(module, kernel)
    _programs[kernel] = (fp, prog, check)
    return prog


def _check_launch(kernel, grid, block):
    check_launch_shape(kernel.name, grid, block, kernel.directives)


def _pack_params(prog, args, gmem):
    kernel = prog.kernel
    params = kernel.params
    if len(args) != len(params):
        raise PtxgenError(f"kernel {kernel.name} takes {len(params)} arguments "
                          f"({', '.join(p.name for p in params) or 'none'}), got {len(args)}")
    buf = bytearray(max(prog.param_size, 1))
    mv = memoryview(buf)            # writes through it keep the buffer's length
    offsets = prog.params
    for p, a in zip(params, args):
        off = offsets[p.name][0]
        if p.array:
            if isinstance(a, TiledMap):        # an operator's map, as the GPU runtime gets it
                addr = gmem.place_array(a.array, p.name)
                data = from_tiled(a, addr).encode(addr)
            elif isinstance(a, TensorMap):     # the emulator's stand-in for a CUtensorMap
                data = a.encode(gmem.place_array(a.array, p.name))
            else:
                data = _bytes_arg(kernel.name, p, a)
            mv[off:off + len(data)] = bytes(data)
            continue
        if isinstance(a, np.ndarray) and a.ndim > 0:
            check_takes_array(kernel.name, p)
            # which parameters the kernel writes through matters for read-only arrays only
            writeable = a.flags.writeable
            check_array_arg(kernel.name, p, a.dtype, writeable, () if writeable else prog.written)
            addr = gmem.place_array(a, p.name)
            mv[off:off + 8] = addr.to_bytes(8, sys.byteorder)
            continue
        data = scalar_arg(kernel.name, p, a).tobytes()
        mv[off:off + len(data)] = data
    region = Region(0, np.frombuffer(buf, np.uint8), "param space")
    region.size = prog.param_size
    return region


def _bytes_arg(kname, p, a):
    if isinstance(a, (bytes, bytearray)):
        data = bytes(a)
    elif isinstance(a, (np.ndarray, np.generic)):
        data = np.asarray(a).tobytes()
    else:
        raise PtxgenError(f"kernel {kname}: parameter {p.name} is a {p.nbytes}-byte "
                          f"aggregate; pass bytes or a numpy array, got {type(a).__name__}")
    if len(data) != p.nbytes:
        raise PtxgenError(f"kernel {kname}: parameter {p.name} has {p.nbytes} bytes, got "
                          f"{len(data)}")
    return data


def emulate(ptx_or_module, kernel_name, grid, block, *args, shared_bytes=0, check="error",
            observer=None, verify=True, engine="interp", cluster=None, progress=None):
    """Run kernel `kernel_name` on the CPU emulator with a grid of `grid` blocks of `block`
    threads (ints or tuples of up to 3). Pointer parameters take numpy arrays (results are
    written back into them), other parameters numpy scalars of the parameter's type.

    check: 'error' raises EmulationError on the first out-of-bounds or misaligned access,
    uninitialized shared-memory read or shared-memory race; 'warn' issues EmulationWarning
    instead (once per instruction and kind), skips invalid accesses and goes on; 'off' skips
    the shared-memory checks (invalid accesses still raise: there is nothing to emulate).
    observer: called as observer(batch, op_index, mask) before each op a group of lanes runs
    (ptxgen.reports.warp_efficiency uses it to see active lanes); op_index indexes
    compile_kernel(...).code, mask is a bool per lane of the batch or None for every live lane.
    verify: a Builder-made kernel is verified first (VerifyError on malformed IR);
    verify=False skips that (PTX text is never verified: ptxas judges it).
    engine: 'interp' (the interpreter: every check), 'native' (emu.native: the kernel compiled
    for the host; NativeUnsupported, an EmulationError raised before anything ran, when it has
    what that engine does not run), 'auto' (native
    when check='off', no observer is given and the kernel is supported, else the interpreter).
    cluster: CTAs per cluster (int or up to 3 ints) for a kernel without .reqnctapercluster,
    as runtime.launch(cluster=...) takes it; clusters run on the interpreter (emu.cluster).
    progress: called as progress(kernel_name, ctas_done, ctas) before the first CTA and after
    each group of CTAs the interpreter runs together (the native engine: once, at the end).
    Returns an EmulationResult."""
    if check not in CHECK_MODES:
        raise PtxgenError(f"check must be one of {', '.join(CHECK_MODES)}, got {check!r}")
    if engine not in ENGINES:
        raise PtxgenError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    module = as_module(ptx_or_module)
    prog = compile_kernel(module, kernel_name, verify)
    kernel = prog.kernel
    grid = launch_dims(grid, "grid", kernel.name)
    block = launch_dims(block, "block", kernel.name)
    _check_launch(kernel, grid, block)
    if not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
        raise PtxgenError(f"kernel {kernel.name}: shared_bytes must be a non-negative int")
    cshape, explicit = cluster_shape(kernel, grid, cluster)
    csize = cshape[0] * cshape[1] * cshape[2]
    if csize > 1 and engine == "native":
        raise NativeUnsupported(Spelled(
            f"kernel {kernel.name}: the native engine does not run clusters of several CTAs; "
            f"use ", Arg("engine='interp'", "--engine interp")))
    native = None if csize > 1 else _native(prog, engine, check, observer, len(args))
    if native is not None:
        from .native import run_native
        ncta, seconds = run_native(native, grid, block, args, int(shared_bytes))
        if progress is not None:
            progress(kernel.name, ncta, ncta)
        return EmulationResult(kernel.name, grid, block, ncta, 0, seconds, engine="native")
    t0 = time.perf_counter()
    gmem = GlobalMemory()
    global_addr = {}
    for v in prog.global_vars:
        buf = np.frombuffer(var_image(v, kernel.name), np.uint8).copy()
        global_addr[v.name] = gmem.add(buf, v.name).start
    params = _pack_params(prog, args, gmem)
    const = Region(0, np.frombuffer(prog.const_image + bytes(16), np.uint8).copy(),
                   "const space")
    const.size = len(prog.const_image)
    launch = Launch(prog, grid, block, gmem, params, const, global_addr, int(shared_bytes),
                    check, cshape, explicit)
    launch.observer = observer
    ncta = grid[0] * grid[1] * grid[2]
    lane_bytes = sum(dt.itemsize for dt in prog.slot_dtypes) + prog.local_size + 64
    lanes = max(launch.threads, min(LANES_PER_BATCH, REGISTER_BUDGET_BYTES // lane_bytes))
    per_batch = max(1, lanes // launch.threads) // csize * csize or csize   # whole clusters
    if prog.grid_sync:                  # a grid-wide barrier needs every CTA in the batch
        per_batch = ncta
    order = cta_order(grid, cshape)
    try:
        with np.errstate(all="ignore"):
            for first in range(0, ncta, per_batch):
                if progress is not None:
                    progress(kernel.name, first, ncta)
                Batch(launch, order[first:first + per_batch]).run()
            if progress is not None:
                progress(kernel.name, ncta, ncta)
    finally:
        gmem.write_back()
        if launch.printed:              # the GPU flushes its printf buffer at the sync
            sys.stdout.write("".join(launch.printed))
            sys.stdout.flush()
    return EmulationResult(kernel.name, grid, block, ncta, launch.steps,
                           time.perf_counter() - t0, launch.findings, launch.printed)


def _native(prog, engine, check, observer, nargs):
    """The NativeKernel to run, or None for the interpreter."""
    if engine == "interp" or (engine == "auto" and (check != "off" or observer is not None)):
        return None
    from ..errors import LoweringError
    from .native import compile_native
    if nargs != len(prog.kernel.params):
        return None                     # the interpreter's argument check names the problem
    try:
        return compile_native(prog)
    except LoweringError as e:
        if engine == "native":
            raise NativeUnsupported(f"native engine: {e}") from None
        return None


def numba_array_args(arr):
    """The kernel arguments Numba's array ABI passes for one array: meminfo, parent, nitems,
    itemsize, data, shape…, strides… (all 64-bit). The data pointer is the array itself, so the
    emulator places it in global memory and writes results back into it."""
    if not isinstance(arr, np.ndarray):
        raise PtxgenError(f"numba_array_args takes a numpy array, got {type(arr).__name__}")
    mask = (1 << 64) - 1
    u64 = np.uint64
    return ([u64(0), u64(0), u64(arr.size), u64(arr.itemsize), arr]
            + [u64(s) for s in arr.shape] + [u64(s & mask) for s in arr.strides])


__all__ = ["emulate", "numba_array_args", "EmulationResult", "compile_kernel", "EmulationError"]
