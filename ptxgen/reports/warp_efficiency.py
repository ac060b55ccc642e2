"""Warp execution efficiency: how many of a warp's lanes do useful work per issued instruction.

The kernel runs on the CPU emulator with an observer that sees, before every instruction a group
of lanes executes, which lanes those are (ptxgen.emu's `observer` hook). Each warp with at least
one lane in the group issues the instruction once; its other lanes are lost to one of

- partial warps: the block's last warp has fewer than 32 threads (a 28-thread block leaves 4),
- exited lanes: threads that already returned (bounds checks that end a thread early),
- divergence: live threads of the warp on another path (or waiting at a barrier),

and among the lanes that do issue, a guard predicate that is false switches the instruction off
for that lane (predicated off). The two figures are those of Nsight Compute / nvprof:

    efficiency              active lanes / (issued warp instructions x warp size)
    nonpredicated_efficiency  lanes whose guard holds / (issued x warp size)

Conditional branches are reported one by one: how often a warp reached them, how often its
lanes split (a divergent branch), and how many lanes went each way.

    rep = warp_efficiency("saxpy", {"n": 1000})          # a library operator and its shape
    rep = warp_efficiency(module, "k", grid, block, *args)   # any kernel, as emulate() takes
    print(rep.to_text())
"""
from dataclasses import dataclass, field

import numpy as np

from .. import isa as isamod
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..names import display_name


@dataclass
class BranchStats:
    index: int               # op index in the emulator's program
    line: int
    text: str
    executions: int = 0      # warp-level executions
    divergent: int = 0       # executions where the warp's active lanes went both ways
    lanes: int = 0           # active lanes over all executions
    taken: int = 0           # active lanes that took the branch

    @property
    def divergence(self):
        return self.divergent / self.executions if self.executions else 0.0

    def to_dict(self):
        d = dict(self.__dict__)
        d["divergence"] = self.divergence
        return d


@dataclass
class WarpEfficiency:
    kernel: str
    grid: tuple
    block: tuple
    warp_size: int
    issued: int = 0                  # warp instructions issued
    active_lanes: int = 0
    predicated_on_lanes: int = 0
    lost: dict = field(default_factory=dict)      # lanes lost per cause
    branches: list = field(default_factory=list)
    instructions: list = field(default_factory=list)   # per PTX instruction executed
    check: dict = None               # operator runs: {ok, max_rel_error}

    @property
    def efficiency(self):
        return self.active_lanes / (self.issued * self.warp_size) if self.issued else 1.0

    @property
    def nonpredicated_efficiency(self):
        return self.predicated_on_lanes / (self.issued * self.warp_size) if self.issued else 1.0

    def to_dict(self):
        d = {k: v for k, v in self.__dict__.items() if k != "branches"}
        d.update(efficiency=self.efficiency,
                 nonpredicated_efficiency=self.nonpredicated_efficiency,
                 branches=[b.to_dict() for b in self.branches], grid=list(self.grid),
                 block=list(self.block))
        return d

    def to_text(self, worst=5):
        slots = self.issued * self.warp_size
        L = [f"{display_name(self.kernel)}: grid {self.grid}, block {self.block}: "
             f"{self.issued:,} warp "
             f"instructions issued",
             f"  warp execution efficiency      {100 * self.efficiency:.1f}% "
             f"({self.active_lanes:,} of {slots:,} lane slots active)",
             f"  non-predicated efficiency      {100 * self.nonpredicated_efficiency:.1f}% "
             f"(guards switch off {self.lost.get('predicated_off', 0):,} active lanes)"]
        for cause, what in (("partial_warps", "partial warps (threads the block lacks)"),
                            ("exited", "exited threads"), ("diverged", "divergence")):
            n = self.lost.get(cause, 0)
            L.append(f"  lost to {what + ':':<40} {n:>12,} lane slots "
                     f"({100 * n / slots if slots else 0:.1f}%)")
        if self.branches:
            L.append("  conditional branches (warp executions, divergent, lanes taken):")
            for b in self.branches:
                where = f"line {b.line}" if b.line else f"op {b.index}"
                L.append(f"    {where:<10} {b.text:<34} {b.executions:>8,} "
                         f"{100 * b.divergence:5.1f}% divergent  "
                         f"{b.taken:,}/{b.lanes:,} lanes taken")
        low = sorted((i for i in self.instructions if i["issued"]),
                     key=lambda i: (i["active"] / i["issued"], i["index"]))[:worst]
        if low and low[0]["active"] < low[0]["issued"] * self.warp_size:
            L.append("  least efficient instructions (active lanes per issue):")
            for i in low:
                L.append(f"    {i['text']:<44} {i['active'] / i['issued']:5.1f} of "
                         f"{self.warp_size} ({i['issued']:,} issues)")
        if self.check is not None:
            L.append(f"  result checked against the float64 reference: "
                     f"{'ok' if self.check['ok'] else 'MISMATCH'} (max rel. error "
                     f"{self.check['max_rel_error']:.2e})")
        return "\n".join(L)


