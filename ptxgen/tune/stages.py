"""The tuner's static stages: ptxas, occupancy and the simulator, one family at a time.

A family (tile sizes and pipeline, `family`) is what the simulator ranks; within one, warp
shape, A padding, the C epilogue and raster order are settled on the GPU (round 2 times the
winning family's other points). So the search simulates one representative per family, the
variant nearest the default schedule that survives ptxas and occupancy, instead of repeating
the simulation for every variant: at 4096³ that is 72 simulations instead of 540. Families go
in order of the FFMA lower bound (of the kernel alone, as the predictions are: the launch
overhead is kept apart), and the search stops before the first family whose bound exceeds the
`wanted`-th best prediction. Variants of a family are assembled only when round 2 asks for
them (family_points). ptxas results are memoized here and cached on disk (ptxas_cache).
"""
from dataclasses import fields

from .. import isa as isamod
from ..schedule import MatmulSchedule
from . import static
from .progress import Progress
from .space import model_key

_ptxas_memo = {}      # (arch, schedule, alignment class) → resources: shared by shape classes
_DEFAULT = MatmulSchedule()


def alignment(shape):
    return (shape["K"] % 4 == 0, next(w for w in (4, 2, 1) if shape["N"] % w == 0))


def family(s):
    """What the simulator tells apart well: tile sizes and pipeline. Warp shape, padding,
    store width and raster order are settled on the GPU within the winning family."""
    return (s.BM, s.BN, s.BK, s.TM, s.TN, s.use_cp_async, s.stages)


def _preference(s):
    """Representatives first: fewest fields away from the default schedule, then by name."""
    return (sum(getattr(s, f.name) != getattr(_DEFAULT, f.name) for f in fields(s)
                if f.name not in ("BM", "BN", "BK", "TM", "TN", "WM", "WN", "use_cp_async",
                                  "stages", "min_ctas_per_sm")), str(s))


def assemble_all(ex, scheds, arch, shape, progress=None):
    """ptxas resources of each schedule (memoized in this process, cached on disk)."""
    align = alignment(shape)
    todo = list(dict.fromkeys(s for s in scheds if (arch, s, align) not in _ptxas_memo))
    jobs = [("assemble", s.to_dict(), arch, shape) for s in todo]
    for s, r in zip(todo, ex.map(static.run_job, jobs, progress)):
        _ptxas_memo[(arch, s, align)] = r
    return [_ptxas_memo[(arch, s, align)] for s in scheds]


