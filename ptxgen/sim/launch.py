"""A whole launch from one simulated SM: placement, waves, loop sampling, extrapolation.

- Placement: CTAs per SM from the occupancy rules (threads, registers from ptxas, shared memory).
- Waves: the grid runs in waves of sm_count × CTAs-per-SM CTAs. One full wave is simulated on
  one SM with CTAs from the middle of evenly spread parts of the grid (typical CTAs, as they
  start when others finish); a grid of exactly one full wave (all CTAs resident at once, a
  persistent kernel) lasts as long as its slowest SM, so the CTAs the round-robin block
  scheduler gives SM 0 (0, S, 2S …) are taken instead where their first warp's path is longer
  (a strided tile loop's extra trips). The last partial wave is simulated separately with its
  CTAs, and the total is full_waves × wave + tail.
- Paths: each warp's path comes from ptxgen.sim.paths with the real argument values.
- Loop sampling: the outermost loop that runs more than `sample` iterations per entry keeps that
  many in the simulated paths (fewer, at least 4, where its iterations are long:
  waves.sampled_pair), and again half as many in a second pass; the difference between
  the two runs is what the left-out iterations cost, steady state and warp interplay included,
  and every counter is extended linearly by the iterations left out. A warp that never enters
  that loop samples its own (warp specialization: a producer's loop feeds the consumers').
"""
import dataclasses
import functools
import time

import numpy as np

from .. import isa as isamod
from ..arch import DEFAULT_TARGET
from ..errors import Arg, PtxgenError, Spelled
from ..ir.module import Module
from ..names import display_name
from ..toolchain import ToolchainError, assemble
from . import memory as memmod
from .engine import STALLS, Sm, run_sm
from .levels import l2_keep_bytes, memory_level
from .paths import PathPlan, follow
from .cached import scheduled_program
from .async_copy import tma_dram_fraction
from .cta_work import grid_work_ratio
from .program import LDG, add_spills
from .result import SimReport, pipe_share
from .pilot import ACCESS_PILOT_STEPS, access_pilot, hot_loop, traffic
from .values import SYNTHETIC_BASE, SYNTHETIC_STRIDE, Env
from .waves import (cta_balance, extrapolate, path_instructions, sample_caps, sampled_pair,
                    spread_ctas)



def _dims(v, what):
    t = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    if not 1 <= len(t) <= 3 or any(x <= 0 for x in t):
        raise PtxgenError(f"{what} must be 1 to 3 positive integers, got {v!r}")
    return t + (1,) * (3 - len(t))


def _param_values(kernel, args):
    """Parameter name → scalar value (None unknown); pointers get synthetic addresses."""
    names = [p.name for p in kernel.params]
    if args is None:
        given = {}
    elif isinstance(args, dict):
        given = {}
        for key, v in args.items():
            given[_param_name(kernel, names, key)] = v
    else:
        args = list(args)
        if len(args) != len(names):
            raise PtxgenError(f"kernel {display_name(kernel.name)} takes {len(names)} arguments, got "
                              f"{len(args)}")
        given = dict(zip(names, args))
    out = {}
    for k, p in enumerate(kernel.params):
        v = given.get(p.name)
        if p.pointer is not None or (p.type.bits == 64 and v is not None
                                     and not np.isscalar(v)):
            out[p.name] = SYNTHETIC_BASE + k * SYNTHETIC_STRIDE
        elif isinstance(v, (int, float, np.generic)) and not isinstance(v, bool):
            out[p.name] = v.item() if isinstance(v, np.generic) else v
        else:
            out[p.name] = None
    return out


def _param_name(kernel, names, key):
    """A parameter named exactly, by its position ('0', '1' …), or by a unique '_KEY' suffix
    (compilers mangle names: '…_param_0')."""
    key = str(key)
    if key in names:
        return key
    if key.isdigit() and int(key) < len(names):
        return names[int(key)]
    ends = [n for n in names if n.endswith("_" + key)]
    if len(ends) == 1:
        return ends[0]
    listed = ", ".join(n if len(n) <= 24 else "…" + n[-20:] for n in names[:6])
    listed += " …" if len(names) > 6 else ""
    raise PtxgenError(f"kernel {display_name(kernel.name)} has no parameter {key!r} (parameters, "
                      f"also accepted by position 0..{len(names) - 1}: {listed or 'none'})")


