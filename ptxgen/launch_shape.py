"""Launch-shape rules shared by the GPU runtime and the emulator, so both refuse the same launches
with the same one-line messages.

The limits are the CUDA API launch limits every target ptxgen emits for shares (identical for
cc 8.x and 9.0): isa/targets.toml [launch], each with its source, read by ptxgen.isa.
"""
import re

import numpy as np

from . import isa
from .errors import LaunchError, PtxgenError


def launch_dims(v, what, kernel):
    """grid or block as a 3-tuple of positive ints (an int or a tuple of 1 to 3 ints given)."""
    if isinstance(v, int) or hasattr(v, "__index__"):
        v = (int(v),)
    try:
        t = tuple(int(x) for x in v)
    except TypeError:
        raise LaunchError(f"kernel {kernel}: {what} must be an int or a tuple of up to 3 ints, "
                          f"got {v!r}") from None
    if not 1 <= len(t) <= 3:
        raise LaunchError(f"kernel {kernel}: {what} must have 1 to 3 dimensions, got {v!r}")
    t = t + (1,) * (3 - len(t))
    if any(d <= 0 for d in t):
        raise LaunchError(f"kernel {kernel}: {what} {t} must be positive")
    return t


def check_launch_shape(name, grid, block, directives=()):
    """grid and block (3-tuples of positive ints) against the device limits and the kernel's
    .reqntid/.maxntid directives; LaunchError naming the kernel on the first violation."""
    if any(d <= 0 for d in tuple(grid) + tuple(block)):
        raise LaunchError(f"kernel {name}: grid {grid} and block {block} must be positive")
    threads = block[0] * block[1] * block[2]
    lim = isa.launch_limits()
    if threads > lim["max_threads_per_block"]:
        raise LaunchError(f"kernel {name}: block {block} has more than "
                          f"{lim['max_threads_per_block']} threads")
    for d, lim_d, what in zip(block, lim["max_block_dim"], "xyz"):
        if d > lim_d:
            raise LaunchError(f"kernel {name}: block.{what}={d} exceeds {lim_d}")
    for d, lim_d, what in zip(grid, lim["max_grid_dim"], "xyz"):
        if d > lim_d:
            raise LaunchError(f"kernel {name}: grid.{what}={d} exceeds {lim_d}")
    for d in directives:
        words = d.replace(",", " ").split()
        if not words or words[0] not in (".reqntid", ".maxntid"):
            continue
        dims = tuple(int(x) for x in words[1:]) + (1,) * (4 - len(words))
        if words[0] == ".reqntid" and dims != tuple(block):
            raise LaunchError(f"kernel {name}: declared {d.strip()} but launched with block "
                              f"{block}")
        if words[0] == ".maxntid" and threads > dims[0] * dims[1] * dims[2]:
            raise LaunchError(f"kernel {name}: declared {d.strip()} but launched with block "
                              f"{block}")


def declared_block(directives, keys=(".reqntid", ".maxntid")):
    """The block shape a kernel declares with the first of `keys` it carries (None if none)."""
    for key in keys:
        for d in directives:
            m = re.match(rf"\s*\{key}\s+([\d\s,]+)", d)
            if m:
                return tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x)
    return None


# -- arguments --------------------------------------------------------------------------------
# Both backends take numpy scalars typed like each non-pointer parameter and arrays for
# pointers; these rules decide what fits, so the GPU and the emulator refuse the same arguments.

NUMPY_OF = {"u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "s8": "int8",
            "s16": "int16", "s32": "int32", "s64": "int64", "f32": "float32",
            "f64": "float64", "b8": "uint8", "b16": "uint16", "b32": "uint32",
            "b64": "uint64", "f16": "float16", "bf16": "uint16", "pred": "bool"}


