"""The emulator's native engine: a kernel lowered for the host (emu.native_lower) and compiled
by llvmlite's JIT, once per kernel text; each CTA's threads run one after another between
barriers at native speed.

Memory is the host's: pointer arguments are the numpy arrays' own addresses, shared and local
memory are per-CTA host buffers. Every access is checked against the launch's buffers and for
alignment (an invalid one stops the launch with an EmulationError naming the PTX line), but
there is no racecheck and no uninitialized-shared-memory check: emulate() uses this engine only
with check='off' (engine='auto') or when asked (engine='native'). Results are bit-identical to
the interpreter's for what it accepts (tests/test_emu_native.py); addresses themselves differ
(host addresses instead of the interpreter's windows).
"""
import ctypes
import functools
import hashlib
import time

import numpy as np

from ..emit.ptx import emit_kernel_text
from ..errors import Arg, EmulationError, LoweringError, PtxgenError, Spelled
from .memory import var_image
from .native_lower import (CONST_BASE, CTAID, CTX_WORDS, FAULT, FAULT_LINE, GLOBAL_VARS,
                           LOCAL_BASE, LOCAL_SIZE, N_RANGES, NCTAID, NTID, PARAM_BASE, RANGES,
                           SHARED_BASE, SHARED_SIZE, ctx_words, lower_host,
                           pointer_params)

_P, _I64 = ctypes.c_void_p, ctypes.c_int64
_GRID = ctypes.CFUNCTYPE(ctypes.c_int32, _P, _I64, _P, _P, ctypes.c_int32, _I64, _I64, _P, _I64,
                         _P, _I64)
_compiled = {}          # kernel text digest → NativeKernel, or the LoweringError message


@functools.lru_cache(maxsize=1)
def _llvm():
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def _host():
    """llvmlite's binding and a new target machine for this CPU: an MCJIT engine takes
    ownership of the target machine it is given, so every engine needs its own."""
    llvm = _llvm()
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                      features=llvm.get_host_cpu_features().flatten(), opt=3)
    return llvm, tm


class NativeKernel:
    def __init__(self, prog, layout, engine, grid_fn):
        self.prog, self.layout, self.engine = prog, layout, engine   # engine keeps the code
        self.grid = grid_fn


def _digest(prog):
    k = prog.kernel
    text = emit_kernel_text(k) + "".join(v.decl() for v in prog.module.vars)
    return hashlib.sha1(text.encode()).hexdigest()


def compile_native(prog):
    """The NativeKernel of a compiled Program (cached by the kernel's text); LoweringError
    (one line, naming the instruction) when the kernel has what the engine does not run."""
    key = _digest(prog)
    hit = _compiled.get(key)
    if isinstance(hit, str):
        raise LoweringError(hit)
    if hit is not None and hit.prog is prog:
        return hit
    if hit is not None:                 # same text, another Program object: same layout
        return NativeKernel(prog, hit.layout, hit.engine, hit.grid)
    if prog.grid_sync or prog.has_barrier_reductions:
        msg = f"kernel {prog.name}: grid sync and bar.red run on the interpreter only"
        _compiled[key] = msg
        raise LoweringError(msg)
    try:
        lm, layout = lower_host(prog)
    except LoweringError as e:
        _compiled[key] = str(e)
        raise
    llvm, tm = _host()
    lm.triple, lm.data_layout = tm.triple, str(tm.target_data)
    try:
        mod = llvm.parse_assembly(str(lm))
        mod.verify()
    except RuntimeError as e:           # a lowering rule built IR LLVM refuses: a ptxgen bug,
        msg = (f"kernel {prog.name}: the native engine could not compile it "   # reported as
               f"({str(e).splitlines()[-1].strip() or 'LLVM error'})")          # a refusal
        _compiled[key] = msg
        raise LoweringError(msg) from None
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    nk = NativeKernel(prog, layout, engine, _GRID(engine.get_function_address("grid")))
    _compiled[key] = nk
    return nk


