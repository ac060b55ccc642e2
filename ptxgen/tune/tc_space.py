"""The TcMatmulSchedule search space (the sm_90a tensor-core GEMM) and the static models the
tuner prunes it with, one schedule (dict) at a time so a process pool can run them.

Dimensions: the tile (128x256 with wgmma n256, 128x128 and 256x128 with n128; two consumer
warpgroups), pipeline stages (2-6), the epilogue (C from the fragments, or staged through
shared memory and stored by TMA), wgmma groups left in flight (0, 1), 2-CTA clusters sharing
B by multicast (1, 2) and the raster (group_m 0 or 8). Validation drops what shared memory or
the register file cannot hold.

What each model can tell apart decides how often it runs:
    ptxas         per code shape (tile, epilogue, inflight, cluster, how C is stored): stages
                  and group_m are constants of the same code, so they share its registers and
                  spills (they change the code only where they decide whether an f32 C fits
                  in shared memory, which the C store kind says)
    simulator     per tile and epilogue: it issues every wgmma with its shape's cost (the
                  isa's WGMMA class scaled by N) and walks the persistent tile loop, so it
                  sees the rounds of tiles over the SMs and the epilogue's stores; it models
                  TMA copies as ALU work and has no clusters, so stages, inflight, clusters
                  and raster are settled on the GPU
    bound         per tile: whole rounds of tiles over the SMs at the tensor cores' peak
"""
import dataclasses
import itertools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .. import isa as isamod
from ..errors import PtxgenError, ScheduleError
from ..schedule.tc_matmul import TcMatmulSchedule
from . import ptxas_cache
from .space import rejection_rule

TILES = ((128, 256, 256), (128, 128, 128), (256, 128, 128))      # (BM, BN, wgmma_n)
STAGES = (2, 3, 4, 5, 6)
EPILOGUES = ("direct", "tma")
INFLIGHT = (0, 1)
CLUSTERS = (1, 2)
GROUPS = (0, 8)
# split-K (lower/split_k.py) for shapes with fewer 128x256 tiles than SMs (decode):
# (BM, consumers) tiles 128 wide, the K loop cut into SPLITS pieces, C from the fragments
SPLIT_TILES = ((64, 1), (128, 2))
SPLITS = (2, 3, 4)
SPLIT_STAGES = (4, 6, 8)
SIM_FIELDS = ("BM", "BN", "wgmma_n", "epilogue", "consumers", "split_k")
CODE_FIELDS = SIM_FIELDS + ("inflight", "cluster_m")
_DEFAULT = TcMatmulSchedule()


@dataclass
class TcSpace:
    points: list                                   # valid TcMatmulSchedules
    raw: int = 0
    rejected: Counter = field(default_factory=Counter)

    def __len__(self):
        return len(self.points)


def tc_space(arch, dtype="bf16", shape=None):
    """Every combination of the dimensions above that validates for `arch` and `dtype`; with
    a skinny `shape` (fewer 128x256 tiles than SMs) the split-K points too."""
    space = TcSpace([])
    if shape is not None and skinny(shape, arch):
        for (BM, cons), split, stages, fl in itertools.product(SPLIT_TILES, SPLITS,
                                                                SPLIT_STAGES, INFLIGHT):
            _add(space, TcMatmulSchedule(BM=BM, BN=128, wgmma_n=128, consumers=cons,
                                         stages=stages, inflight=fl, split_k=split)
                 .for_dtype(dtype), arch, dtype)
    for (BM, BN, wn) in TILES:
        for stages in STAGES:
            for epi in EPILOGUES:
                for fl in INFLIGHT:
                    for x in CLUSTERS:
                        for g in GROUPS:
                            _add(space, TcMatmulSchedule(
                                BM=BM, BN=BN, wgmma_n=wn, stages=stages, epilogue=epi,
                                inflight=fl, cluster_m=x, group_m=g).for_dtype(dtype),
                                arch, dtype)
    return space


def _add(space, s, arch, dtype):
    space.raw += 1
    try:
        space.points.append(s.validate(arch, dtype))
    except ScheduleError as e:
        space.rejected[rejection_rule(e)] += 1


