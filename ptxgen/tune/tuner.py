"""tune_matmul: search the MatmulSchedule space for one shape, pruning with the static models
before spending GPU time.

    valid points (space.py)          every combination that passes MatmulSchedule.validate
    -> per family (stages.py)         a family is tile sizes and pipeline, what the simulator
                                      ranks; its representative is the variant nearest the
                                      default schedule that survives
       ptxas                          any spill or stack frame drops the point (results cached
                                      on disk by PTX hash, ptxas_cache.py)
       occupancy                      no CTA fits, or fewer than the .minnctapersm target; a
                                      raster-order variant (group_m) of a grid that is resident
                                      all at once (one wave) is the same launch as group_m=0
       simulator                      one prediction per family (of the kernel alone; the
                                      launch overhead is shown apart), in order of an FFMA lower
                                      bound; families whose bound exceeds the prediction of the
                                      last family round 1 would time are never looked at
    -> GPU (budget trials)            round 1: the default schedule (the baseline) and the
                                      representative of each of the best predicted families;
                                      round 2: the rest of the family that measured fastest
                                      (warp shape, padding, store width, raster order: its
                                      variants are assembled then), then the next families.
                                      Each trial: correctness on a small odd shape, then time

The static work runs on an executor (executor.py): local processes, or Ray with `cluster`.
An exhaustive search would time every valid point; the report says how many trials pruning
saved. The fastest correct point is written to the tune cache under the shape's class.
"""
import time
from dataclasses import dataclass, field

from .. import __version__
from ..arch import DEFAULT_TARGET
from ..errors import Arg, PtxgenError, Spelled
from ..schedule import default_schedule
from ..schedule import tuned as cachemod
from . import static
from .executor import executor
from .progress import Progress
from .space import matmul_space, model_key
from .stages import StaticSearch, assemble_all, family


@dataclass
class Point:
    schedule: object
    registers: int = None
    ctas_per_sm: int = None
    bound_us: float = None
    predicted_us: float = None           # the kernel alone
    launch_us: float = None              # what a launch adds around it (isa launch overhead)
    ok: bool = None
    error: float = None                  # worst relative error of the correctness check
    ms: float = None
    baseline: bool = False
    note: str = ""                       # why a GPU trial failed

    def to_dict(self, full=False):
        d = {"name": str(self.schedule), "registers": self.registers,
             "ctas_per_sm": self.ctas_per_sm, "bound_us": self.bound_us,
             "predicted_us": self.predicted_us, "launch_overhead_us": self.launch_us}
        if self.ok is not None:
            d.update(ok=self.ok, max_rel_error=self.error, ms=self.ms)
        if self.baseline:
            d["baseline"] = True
        if self.note:
            d["note"] = self.note
        if full:
            d["schedule"] = self.schedule.to_dict()
        return d


