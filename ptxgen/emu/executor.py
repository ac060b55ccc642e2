"""Executes a batch of CTAs, every thread a lane of numpy vectors.

A batch holds one or more whole CTAs side by side (lanes of CTA c are c*threads … c*threads +
threads-1), each with its own part of the batch's shared memory; CTAs never see each other's
shared memory, so running several together only amortises Python overhead.

Scheduling: every lane has a PC. The executor picks the smallest PC among lanes that are neither
exited nor waiting at a barrier and runs the group of lanes at that PC straight ahead (one numpy
operation per instruction for the whole group) until the group reaches the PC of another lane
(then they merge), branches apart (then the taken and not-taken lanes become separate groups),
arrives at a barrier or exits. Lagging lanes always run first, so divergent paths of structured
code reconverge at their join point. A barrier releases when every live lane waits at one.
"""
import time
import warnings

import numpy as np

from ..errors import EmulationError
from . import cluster
from .memory import LaneSpace, Region
from .compiled_op import BARRIER, BRANCH, NORMAL, WAIT
from .races import SharedShadow

MAX_GROUP_STEPS = 100_000_000


class EmulationWarning(UserWarning):
    """A memcheck/racecheck finding reported with check='warn'."""


class Launch:
    """What all batches of one launch share: grid, memory, parameters, check mode, findings."""

    def __init__(self, prog, grid, block, gmem, params, const, global_addr, shared_bytes, check,
                 cluster_shape=(1, 1, 1), explicit_cluster=False):
        self.prog, self.grid, self.block = prog, grid, block
        self.cluster, self.explicit_cluster = cluster_shape, explicit_cluster
        self.cluster_ctas = cluster_shape[0] * cluster_shape[1] * cluster_shape[2]
        self.threads = block[0] * block[1] * block[2]
        self.gmem, self.params, self.const = gmem, params, const
        self.global_addr = global_addr
        self.shared_bytes = shared_bytes
        self.shared_size = (prog.dynamic_offset + shared_bytes) if prog.dynamic_vars or \
            shared_bytes else prog.static_shared
        self.check = check
        self.findings = []
        self.printed = []           # printf lines (emu.printf), in the order threads ran them
        self._warned = set()
        self.steps = 0
        self.clock = 0
        # observer(batch, op_index, mask) before every op a lane group executes (mask None: all
        # live lanes of the batch); None, the default, costs one test per step
        self.observer = None


