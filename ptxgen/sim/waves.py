"""One wave's counters extended past what the cycle engine ran (ptxgen.sim.launch runs one
SM's CTAs of each wave): the loop iterations the sample left out, and what each further wave
of the same CTAs adds. Split from launch.py, which places the waves and runs them."""
from .result import WaveResult


def path_instructions(prog, trace):
    """Instructions one warp issues along a whole (unsampled) trace."""
    nb = len(prog.blocks)
    return sum(prog.blocks[e % nb].end - prog.blocks[e % nb].start for e in trace)


def cta_balance(prog, runs, warps_per_cta):
    """The mean CTA's work over the slowest CTA's, in instructions its slowest warp issues
    along its whole path (the sampled trace plus the left-out iterations, each costing what
    the two samples' difference says one costs). 1 when every CTA does the same work."""
    (tr0, sk0), small = runs[0], (runs[1] if len(runs) > 1 else None)
    n0 = [path_instructions(prog, t) for cta in tr0 for t in cta]
    body = []
    if small is not None and small[0]:
        n1 = [path_instructions(prog, t) for cta in small[0] for t in cta]
        body = [(a - b) / (s1 - s0) for a, b, s0, s1 in zip(n0, n1, sk0, small[1]) if s1 > s0]
    per_iter = sum(body) / len(body) if body else 0.0
    full = [n + k * per_iter for n, k in zip(n0, sk0)]
    ctas = [max(full[k:k + warps_per_cta]) for k in range(0, len(full), warps_per_cta)]
    return sum(ctas) / len(ctas) / max(ctas) if ctas and max(ctas) > 0 else 1.0


def extrapolate(name, count, ctas, active, big, small, again=None, balance=1.0):
    """One wave's counters with the sampled-out loop iterations added back.

    `big` and `small` are (SmResult, iterations left out) of runs keeping `sample` and
    `sample // 2` iterations of the sampled loop. Their difference is what the extra iterations
    cost (every interaction between warps included), so each counter is extended linearly by the
    iterations `big` left out. `again`: the cycles of `big`'s CTAs run twice, the second set
    starting as the first ends (the steady state of further waves; None: the wave's finish).
    `balance`: the mean CTA's work over the slowest's (cta_balance): CTAs that leave a loop
    after different trip counts (a data-dependent exit) free their slots at different times, and
    the block scheduler refills each as it frees, so of the left-out iterations (the slowest
    warp's, which hold one slot, not the whole SM) a further wave adds the mean CTA's share."""
    sm, skipped = big
    scale, period = 0.0, 0.0
    if small is not None and small[1] > skipped:
        scale = skipped / (small[1] - skipped)
        period = (sm.cycles - small[0].cycles) / (small[1] - skipped)

    def ext(a, b):
        # a counter the longer sample saw less of than the shorter (start-up or end effects
        # of a small one) must not go negative
        return max(0.0, a + (a - b) * scale)

    lo = small[0] if small is not None else sm
    busy = {k: ext(v, lo.busy.get(k, 0.0)) for k, v in sm.busy.items()}
    finish = max(sm.finish, ext(sm.finish, lo.finish))
    cycles = max(sm.cycles, ext(sm.cycles, lo.cycles))
    # what each further wave adds: a second set of the CTAs behind the first (plus the loop
    # iterations the sample left out, in the mean CTA's share), else the wave's own span
    # (waves in lockstep)
    span = finish if again is None else again - sm.cycles + (cycles - sm.cycles) * balance
    return WaveResult(
        name=name, count=count, ctas=ctas, active_sms=active,
        cycles=cycles, sampled_cycles=sm.cycles, period=period,
        steady=min(cycles, max([span] + list(busy.values()))), busy=busy, finish=finish,
        skipped=skipped if scale else 0, issued=ext(sm.issued, lo.issued),
        unit_busy=[ext(a, b) for a, b in zip(sm.unit_busy, lo.unit_busy)],
        stalls={r: ext(sm.stalls[r], lo.stalls[r]) for r in sm.stalls},
        warp_cycles=ext(sm.warp_cycles, lo.warp_cycles),
        loads={k: ext(v, lo.loads[k]) for k, v in sm.loads.items()},
        bytes={k: ext(v, lo.bytes[k]) for k, v in sm.bytes.items()}, events=sm.events)
