"""The MatmulSchedule search space: every combination of the choices below that validates.

Dimensions (each a choice MatmulSchedule lowers): block tile, thread tile with its warp shape,
BK, pipeline (register-staged double buffer or a cp.async ring of 2 or 3 stages), A padding,
C epilogue (staged through shared memory, or straight from the fragments 2 or 4 wide) and CTA
raster order (group_m). Left out because they cannot win on a SIMT FFMA
kernel: thread tiles below 8x8 accumulators without a 16 (one LDS.128 feeds too few FFMAs, the
kernel is shared-memory bound), scalar fragment loads, BK=32 (two stages of 128x128 already
fill the 48 KB of static shared memory) and 4-stage rings (the same limit).

The occupancy target (.minnctapersm, which only caps registers) is not a free dimension: each
point takes the highest target its threads, shared memory and register estimate allow, as
every hand-picked candidate of ptxgen.schedule does. The count of valid points is what an
exhaustive search would have to time.
"""
from collections import Counter
from dataclasses import dataclass, field

from ..arch import DEFAULT_TARGET
from ..errors import ScheduleError
from ..schedule import MatmulSchedule

BLOCK_TILES = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
# (TM, TN, lanes along M, lanes along N): the thread tile and how a warp's 32 lanes tile it
THREAD_TILES = ((8, 8, 4, 8), (8, 8, 8, 4), (8, 16, 4, 8), (16, 8, 8, 4))
BKS = (8, 16)
PIPELINES = ((False, 2), (True, 2), (True, 3))     # (use_cp_async, stages)
PADS_A = (4, 0)
EPILOGUES = ((True, 2), (False, 2), (False, 4))   # (stage_c, vec_store): vec_store only
                                                # matters for the direct epilogue
GROUPS = (0, 8)
OCCUPANCY_TARGETS = (16, 12, 8, 6, 4, 3, 2, 1)     # .minnctapersm, tried highest first
# Fields the static models cannot tell apart: points that differ only here are simulated once
# and timed separately (group_m changes which CTAs run at the same time, i.e. L2 reuse).
TIMED_ONLY = ("group_m",)


@dataclass
class Space:
    points: list                                   # valid MatmulSchedules
    raw: int = 0                                   # combinations looked at
    rejected: Counter = field(default_factory=Counter)   # violated rule → combinations

    def __len__(self):
        return len(self.points)


def model_key(schedule):
    """The schedule with its timed-only fields at their defaults."""
    d = MatmulSchedule()
    return schedule.replace(**{f: getattr(d, f) for f in TIMED_ONLY})


def rule_of(err):
    """A ScheduleError's rule without the schedule's name and numbers (for counting)."""
    text = str(err).split(": ", 1)[-1]
    for cut in (" (", ", got", " of sm_", " on sm_"):
        text = text.split(cut, 1)[0]
    # the counts vary per combination and are left out ("N bytes" read as a unit in reports)
    return " ".join(w for w in text.split() if not w.rstrip(",").isdigit())[:100]


def _cores():
    for BM, BN in BLOCK_TILES:
        for TM, TN, lm, ln in THREAD_TILES:
            WM, WN = lm * TM, ln * TN
            if BM % WM == 0 and BN % WN == 0:
                yield dict(BM=BM, BN=BN, TM=TM, TN=TN, WM=WM, WN=WN)


def matmul_space(arch=DEFAULT_TARGET, shape=None):
    """Every valid point of the space for `arch` (and `shape`, whose only rule is the 32-bit
    offset limit of very large operands)."""
    space = Space([])
    for core in _cores():
        for BK in BKS:
            for cp, stages in PIPELINES:
                for pad_a in PADS_A:
                    for stage_c, vs in EPILOGUES:
                        base = MatmulSchedule(BK=BK, use_cp_async=cp, stages=stages,
                                              pad_a=pad_a, vec_store=vs, stage_c=stage_c,
                                              **core)
                        space.raw += len(GROUPS)
                        s = _highest_occupancy(base, arch, shape, space)
                        if s is not None:
                            space.points.extend(s.replace(group_m=g) for g in GROUPS)
    return space


def _highest_occupancy(base, arch, shape, space):
    """`base` at the highest valid occupancy target, or None (rule counted) when none is."""
    err = None
    for m in OCCUPANCY_TARGETS:
        s = base.replace(min_ctas_per_sm=m)
        try:
            return s.validate(arch, shape)
        except ScheduleError as e:
            err = e                         # the least demanding target's reason is kept
            if "CTA" not in str(e) and "registers" not in str(e):
                break                       # a rule no occupancy target changes
    space.rejected[rule_of(err)] += len(GROUPS)
    return None