class Batch:
    def __init__(self, launch, ctas):
        prog = launch.prog
        self.launch, self.prog = launch, prog
        self.ctas = np.asarray(ctas, np.int64)               # linear CTA ids in this batch
        nt = launch.threads
        self.n = n = nt * len(ctas)
        zeros = {}
        R = self.R = []
        for dt in prog.slot_dtypes:            # one zeroed array per dtype (ops replace them)
            z = zeros.get(dt)
            if z is None:
                z = zeros[dt] = np.zeros(n, dt)
            R.append(z)
        (self.lane_ids, self.lane_cta, self.tlin, lane, warp, self.warp_base, self.warp_len,
         self.warp_index, self.warp_starts) = _geometry(nt, len(ctas))
        self.gmem, self.params, self.const = launch.gmem, launch.params, launch.const
        self.global_addr = launch.global_addr
        self.shared = LaneSpace("shared", len(ctas), launch.shared_size, self.lane_cta)
        self.local = LaneSpace("local", n, prog.local_size, self.lane_ids)
        self.shadow = None
        if launch.check != "off" and launch.shared_size > 0:
            self.shadow = SharedShadow(self.shared.region.size, prog.granule)
        self.csize = launch.cluster_ctas        # the batch holds whole clusters (emu.cluster)
        self.carry = np.zeros(n, np.uint8)
        self._special = {"laneid": lane.astype(np.uint32), "warpid": warp.astype(np.uint32)}

    # -- special registers ---------------------------------------------------------------------
    def special(self, name):
        v = self._special.get(name)
        if v is not None:
            return v
        L = self.launch
        n = self.n
        bx, by, bz = L.block
        gx, gy, gz = L.grid
        parts = name.split(".")
        if parts[0] in ("clock", "clock64", "clock_hi", "globaltimer", "globaltimer_lo",
                        "globaltimer_hi"):
            return self._clock(name)
        if parts[0] == "tid":
            t = self.tlin
            comp = {"x": t % bx, "y": (t // bx) % by, "z": t // (bx * by)}[parts[1]]
            v = comp.astype(np.uint32)
        elif parts[0] == "ntid":
            v = np.full(n, {"x": bx, "y": by, "z": bz}[parts[1]], np.uint32)
        elif parts[0] == "nctaid":
            v = np.full(n, {"x": gx, "y": gy, "z": gz}[parts[1]], np.uint32)
        elif parts[0] == "ctaid":
            c = self.ctas
            comp = {"x": c % gx, "y": (c // gx) % gy, "z": c // (gx * gy)}[parts[1]]
            v = comp.astype(np.uint32)[self.lane_cta]
        elif name.startswith("lanemask_"):
            lane = self._special["laneid"].astype(np.uint64)
            eq = np.uint64(1) << lane
            v = {"eq": eq, "le": (eq << np.uint64(1)) - np.uint64(1), "lt": eq - np.uint64(1),
                 "ge": ~(eq - np.uint64(1)), "gt": ~((eq << np.uint64(1)) - np.uint64(1))}[
                name[9:]].astype(np.uint32)
        elif name == "nwarpid":
            v = np.full(n, -(-L.threads // 32), np.uint32)
        elif name in ("smid", "gridid"):
            v = np.zeros(n, np.uint64 if name == "gridid" else np.uint32)
        elif name == "nsmid":
            v = np.ones(n, np.uint32)
        elif name == "dynamic_smem_size":
            v = np.full(n, L.shared_bytes, np.uint32)
        elif name == "total_smem_size":
            v = np.full(n, L.shared_size, np.uint32)
        elif name in cluster.SPECIALS:
            v = cluster.special(self, name)
        else:
            raise EmulationError(f"kernel {self.prog.name}: special register %{name} is not "
                                 f"emulated")
        self._special[name] = v
        return v

    def _clock(self, name):
        L = self.launch
        if name.startswith("globaltimer"):
            t = time.perf_counter_ns()
        else:
            # a counter: instructions run so far, plus one per read so two reads differ
            L.clock += 1
            t = L.clock + L.steps + self._steps
        t &= (1 << 64) - 1
        if name in ("clock", "globaltimer_lo"):
            return np.full(self.n, t & 0xFFFFFFFF, np.uint32)
        if name in ("clock_hi", "globaltimer_hi"):
            return np.full(self.n, t >> 32, np.uint32)
        return np.full(self.n, t, np.uint64)

    # -- findings --------------------------------------------------------------------------------
    def thread_name(self, lane):
        bx, by, _ = self.launch.block
        t = int(self.tlin[lane])
        return f"thread ({t % bx}, {(t // bx) % by}, {t // (bx * by)})"

    def block_name(self, lane):
        gx, gy, _ = self.launch.grid
        c = int(self.ctas[int(self.lane_cta[lane])])
        return f"block ({c % gx}, {(c // gx) % gy}, {c // (gx * gy)})"

    def op_where(self, opi):
        return self.prog.code[opi].where

    def report(self, kind, opi, lane, addr, detail, extra="", space=None):
        """A memcheck/racecheck finding. Invalid accesses always stop the launch unless
        check='warn'; uninitialized reads and races follow the check mode."""
        L = self.launch
        mode = L.check
        if kind in ("oob", "misaligned") and mode == "off":
            mode = "error"
        if mode == "off":
            return
        op = self.prog.code[opi]
        where = f"{space} address {addr:#x}" if space else f"address {addr:#x}"
        if kind in ("uninit", "race"):
            where = f"shared address {addr:#x}"
        msg = (f"kernel {self.prog.name}: {detail} at {where} by {self.block_name(lane)} "
               f"{self.thread_name(lane)}: `{op.text}` at {op.where}")
        if extra:
            msg += f" ({extra})"
        if mode == "error":
            raise EmulationError(msg)
        key = (kind, opi)
        if key not in L._warned:
            L._warned.add(key)
            L.findings.append(msg)
            warnings.warn(msg, EmulationWarning, stacklevel=2)

    # -- execution --------------------------------------------------------------------------------
    def _release(self, code, pc, waiting):
        if self.prog.has_barrier_reductions:
            _release_reductions(self, code, pc, waiting)

    def run(self):
        code = self.prog.code
        n = self.n
        BIG = len(code) + 1
        pc = np.zeros(n, np.int32)
        alive = self.alive = np.ones(n, bool)     # updated in place (barrier.cluster reads it)
        waiting = np.zeros(n, bool)
        any_waiting = False
        held = np.zeros(n, bool)                 # lanes held at an mbarrier wait (WAIT ops)
        any_held = False
        self._steps = steps = 0
        R = self.R
        observe = self.launch.observer
        while True:
            sched = alive & ~waiting if any_waiting else alive
            if any_held:
                sched = sched & ~held
            if not sched.any():
                if any_held:                            # phases completed since: run again
                    from .mbarrier import deadlock, release_ready
                    ready = release_ready(self) & held
                    if ready.any():
                        held &= ~ready
                        any_held = bool(held.any())
                        continue
                    if not any_waiting:
                        raise deadlock(self, held)
                if not any_waiting:
                    break
                self._release(code, pc, waiting)        # every live lane is at a barrier
                waiting[:] = False
                any_waiting = False
                if self.shadow is not None:
                    self.shadow.barrier()
                continue
            pcs = np.where(sched, pc, BIG)
            p = int(pcs.min())
            grp = pcs == p
            limit = int(np.where(grp, BIG, pcs).min())
            if limit == BIG and sched.all():
                mask, ngrp = None, n
            else:
                mask, ngrp = grp, int(np.count_nonzero(grp))
            reschedule_pc = True
            while True:
                op = code[p]
                kind = op.kind
                steps += 1
                if observe is not None:
                    observe(self, p, mask)
                if kind == NORMAL:
                    op.fn(self, mask)
                    p += op.span
                    if p >= limit:
                        break
                    continue
                if kind == BRANCH:
                    target = op.target
                    if op.guard < 0:
                        taken_all = True
                    else:
                        g = R[op.guard]
                        if op.neg:
                            g = ~g
                        taken = g if mask is None else g & mask
                        nt = int(np.count_nonzero(taken))
                        taken_all = nt == ngrp
                        if nt == 0:
                            p += 1
                            if p >= limit:
                                break
                            continue
                        if not taken_all:
                            if target == -2:            # predicated ret/exit
                                alive &= ~taken
                                grp = grp & ~taken
                                mask, ngrp = grp, ngrp - nt
                                p += 1
                                if p >= limit:
                                    break
                                continue
                            pc[grp] = p + 1
                            pc[taken] = target
                            reschedule_pc = False
                            break
                    if target == -2:
                        alive &= ~grp
                        reschedule_pc = False
                        break
                    if target <= p and steps > MAX_GROUP_STEPS:
                        break                           # a loop that does not end: below
                    p = target
                    if p >= limit:
                        break
                    continue
                if kind == WAIT:
                    self.wait_blocked = None
                    op.fn(self, mask)
                    blk = self.wait_blocked
                    if blk is None or not blk.any():
                        p += 1
                        if p >= limit:
                            break
                        continue
                    pc[grp] = p + 1
                    pc[blk] = p                         # they run the wait again when released
                    held |= blk
                    any_held = True
                    reschedule_pc = False
                    break
                if kind == BARRIER:
                    pc[grp] = p + 1
                    waiting |= grp
                    any_waiting = True
                    reschedule_pc = False
                    break
                # EXIT
                alive &= ~grp
                reschedule_pc = False
                break
            if reschedule_pc:
                pc[grp] = p
            if steps > MAX_GROUP_STEPS:
                raise EmulationError(f"kernel {self.prog.name}: no end after {steps} "
                                     f"instruction steps in one batch (an infinite loop?)")
            self._steps = steps
        self.launch.steps += steps
        return steps


_GEOMETRY = {}
_GEOMETRY_LANES = 4096          # batches this small share their layout (larger: made anew)


def _geometry(nt, nctas):
    """The lane layout of a batch of nctas CTAs of nt threads: lane ids, each lane's CTA (its
    index in the batch), thread index, lane in its warp, warp in its CTA, its warp's first lane
    and width, its warp's index in the batch, and the warps' first lanes. Read-only: small
    batches of one shape share it."""
    out = _GEOMETRY.get((nt, nctas))
    if out is not None:
        return out
    n = nt * nctas
    lane_ids = np.arange(n, dtype=np.int64)
    lane_cta = lane_ids // nt
    tlin = lane_ids % nt
    lane = tlin % 32
    warp = tlin // 32
    out = (lane_ids, lane_cta, tlin, lane, warp, lane_ids - lane, np.minimum(32, nt - 32 * warp),
           lane_cta * -(-nt // 32) + warp, np.flatnonzero(lane == 0))
    for a in out:
        a.setflags(write=False)
    if n <= _GEOMETRY_LANES:
        if len(_GEOMETRY) >= 64:
            _GEOMETRY.clear()
        _GEOMETRY[(nt, nctas)] = out
    return out


def _release_reductions(batch, code, pc, waiting):
    """Barriers with a reduction (bar.red) write their result as they release: each op's
    lanes are those waiting just past it."""
    for after in np.unique(pc[waiting]):
        op = code[after - 1]
        if op.fn is not None:
            op.fn(batch, waiting & (pc == after))


def param_region(size):
    return Region(0, np.zeros(max(size, 0), np.uint8), "param space")