class _Observer:
    """Tallies per op of the emulator's program; called before each op a lane group runs."""

    def __init__(self, prog, warp_size):
        self.prog, self.ws = prog, warp_size
        n = len(prog.code)
        self.issued = np.zeros(n, np.int64)
        self.active = np.zeros(n, np.int64)
        self.pred_on = np.zeros(n, np.int64)
        self.lost = {"partial_warps": 0, "exited": 0, "diverged": 0}
        self.branches = {}
        self.batch = None
        from ..emu import NORMAL
        # the guard slot of predicated ops (branch conditions are read from the op itself)
        self.guard = [(prog.slot(op.instr.guard), op.instr.guard_negated)
                      if op.instr is not None and op.instr.guard is not None and
                      op.kind == NORMAL else None for op in prog.code]

    def _start(self, batch):
        self.batch = batch
        wi = batch.warp_index
        self.wl = wi - wi.min()
        self.nw = int(self.wl.max()) + 1
        self.warp_len = np.bincount(self.wl, minlength=self.nw)
        self.exited = np.zeros(batch.n, bool)
        self.exited_per_warp = np.zeros(self.nw, np.int64)

    def __call__(self, batch, p, mask):
        if batch is not self.batch:
            self._start(batch)
        from ..emu import BRANCH, EXIT
        op = self.prog.code[p]
        counts = self.warp_len if mask is None else np.bincount(self.wl[mask],
                                                                 minlength=self.nw)
        issuing = counts > 0
        n_issued = int(np.count_nonzero(issuing))
        active = int(counts.sum())
        if op.instr is not None:
            span = op.span
            partial = int(np.sum(self.ws - self.warp_len[issuing]))
            exited = int(np.sum(self.exited_per_warp[issuing]))
            self.lost["partial_warps"] += span * partial
            self.lost["exited"] += span * exited
            self.lost["diverged"] += span * (n_issued * self.ws - active - partial - exited)
            on = active
            g = self.guard[p]
            if g is not None:
                pv = batch.R[g[0]]
                pv = ~pv if g[1] else pv
                on = int(np.count_nonzero(pv if mask is None else pv & mask))
            sl = slice(p, p + span)
            self.issued[sl] += n_issued
            self.active[sl] += active
            self.pred_on[sl] += on
        if op.kind == BRANCH and op.guard >= 0:
            pv = batch.R[op.guard]
            pv = ~pv if op.neg else pv
            taken = pv if mask is None else pv & mask
            if op.target == -2:                     # predicated ret/exit
                self._exit(taken)
            else:
                tc = np.bincount(self.wl[taken], minlength=self.nw)
                b = self.branches.get(p)
                if b is None:
                    b = self.branches[p] = BranchStats(p, op.line, op.text)
                b.executions += n_issued
                b.divergent += int(np.count_nonzero(issuing & (tc > 0) & (tc < counts)))
                b.lanes += active
                b.taken += int(tc.sum())
        elif op.kind == EXIT:
            self._exit(np.ones(batch.n, bool) if mask is None else mask)

    def _exit(self, lanes):
        new = lanes & ~self.exited
        self.exited |= new
        self.exited_per_warp += np.bincount(self.wl[new], minlength=self.nw)