@dataclass
class TuneReport:
    operator: str
    arch: str
    shape: dict
    shape_class: str
    budget: int
    dry_run: bool
    stages: list = field(default_factory=list)      # {stage, kept, dropped: {why: n}}
    exhaustive: int = 0
    simulated: list = field(default_factory=list)   # Points, best prediction first
    trials: list = field(default_factory=list)      # Points picked for the GPU, in order
    best: Point = None
    cache_path: str = None
    device: str = None
    seconds: dict = field(default_factory=dict)
    plan: dict = None                               # the static stages' result (tc.py)

    @property
    def gpu_trials(self):
        """Trials run, or in a dry run the most the budget allows (round 2 is not known)."""
        return self.budget if self.dry_run else len(self.trials)

    @property
    def saved(self):
        return self.exhaustive - self.gpu_trials

    def flops(self):
        return 2 * self.shape["M"] * self.shape["N"] * self.shape["K"]

    def to_dict(self):
        base = next((p for p in self.trials if p.baseline), None)
        d = {"operator": self.operator, "arch": self.arch, "shape": self.shape,
             "shape_class": self.shape_class, "budget": self.budget, "dry_run": self.dry_run,
             "stages": self.stages, "exhaustive_trials": self.exhaustive,
             "gpu_trials": self.gpu_trials, "trials_saved": self.saved,
             "trials_saved_fraction": self.saved / self.exhaustive if self.exhaustive else 0.0,
             "trials": [p.to_dict(full=True) for p in self.trials],
             "simulated": [p.to_dict() for p in self.simulated],
             "best": self.best.to_dict(full=True) if self.best else None,
             "baseline": base.to_dict(full=True) if base else None,
             "cache_path": self.cache_path, "device": self.device, "seconds": self.seconds}
        if self.best and self.best.ms:
            d["best"]["tflops"] = self.flops() / self.best.ms / 1e9
            if base and base.ms:
                d["speedup_vs_baseline"] = base.ms / self.best.ms
        return d

    def to_text(self):
        dims = "x".join(str(self.shape[k]) for k in ("M", "N", "K"))
        lines = [f"tune {self.operator} {dims} on {self.arch} (class {self.shape_class})"
                 f"{' [dry run: no GPU]' if self.dry_run else ''}"]
        for st in self.stages:
            why = "; ".join(f"{k}: {n}" for k, n in st["dropped"].items() if n)
            if not st["stage"].startswith("round"):
                unit = "schedules kept"
            elif self.dry_run:
                unit = "to time on a GPU (dry run: none timed)"
            else:
                unit = "timed on the GPU"
            lines.append(f"  {st['stage']:10s} {st['kept']:5d} {unit}" +
                         (f"  (dropped: {why})" if why else ""))
            for text in ([st["note"]] if "note" in st else []) + st.get("errors", []):
                lines.append(f"  {'':10s} {text}")
        if self.dry_run:
            lines.append(f"  an exhaustive search would time {self.exhaustive} points on a GPU; "
                         f"pruned, at most {self.gpu_trials} ({self.saved} saved, "
                         f"{100 * self.saved / max(self.exhaustive, 1):.1f} %)")
        else:
            lines.append(f"  exhaustive search: {self.exhaustive} GPU trials; pruned: "
                         f"{self.gpu_trials} ({self.saved} saved, "
                         f"{100 * self.saved / max(self.exhaustive, 1):.1f} %)")
        lines += [""] + self._table()
        launch = next((p.launch_us for p in self.trials if p.launch_us), None)
        if launch:
            lines.append(f"  pred us is the kernel alone; a launch timed with CUDA events adds "
                         f"{launch:.1f} us (isa timing.launch_overhead_us)")
        if self.best is not None and self.best.ms:
            base = next((p for p in self.trials if p.baseline and p.ms), None)
            vs = f", {base.ms / self.best.ms:.3f}x the baseline" if base else ""
            lines.append(f"  best: {self.best.schedule} {self.flops() / self.best.ms / 1e9:.2f} "
                         f"TFLOP/s{vs}")
        if self.cache_path:
            lines.append(f"  cached in {self.cache_path} under {self.shape_class}")
        lines.append("  time: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items()))
        return "\n".join(lines)

    def _table(self):
        """The trials: whole names (the column is as wide as the longest); a dry run shows
        the predicted TFLOP/s of the kernel instead of measured columns it cannot have."""
        names = [str(p.schedule) + (" (baseline)" if p.baseline else "") for p in self.trials]
        w = max([len("schedule")] + [len(n) for n in names])
        cols = [f"{'regs':>4s}", f"{'cta/SM':>6s}", f"{'bound us':>9s}", f"{'pred us':>9s}"]
        if self.dry_run:
            cols.append(f"{'pred TFLOP/s':>12s}")
        else:
            cols += [f"{'ms':>8s}", f"{'TFLOP/s':>7s}", "ok"]
        rows = [f"  {'schedule':{w}s} " + " ".join(cols)]
        for name, p in zip(names, self.trials):
            cells = [f"{p.registers or 0:4d}", f"{p.ctas_per_sm or 0:6d}", _num(p.bound_us, 9),
                     _num(p.predicted_us, 9)]
            if self.dry_run:
                tf = self.flops() / p.predicted_us / 1e6 if p.predicted_us else None
                cells.append(_num(tf, 12, 2))
            else:
                tf = self.flops() / p.ms / 1e9 if p.ms else None
                ok = "" if p.ok is None else ("yes" if p.ok else f"NO ({p.error:.1e})")
                cells += [_num(p.ms, 8, 3), _num(tf, 7, 2), ok]
            rows.append(f"  {name:{w}s} " + " ".join(cells).rstrip())
        return rows


def _num(x, width, digits=1):
    """A right-aligned number, or blanks where there is none."""
    return f"{x:{width}.{digits}f}" if x else " " * width


# -- the search --------------------------------------------------------------------------------
def tune_matmul(shape, arch=DEFAULT_TARGET, budget=12, dry_run=False, jobs=None, sample=16,
                progress=True, space=None, cache_path=None, write_cache=True, seed=0,
                cluster=None):
    """Search the MatmulSchedule space for `shape` ({'M','N','K'}) on `arch`; returns a
    TuneReport. dry_run: static pruning only. space: a Space to search instead of the full
    one. cache_path: where the winner goes (default: the user cache). jobs: worker processes
    (default: the CPUs); cluster: a Ray address to run the static models on instead.

    The GPU budget is spent in two rounds: the baseline (the default schedule) and the best
    predicted point of each of the best predicted families, then the untried points of the
    family that measured fastest (its raster-order variants first) and, budget left, of the
    next families."""
    if not isinstance(budget, int) or budget < 2:
        raise PtxgenError(f"tune: budget must be an integer >= 2 (the baseline and at least "
                          f"one candidate), got {budget!r}")
    t0 = time.perf_counter()
    rep = TuneReport("matmul", arch, dict(shape), cachemod.shape_class(shape), budget, dry_run)
    if not dry_run:
        from ..runtime import gpu_available
        if not gpu_available():
            raise PtxgenError(Spelled("tune: no CUDA GPU is available (use ",
                                      Arg("dry_run=True", "--dry-run"),
                                      " to prune with the static models only)"))
    space = space if space is not None else matmul_space(arch, shape)
    rep.exhaustive = len(space.points)
    rep.stages.append({"stage": "validate", "kept": len(space.points),
                       "dropped": dict(space.rejected.most_common())})
    refine = budget // 3
    first = budget - refine
    ex = executor(jobs, cluster)
    try:
        return _search(rep, space, ex, sample, progress, first, seed, t0, cache_path,
                       write_cache)
    finally:
        ex.close()


def _search(rep, space, ex, sample, progress, first, seed, t0, cache_path, write_cache):
    """The static stages and round 1, then (not a dry run) the GPU rounds."""
    arch, shape, budget = rep.arch, rep.shape, rep.budget
    base = default_schedule(shape, arch)
    search = StaticSearch(Point, arch, shape, ex, sample, first)
    rep.stages += search.run(space.points, first=base, progress=progress)
    groups, ranked = search.groups, search.ranked()
    bp = search.point_of(base)
    if bp is None:                     # dropped by ptxas or occupancy: its resources still show
        bp = Point(base)
        r = assemble_all(ex, [base], arch, shape)[0]
        if "registers" in r:
            bp.registers = r["registers"]
            bp.ctas_per_sm = static.ctas_per_sm(base, bp.registers, arch)
    rep.simulated = [min(groups[k], key=lambda p: p.schedule.group_m) for k in ranked]
    bp.baseline = True
    rep.trials = [bp]
    seen = {family(base)}
    for k in ranked:                      # round 1: one point per family, best predicted first
        if len(rep.trials) >= first:
            break
        if family(k) not in seen:
            seen.add(family(k))
            rep.trials.append(min(groups[k], key=lambda p: p.schedule.group_m))
    rep.stages.append({"stage": "round 1", "kept": len(rep.trials), "dropped": {}})
    rep.seconds["static"] = round(time.perf_counter() - t0, 1)
    if rep.dry_run:
        return rep

    t1 = time.perf_counter()
    from .gpu import GpuTrials
    gpu = GpuTrials(shape, arch, seed=seed)
    rep.device = gpu.device_name()
    with Progress(budget, "gpu", progress, unit="trials at most") as bar:
        measure(gpu, rep.trials, bar)
        good = [p for p in rep.trials if p.ms]
        if good:                          # round 2: the rest of the winning family
            win = min(good, key=lambda p: p.ms)
            more = _round_two(win, rep.trials, search, ranked, budget - len(rep.trials))
            rep.trials += more
            measure(gpu, more, bar)
        # the closest few again: clocks and the memory system drift between trials
        good = sorted((p for p in rep.trials if p.ms), key=lambda p: p.ms)
        for p in good[:3] + [p for p in good[3:] if p.baseline]:
            p.ms = min(p.ms, gpu.time(p.schedule)[0])
    rep.stages.append({"stage": "round 2", "kept": len(rep.trials), "dropped": {}})
    good = [p for p in rep.trials if p.ms]
    rep.best = min(good, key=lambda p: p.ms) if good else None
    rep.seconds["gpu"] = round(time.perf_counter() - t1, 1)
    if rep.best is not None and write_cache:
        path = cache_path or cachemod.user_path("matmul", arch)     # None: caches off
        if path is not None:
            rep.cache_path = str(cachemod.store(path, "matmul", arch, rep.shape_class,
                                                cache_entry(rep, bp)))
    return rep


def _score(p):
    """Predicted time, or the bound where the simulator failed."""
    return p.predicted_us if p.predicted_us is not None else p.bound_us or 0.0


def _round_two(win, trials, search, ranked, left):
    """Up to `left` untimed points: the winner's family (its own raster-order variants first,
    then by prediction or name), then the representative of each next family not timed yet."""
    timed = {p.schedule for p in trials}
    groups = search.groups
    same = [p for p in search.family_points(family(win.schedule)) if p.schedule not in timed]
    same.sort(key=lambda p: (model_key(p.schedule) != model_key(win.schedule), _score(p),
                             str(p.schedule)))
    more = same[:left]
    seen = {family(p.schedule) for p in trials}
    for k in ranked:
        if len(more) >= left:
            break
        if family(k) not in seen:
            seen.add(family(k))
            more.append(min(groups[k], key=lambda p: p.schedule.group_m))
    return more


def measure(gpu, points, bar):
    for p in points:
        try:
            p.ok, p.error = gpu.check(p.schedule)
            if p.ok:
                p.ms, regs = gpu.time(p.schedule)
                p.registers = p.registers or regs
        except PtxgenError as e:
            p.ok, p.error, p.note = False, float("nan"), str(e)[:200]
        bar.update(note=f"{p.ms:.3f} ms" if p.ms else "failed")


def cache_entry(rep, baseline):
    """The tune cache entry of rep's best point (the baseline's time beside it)."""
    b = rep.best
    return {"schedule": b.schedule.to_dict(), "name": str(b.schedule),
            "shape": [rep.shape[k] for k in ("M", "N", "K")], "ms": b.ms,
            "tflops": rep.flops() / b.ms / 1e9,
            "baseline": {"name": str(baseline.schedule), "ms": baseline.ms},
            "device": rep.device, "date": time.strftime("%Y-%m-%d"), "ptxgen": __version__,
            "gpu_trials": rep.gpu_trials, "valid_points": rep.exhaustive}