def run_native(nk, grid, block, args, shared_bytes=0):
    """Run a launch; arrays among `args` are written in place. Returns (CTAs, seconds)."""
    prog, kernel = nk.prog, nk.prog.kernel
    t0 = time.perf_counter()
    threads = block[0] * block[1] * block[2]
    ncta = grid[0] * grid[1] * grid[2]
    ctx = np.zeros(ctx_words(prog), np.int64)
    ctx[NTID:NTID + 3] = block
    ctx[NCTAID:NCTAID + 3] = grid
    params = ctx[CTX_WORDS:].view(np.uint8)         # the parameter bytes follow the fields
    _params(kernel, prog, args, params)
    const = np.frombuffer(prog.const_image + bytes(16), np.uint8).copy()
    gvars = [np.frombuffer(var_image(v, kernel.name), np.uint8).copy() for v in prog.global_vars]
    shared_size = (prog.dynamic_offset + shared_bytes) if prog.dynamic_vars or shared_bytes \
        else prog.static_shared
    shared = np.zeros(max(shared_size, 1) + 64, np.uint8)
    local = np.zeros(max(threads * prog.local_size, 1) + 64, np.uint8)
    regs = np.zeros(threads * nk.layout.stride, np.uint8)
    ranges = [(shared.ctypes.data, shared.ctypes.data + shared_size),
              (local.ctypes.data, local.ctypes.data + threads * prog.local_size)]
    for p, a in zip(kernel.params, args):
        if p in pointer_params(kernel):
            ranges.append((a.ctypes.data, a.ctypes.data + a.nbytes) if isinstance(a, np.ndarray)
                          else (0, 0))
    ranges += [(g.ctypes.data, g.ctypes.data + g.nbytes) for g in gvars]
    ctx[SHARED_BASE], ctx[SHARED_SIZE] = shared.ctypes.data, shared_size
    ctx[LOCAL_BASE], ctx[LOCAL_SIZE] = local.ctypes.data, prog.local_size
    ctx[PARAM_BASE], ctx[CONST_BASE] = params.ctypes.data, const.ctypes.data
    ctx[N_RANGES] = len(ranges)
    ctx[RANGES:RANGES + 2 * len(ranges)] = np.array(ranges, np.uint64).reshape(-1).view(np.int64)
    ctx[GLOBAL_VARS:GLOBAL_VARS + len(gvars)] = [g.ctypes.data for g in gvars]
    state = np.zeros(threads, np.int32)
    keep = (params, const, gvars, shared, local, regs, args)      # alive during the call
    r = nk.grid(regs.ctypes.data, nk.layout.stride, ctx.ctypes.data, state.ctypes.data, threads,
                0, ncta, shared.ctypes.data, -(-shared_size // 8), local.ctypes.data,
                -(-threads * prog.local_size // 8))
    if r == -2:
        raise EmulationError(Spelled(
            f"kernel {kernel.name}: invalid (out-of-bounds or misaligned) access at address "
            f"{int(ctx[FAULT]) & (2**64 - 1):#x} at PTX line {ctx[FAULT_LINE]} in block "
            f"{tuple(int(x) for x in ctx[CTAID:CTAID + 3])} (native engine; ",
            Arg("engine='interp'", "--engine interp"), " names the thread)"))
    if r == -3:
        raise EmulationError(f"kernel {kernel.name}: threads of block {int(ctx[FAULT])} wait at "
                             f"different barriers")
    del keep
    return ncta, time.perf_counter() - t0


def _params(kernel, prog, args, buf):
    for p, a in zip(kernel.params, args):
        off = prog.params[p.name][0]
        if isinstance(a, np.ndarray) and a.ndim > 0:
            if not (a.flags.c_contiguous and a.flags.writeable):
                raise PtxgenError(f"kernel {kernel.name}: parameter {p.name}: the native "
                                  f"engine needs C-contiguous writable arrays")
            data = np.uint64(a.ctypes.data).tobytes()
        else:
            data = np.asarray(a).tobytes()
        buf[off:off + len(data)] = np.frombuffer(data, np.uint8)
