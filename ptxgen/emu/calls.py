"""External functions the emulator runs on the host when a kernel calls them: vprintf (emu.printf)
and cooperative groups' grid sync (cudaCGGetIntrinsicHandle, cudaCGSynchronize)."""
import numpy as np

from .memops import load, store
from .printf import build_vprintf
from .compiled_op import BARRIER, NORMAL, Op, guarded_op, raiser

GRID_SYNC = ("cudaCGGetIntrinsicHandle", "cudaCGSynchronize")


def grid_sync_ops(prog, ins, index, name, visible, rets):
    """Cooperative groups' grid sync as Numba and nvcc call it: cudaCGGetIntrinsicHandle
    returns a handle (any non-zero value), cudaCGSynchronize (returning cudaSuccess) is a
    barrier of the whole grid, which the executor's barrier is once every CTA runs in one
    batch. Returns the ops."""
    if ins.guard is not None:
        return [Op(NORMAL, raiser(prog._unsupported(ins, index, "a predicated grid sync")),
                   ins, index)]
    opi = len(prog.code)
    offs = [visible[r] for r in rets]
    value = 1 if name == "cudaCGGetIntrinsicHandle" else 0
    dt = np.dtype(np.uint64 if value else np.uint32)

    def result(st, m):
        lanes = st.lane_ids if m is None else np.flatnonzero(m)
        for off in offs:
            store(st, "local", lanes, np.full(lanes.size, off, np.uint64), dt, 1,
                  [np.full(lanes.size, value, dt)], opi)
    ops = [Op(NORMAL, result, ins, index)]
    if name == "cudaCGSynchronize":
        prog.grid_sync = prog.uses_barrier = True
        ops.append(Op(BARRIER, None, ins, index))
    return ops


def vprintf_op(prog, ins, index, arg_offs, ret_off):
    """printf: formatted on the host (emu.printf) from the thread's call parameters."""
    opi = len(prog.code)
    fn = build_vprintf(lambda st, sp, ln, a, dt: load(st, sp, ln, a, dt, 1, opi),
                       lambda st, sp, ln, a, dt, v: store(st, sp, ln, a, dt, 1, v, opi),
                       arg_offs[0], arg_offs[1], ret_off)
    if ins.guard is not None:
        fn = guarded_op(fn, prog.slot(ins.guard), ins.guard_negated)
    return Op(NORMAL, fn, ins, index)
