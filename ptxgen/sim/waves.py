"""One wave's counters extended past what the cycle engine ran (ptxgen.sim.launch runs one
SM's CTAs of each wave): which CTAs stand for a wave, the loop iterations the sample left out,
and what each further wave of the same CTAs adds. Split from launch.py, which places the waves
and runs them."""
import math

from .result import WaveResult


def _van_der_corput(k):
    """k's binary digits mirrored behind the point: 0, 1/2, 1/4, 3/4, 1/8, … (each prefix of
    the sequence spreads evenly over [0, 1))."""
    v, d = 0.0, 0.5
    while k:
        v, k, d = v + d * (k & 1), k >> 1, d / 2
    return v


def spread_ctas(span, gx, n):
    """n CTA ids standing for the first `span` CTAs of a grid `gx` CTAs wide. A 1-D grid: the
    middles of n equal parts. A grid with rows (gy·gz > 1): a Hammersley set over (column,
    row): row k in the middle of the k-th of n bands of rows, column at the van der Corput
    point of k. Ids evenly spaced in a 2-D grid fall on a few columns (Mandelbrot 1000×1500,
    47 CTAs per row: columns 1, 3, …, 15, the left third of the image, whose pixels escape at
    once: −91 %), where the work of an image-like grid varies over both axes."""
    if span <= gx or gx <= 1:
        return [(2 * k + 1) * span // (2 * n) for k in range(n)]
    rows = span // gx
    return [((2 * k + 1) * rows // (2 * n)) * gx + int((_van_der_corput(k) + 0.5 / n) * gx) % gx
            for k in range(n)]


def path_instructions(prog, trace):
    """Instructions one warp issues along a whole (unsampled) trace."""
    nb = len(prog.blocks)
    return sum(prog.blocks[e % nb].end - prog.blocks[e % nb].start for e in trace)


# the sampled loop keeps `sample` iterations (and half as many in the second pass), or fewer
# where its iterations are long: the fewest (halving, at least 4) whose instructions still
# cover this many per warp. The sample is there to reach the loop's steady state, which a
# stretch of instructions does, however many iterations it holds: a DP row loop of 1200
# instructions an iteration (edit_distance_local) reaches it as well in 4 iterations as
# in 16, at a quarter of the simulation (docs/MODEL.md)
SAMPLE_COVER = 3072


def sample_caps(sample):
    """The iteration counts one path walk keeps for the sampled loop: sample, sample // 2,
    … down to 2 (`sampled_pair` picks two neighbours)."""
    caps = [sample]
    while caps[-1] // 2 >= 2:
        caps.append(caps[-1] // 2)
    return tuple(caps)


def sampled_pair(prog, runs, caps, cover=SAMPLE_COVER, alike=False):
    """The index i of the runs (per cap in `caps`, from sample_caps) to simulate, i and i + 1:
    halved from the first while the halved count, at the fewest instructions any warp
    issues per iteration, still covers `cover` instructions. `alike`: and while the
    iterations the halving drops cost what the ones it keeps do (a persistent CTA's causal
    tiles cycle through long and short ones: fewer would not cover a cycle)."""
    body = _per_iteration(prog, runs[0], runs[1]) if len(runs) > 1 else []
    per = min(body, default=0.0)
    i = 0
    while i + 2 < len(runs) and caps[i + 1] >= 4 and caps[i + 1] * per >= cover:
        if alike and not _alike(_per_iteration(prog, runs[i], runs[i + 1]),
                                _per_iteration(prog, runs[i + 1], runs[i + 2])):
            break
        i += 1
    return i


def _alike(a, b, tolerance=0.02):
    ma, mb = (sum(x) / len(x) if x else 0.0 for x in (a, b))
    return abs(ma - mb) <= tolerance * max(ma, mb)


def _per_iteration(prog, big, small):
    """Per warp that left iterations out: the instructions one more iteration costs, from
    the two samples' difference (big: the longer sample's (traces per CTA, skipped))."""
    if small is None or not small[0]:
        return []
    n0 = [path_instructions(prog, t) for cta in big[0] for t in cta]
    n1 = [path_instructions(prog, t) for cta in small[0] for t in cta]
    return [(a - b) / (s1 - s0) for a, b, s0, s1 in zip(n0, n1, big[1], small[1]) if s1 > s0]


def cta_balance(prog, runs, warps_per_cta):
    """The mean CTA's work over the slowest CTA's, in instructions its slowest warp issues
    along its whole path (the sampled trace plus the left-out iterations, each costing what
    the two samples' difference says one costs). 1 when every CTA does the same work."""
    (tr0, sk0), small = runs[0], (runs[1] if len(runs) > 1 else None)
    n0 = [path_instructions(prog, t) for cta in tr0 for t in cta]
    body = _per_iteration(prog, runs[0], small)
    per_iter = sum(body) / len(body) if body else 0.0
    full = [n + k * per_iter for n, k in zip(n0, sk0)]
    ctas = [max(full[k:k + warps_per_cta]) for k in range(0, len(full), warps_per_cta)]
    return sum(ctas) / len(ctas) / max(ctas) if ctas and max(ctas) > 0 else 1.0


def slot_share(sm, again, relaunch, left_out, cta_skipped, floor=0.0):
    """What one further wave adds to the SM's run by the mean CTA (inf when the run kept no
    CTA spans); `extrapolate` takes the smaller of this and what `again` adds (the wave's CTAs
    run twice, the second set starting as the first ends).

    Every CTA slot is refilled as it frees, so over many waves a slot runs one CTA after
    another: a further wave adds the mean CTA's span plus the relaunch gap, and of the loop
    iterations the sample left out (`left_out` cycles, the slowest warp's) the mean CTA's
    share (`cta_skipped`: per CTA, the most its warps left out). `again` repeats the same
    CTAs, and a second copy of the slowest one, placed in the slot that frees last, doubles
    the slowest CTA (CTAs that leave a loop at data-dependent trip counts: a row search
    stopping at its first hit). Used only where the CTAs' work differs (cta_balance < 1):
    CTAs of equal work that end staggered share a saturated resource, which `again` models.
    `floor`: the wave's busiest sub-partition resource (issue slots, a pipe) in cycles; CTAs
    that queue for a saturated pipe end one after another under oldest-first issue, so their
    mean span says nothing about what a further wave adds, which is then at least this."""
    spans = getattr(sm, "cta_finish", None)
    if getattr(again, "cta_start", None) and spans:
        # the second set's CTAs: they start staggered, as slots free, the way CTAs run once
        # the first wave's common start (every warp's first load at once) is past
        spans = [b - a for a, b in zip(again.cta_start, again.cta_finish)][len(spans):]
    if not spans:
        return math.inf
    mean = sum(spans) / len(spans) + relaunch
    if cta_skipped and max(cta_skipped) > 0:
        mean += left_out * sum(cta_skipped) / len(cta_skipped) / max(cta_skipped)
    return max(mean, floor)


def extrapolate(name, count, ctas, active, big, small, again=None, balance=1.0, relaunch=0.0,
                cta_skipped=None, nsched=1, left_out=None):
    """One wave's counters with the sampled-out loop iterations added back.

    `big` and `small` are (SmResult, iterations left out) of runs keeping `sample` and
    `sample // 2` iterations of the sampled loop. Their difference is what the extra iterations
    cost (every interaction between warps included), so each counter is extended linearly by the
    iterations `big` left out. `again`: the cycles of `big`'s CTAs run twice, the second set
    starting as the first ends (the steady state of further waves; None: the wave's finish).
    `balance`: the mean CTA's work over the slowest's (cta_balance): CTAs that leave a loop
    after different trip counts (a data-dependent exit) free their slots at different times, and
    the block scheduler refills each as it frees, so of the left-out iterations (the slowest
    warp's, which hold one slot, not the whole SM) a further wave adds the mean CTA's share.
    `left_out`: the instructions `big` and `small` left out (all warps): given, the counters
    are extended by work, not by iterations (iterations whose inner loops run different trip
    counts: the two samples' difference is not the mean left-out iteration)."""
    sm, skipped = big
    scale, period = 0.0, 0.0
    if small is not None and small[1] > skipped:
        scale = skipped / (small[1] - skipped)
        period = (sm.cycles - small[0].cycles) / (small[1] - skipped)
        if left_out is not None and left_out[1] > left_out[0] > 0:
            scale = left_out[0] / (left_out[1] - left_out[0])

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
    issued = ext(sm.issued, lo.issued)
    unit_busy = [ext(a, b) for a, b in zip(sm.unit_busy, lo.unit_busy)]
    span = finish
    rerun = again if hasattr(again, "cycles") else None      # the SmResult, when given
    if rerun is not None:
        again = rerun.cycles
    if again is not None:
        span = again - sm.cycles + (cycles - sm.cycles) * balance
        if balance < 1.0:
            # CTAs of unequal work (data-dependent trip counts): slots refill independently
            floor = max([issued] + unit_busy) / max(nsched, 1)
            span = min(span, slot_share(sm, rerun, relaunch, cycles - sm.cycles,
                                         cta_skipped, floor))
    return WaveResult(
        name=name, count=count, ctas=ctas, active_sms=active,
        cycles=cycles, sampled_cycles=sm.cycles, period=period,
        steady=min(cycles, max([span] + list(busy.values()))), busy=busy, finish=finish,
        skipped=skipped if scale else 0, issued=issued, unit_busy=unit_busy,
        stalls={r: ext(sm.stalls[r], lo.stalls[r]) for r in sm.stalls},
        warp_cycles=ext(sm.warp_cycles, lo.warp_cycles),
        loads={k: ext(v, lo.loads[k]) for k, v in sm.loads.items()},
        bytes={k: ext(v, lo.bytes[k]) for k, v in sm.bytes.items()}, events=sm.events)
