"""tune_tc_matmul: search the TcMatmulSchedule space (sm_90a tensor-core GEMM) for one shape and
input type, pruning with the static models before spending GPU time (tc_space.py says what each
model can tell apart).

    valid points (tc_space)        every combination TcMatmulSchedule.validate accepts
    ptxas                          one assembly per code shape; a spill or stack frame drops
                                   every point of that shape
    occupancy                      the one persistent CTA must fit an SM (threads, the entry
                                   register cap, shared memory with the staged C tile)
    simulator                      one prediction per tile, epilogue and C store (an f32 C is
                                   staged only where it fits beside the stages); the points of
                                   a class share it (the bound: whole rounds of tiles at peak)
    -> GPU (budget trials)         round 1: the baseline (the operator's default schedule) and
                                   per class, best predicted first, the variant nearest the
                                   baseline; round 2: the untimed variants of the class that
                                   measured fastest (clusters with inflight, raster, stages:
                                   tc_space.round_two_key), fewest moves from the winner
                                   first. Each trial: correctness on a small shape of the
                                   same alignment class, then time.

The fastest correct point goes to the tune cache (operator "tc_matmul_<dtype>").
"""
import time

from ..errors import Arg, PtxgenError, Spelled
from ..schedule import tuned as cachemod
from . import tc_space as T
from .executor import executor
from .progress import Progress
from .tuner import Point, TuneReport, cache_entry, measure


def cache_operator(dtype):
    return f"tc_matmul_{dtype}"


def tune_tc_matmul(shape, arch, dtype="bf16", out="bf16", budget=12, dry_run=False, jobs=None,
                   sample=16, progress=True, cache_path=None, write_cache=True, seed=0,
                   cluster=None, space=None, plan=None):
    """Search the tensor-core GEMM space for `shape` on `arch` (sm_90a); returns a TuneReport.
    dry_run: the static stages only. space: a TcSpace to search instead of the full one.
    plan: the static stages' result of an earlier (dry) run for the same shape (rep.plan,
    see static_plan), used instead of running ptxas and the simulator again: a GPU machine's
    time then goes to the trials alone."""
    from ..ops.tc_matmul import TcMatmul
    if not isinstance(budget, int) or budget < 2:
        raise PtxgenError(f"tune: budget must be an integer >= 2 (the baseline and at least "
                          f"one candidate), got {budget!r}")
    TcMatmul(dtype, out)                                   # one-line errors for bad types
    t0 = time.perf_counter()
    rep = TuneReport(f"matmul --dtype {dtype}", arch, dict(shape),
                     cachemod.tc_shape_class(shape, arch, dtype, out), budget, dry_run)
    if not dry_run:
        from ..runtime import gpu_available
        if not gpu_available():
            raise PtxgenError(Spelled("tune: no CUDA GPU is available (use ",
                                      Arg("dry_run=True", "--dry-run"),
                                      " to prune with the static models only)"))
    if plan is not None:
        points = _from_plan(rep, plan, dtype, out)
    else:
        space = space if space is not None else T.tc_space(arch, dtype, shape)
        rep.exhaustive = len(space.points)
        rep.stages.append({"stage": "validate", "kept": len(space.points),
                           "dropped": dict(space.rejected.most_common())})
        ex = executor(jobs, cluster)
        try:
            points = _static(rep, space.points, ex, dtype, out, sample, progress)
        finally:
            ex.close()
    rep.plan = static_plan(rep, points, dtype, out)
    base = TcMatmul(dtype, out).schedule_for(shape)
    first = budget - budget // 3
    keys = Keys(out, shape)
    rep.trials = _round_one(points, base, first, keys)
    rep.simulated = sorted(points.values(), key=_score)[:20]
    rep.stages.append({"stage": "round 1", "kept": len(rep.trials), "dropped": {}})
    rep.seconds["static"] = round(time.perf_counter() - t0, 1)
    if dry_run:
        return rep
    t1 = time.perf_counter()
    gpu = TcGpuTrials(shape, arch, dtype, out, seed=seed)
    rep.device = gpu.device_name()
    with Progress(budget, "gpu", progress, unit="trials at most") as bar:
        measure(gpu, rep.trials, bar)
        good = [p for p in rep.trials if p.ms]
        if good:
            win = min(good, key=lambda p: p.ms)
            timed = {p.schedule for p in rep.trials}
            same = [p for p in points.values() if p.schedule not in timed and
                    keys.sim(p.schedule) == keys.sim(win.schedule)]
            more = sorted(same, key=lambda p: T.round_two_key(p.schedule, win.schedule))[
                :budget - len(rep.trials)]
            rep.trials += more
            measure(gpu, more, bar)
        good = sorted((p for p in rep.trials if p.ms), key=lambda p: p.ms)
        for p in good[:3] + [p for p in good[3:] if p.baseline]:
            p.ms = min(p.ms, gpu.time(p.schedule)[0])     # clocks drift between trials
    rep.stages.append({"stage": "round 2", "kept": len(rep.trials), "dropped": {}})
    good = [p for p in rep.trials if p.ms]
    rep.best = min(good, key=lambda p: p.ms) if good else None
    rep.seconds["gpu"] = round(time.perf_counter() - t1, 1)
    if rep.best is not None and write_cache:
        path = cache_path or cachemod.user_path(cache_operator(dtype), arch)   # None: off
        bp = next(p for p in rep.trials if p.baseline)
        if path is not None:
            rep.cache_path = str(cachemod.store(path, cache_operator(dtype), arch,
                                                rep.shape_class, cache_entry(rep, bp)))
    return rep