def skinny(shape, arch):
    """Fewer 128x256 tiles than the target's SMs: the shapes split-K is searched for."""
    sms = isamod.load(arch).header.sm_count
    return -(-shape["M"] // 128) * -(-shape["N"] // 256) < sms

def key_of(s, names):
    """The schedule with every field outside `names` at the default's value (BK kept: it
    follows the input type)."""
    return dataclasses.replace(_DEFAULT, BK=s.BK, **{n: getattr(s, n) for n in names})


def bound_us(s, shape, arch, dtype="bf16"):
    """A lower bound: the busiest SM runs ceil(units / SMs) work units (tiles, or with
    split-K tiles x pieces; cluster pairs count as two), each BM x BN x K' (its share of K,
    rounded up to whole k steps) at the tensor cores' peak."""
    h = isamod.load(arch).header
    units = -(-shape["M"] // s.BM) * -(-shape["N"] // s.BN) * s.split_k
    k_pad = -(-(-(-shape["K"] // s.BK)) // s.split_k) * s.BK
    flops = -(-units // h.sm_count) * 2 * s.BM * s.BN * k_pad
    rate = h.tensor_flops_per_cycle_per_sm / (2 if dtype == "tf32" else 1)
    return flops / rate / h.clock_mhz


def _op(sched, dtype, out):
    from ..ops.tc_matmul import TcMatmul
    s = TcMatmulSchedule.from_dict(sched) if isinstance(sched, dict) else sched
    return TcMatmul(dtype, out, s), s


def assemble(sched, arch, shape, dtype, out):
    """ptxas resources of the main kernel: registers, spills, stack, shared; or error."""
    from ..emit import emit_module
    from ..toolchain import assemble as ptxas
    try:
        op, _ = _op(sched, dtype, out)
        text = emit_module(op.build(shape, arch), arch)
        return ptxas_cache.cached_resources(text, arch, op.kernel_name(), ptxas)
    except PtxgenError as e:
        return {"error": str(e)[:200]}


def _stand_ins(op, shape):
    """The operator's arrays as zero-stride numpy views (shape and type, no memory): what the
    tensor maps and the simulator's footprint look at."""
    dims = {name: ((rows, cols), op._np_in()) for name, rows, cols in op.operands(shape)}
    dims["C"] = ((shape["M"], shape["N"]), np.float32 if op.out == "f32" else np.uint16)
    dims.update(op.workspace(shape))
    return {name: np.lib.stride_tricks.as_strided(np.zeros(1, dt), d, (0,) * len(d))
            for name, (d, dt) in dims.items()}


def simulate(sched, arch, shape, dtype, out, registers, sample=16):
    """{'us': predicted kernel microseconds, 'launch_us'} of the main kernel, or error."""
    from ..sim import simulate as sim
    try:
        op, s = _op(sched, dtype, out)
        m = op.build(shape, arch)
        k = m.kernel(op.kernel_name())
        cfg = op.launch(shape, isamod.load(arch).header.sm_count)
        args = op.kernel_args(shape, _stand_ins(op, shape))
        rep = sim(k, cfg.grid, cfg.block, args=dict(zip([p.name for p in k.params], args)),
                  shared_bytes=cfg.shared_bytes, arch=arch, module=m, registers=registers,
                  sample=sample)
    except Exception as e:           # noqa: BLE001 (one point's failure must not end a search)
        return {"error": f"{type(e).__name__}: {e}"[:200]}
    return {"us": rep.device_us, "launch_us": rep.time_us - rep.device_us}


def run_job(job):
    """Pool entry point: ('assemble'|'simulate', schedule dict, args...)."""
    return {"assemble": assemble, "simulate": simulate}[job[0]](*job[1:])


def ctas_per_sm(s, registers, arch, dtype, staged, out="bf16"):
    from ..analysis.occupancy import occupancy
    elem = 4 if dtype == "tf32" else 2
    return occupancy(s.threads, registers, s.shared_bytes(elem, staged, out), arch) \
        .active_blocks_per_sm


def distance(s, base):
    """Fields in which s differs from base (the baseline's nearest variants first)."""
    return sum(getattr(s, f.name) != getattr(base, f.name) for f in dataclasses.fields(s))




# Round 2 (the winning simulation class's untimed variants) in moves from the winner, a move
# being one field except clusters and inflight, which move together: multicast B paid only
# with no wgmma group in flight (H200, PERF.md run 4: x2 0.850x / 0.872x cuBLAS, x2f0 0.890x /
# 0.965x at 4096^3 / 8192^3). Among as many moves: clusters first, then the raster, then the
# stages (the one field shared memory already limits: 2 stages were 22-59 % slower than 3 in
# every class where the tuning run timed both, docs/PERF.md "Tensor-core tune cache"). The
# first search's plain field distance with name order timed the stages and raster moves first
# and at budget 8 never reached a cluster or inflight move; in this order, at budget 10,
# inflight 0 won in every class (+1-8 % over the old default).
MOVES = (("cluster_m", "inflight"), ("group_m",), ("stages",))


def round_two_key(s, win):
    moved = [any(getattr(s, f) != getattr(win, f) for f in m) for m in MOVES]
    return sum(moved), [not m for m in moved], str(s)
