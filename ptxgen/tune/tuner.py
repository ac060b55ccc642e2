"""tune_matmul: search the MatmulSchedule space for one shape, pruning with the static models
before spending GPU time.

    valid points (space.py)          every combination that passes MatmulSchedule.validate
    -> ptxas                          assembled; any spill or stack frame drops the point
    -> occupancy                      no CTA fits, or fewer than the .minnctapersm target; a
                                      raster-order variant (group_m) of a grid that is resident
                                      all at once (one wave) is the same launch as group_m=0
    -> simulator                      one prediction per point that differs in more than
                                      raster order, in order of an FFMA lower bound; points
                                      whose bound exceeds the prediction of the last family
                                      round 1 would time are never simulated (they cannot
                                      make the cut)
    -> GPU (budget trials)            round 1: the default schedule (the baseline) and the
                                      best prediction of each of the best predicted families
                                      (tile sizes and pipeline, which the simulator resolves);
                                      round 2: the rest of the family that measured fastest
                                      (warp shape, padding, store width, raster order), then
                                      the next untimed families.
                                      Each trial: correctness on a small odd shape, then time

An exhaustive search would time every valid point; the report says how many trials pruning
saved. The fastest correct point is written to the tune cache under the shape's class.
"""
import os
import time
from dataclasses import dataclass, field

from .. import __version__
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..schedule import default_schedule
from ..schedule import tuned as cachemod
from . import static
from .progress import Progress
from .space import matmul_space, model_key


