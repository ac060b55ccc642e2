"""ptxgen's kernel beside the same operator compiled by Numba (NVVM).

The static part (ptxas resources, PTX and SASS instruction counts) needs no GPU; with a GPU both
kernels also run on the same fresh inputs, are checked against the float64 reference and timed.
"""
import textwrap
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import toolchain
from ..arch import DEFAULT_TARGET
from ..ir.verify import verify_module
from ..names import display_name


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
    ptx: str = ""


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
    """The sides of one operator at one shape: ptxgen's own PTX, the same IR through each
    requested LLVM path, and the operator compiled by Numba (last)."""
    op: object
    shape: dict
    sides: list

    @property
    def ours(self):
        return self.sides[0]

    @property
    def theirs(self):
        return self.sides[-1]

    def to_dict(self):
        def figures(side):
            return {k: v for k, v in asdict(side).items() if k != "ptx"}
        return {"operator": self.op.name, "shape": dict(self.shape),
                "ours": figures(self.ours), "theirs": figures(self.theirs),
                "via": {s.name: figures(s) for s in self.sides[1:-1]}}

    def to_text(self, width=100):
        """The sides as columns, each line at most `width` characters (long cells wrap
        inside their column); width=None: one line per row, as long as it gets."""
        return _table(self.sides, self.op, self.shape, width)


SIDE_NAMES = {"direct": "ptxgen", "llvm": "ptxgen→LLVM", "nvvm": "ptxgen→NVVM"}


def compare(op, shape, arch=DEFAULT_TARGET, gpu=None, seed=None, paths=()):
    """A Comparison: ptxgen's own PTX, the same IR through each of `paths` ("llvm": LLVM's
    NVPTX back end, "nvvm": libNVVM; ptxgen.llvm), then the operator compiled by Numba. Runs
    every side on the GPU when `gpu` is true (None: when one is present)."""
    from .paths import emit_via
    from ..runtime import twins
    module = verify_module(op.build(shape, arch))
    sides = []
    for via in ("direct",) + tuple(p for p in paths if p != "direct"):
        side = Side(SIDE_NAMES[via])
        side.ptx = emit_via(module, arch, via)
        _static(side, side.ptx, op.kernel_name(), arch)
        sides.append(side)
    theirs = Side("numba (NVVM)")
    twin_ptx, twin_entry = twins.twin_ptx(op.name, arch)
    _static(theirs, twin_ptx, twin_entry, arch)
    if gpu is None:
        from ..runtime import gpu_available
        gpu = gpu_available()
    if gpu:
        _run_all(op, shape, module, sides, theirs, seed)
    return Comparison(op, dict(shape), sides + [theirs])


def _run_all(op, shape, module, sides, theirs, seed):
    """Every side on the same inputs, outputs poisoned before each; times are GPU time per call
    (runtime.time_calls: held batches, no host launch latency), the same way for all."""
    from ..runtime import (bound_steps, load_steps, synchronize, time_calls, to_device,
                           to_host)
    from ..runtime.twins import twin_call
    arch = module.target
    rng = np.random.default_rng(seed)
    arrays = op.make_inputs(shape, rng)
    ref = op.reference(shape, arrays)
    arrays.update(op.workspace_arrays(shape, arch))
    dev = to_device(arrays)

    def measure(side, make_call):
        # outputs poisoned first; the call is made afterwards so it binds the poisoned arrays
        dev.update(to_device({n: np.full_like(arrays[n], np.nan) for n in op.outputs}))
        call = make_call()
        call()
        synchronize(op.name)
        side.ok, side.max_rel_error = op.check(shape, {**arrays, **to_host(dev, op.outputs)},
                                               ref)
        side.time_ms = time_calls(call)

    for side in sides:
        kernels = load_steps(op, shape, module, arch, side.ptx)
        measure(side, lambda: bound_steps(op, shape, kernels, dev, arch))
    measure(theirs, lambda: twin_call(op.name, shape, dev))


def _table(sides, op, shape, width=None):
    rows = [("kernel",) + tuple(display_name(s.kernel) for s in sides)]
    for label, attr in (("registers", "registers"), ("spill bytes", "spill_bytes"),
                        ("stack bytes", "stack_bytes"), ("static shared bytes", "shared_bytes"),
                        ("PTX instructions", "ptx_instructions"),
                        ("SASS instructions", "sass_instructions")):
        rows.append((label,) + tuple(getattr(s, attr) for s in sides))
    lists = [("top PTX",) + tuple(_top(s.ptx_top) for s in sides),
             ("top SASS",) + tuple(_top(s.sass_top) for s in sides)]
    if all(s.ok is not None for s in sides):
        rows.append(("result",) + tuple(_ok(s) for s in sides))
        rows.append(("time (ms)",) + tuple(f"{s.time_ms:.4f}" for s in sides))
        work = op.flops(shape) if op.name != "saxpy" else op.bytes_moved(shape)
        unit, scale = ("GB/s", 1e-6) if op.name == "saxpy" else ("TFLOP/s", 1e-9)
        rows.append((unit,) + tuple(f"{work / s.time_ms * scale:.1f}" for s in sides))
    head = ("",) + tuple(s.name for s in sides)
    lines = [f"{op.name} " + " ".join(f"{k}={v}" for k, v in shape.items())]
    wide = _columns([head] + rows[:7] + lists + rows[7:])
    if width is None or max(map(len, wide)) <= width:
        return "\n".join(lines + wide)
    # too wide for one line per row: the opcode lists below the table, a line per side
    lines += _columns([head] + rows)
    names = max(len(s.name) for s in sides)
    for label, *tops in lists:
        lines.append(label)
        for s, top in zip(sides, tops):
            lines += textwrap.wrap(top, width, initial_indent=f"  {s.name:{names}}  ",
                                   subsequent_indent=" " * (names + 4))
    return "\n".join(lines)


def _columns(rows):
    rows = [tuple(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(f"{x:{w}}" for x, w in zip(r, widths)).rstrip() for r in rows]


def _top(pairs):
    return " ".join(f"{op}×{c}" for op, c in pairs[:4])


def _ok(side):
    return f"{'PASS' if side.ok else 'FAIL'} ({side.max_rel_error:.1e})"