def _operator_run(op, shape, arch, seed, observer_factory):
    from ..emit import emit_module
    from ..emu import compile_kernel, emulate
    from ..ir.verify import verify_module
    from ..parse import parse_ptx
    shape = op.shape(**(shape or {}))
    # run as printed, so lines are those of `ptxgen emit` for the same shape
    module = parse_ptx(emit_module(verify_module(op.build(shape, arch)), arch),
                       filename=f"ptxgen emit {op.label}")
    cfg = op.launch(shape, isamod.load(arch).header.sm_count)
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    arrays.update(op.workspace_arrays(shape, arch))
    for step in op.steps(shape, arch)[:-1]:     # e.g. the matmul's packing, not observed
        emulate(module, step.kernel, step.launch.grid, step.launch.block, *step.args(arrays),
                shared_bytes=step.launch.shared_bytes)
    prog = compile_kernel(module, op.kernel_name())
    obs = observer_factory(prog)
    emulate(module, op.kernel_name(), cfg.grid, cfg.block, *op.kernel_args(shape, arrays),
            shared_bytes=cfg.shared_bytes, observer=obs)
    ok, err = op.check(shape, arrays)
    return obs, prog, cfg.grid, cfg.block, {"ok": bool(ok), "max_rel_error": float(err)}


def warp_efficiency(target, *args, shape=None, arch=DEFAULT_TARGET, seed=0, shared_bytes=0):
    """Warp execution efficiency of one launch, measured on the CPU emulator.

    target: a library operator (an Operator or its name) with `shape` (its sizes; defaults
    otherwise) — the operator's launch and random inputs are used and the result is checked —
    or a Module / PTX text followed by kernel name, grid, block and the kernel's arguments,
    exactly as ptxgen.emulate takes them."""
    from ..ops import OPERATORS, Operator
    ws = isamod.load(arch).header.warp_size
    if isinstance(target, str) and target in OPERATORS:
        target = OPERATORS[target]
    if isinstance(target, Operator):
        obs, prog, grid, block, check = _operator_run(target, shape, arch, seed,
                                                      lambda p: _Observer(p, ws))
    else:
        from ..emu import as_module, compile_kernel, emulate
        if len(args) < 3:
            raise PtxgenError("warp_efficiency(module, kernel_name, grid, block, *args) needs "
                              "the kernel name, grid and block")
        name, grid, block, kargs = args[0], args[1], args[2], args[3:]
        module = as_module(target)
        prog = compile_kernel(module, name)
        obs = _Observer(prog, ws)
        res = emulate(module, name, grid, block, *kargs, shared_bytes=shared_bytes,
                      observer=obs)
        grid, block, check = res.grid, res.block, None
    return _report(prog, obs, tuple(grid), tuple(block), ws, check)


def _report(prog, obs, grid, block, ws, check):
    rep = WarpEfficiency(prog.name, grid + (1,) * (3 - len(grid)),
                         block + (1,) * (3 - len(block)), ws, check=check)
    rep.issued = int(obs.issued.sum())
    rep.active_lanes = int(obs.active.sum())
    rep.predicated_on_lanes = int(obs.pred_on.sum())
    rep.lost = dict(obs.lost, predicated_off=rep.active_lanes - rep.predicated_on_lanes)
    rep.branches = [obs.branches[k] for k in sorted(obs.branches)]
    from ..analysis.memory import memory_op
    for i, op in enumerate(prog.code):
        if op.instr is None or not obs.issued[i]:
            continue
        m = memory_op(op.instr)
        rep.instructions.append({"index": i, "line": op.line, "text": op.text,
                                 "opcode": op.instr.full_opcode, "issued": int(obs.issued[i]),
                                 "active": int(obs.active[i]),
                                 "predicated_on": int(obs.pred_on[i]),
                                 "space": m.space if m else None,
                                 "bytes_per_lane": m.bytes if m else 0})
    return rep
