"""ptxgen's kernel beside the same operator compiled by Numba (NVVM).

The static part (ptxas resources, PTX and SASS instruction counts) needs no GPU; with a GPU both
kernels also run on the same fresh inputs, are checked against the float64 reference and timed.
"""
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import toolchain
from ..arch import DEFAULT_TARGET
from ..emit import emit_module
from ..ir.verify import verify_module


@dataclass
class Side:
    name: str
    kernel: str = ""
    registers: int = 0
    spill_bytes: int = 0
    stack_bytes: int = 0
    shared_bytes: int = 0
    ptx_instructions: int = 0
    sass_instructions: int = 0
    ptx_top: list = field(default_factory=list)
    sass_top: list = field(default_factory=list)
    ok: bool = None
    max_rel_error: float = None
    time_ms: float = None


def _static(side, ptx, entry, arch):
    from ..analysis.analyzer import analyze
    report = analyze(ptx, arch=arch, kernel=entry)
    k = report.kernels[0]
    side.kernel = entry
    side.ptx_instructions = k.instructions
    side.ptx_top = sorted(k.opcodes.items(), key=lambda kv: -kv[1])[:6]
    asm = toolchain.assemble(ptx, arch)
    r = asm.resources.get(entry)
    if r is not None:
        side.registers, side.spill_bytes = r.registers, r.spills
        side.stack_bytes, side.shared_bytes = r.stack_bytes, r.shared_bytes
    mix = toolchain.sass_mix(toolchain.disassemble(asm.cubin)).get(entry, {})
    side.sass_instructions = sum(c for op, c in mix.items() if op != "NOP")
    side.sass_top = [(op, c) for op, c in mix.items() if op != "NOP"][:6]


@dataclass
class Comparison:
    """ptxgen's side and Numba's side of one operator at one shape."""
    op: object
    shape: dict
    ours: Side
    theirs: Side

    def to_dict(self):
        return {"operator": self.op.name, "shape": dict(self.shape),
                "ours": asdict(self.ours), "theirs": asdict(self.theirs)}

    def to_text(self):
        return _table(self.ours, self.theirs, self.op, self.shape)


def compare(op, shape, arch=DEFAULT_TARGET, gpu=None, seed=None):
    """A Comparison of both sides' figures; runs both on the GPU when `gpu` is true (None: when
    one is present)."""
    from ..runtime import twins
    ours = Side("ptxgen")
    module = verify_module(op.build(shape, arch))
    ptx = emit_module(module, arch)
    _static(ours, ptx, op.kernel_name(), arch)
    theirs = Side("numba (NVVM)")
    twin_ptx, twin_entry = twins.twin_ptx(op.name, arch)
    _static(theirs, twin_ptx, twin_entry, arch)
    if gpu is None:
        from ..runtime import gpu_available
        gpu = gpu_available()
    if gpu:
        _run_both(op, shape, module, ptx, ours, theirs, seed)
    return Comparison(op, dict(shape), ours, theirs)


def _run_both(op, shape, module, ptx, ours, theirs, seed):
    """Both kernels on the same inputs, outputs poisoned first; times are GPU time per call
    (runtime.time_calls: held batches, no host launch latency), the same way for both."""
    from ..runtime import (bound_steps, load_steps, synchronize, time_calls, to_device,
                           to_host)
    from ..runtime.twins import twin_call
    arch = module.target
    rng = np.random.default_rng(seed)
    arrays = op.make_inputs(shape, rng)
    ref = op.reference(shape, arrays)
    arrays.update(op.workspace_arrays(shape, arch))
    dev = to_device(arrays)
    ours_call = bound_steps(op, shape, load_steps(op, shape, module, arch, ptx), dev, arch)
    ours_call()
    synchronize(op.name)
    ours.ok, ours.max_rel_error = op.check(shape, {**arrays, **to_host(dev, op.outputs)}, ref)
    ours.time_ms = time_calls(ours_call)
    # the twin on the same inputs, outputs poisoned again first
    dev.update(to_device({n: np.full_like(arrays[n], np.nan) for n in op.outputs}))
    theirs_call = twin_call(op.name, shape, dev)
    theirs_call()
    synchronize(op.name)
    theirs.ok, theirs.max_rel_error = op.check(shape, {**arrays, **to_host(dev, op.outputs)},
                                               ref)
    theirs.time_ms = time_calls(theirs_call)


def _table(ours, theirs, op, shape):
    rows = [("kernel", ours.kernel, theirs.kernel[:40] + ("…" if len(theirs.kernel) > 40 else "")),
            ("registers", ours.registers, theirs.registers),
            ("spill bytes", ours.spill_bytes, theirs.spill_bytes),
            ("stack bytes", ours.stack_bytes, theirs.stack_bytes),
            ("static shared bytes", ours.shared_bytes, theirs.shared_bytes),
            ("PTX instructions", ours.ptx_instructions, theirs.ptx_instructions),
            ("SASS instructions", ours.sass_instructions, theirs.sass_instructions),
            ("top PTX", _top(ours.ptx_top), _top(theirs.ptx_top)),
            ("top SASS", _top(ours.sass_top), _top(theirs.sass_top))]
    if ours.ok is not None:
        rows.append(("result", _ok(ours), _ok(theirs)))
        rows.append(("time (ms)", f"{ours.time_ms:.4f}", f"{theirs.time_ms:.4f}"))
        work = op.flops(shape) if op.name != "saxpy" else op.bytes_moved(shape)
        unit, scale = ("GB/s", 1e-6) if op.name == "saxpy" else ("TFLOP/s", 1e-9)
        rows.append((unit, f"{work / ours.time_ms * scale:.1f}", f"{work / theirs.time_ms * scale:.1f}"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(str(r[1])) for r in rows + [("", "ptxgen", "")])
    lines = [f"{op.name} " + " ".join(f"{k}={v}" for k, v in shape.items()),
             f"{'':{w0}}  {'ptxgen':{w1}}  numba (NVVM)"]
    for name, a, b in rows:
        lines.append(f"{name:{w0}}  {str(a):{w1}}  {b}")
    return "\n".join(lines)


def _top(pairs):
    return " ".join(f"{op}×{c}" for op, c in pairs[:4])


def _ok(side):
    return f"{'PASS' if side.ok else 'FAIL'} ({side.max_rel_error:.1e})"