_PLAN_FIELDS = ("registers", "ctas_per_sm", "bound_us", "predicted_us", "launch_us")


def static_plan(rep, points, dtype, out):
    """The static stages' result as JSON data: what a later run for the same shape, arch and
    types takes instead of assembling and simulating again (`ptxgen tune --plan`)."""
    return {"arch": rep.arch, "shape": rep.shape, "dtype": dtype, "out": out,
            "exhaustive": rep.exhaustive, "stages": rep.stages,
            "points": [dict({f: getattr(p, f) for f in _PLAN_FIELDS},
                            schedule=p.schedule.to_dict()) for p in points.values()]}


def _from_plan(rep, plan, dtype, out):
    """{schedule: Point} of a static_plan made for this very search; a plan of another shape,
    arch or type is a one-line error."""
    from ..schedule.tc_matmul import TcMatmulSchedule
    want = {"arch": rep.arch, "shape": rep.shape, "dtype": dtype, "out": out}
    got = {k: plan.get(k) for k in want}
    if got != want:
        raise PtxgenError(f"tune: the static plan is for {got}, not {want}")
    rep.exhaustive = plan["exhaustive"]
    rep.stages.extend(plan["stages"])
    rep.stages[-1] = dict(rep.stages[-1], note=rep.stages[-1].get("note", "") +
                          " (from the static plan of an earlier run)")
    points = {}
    for d in plan["points"]:
        s = TcMatmulSchedule.from_dict(d["schedule"])
        points[s] = Point(s, **{f: d[f] for f in _PLAN_FIELDS})
    return points


def _static(rep, scheds, ex, dtype, out, sample, progress):
    """ptxas per code shape, occupancy, the simulator per class: {schedule: Point} of the
    survivors, their stage records appended to rep.stages."""
    arch, shape = rep.arch, rep.shape
    keys = Keys(out, shape)
    codes = _representatives(scheds, keys.code)
    with Progress(len(codes), "ptxas", progress, unit="code shapes") as bar:
        res = dict(zip(codes, ex.map(T.run_job, [("assemble", c.to_dict(), arch, shape, dtype,
                                                  out) for c in codes.values()], bar)))
    points, ptxas_drop, occ_drop = {}, {"spills": 0, "ptxas rejected": 0}, {"no CTA fits": 0}
    for s in scheds:
        r = res[keys.code(s)]
        if "error" in r:
            ptxas_drop["ptxas rejected"] += 1
            continue
        if r["spills"] or r["stack"]:
            ptxas_drop["spills"] += 1
            continue
        staged = s.c_store(out, shape["M"], shape["N"])
        p = Point(s, registers=r["registers"], bound_us=T.bound_us(s, shape, arch, dtype))
        p.ctas_per_sm = T.ctas_per_sm(s, p.registers, arch, dtype, staged, out)
        if p.ctas_per_sm < 1:
            occ_drop["no CTA fits"] += 1
            continue
        points[s] = p
    kept_ptxas = len(scheds) - sum(ptxas_drop.values())
    rep.stages.append({"stage": "ptxas", "kept": kept_ptxas,
                       "dropped": dict(ptxas_drop, **{
                           f"assembled once per code shape ({len(codes)})": 0})})
    rep.stages.append({"stage": "occupancy", "kept": len(points), "dropped": occ_drop})
    classes = _representatives(points, keys.sim)
    with Progress(len(classes), "simulator", progress, unit="simulation classes") as bar:
        sims = dict(zip(classes, ex.map(T.run_job, [
            ("simulate", c.to_dict(), arch, shape, dtype, out, points[c].registers, sample)
            for c in classes.values()], bar)))
    errors, failed = [], 0
    for s, p in list(points.items()):
        r = sims[keys.sim(s)]
        p.predicted_us, p.launch_us = r.get("us"), r.get("launch_us")
        if p.predicted_us is None:
            failed += 1
            errors.append(r.get("error", "?"))
    rec = {"stage": "simulator", "kept": len(points) - failed,
           "dropped": {"simulation failed": failed},
           "note": f"{len(classes)} simulations (one per tile, epilogue and C store), "
                   f"{len(points)} points ranked"}
    if errors:
        rec["errors"] = sorted(set(errors))[:5]
    rep.stages.append(rec)
    return points


