"""The AttentionSchedule search space, pruned by the static models and ranked by the simulator
(issue 17, item 3): what a GPU search of the fused attention forward should time first.

    space          key block BN, consumer warpgroups, K/V stages, the S/P·V overlap and the
                   setmaxnreg split (producer registers; the consumers get the most that fits)
    validate       AttentionSchedule.validate: shared memory, the SM's registers, fragments
    dominated      the overlap with 2 stages: the overlapped loop holds slot n-1 until
                   P·V(n-1) ends, so the producer has no slot to prefetch into (measured
                   slower than 3 stages: docs/PERF.md#fused-attention-forward-sm_90a)
    ptxas          any spill or stack frame drops the point
    occupancy      no CTA fits an SM (threads, ptxas registers, shared memory)
    simulator      one prediction per model group, ranked; `stages` is timed only: the
                   simulator does not model TMA arrival or mbarrier waits, so stage counts
                   beyond the minimum look alike to it and are settled on the GPU

Static work runs on the tuner's executor (local processes or Ray), one job per point.
"""
import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field

from .. import isa as isamod
from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET
from ..errors import PtxgenError, ScheduleError
from ..schedule.attention import AttentionSchedule
from ..schedule.tc_matmul import WARPGROUP
from . import ptxas_cache
from .executor import executor
from .space import rejection_rule

BNS = (64, 128, 192, 256)
CONSUMERS = (1, 2, 3)
STAGES = (2, 3, 4)
PRODUCER_REGS = (24, 40)
OVERLAP = (True, False)
# fields the simulator cannot tell apart (it does not model TMA arrival and mbarrier waits, and
# the register split only matters through spills, which ptxas already checks)
TIMED_ONLY = ("stages", "producer_regs", "consumer_regs")
DOMINATED = ("overlap with 2 K/V stages: no slot to prefetch into (measured slower than 3 "
             "stages, docs/PERF.md#fused-attention-forward-sm_90a)")