@dataclass
class Point:
    schedule: object
    registers: int = None
    ctas_per_sm: int = None
    bound_us: float = None
    predicted_us: float = None
    ok: bool = None
    error: float = None                  # worst relative error of the correctness check
    ms: float = None
    baseline: bool = False
    note: str = ""                       # why a GPU trial failed

    def to_dict(self, full=False):
        d = {"name": str(self.schedule), "registers": self.registers,
             "ctas_per_sm": self.ctas_per_sm, "bound_us": self.bound_us,
             "predicted_us": self.predicted_us}
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
            why = ", ".join(f"{n} {k}" for k, n in st["dropped"].items() if n)
            unit = "GPU trials" if st["stage"].startswith("round") else "kept"
            lines.append(f"  {st['stage']:10s} {st['kept']:5d} {unit}" +
                         (f"  (dropped: {why})" if why else ""))
            for text in ([st["note"]] if "note" in st else []) + st.get("errors", []):
                lines.append(f"  {'':10s} {text}")
        lines.append(f"  exhaustive search: {self.exhaustive} GPU trials; pruned: "
                     f"{'at most ' if self.dry_run else ''}{self.gpu_trials} ({self.saved} "
                     f"saved, {100 * self.saved / max(self.exhaustive, 1):.1f} %)")
        head = (f"  {'schedule':58s} {'regs':>4s} {'cta/SM':>6s} {'bound us':>9s} "
                f"{'device us':>9s} {'ms':>8s} {'TFLOP/s':>7s} ok")
        lines += ["", head]
        for p in self.trials:
            ms = f"{p.ms:8.3f}" if p.ms else f"{'':8s}"
            tf = f"{self.flops() / p.ms / 1e9:7.2f}" if p.ms else f"{'':7s}"
            ok = "" if p.ok is None else ("yes" if p.ok else f"NO ({p.error:.1e})")
            pred = f"{p.predicted_us:9.1f}" if p.predicted_us else f"{'':9s}"
            bound = f"{p.bound_us:9.1f}" if p.bound_us else f"{'':9s}"
            name = str(p.schedule) + (" (baseline)" if p.baseline else "")
            lines.append(f"  {name[:58]:58s} {p.registers or 0:4d} {p.ctas_per_sm or 0:6d} "
                         f"{bound} {pred} {ms} {tf} {ok}")
        if self.best is not None and self.best.ms:
            base = next((p for p in self.trials if p.baseline and p.ms), None)
            vs = f", {base.ms / self.best.ms:.3f}x the baseline" if base else ""
            lines.append(f"  best: {self.best.schedule} {self.flops() / self.best.ms / 1e9:.2f} "
                         f"TFLOP/s{vs}")
        if self.cache_path:
            lines.append(f"  cached in {self.cache_path} under {self.shape_class}")
        lines.append("  time: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items()))
        return "\n".join(lines)


# -- running jobs ------------------------------------------------------------------------------
class _Runner:
    """static.run_job over lists of jobs, results in order: in this process when jobs is 1,
    else on one process pool kept for the whole search (made on first use)."""

    def __init__(self, jobs):
        self.jobs, self.pool = jobs, None

    def map(self, items, progress):
        out = [None] * len(items)
        if self.jobs <= 1 or len(items) <= 1:
            for i, it in enumerate(items):
                out[i] = static.run_job(it)
                progress.update()
            return out
        import concurrent.futures as cf
        if self.pool is None:
            import multiprocessing as mp
            # fork where there is one: spawn would re-run an unguarded __main__. The workers
            # never touch CUDA, so a context the parent holds does not matter to them.
            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
            self.pool = cf.ProcessPoolExecutor(max_workers=self.jobs, mp_context=ctx)
        futs = {self.pool.submit(static.run_job, it): i for i, it in enumerate(items)}
        for f in cf.as_completed(futs):
            out[futs[f]] = f.result()
            progress.update()
        return out

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


def _cpus():
    """CPUs this process may run on (a container can show the host's count in cpu_count)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 32))


_ptxas_memo = {}      # (arch, schedule, alignment class) → resources: shared by shape classes


def _alignment(shape):
    return (shape["K"] % 4 == 0, next(w for w in (4, 2, 1) if shape["N"] % w == 0))


# -- the search --------------------------------------------------------------------------------
def family(s):
    """What the simulator tells apart well: tile sizes and pipeline. Warp shape, padding,
    store width and raster order change its predictions by a fraction of a percent at most,
    below what it resolves, so those are settled on the GPU within the winning family."""
    return (s.BM, s.BN, s.BK, s.TM, s.TN, s.use_cp_async, s.stages)


def tune_matmul(shape, arch=DEFAULT_TARGET, budget=12, dry_run=False, jobs=None, sample=16,
                progress=True, space=None, cache_path=None, write_cache=True, seed=0):
    """Search the MatmulSchedule space for `shape` ({'M','N','K'}) on `arch`; returns a
    TuneReport. dry_run: static pruning only. space: a Space to search instead of the full
    one. cache_path: where the winner goes (default: the user cache).

    The GPU budget is spent in two rounds: the baseline (the default schedule) and the best
    predicted point of each of the best predicted families, then the untried points of the
    family that measured fastest (its raster-order variants first) and, budget left, of the
    next families."""
    if not isinstance(budget, int) or budget < 2:
        raise PtxgenError(f"tune: budget must be an integer >= 2 (the baseline and at least "
                          f"one candidate), got {budget!r}")
    jobs = jobs or _cpus()
    t0 = time.perf_counter()
    rep = TuneReport("matmul", arch, dict(shape), cachemod.shape_class(shape), budget, dry_run)
    if not dry_run:
        from ..runtime import gpu_available
        if not gpu_available():
            raise PtxgenError("tune: no CUDA GPU is available (use --dry-run to prune with the "
                              "static models only)")
    space = space if space is not None else matmul_space(arch, shape)
    rep.exhaustive = len(space.points)
    rep.stages.append({"stage": "validate", "kept": len(space.points),
                       "dropped": dict(space.rejected.most_common())})
    refine = budget // 3
    first = budget - refine
    runner = _Runner(jobs)
    try:
        points = _ptxas_stage(rep, space, arch, shape, runner, progress)
        points = _occupancy_stage(rep, points, arch, shape)
        groups, ranked = _simulator_stage(rep, points, arch, shape, runner, progress, sample,
                                          first)
    finally:
        runner.close()

    base = default_schedule(shape, arch)
    by_sched = {p.schedule: p for p in points}
    bp = by_sched.get(base) or Point(base)
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
    if dry_run:
        return rep

    t1 = time.perf_counter()
    from .gpu import GpuTrials
    gpu = GpuTrials(shape, arch, seed=seed)
    rep.device = gpu.device_name()
    with Progress(budget, "gpu", progress) as bar:
        _measure(gpu, rep.trials, bar)
        good = [p for p in rep.trials if p.ms]
        if good:                          # round 2: the rest of the winning family
            win = min(good, key=lambda p: p.ms)
            more = _round_two(win, rep.trials, groups, ranked, budget - len(rep.trials))
            rep.trials += more
            _measure(gpu, more, bar)
        # the closest few again: clocks and the memory system drift between trials
        good = sorted((p for p in rep.trials if p.ms), key=lambda p: p.ms)
        for p in good[:3] + [p for p in good[3:] if p.baseline]:
            p.ms = min(p.ms, gpu.time(p.schedule)[0])
    rep.stages.append({"stage": "round 2", "kept": len(rep.trials), "dropped": {}})
    good = [p for p in rep.trials if p.ms]
    rep.best = min(good, key=lambda p: p.ms) if good else None
    rep.seconds["gpu"] = round(time.perf_counter() - t1, 1)
    if rep.best is not None and write_cache:
        path = cache_path or cachemod.user_path("matmul", arch)
        rep.cache_path = str(cachemod.store(path, "matmul", arch, rep.shape_class,
                                            _entry(rep, bp)))
    return rep


def _score(p):
    """Predicted time, or the bound where the simulator failed."""
    return p.predicted_us if p.predicted_us is not None else p.bound_us or 0.0


def _round_two(win, trials, groups, ranked, left):
    """Up to `left` untimed points: the winner's family (its own raster-order variants first,
    then by prediction), then the best point of each next family not timed yet."""
    timed = {p.schedule for p in trials}
    same = [p for k in ranked for p in groups[k]
            if family(k) == family(win.schedule) and p.schedule not in timed]
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


def _ptxas_stage(rep, space, arch, shape, runner, progress):
    align = _alignment(shape)
    todo = [s for s in space.points if (arch, s, align) not in _ptxas_memo]
    with Progress(len(todo), "ptxas", progress) as bar:
        jobs_in = [("assemble", s.to_dict(), arch, shape) for s in todo]
        for s, r in zip(todo, runner.map(jobs_in, bar)):
            _ptxas_memo[(arch, s, align)] = r
    points, dropped = [], {"spills": 0, "ptxas rejected": 0}
    for s in space.points:
        r = _ptxas_memo[(arch, s, align)]
        if "error" in r:
            dropped["ptxas rejected"] += 1
        elif r["spills"] or r["stack"]:
            dropped["spills"] += 1
        else:
            points.append(Point(s, registers=r["registers"]))
    rep.stages.append({"stage": "ptxas", "kept": len(points), "dropped": dropped})
    return points


def _occupancy_stage(rep, points, arch, shape):
    from .. import isa as isamod
    sms = isamod.load(arch).header.sm_count
    kept, dropped = [], {"no CTA fits": 0, "below its occupancy target": 0,
                         "raster order of a one-wave grid": 0}
    for p in points:
        s = p.schedule
        p.ctas_per_sm = static.ctas_per_sm(s, p.registers, arch)
        gx, gy, _ = s.grid(shape)
        if p.ctas_per_sm == 0:
            dropped["no CTA fits"] += 1
        elif p.ctas_per_sm < s.min_ctas_per_sm:
            dropped["below its occupancy target"] += 1
        elif s != model_key(s) and gx * gy <= sms * p.ctas_per_sm:
            # every CTA is resident at once: the launch order changes nothing
            dropped["raster order of a one-wave grid"] += 1
        else:
            kept.append(p)
    rep.stages.append({"stage": "occupancy", "kept": len(kept), "dropped": dropped})
    return kept


def _simulator_stage(rep, points, arch, shape, runner, progress, sample, wanted):
    """Predict each model key (points differing only in timed-only fields share one run), in
    order of the FFMA bound; stop once the next bound exceeds the wanted-th best family's
    prediction. Returns ({key: points}, keys best prediction first)."""
    groups = {}
    for p in points:
        groups.setdefault(model_key(p.schedule), []).append(p)
    for key, ps in groups.items():
        b = static.ffma_bound_us(key, shape, arch)
        for p in ps:
            p.bound_us = b
    order = sorted(groups, key=lambda k: (groups[k][0].bound_us, str(k)))
    predicted, best_of, errors, i = {}, {}, [], 0
    batch = max(2 * runner.jobs, 8)
    with Progress(len(order), "simulate", progress) as bar:
        while i < len(order):
            tops = sorted(best_of.values())
            if len(tops) >= wanted and groups[order[i]][0].bound_us > tops[wanted - 1]:
                break
            chunk = order[i:i + batch]
            res = runner.map([("simulate", k.to_dict(), arch, shape, groups[k][0].registers,
                               sample) for k in chunk], bar)
            for k, r in zip(chunk, res):
                predicted[k] = us = r.get("us")
                if us is None:
                    errors.append(r.get("error", "?"))
                for p in groups[k]:
                    p.predicted_us = us
                if us is not None:
                    f = family(k)
                    best_of[f] = min(best_of.get(f, us), us)
            i += len(chunk)
    ranked = sorted((k for k in predicted if predicted[k] is not None),
                    key=lambda k: (predicted[k], str(k)))
    stage = {"stage": "simulator", "kept": sum(len(groups[k]) for k in ranked), "dropped": {
        "bound above the wanted predictions": sum(len(groups[k]) for k in order[i:]),
        "simulation failed": sum(len(groups[k]) for k in predicted if predicted[k] is None)}}
    if errors:
        stage["errors"] = sorted(set(errors))[:5]
    if not ranked and groups:
        # no prediction at all (a broken simulator): rank by the bound rather than time
        # nothing but the baseline
        ranked = order
        stage["note"] = "every simulation failed: ranked by the FFMA bound instead"
    rep.simulated = [min(groups[k], key=lambda p: p.schedule.group_m) for k in ranked]
    rep.stages.append(stage)
    return groups, ranked


def _measure(gpu, points, bar):
    for p in points:
        try:
            p.ok, p.error = gpu.check(p.schedule)
            if p.ok:
                p.ms, regs = gpu.time(p.schedule)
                p.registers = p.registers or regs
        except PtxgenError as e:
            p.ok, p.error, p.note = False, float("nan"), str(e)[:200]
        bar.update(note=f"{p.ms:.3f} ms" if p.ms else "failed")


def _entry(rep, baseline):
    b = rep.best
    return {"schedule": b.schedule.to_dict(), "name": str(b.schedule),
            "shape": [rep.shape[k] for k in ("M", "N", "K")], "ms": b.ms,
            "tflops": rep.flops() / b.ms / 1e9,
            "baseline": {"name": str(baseline.schedule), "ms": baseline.ms},
            "device": rep.device, "date": time.strftime("%Y-%m-%d"), "ptxgen": __version__,
            "gpu_trials": rep.gpu_trials, "valid_points": rep.exhaustive}