class Keys:
    """The classes of a search: code shape and simulation class (tc_space.CODE_FIELDS and
    SIM_FIELDS), each with how C is stored for the shape (an f32 C is staged only where its
    tile fits beside the stages, so there the stage count changes the code)."""

    def __init__(self, out, shape):
        self.out, self.shape = out, shape

    def _kind(self, s):
        return s.c_store(self.out, self.shape["M"], self.shape["N"])

    def code(self, s):
        return T.key_of(s, T.CODE_FIELDS), self._kind(s)

    def sim(self, s):
        return T.key_of(s, T.SIM_FIELDS), self._kind(s)


def _representatives(scheds, key):
    """{class key: the class's point nearest the default schedule}."""
    out = {}
    for s in sorted(scheds, key=lambda s: (T.distance(s, T.key_of(s, ())), str(s))):
        out.setdefault(key(s), s)
    return out


def _score(p):
    return (p.predicted_us if p.predicted_us is not None else p.bound_us or 0.0,
            str(p.schedule))


def _round_one(points, base, first, keys):
    """The baseline, then per simulator class in order of prediction the variant nearest the
    baseline."""
    bp = points.get(base) or Point(base)
    bp.baseline = True
    trials, seen = [bp], {keys.sim(base)}
    for p in sorted(points.values(), key=_score):
        if len(trials) >= first:
            break
        k = keys.sim(p.schedule)
        if k in seen:
            continue
        seen.add(k)
        trials.append(min((q for s, q in points.items() if keys.sim(s) == k),
                          key=lambda q: (T.distance(q.schedule, base), str(q.schedule))))
    return trials


class TcGpuTrials:
    """GPU trials of tensor-core schedules: inputs on the device once; each schedule checked
    on a small shape of the tuned shape's alignment class (N % 8 picks the C store, K % 8 the
    operand padding), then timed at the tuned shape. Nothing here runs without a GPU."""

    def __init__(self, shape, arch, dtype, out, seed=0, target_ms=150.0):
        import numpy as np
        from ..ops.tc_matmul import TcMatmul
        from ..runtime import to_device
        self.shape, self.arch, self.dtype, self.out = dict(shape), arch, dtype, out
        self.target_ms = target_ms
        rng = np.random.default_rng(seed)
        op = TcMatmul(dtype, out)
        self.dev = to_device(dict(op.make_inputs(shape, rng), **op.workspace_arrays(shape)))
        self.small = {"M": 261, "N": 264 + shape["N"] % 8, "K": 72 + shape["K"] % 8}
        self.small_host = op.make_inputs(self.small, rng)

    def _op(self, sched):
        from ..ops.tc_matmul import TcMatmul
        return TcMatmul(self.dtype, self.out, sched)

    def check(self, sched):
        from ..runtime import load_steps, run_steps
        op, shape = self._op(sched), self.small
        arrays = dict({k: v.copy() for k, v in self.small_host.items()},
                      **op.workspace_arrays(shape))
        run_steps(op, shape, load_steps(op, shape, op.build(shape, self.arch), self.arch),
                  arrays, self.arch)
        return op.check(shape, arrays)

    def time(self, sched):
        from ..runtime import bound_launch, load_steps, time_calls
        from ..runtime.device import sm_count
        from ..runtime.tensormap import max_cluster_ctas
        op, shape = self._op(sched), self.shape
        kernels = load_steps(op, shape, op.build(shape, self.arch), self.arch)
        main = kernels[op.kernel_name()]
        ctas = sm_count()
        if sched.cluster_m > 1:
            L = op.launch(shape, ctas)
            ctas = max_cluster_ctas(main, L.block, L.shared_bytes, sched.cluster_m)
        gos = [bound_launch(kernels[st.kernel], st.launch.grid, st.launch.block,
                            st.args(self.dev), st.launch.shared_bytes)
               for st in op.steps(shape, self.arch, ctas)]

        def go():
            for g in gos:
                g()
        return time_calls(go, repeat=max(3, int(self.target_ms // 10)), target_ms=10.0), \
            main.registers

    def device_name(self):
        from ..runtime import device_name
        return device_name()