class StaticSearch:
    def __init__(self, point_type, arch, shape, ex, sample, wanted):
        self.Point, self.arch, self.shape, self.ex = point_type, arch, shape, ex
        self.sample, self.wanted = sample, wanted
        self.sms = isamod.load(arch).header.sm_count
        self.ptxas_dropped = {"spills": 0, "ptxas rejected": 0}
        self.occ_dropped = {"no CTA fits": 0, "below its occupancy target": 0,
                            "raster order of a one-wave grid": 0}
        self.assembled_ok = 0
        self.points = []              # survivors of ptxas and occupancy
        self.groups = {}              # model key → surviving Points
        self.predicted = {}           # representative key → kernel us (None: it failed)
        self.errors = []
        self.variants = {}            # family → its schedules, representatives first
        self.families = (0, 0)        # (families run through the static models, families)
        self._checked = set()

    def point(self, s, r):
        """A Point for schedule s with ptxas result r, or None (the drop counted)."""
        if "error" in r:
            self.ptxas_dropped["ptxas rejected"] += 1
            return None
        if r["spills"] or r["stack"]:
            self.ptxas_dropped["spills"] += 1
            return None
        self.assembled_ok += 1
        p = self.Point(s, registers=r["registers"],
                       bound_us=static.ffma_bound_us(s, self.shape, self.arch))
        p.ctas_per_sm = static.ctas_per_sm(s, p.registers, self.arch)
        gx, gy, _ = s.grid(self.shape)
        if p.ctas_per_sm == 0:
            self.occ_dropped["no CTA fits"] += 1
        elif p.ctas_per_sm < s.min_ctas_per_sm:
            self.occ_dropped["below its occupancy target"] += 1
        elif s != model_key(s) and gx * gy <= self.sms * p.ctas_per_sm:
            # every CTA is resident at once: the launch order changes nothing
            self.occ_dropped["raster order of a one-wave grid"] += 1
        else:
            return p
        return None

    def check(self, scheds):
        """Assemble and filter schedules not looked at yet; their surviving Points."""
        scheds = [s for s in dict.fromkeys(scheds) if s not in self._checked]
        self._checked.update(scheds)
        out = []
        for s, r in zip(scheds, assemble_all(self.ex, scheds, self.arch, self.shape)):
            p = self.point(s, r)
            if p is not None:
                self.points.append(p)
                self.groups.setdefault(model_key(s), []).append(p)
                out.append(p)
        return out

    def run(self, schedules, first=None, progress=True):
        """Search `schedules` (valid points); `first`: a schedule whose family goes first and
        is represented by its model key (the baseline, so its row has a prediction). Returns
        the stage records."""
        arch, shape = self.arch, self.shape
        for s in sorted(schedules, key=_preference):
            self.variants.setdefault(family(s), []).append(s)
        if first is not None and model_key(first) in self.variants.get(family(first), ()):
            self.variants[family(first)].remove(model_key(first))
            self.variants[family(first)].insert(0, model_key(first))
        bound = {f: static.ffma_bound_us(v[0], shape, arch) for f, v in self.variants.items()}
        order = sorted(self.variants, key=lambda f: (bound[f], str(f)))
        if first is not None and family(first) in self.variants:
            order.remove(family(first))
            order.insert(0, family(first))
        best, reps, i = [], {}, 0
        batch = max(2 * self.ex.jobs, 4)
        with Progress(len(order), "static models (ptxas, simulator)", progress,
                      unit="schedule families") as bar:
            while i < len(order):
                if i and len(best) >= self.wanted and bound[order[i]] > best[self.wanted - 1]:
                    break
                chunk = order[i:i + batch]
                i += len(chunk)
                reps.update(self._representatives(chunk))
                sim = [reps[f] for f in chunk if f in reps]
                bar.update(len(chunk) - len(sim))
                res = self.ex.map(static.run_job, [
                    ("simulate", p.schedule.to_dict(), arch, shape, p.registers, self.sample)
                    for p in sim], bar)
                for p, r in zip(sim, res):
                    self.predicted[p.schedule] = us = r.get("us")
                    if us is None:
                        self.errors.append(r.get("error", "?"))
                    for q in self.groups[model_key(p.schedule)]:
                        q.predicted_us, q.launch_us = us, r.get("launch_us")
                    if us is not None:
                        best = sorted(best + [us])
            if i < len(order):
                bar.note = f"{len(order) - i} pruned by their FFMA bound"
        self.families = (i, len(order))
        self.unvisited = sum(len(self.variants[f]) for f in order[i:])
        self.reps = [reps[f] for f in order[:i] if f in reps]
        return self.stages(schedules)

    def _representatives(self, fams):
        """{family: Point} of the first variant (raster order 0) of each family that survives
        ptxas and occupancy, trying the next variant of every family still without one."""
        out, tries = {}, {f: [s for s in self.variants[f] if s == model_key(s)] for f in fams}
        while tries:
            heads = {f: ts.pop(0) for f, ts in tries.items()}
            ok = {p.schedule for p in self.check(heads.values())}
            for f, s in heads.items():
                if s in ok:
                    out[f] = next(p for p in self.points if p.schedule == s)
            tries = {f: ts for f, ts in tries.items() if ts and f not in out}
        return out

    def point_of(self, s):
        """The Point of schedule s (assembled now if need be; its model key's prediction), or
        None where ptxas or occupancy drop it."""
        self.check([s])
        p = next((p for p in self.points if p.schedule == s), None)
        rep = self.groups.get(model_key(s), [None])[0]
        if p is not None and p.predicted_us is None and rep is not None:
            p.predicted_us, p.launch_us = rep.predicted_us, rep.launch_us
        return p

    def family_points(self, fam):
        """Every surviving Point of a family (its variants assembled now if need be)."""
        self.check(self.variants.get(fam, []))
        return [p for p in self.points if family(p.schedule) == fam]

    def ranked(self):
        """Representative keys with a prediction, best first; when every simulation failed,
        the representatives by bound (rather than time nothing but the baseline)."""
        keys = sorted((model_key(s) for s, us in self.predicted.items() if us is not None),
                      key=lambda k: (self.predicted[k], str(k)))
        return keys or [model_key(p.schedule) for p in self.reps]

    def stages(self, schedules):
        looked = len(self._checked)
        ptxas = dict(self.ptxas_dropped)
        ptxas["not assembled: FFMA bound above the wanted predictions"] = self.unvisited
        ptxas["not assembled: other variants of a family (settled on the GPU)"] = \
            len(schedules) - looked - self.unvisited
        ok = [s for s, us in self.predicted.items() if us is not None]
        sim = {"stage": "simulator", "kept": sum(len(self.groups[s]) for s in ok), "dropped": {
            "simulation failed": sum(len(self.groups[s]) for s, us in self.predicted.items()
                                     if us is None)}}
        if self.errors:
            sim["errors"] = sorted(set(self.errors))[:5]
        if not ok and self.reps:
            sim["note"] = "every simulation failed: ranked by the FFMA bound instead"
        seen, total = self.families
        return [{"stage": "ptxas", "kept": self.assembled_ok, "dropped": ptxas,
                 "note": f"{seen} of {total} schedule families (the progress bar's count) "
                         f"went through ptxas and the simulator, a family's first variant "
                         f"standing for the rest; the counts here are schedules"},
                {"stage": "occupancy", "kept": len(self.points),
                 "dropped": dict(self.occ_dropped)},
                sim]