def consumer_regs(consumers, producer, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
    """The most registers (a multiple of 8, at most a thread's limit) each consumer thread can
    get by setmaxnreg once the producer warpgroup has given its own back."""
    h = isamod.load(arch).header
    cap = h.max_registers_per_thread // 8 * 8
    fit = (h.registers_per_sm // WARPGROUP - producer) // consumers // 8 * 8
    return min(cap, fit)


def model_key(s):
    """The schedule as the simulator sees it: its timed-only fields left out."""
    return dataclasses.replace(s, **{f: 0 for f in TIMED_ONLY})


@dataclass
class AttentionSpace:
    points: list                                     # valid, not dominated
    raw: int = 0
    rejected: Counter = field(default_factory=Counter)

    def __len__(self):
        return len(self.points)


def attention_space(D, dtype="bf16", arch=DEFAULT_ARCH_SPECIFIC_TARGET):
    """Every schedule of the space for head dim D that validates and is not dominated."""
    space = AttentionSpace([])
    for BN in BNS:
        for c in CONSUMERS:
            for p in PRODUCER_REGS:
                for overlap in OVERLAP:
                    for st in STAGES:
                        space.raw += 1
                        s = AttentionSchedule(BN=BN, consumers=c, stages=st, producer_regs=p,
                                              consumer_regs=consumer_regs(c, p, arch),
                                              overlap=overlap)
                        try:
                            s.validate(arch, dtype, D)
                        except ScheduleError as e:
                            space.rejected[rejection_rule(e)] += 1
                            continue
                        if overlap and st < 3:
                            space.rejected[DOMINATED] += 1
                            continue
                        space.points.append(s)
    return space


# -- the static models, one point at a time (picklable in and out for the executor) -----------
def _op(sched, shape, dtype, causal):
    from ..ops.attention import Attention
    s = AttentionSchedule(**sched) if isinstance(sched, dict) else sched
    return Attention(dtype, causal=causal, schedule=s), s


def assemble(sched, arch, shape, dtype, causal):
    """ptxas resources ({registers, spills, stack, ...}) of the kernel, or {'error': ...}."""
    from ..emit import emit_module
    from ..toolchain import assemble as ptxas
    op, _ = _op(sched, shape, dtype, causal)
    try:
        text = emit_module(op.build(shape, arch), arch)
        return ptxas_cache.cached_resources(text, arch, op.kernel_name(), ptxas)
    except PtxgenError as e:
        return {"error": str(e)[:200]}


def simulate(sched, arch, shape, dtype, causal, registers, sample=16):
    """{'us': predicted device microseconds, 'bound': what bounds it} or {'error': ...}."""
    from ..sim import simulate_operator
    op, _ = _op(sched, shape, dtype, causal)
    try:
        rep = simulate_operator(op, shape, arch=arch, registers=registers, sample=sample)
    except Exception as e:           # noqa: BLE001 (one point's failure must not end a search)
        return {"error": f"{type(e).__name__}: {e}"[:200]}
    b = rep.details["bound"]
    return {"us": rep.device_us, "bound": b["resource"],
            "shares": {k: v for k, v in b["shares"].items() if k.startswith("pipe")}}


def run_job(job):
    kind, *rest = job
    return assemble(*rest) if kind == "assemble" else simulate(*rest)


@dataclass
class Ranked:
    schedule: AttentionSchedule
    registers: int = None
    ctas_per_sm: int = None
    predicted_us: float = None
    bound: str = ""
    shares: dict = field(default_factory=dict)
    variants: list = field(default_factory=list)     # timed-only siblings (stages, registers)

    def to_dict(self):
        return {"name": str(self.schedule), "schedule": dataclasses.asdict(self.schedule),
                "registers": self.registers, "ctas_per_sm": self.ctas_per_sm,
                "predicted_us": self.predicted_us, "bound": self.bound, "shares": self.shares,
                "stage_variants": [str(v) for v in self.variants]}


@dataclass
class AttentionTuneReport:
    shape: dict
    dtype: str
    causal: bool
    arch: str
    stages: list = field(default_factory=list)       # {stage, kept, dropped: {why: n}}
    ranked: list = field(default_factory=list)       # Ranked, best prediction first
    errors: list = field(default_factory=list)
    seconds: float = 0.0

    def flops(self):
        from ..ops.attention import Attention
        return Attention(self.dtype, causal=self.causal).flops(self.shape)

    def top(self, k):
        """The k best predicted schedules (one per model group: the fewest stages, the
        smallest producer share)."""
        return [r.schedule for r in self.ranked[:k]]

    def to_dict(self):
        return {"operator": "attention", "shape": self.shape, "dtype": self.dtype,
                "causal": self.causal, "arch": self.arch, "stages": self.stages,
                "ranked": [r.to_dict() for r in self.ranked], "errors": self.errors,
                "seconds": self.seconds}

    def to_text(self):
        dims = " ".join(f"{k}={v}" for k, v in self.shape.items())
        lines = [f"tune attention {dims} {self.dtype}{' causal' if self.causal else ''} on "
                 f"{self.arch} [dry run: static models only, no GPU]"]
        for st in self.stages:
            why = "; ".join(f"{k}: {n}" for k, n in st["dropped"].items() if n)
            lines.append(f"  {st['stage']:10s} {st['kept']:5d} kept" +
                         (f"  (dropped: {why})" if why else ""))
        lines += [f"  {e}" for e in self.errors[:5]]
        w = max([len("schedule")] + [len(str(r.schedule)) for r in self.ranked])
        lines += ["", f"  {'schedule':{w}s} {'regs':>4s} {'cta/SM':>6s} {'pred us':>9s} "
                      f"{'pred TFLOP/s':>12s}  bound (TENSOR: wgmma; XU: ex2 on the SFU)"]
        f = self.flops()
        for r in self.ranked:
            tf = f"{f / r.predicted_us / 1e6:12.1f}" if r.predicted_us else f"{'':12s}"
            pred = f"{r.predicted_us:9.1f}" if r.predicted_us else f"{'failed':>9s}"
            lines.append(f"  {str(r.schedule):{w}s} {r.registers or 0:4d} "
                         f"{r.ctas_per_sm or 0:6d} {pred} {tf}  {r.bound}")
        n = sum(len(r.variants) for r in self.ranked)
        lines.append(f"  {n} more stage counts / register splits of these are timed only (the "
                     f"simulator does not model TMA/mbarrier waits); time: {self.seconds:.1f} s")
        return "\n".join(lines)


def tune_attention(shape, dtype="bf16", causal=False, arch=DEFAULT_ARCH_SPECIFIC_TARGET,
                   jobs=None, sample=16, space=None, cluster=None):
    """Prune the AttentionSchedule space for `shape` ({'B','H','S','D'}) with the static models
    and rank the survivors by the simulator. No GPU: the top of `ranked` is what to time."""
    t0 = time.perf_counter()
    rep = AttentionTuneReport(dict(shape), dtype, bool(causal), arch)
    space = space if space is not None else attention_space(shape["D"], dtype, arch)
    valid = len(space) + space.rejected[DOMINATED]
    rep.stages.append({"stage": "validate", "kept": valid, "dropped": {
        k: n for k, n in space.rejected.most_common() if k != DOMINATED}})
    rep.stages.append({"stage": "dominated", "kept": len(space),
                       "dropped": {DOMINATED: space.rejected[DOMINATED]}})
    ex = executor(jobs, cluster)
    try:
        res = ex.map(run_job, [("assemble", dataclasses.asdict(s), arch, shape, dtype, causal)
                               for s in space.points])
        ptxas = {"ptxas rejected": 0, "spills": 0}
        alive = []
        for s, r in zip(space.points, res):
            if "error" in r:
                ptxas["ptxas rejected"] += 1
                rep.errors.append(r["error"])
            elif r["spills"] or r["stack"]:
                ptxas["spills"] += 1
            else:
                alive.append((s, r["registers"]))
        rep.stages.append({"stage": "ptxas", "kept": len(alive), "dropped": ptxas})
        from ..analysis.occupancy import occupancy
        groups = {}
        for s, regs in alive:
            cta = occupancy(s.threads, regs, s.shared_bytes(shape["D"]),
                            arch).active_blocks_per_sm
            if cta:
                groups.setdefault(model_key(s), []).append((s, regs, cta))
        kept = sum(len(g) for g in groups.values())
        rep.stages.append({"stage": "occupancy", "kept": kept,
                           "dropped": {"no CTA fits": len(alive) - kept}})
        reps = [min(g, key=lambda x: (x[0].stages, x[0].producer_regs))
                for g in groups.values()]
        sims = ex.map(run_job, [("simulate", dataclasses.asdict(s), arch, shape, dtype, causal,
                                 regs, sample) for s, regs, _ in reps])
    finally:
        ex.close()
    for (s, regs, cta), r in zip(reps, sims):
        if "error" in r:
            rep.errors.append(r["error"])
        rep.ranked.append(Ranked(s, regs, cta, r.get("us"), r.get("bound", ""),
                                 r.get("shares", {}),
                                 sorted((v for v, _, _ in groups[model_key(s)] if v != s),
                                        key=lambda v: (v.stages, v.producer_regs))))
    rep.ranked.sort(key=lambda r: (r.predicted_us is None, r.predicted_us or 0.0,
                                   str(r.schedule)))
    ok = sum(r.predicted_us is not None for r in rep.ranked)
    rep.stages.append({"stage": "simulator", "kept": ok,
                       "dropped": {"simulation failed": len(rep.ranked) - ok}})
    rep.seconds = round(time.perf_counter() - t0, 1)
    return rep