def scalar_arg(kernel, p, a):
    """`a` as the numpy scalar parameter `p` takes: its own dtype; another integer dtype when
    the value fits (Numba declares int32 arguments .u32); any same-width scalar for a .bN
    parameter (reinterpreted). PtxgenError naming kernel and parameter otherwise."""
    want = np.dtype(NUMPY_OF.get(p.type.name, "uint8"))
    if isinstance(a, np.ndarray) and a.ndim == 0:
        a = a[()]
    if isinstance(a, np.generic):
        if a.dtype == want:
            return a
        if want.kind in "ui" and a.dtype.kind in "ui":
            info = np.iinfo(want)
            if info.min <= int(a) <= info.max:
                return want.type(int(a))
            raise PtxgenError(f"kernel {kernel}: parameter {p.name} is .{p.type}; {a!r} does "
                              f"not fit in it")
        if p.type.kind == "bits" and a.dtype.itemsize * 8 == p.type.bits:
            return a.view(want)
    got = f"numpy {a.dtype}" if isinstance(a, np.generic) else type(a).__name__
    hint = f"np.{want}(...)"
    if p.pointer is not None or (p.type.bits == 64 and p.type.kind != "float"):
        hint += " or an array"
    raise PtxgenError(f"kernel {kernel}: parameter {p.name} is .{p.type}; pass {hint}, "
                      f"got {got}")


def check_takes_array(kernel, p):
    """An array goes to a pointer parameter, or to a 64-bit integer one (Numba and Triton
    declare pointers .u64 without .ptr)."""
    if p.pointer is None and p.type.name not in ("u64", "s64", "b64"):
        raise PtxgenError(f"kernel {kernel}: parameter {p.name} is .{p.type}; an array can "
                          f"only be passed for a 64-bit pointer parameter")


def check_array_arg(kernel, p, dtype, writeable=True, written=()):
    """An array for pointer parameter `p`: its element type must be the pointee's where the IR
    knows it (a pointer parsed from PTX points to bytes: any array), and an array the kernel
    writes through must be writeable (a read-only one would silently keep its old values)."""
    elem = p.pointer.elem if p.pointer is not None else None
    if elem is not None and elem.bits > 8 and not _fits(elem, np.dtype(dtype)):
        raise PtxgenError(f"kernel {kernel}: parameter {p.name} points to {elem}; got an "
                          f"array of {np.dtype(dtype)} (pass {_expected(elem)} data)")
    if not writeable and p.name in written:
        raise PtxgenError(f"kernel {kernel}: parameter {p.name} is written by the kernel but "
                          f"the array is read-only (pass a writeable array)")


def _fits(elem, dt):
    if dt.itemsize * 8 != elem.bits:
        return False
    if elem.kind == "float" and elem.name != "bf16":
        return dt.kind == "f"
    if elem.kind in ("uint", "sint"):
        return dt.kind in "ui"
    return True                        # .bN and bf16: any element of that width


def _expected(elem):
    return f"np.{NUMPY_OF[elem.name]}" if elem.name in NUMPY_OF else f"{elem.bits}-bit"


WRITES = frozenset({"st", "atom", "red", "stmatrix", "cp", "st.async", "red.async"})


def written_params(kernel):
    """Names of the pointer parameters the kernel stores through (st, atom, red, bulk copies
    to global): each register carries the set of parameters its value derives from, and a
    write's address register names them. Iterated to a fixed point so loops are covered."""
    from .ir.instr import Instr
    from .ir.values import Addr, Reg, Sym
    # per instruction, once: the symbols its sources name, the registers it reads (none for
    # loaded data: an index loaded from x does not point at x), the register holding a written
    # address (the first address operand: a copy's second is its source), what it defines
    steps = []
    for ins in kernel.body:
        if not isinstance(ins, Instr):
            continue
        syms, reads = set(), ()
        if not (ins.opcode in ("ld", "ldu", "atom") and ins.space != "param"):
            for o in ins.operands[ins.n_dests:]:
                base = o.base if isinstance(o, Addr) else o
                if isinstance(base, Sym):
                    syms.add(base.name)
            reads = tuple(r.name for r in ins.uses())
        dest = next((o for o in ins.operands if isinstance(o, Addr)), None)
        wreg = dest.base.name if ins.opcode in WRITES and dest is not None and \
            isinstance(dest.base, Reg) else None
        steps.append((frozenset(syms), reads, wreg, tuple(r.name for r in ins.defs())))
    taint, written = {}, set()
    empty = frozenset()
    changed = True
    while changed:
        changed = False
        for syms, reads, wreg, defs in steps:
            src = set(syms)
            for r in reads:
                src |= taint.get(r, empty)
            if wreg is not None:
                new = taint.get(wreg, empty) - written
                if new:
                    written |= new
                    changed = True
            for r in defs:
                old = taint.get(r, empty)
                if not src <= old:
                    taint[r] = old | src
                    changed = True
    params = {p.name for p in kernel.params}
    return frozenset(written & params)