def _memory_of(kernel, args, params):
    """[(synthetic address, bytes)] of the numpy arrays given for pointer parameters: loads
    from them yield their values (an index array's values steer the addresses that follow)."""
    if args is None:
        return []
    vals = [args.get(p.name) for p in kernel.params] if isinstance(args, dict) else list(args)
    out = []
    for p, v in zip(kernel.params, vals):
        if isinstance(v, np.ndarray) and v.size and params.get(p.name) is not None:
            out.append((params[p.name], memoryview(np.ascontiguousarray(v).view(np.uint8)
                                                   .reshape(-1))))
    return out


def _footprint_of(args):
    if args is None:
        return None
    vals = args.values() if isinstance(args, dict) else args
    arrays = [a for a in vals if isinstance(a, np.ndarray)]
    return sum(a.nbytes for a in arrays) if arrays else None


def _symbols(kernel, module):
    syms, shared = {}, 0
    for v in list(module.vars if module else []) + list(kernel.vars):
        if v.space == "shared":
            al = max(v.align, 1)
            shared = -(-shared // al) * al
            syms[v.name] = shared
            shared += v.nbytes
        else:
            syms[v.name] = SYNTHETIC_BASE - (len(syms) + 1) * SYNTHETIC_STRIDE
    return syms


def _ptxas(module, arch):
    """ptxas's Assembled for the module, in the PTX version the arch needs (remembered)."""
    from ..emit import emit_module
    return _assemble_text(emit_module(dataclasses.replace(module, version=""), arch), arch)


@functools.lru_cache(maxsize=8)
def _assemble_text(text, arch):
    return assemble(text, arch)


def _registers(module, kernel, arch, warnings, given=None):
    """(registers per thread, ptxas's spill load bytes, spill store bytes): the registers
    given, else ptxas's count; spills from ptxas (none when it is not at hand)."""
    try:
        res = _ptxas(module, arch).resources[kernel.name]
        return (res.registers if given is None else given), res.spill_loads, res.spill_stores
    except (ToolchainError, KeyError) as e:
        if given is not None:
            return given, 0, 0
        # assume registers do not limit occupancy: the most a thread may use at full residency
        h = isamod.load(arch).header
        regs = h.registers_per_sm // h.max_threads_per_sm
        warnings["registers"] = Spelled(f"register count unknown ({str(e)[:80]}); assumed "
                                        f"{regs} (registers do not limit occupancy) — pass ",
                                        Arg("registers=N", "--regs N"))
        return regs, 0, 0


def _ptxas_order(kernel, table, module, arch):
    """The kernel list-scheduled block by block (ptxgen.reorder) with no more global-load
    results in flight than ptxas's SASS of it keeps (reorder/inflight.py), or no limit."""
    from ..reorder import most_held_in_a_block, sass_in_flight, schedule_kernel
    try:                                # (a lone load per block: no limit changes anything)
        limit = (sass_in_flight(_ptxas(module, arch).cubin, kernel.name)
                 if most_held_in_a_block(kernel) > 1 else None)
    except ToolchainError:
        limit = None
    return schedule_kernel(kernel, isa=table, in_flight=limit or None)


def _data_exits(prog, plan):
    """Loops whose way out depends on a value loaded inside them (a search that stops at the
    first hit): the fast-forward would read a run of misses as a constant state and probe for
    the exit by bisection, which assumes a loop that has left stays left — so they are walked
    (their loads give values only where the caller gave the array's contents)."""
    return _loaded_control(prog, plan, inside=True)


def _loaded_control(prog, plan, inside):
    """Loops whose control depends on a value a global load gives: one loaded inside the loop
    (inside=True), or anywhere (a trip count read from data, a batch's length)."""
    out = set()
    for lp in prog.loops:
        ctrl = set(plan.loop_regs[lp.id])
        span = range(lp.header, lp.end + 1) if inside else range(len(prog.instrs))
        if any(prog.instrs[i].kind == LDG and ctrl.intersection(prog.instrs[i].defs)
               for i in span):
            out.add(lp.id)
    return out


def _cluster_dims(kernel):
    """The kernel's .reqnctapercluster (x, y, z), or (1, 1, 1)."""
    for d in kernel.directives:
        words = d.replace(",", " ").split()
        if words and words[0] == ".reqnctapercluster":
            dims = [int(w) for w in words[1:]] + [1, 1]
            return tuple(dims[:3])
    return (1, 1, 1)


def _cluster_specs(cx, cy, cz, grid, cluster):
    """%clusterid, %nclusterid, %cluster_ctaid, %cluster_nctaid, %cluster_ctarank,
    %cluster_nctarank of CTA (cx, cy, cz) in clusters of `cluster` CTAs (x, y, z)."""
    kx, ky, kz = cluster
    ids = (cx // kx, cy // ky, cz // kz)
    rank = (cx % kx) + kx * ((cy % ky) + ky * (cz % kz))
    out = {"cluster_ctarank": rank, "cluster_nctarank": kx * ky * kz,
           "is_explicit_cluster": int(kx * ky * kz > 1)}
    for k, axis in enumerate("xyz"):
        out[f"clusterid.{axis}"] = ids[k]
        out[f"nclusterid.{axis}"] = -(-grid[k] // cluster[k])
        out[f"cluster_ctaid.{axis}"] = (cx, cy, cz)[k] % cluster[k]
        out[f"cluster_nctaid.{axis}"] = cluster[k]
    return out


def _lane_specs(cta_id, grid, block, warp, warp_size, sm_count, dyn_shared, table,
                every_lane=False, cluster=(1, 1, 1)):
    """Special registers of the first and last thread of one warp of one CTA (every_lane:
    of all its threads)."""
    gx, gy, gz = grid
    bx, by, bz = block
    threads = bx * by * bz
    cx, cy, cz = cta_id % gx, (cta_id // gx) % gy, cta_id // (gx * gy)
    first = warp * warp_size
    last = min(first + warp_size - 1, threads - 1)
    specs = []
    clusters = _cluster_specs(cx, cy, cz, grid, cluster)
    for t in (range(first, last + 1) if every_lane else sorted({first, last})):
        specs.append({
            "tid.x": t % bx, "tid.y": (t // bx) % by, "tid.z": t // (bx * by),
            "ntid.x": bx, "ntid.y": by, "ntid.z": bz,
            "ctaid.x": cx, "ctaid.y": cy, "ctaid.z": cz,
            "nctaid.x": gx, "nctaid.y": gy, "nctaid.z": gz,
            "laneid": t - first, "warpid": warp, "nwarpid": table.header.max_warps_per_sm,
            "smid": 0, "nsmid": sm_count, "gridid": 0,
            "dynamic_smem_size": dyn_shared, "total_smem_size": dyn_shared,
            **_lanemasks(t - first, warp_size), **clusters,
        })
    return specs


def _lanemasks(lane, warp_size):
    """%lanemask_eq/lt/le/gt/ge of a lane (the lane's own bit, those below it...): a leader
    election or a rank within a match group reads them."""
    full, bit = (1 << warp_size) - 1, 1 << lane
    return {"lanemask_eq": bit, "lanemask_lt": bit - 1, "lanemask_le": 2 * bit - 1,
            "lanemask_gt": full & ~(2 * bit - 1), "lanemask_ge": full & ~(bit - 1)}


def simulate(kernel, grid, block, *, args=None, shared_bytes=0, arch=DEFAULT_TARGET, module=None,
             trip=None, level="auto", footprint=None, registers=None, sample=16,
             trace_warps=8, budget=5_000_000, cache="warm", launch_path="cuda.core",
             ptxas_order=True):
    """Predict one launch of `kernel` (an IR Kernel, builder-made or parsed) on `arch`.

    args: argument values (a list in parameter order or a dict by name; arrays or any object
    stand for pointers); trip: iterations of every loop (overrides values); level: 'auto' or a
    level every global load is served from; footprint: distinct bytes the launch touches (the
    reuse model; defaults to the arrays' sizes when args has numpy arrays); registers: per
    thread (default: ptxas's count); cache: 'warm' (the launch repeats, as benchmarks time it:
    a footprint that fits in L2 is found there) or 'cold' (the first launch after L2 was
    flushed); launch_path: whose launch overhead time_us adds (cuda.core, numba, triton);
    ptxas_order: simulate every basic block list-scheduled (ptxgen.reorder), as ptxas
    schedules it before the GPU runs it, not in the PTX's own order (False: as written).
    device_us is the kernel alone as back-to-back launches see it.
    """
    t_start = time.perf_counter()
    table = isamod.load(arch)
    h = table.header
    grid, block = _dims(grid, "grid"), _dims(block, "block")
    threads = block[0] * block[1] * block[2]
    if threads > h.max_threads_per_block:
        raise PtxgenError(f"block {block} has {threads} threads; {arch} allows "
                          f"{h.max_threads_per_block}")
    if trip is not None and (not isinstance(trip, int) or trip < 1):
        raise PtxgenError(f"trip must be a positive integer, got {trip!r}")
    table.launch_overhead_for(launch_path)           # an unknown path fails here, early
    memory_level(table, None, cache)                # an unknown cache state fails here
    if not (isinstance(sample, int) and sample >= 4):
        raise PtxgenError(f"sample must be an integer >= 4, got {sample!r}")
    if module is None:
        module = Module(target=arch, kernels=[kernel])
    warnings = {}
    regs, spill_loads, spill_stores = _registers(module, kernel, arch, warnings, registers)
    kernel, prog = scheduled_program(
        kernel, table, module, arch,
        (lambda k: _ptxas_order(k, table, module, arch)) if ptxas_order else None)
    add_spills(prog, table, spill_loads, spill_stores)
    smem = kernel.static_shared_bytes + int(shared_bytes)
    from ..analysis.occupancy import occupancy
    occ = occupancy(threads, int(regs), smem, arch)
    per_sm = occ.active_blocks_per_sm
    if per_sm < 1:
        raise PtxgenError(f"kernel {kernel.name} does not fit on an SM of {arch} "
                          f"({threads} threads, {regs} registers, {smem} B shared; limited by "
                          f"{occ.limiter})")
    pvals = _param_values(kernel, args)
    env = Env(pvals, _symbols(kernel, module), _memory_of(kernel, args, pvals))
    plan = PathPlan(prog, env)
    plan.no_skip |= _data_exits(prog, plan)
    S, ws = h.sm_count, h.warp_size
    n_ctas = grid[0] * grid[1] * grid[2]
    warps_per_cta = -(-threads // ws)
    full, rem = divmod(n_ctas, S * per_sm)
    if footprint is None:
        footprint = _footprint_of(args)

    # a warp-wide vote in the control slice (a ballot-driven early exit) needs every lane's
    # predicate: two lanes give an unknown mask, and the loop would follow the default trip
    # count (one) instead of the data
    votes = plan.votes

    cluster = _cluster_dims(kernel)

    def specs(cta, w):
        return _lane_specs(cta, grid, block, w, ws, S, int(shared_bytes), table,
                           every_lane=votes, cluster=cluster)

    waves = []
    pilot = None
    if full:
        # one SM's CTAs of a full wave stand for all of them: taken from the middle of evenly
        # spread parts of the grid, not its start (a stencil's first plane or rows are all
        # boundary, whose threads do nothing)
        span = full * S * per_sm
        ids = spread_ctas(span, grid[0], per_sm)
        if full == 1:
            # every CTA is resident at once (a persistent grid): the wave lasts as long as
            # its slowest CTA, not its typical one; the CTAs the block scheduler gives SM 0
            # first (0, S, 2S …) are the ones a strided tile loop gives the extra trips
            pilot, ids = _slowest(plan, prog, specs, [ids, [k * S for k in range(per_sm)]],
                                  trip, budget, warnings)
        waves.append(("full", full, ids, S))
    if rem:
        base = full * S * per_sm
        ids = [base + k * S for k in range(-(-rem // S))]
        if not full and rem > 1 and _loaded_control(prog, plan, inside=False):
            # the whole grid is one partial wave: it lasts as long as its slowest SM, whose
            # CTAs (j, j + S, … as the block scheduler deals them) may loop longer than the
            # first SM's where trip counts are read from data (a batch's length)
            pilot, ids = _slowest(plan, prog, specs,
                                  [ids] + [list(range(j, rem, S)) for j in range(1, min(S, rem))],
                                  trip, budget, warnings)
        waves.append(("tail", 1, ids, min(S, rem)))

    if pilot is None:
        pilot = follow(plan, specs(waves[0][2][0], 0), trip=trip, budget=budget,
                       warnings=warnings)
    hot = hot_loop(prog, pilot, sample)
    access, passes = access_pilot(
        prog, env, lambda w, cta=waves[0][2][0]: _lane_specs(
            cta, grid, block, w, ws, S, int(shared_bytes), table, every_lane=True,
            cluster=cluster),
        warps_per_cta, hot, trip, table, min(budget, ACCESS_PILOT_STEPS), n_ctas)
    loads, stores = traffic(prog, pilot.trace, access)
    requested = loads * warps_per_cta * n_ctas
    written = stores * warps_per_cta * n_ctas
    dram_fraction = 1.0
    if footprint is not None and requested > 0:
        # loads can fetch from DRAM at most the footprint's bytes the launch does not only
        # write (first touches); everything else they ask for was fetched before and hits L2
        read_fp = footprint - written if footprint > written else footprint
        dram_fraction = min(1.0, read_fp / requested)
        # ... unless the CTA reads its own part again in a later pass and the CTAs in flight
        # read more than L2 keeps in between: then the second pass comes from DRAM as well
        in_flight = (read_fp if passes == "read" else footprint) / n_ctas \
            * min(n_ctas, S * per_sm)
        if passes and in_flight > l2_keep_bytes(table):
            dram_fraction += (1.0 - dram_fraction) * (1.0 - l2_keep_bytes(table) / in_flight)
    # repeated launches find a small footprint in L2 (ptxgen.sim.levels: the assumption the
    # roofline and the tuner share); a larger one streams, and the reuse model above applies
    resident = memory_level(table, footprint, cache) == "L2"
    if resident:
        dram_fraction = 0.0
    # TMA copies: DRAM serves the read footprint's share of them; with no footprint given,
    # none (TMA feeds tiled kernels whose tiles many CTAs load again from L2)
    tma_frac = 0.0 if resident or not footprint else tma_dram_fraction(
        prog, pilot.trace, n_ctas, footprint - written if footprint > written else footprint)
    if tma_frac is None:
        tma_frac = dram_fraction

    # kernels with tensor work: iterations of the sampled loop that differ in work (a
    # persistent CTA's causal tiles) are extrapolated by their instructions (sim/cta_work.py)
    tensor = any(prog.units[st.unit] == "TENSOR" for st in prog.instrs)
    # the clock: the sustained one, lowered by tensor work and by SFU work beside it (isa
    # clock_for_tensor_share); memory rates are bytes per cycle of it, so a kernel whose
    # tensor pipes work is simulated again at the clock its first pass's shares give
    clock = table.time_clock_mhz
    pilot_steps, first_sample = pilot.steps, sample
    for _clock_pass in range(2):
        sample = first_sample
        results = []
        steps = pilot_steps
        caps = sample_caps(sample) if hot is not None else (sample,)
        for name, count, cta_ids, active in waves:
            if results and len(cta_ids) == results[0].ctas and active == results[0].active_sms:
                # a tail wave as full as a full wave (and as spread) behaves like one
                results[0].count += count
                continue
            runs = [([], []) for _ in caps]           # per cap: traces per CTA, skipped per warp
            left_out = [0 for _ in caps]              # per cap: instructions left out, all warps
            for c in cta_ids:
                rows = [[] for _ in caps]
                for w in range(warps_per_cta):
                    p = _sampled_path(plan, specs(c, w), trip, caps, hot, sample, budget,
                                      warnings)
                    steps += p.steps
                    for k, (tr, sk) in enumerate(p.samples):
                        rows[k].append(tr)
                        runs[k][1].append(sk)
                        left_out[k] += p.left_out[k]
                for k in range(len(caps)):
                    runs[k][0].append(rows[k])
            kept = sampled_pair(prog, runs, caps, alike=tensor)   # long iterations: fewer
            runs = runs[kept:kept + 2]
            left_out = left_out[kept:kept + 2]
            if not results:
                sample = caps[kept]                   # what the report says the sample kept
            sims, again, first = [], None, None
            # waves are not lockstep: the next wave's CTAs start as this wave's end, in their
            # warp slots, so the sub-partitions stay busy while a CTA's last warps finish (a CTA
            # whose last warp runs the longest loop); what a second set of the same CTAs adds to
            # the run (`again`) is the steady-state share of each further wave
            rerun = count > 1 and "cta_relaunch_cycles" in (table.memory_model or {})
            for k, (traces, skipped) in enumerate(runs):
                if k and sims[0][1] == 0:
                    break                             # nothing was left out: no second pass
                mem = memmod.SmMemory(memmod.memory_config(table, active, level, dram_fraction,
                                                           resident, access, tma_frac, clock))
                tw = trace_warps if not results and not k else 0
                sm = first.alt_result if k and first is not None else None
                if k == 0:
                    # with `rerun`, one run of both sets, copied without the second when the
                    # first CTA ends (sim/fork.py): the wave's run is `again`'s first stretch,
                    # simulated once; the shorter sample's run is copied off it too
                    first = Sm(prog, traces + traces if rerun else traces, table, mem,
                               trace_warps=tw, resident=len(traces) if rerun else None)
                    if len(runs) > 1:
                        first.set_alternative(runs[1][0])
                    if rerun:
                        again = first.run(fork=True)
                        sm = first.forked
                        mem = memmod.SmMemory(memmod.memory_config(table, active, level,
                                                                   dram_fraction, resident,
                                                                   access, tma_frac, clock))
                    else:
                        sm = first.run()
                if sm is None:
                    sm = run_sm(prog, traces, table, mem, trace_warps=tw)
                sims.append((sm, max(skipped, default=0)))
            results.append(extrapolate(name, count, len(cta_ids), active, sims[0],
                                        sims[1] if len(sims) > 1 else None, again,
                                        cta_balance(prog, runs, warps_per_cta),
                                        (table.memory_model or {}).get("cta_relaunch_cycles", 0.0),
                                        [max(sk[k:k + warps_per_cta], default=0) for sk in
                                         [runs[0][1]] for k in range(0, len(sk), warps_per_cta)],
                                        table.header.schedulers_per_sm,
                                        left_out if tensor and len(left_out) > 1 else None))

        tuned = table.clock_for_tensor_share(pipe_share(table, results, "TENSOR"),
                                             pipe_share(table, results, "XU"))
        if _clock_pass == 1 or abs(tuned - clock) <= 0.005 * clock:
            break
        clock = tuned
    if full > 1 and results and results[0].name == "full" and tensor:
        results[0].count *= grid_work_ratio(plan, prog, specs, grid, waves[0][2], trip, budget,
                                            warnings)
    return SimReport.build(
        kernel=kernel.name, arch=arch, table=table, grid=grid, block=block, regs=int(regs),
        shared=smem, occupancy=occ, waves=results, n_ctas=n_ctas, dram_fraction=dram_fraction,
        footprint=footprint, requested=requested, level=level, resident=resident,
        launch_path=launch_path, clock_mhz=clock,
        hot=(hot.header, hot.line) if hot else None, sample=sample,
        warnings=list(warnings.values()), wall_s=time.perf_counter() - t_start,
        path_steps=steps, trace_events=results[0].events if results else [])


def _sampled_path(plan, spec, trip, caps, hot, sample, budget, warnings):
    """One warp's path with the sampled loop kept to `caps` iterations. A warp that never
    enters the pilot's sampled loop (a warp-specialized kernel: warp 0 is the producer, whose
    loop hands tiles to the consumers' own loop) samples its own outermost loop of more than
    `sample` iterations an entry: left whole, its iterations past the producer's sample would
    run unfed and be counted again by the extrapolation."""
    p = follow(plan, spec, trip=trip, cap=caps, hot_loop=hot.id if hot else None,
               budget=budget, warnings=warnings)
    if hot is None or hot.id in p.loop_iters:
        return p
    own = hot_loop(plan.prog, p, sample)
    if own is None:
        return p
    return follow(plan, spec, trip=trip, cap=caps, hot_loop=own.id, budget=budget,
                  warnings=warnings)


def _slowest(plan, prog, specs, candidates, trip, budget, warnings):
    """(pilot path, CTA ids) of the candidate CTA sets whose first CTA's first warp issues the
    most instructions (the earlier candidate on a tie)."""
    best = None
    for ids in candidates:
        p = follow(plan, specs(ids[0], 0), trip=trip, budget=budget, warnings=warnings)
        n = path_instructions(prog, p.trace)
        if best is None or n > best[0]:
            best = (n, p, ids)
    return best[1], best[2]


STALL_REASONS = STALLS
