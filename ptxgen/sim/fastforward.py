"""The path walker's loop fast-forward (ptxgen.sim.paths): from three consecutive loop states
whose values move by a constant step, how many more iterations the loop runs (found by probing
single iterations from extrapolated states: exponential, then binary search, or the iteration at
which a moving value meets a fixed one for an equality exit), and the state that many
iterations on. Split from paths.py: this is arithmetic on saved states; the walker's `probe` is
the only thing it runs."""
from itertools import compress, count
from operator import ne


def affine_step(states, free=frozenset()):
    """The per-iteration step of three consecutive loop states, if every value moves by the
    same amount each time (ints) or stays put (everything else); else None. Registers in
    `free` do not matter (they are left as they are)."""
    (v0, _), (v1, _), (v2, _) = states
    step = _Step()
    for l0, l1, l2 in zip(v0, v1, v2):
        d = [0] * len(l0)
        moving = []
        # only registers whose value changed need a look (found at C speed: a warp's lanes
        # hold hundreds of registers, a loop moves a few); equal values stay put, whatever
        # their type, as the checks below would find
        for r in sorted(set(compress(count(), map(ne, l0, l1)))
                        | set(compress(count(), map(ne, l1, l2)))):
            if r in free:
                continue
            a, b, c = l0[r], l1[r], l2[r]
            if a is None or b is None or c is None:
                return None             # (not all None: they differ)
            if type(a) is int and type(b) is int and type(c) is int:
                if b - a != c - b:
                    return None
                if c != b:
                    d[r] = c - b
                    moving.append((r, c - b))
            else:
                return None             # not all equal (NaN included)
        step.append(d)
        step.moving.append(moving)
    return step


class _Step(list):
    """affine_step's per-lane steps, and `moving`: per lane the (register, step) pairs that are
    not 0, so that advance_state (called for every probe of the binary search, on kernels with
    hundreds of registers per lane) touches only the registers that move."""

    def __init__(self):
        super().__init__()
        self.moving = []


def advance_state(st, step, j, lid):
    """Loop state st moved on by j iterations of `step`."""
    vals, iters = st
    if isinstance(step, _Step):
        out = [list(lv) for lv in vals]
        for lv, mv in zip(out, step.moving):
            for r, d in mv:
                lv[r] += j * d
    else:
        out = [[v + j * d if d else v for v, d in zip(lv, ld)] for lv, ld in zip(vals, step)]
    it = list(iters)
    it[lid] += j
    return out, it


def skippable(walker, lp, st, step):
    """How many more whole iterations the loop runs from state st (all of them identical in
    control), found by probing; 0 when unsure."""
    if walker.probe(lp, advance_state(st, step, 0, lp.id)) is not True:
        return 0
    hi = 1
    while True:
        r = walker.probe(lp, advance_state(st, step, hi, lp.id))
        if r is None:
            return 0
        if r is False:
            break
        hi *= 2
        if hi > 1 << 24:
            # an equality exit test (a counter run down to zero, `setp.ne`) is passed over
            # by doubling: try the iterations at which a moving value meets a fixed one
            return _equality_exit(walker, lp, st, step)
    lo = hi // 2                       # probe(lo) continues, probe(hi) leaves
    while hi - lo > 1:
        mid = (lo + hi) // 2
        r = walker.probe(lp, advance_state(st, step, mid, lp.id))
        if r is None:
            return 0
        if r:
            lo = mid
        else:
            hi = mid
    return hi


def _equality_exit(walker, lp, st, step, tries=16):
    """The iteration count at which the loop leaves when its exit test is an equality: the
    smallest j > 0 at which some moving integer value of the first lane meets zero or a value
    that stays put, checked by probing j-1 (continues) and j (leaves); 0 when none is found."""
    vals, d = st[0][0], step[0]
    fixed = {0} | {v for v, dv in zip(vals, d) if type(v) is int and not dv}
    cands = set()
    for v, dv in zip(vals, d):
        if type(v) is int and dv:
            for c in fixed:
                j, r = divmod(c - v, dv)
                if not r and 0 < j < 1 << 40:
                    cands.update((j - 1, j, j + 1))
    for j in sorted(c for c in cands if c > 0)[:3 * tries]:
        if walker.probe(lp, advance_state(st, step, j, lp.id)) is False and \
                walker.probe(lp, advance_state(st, step, j - 1, lp.id)) is True:
            return j
    return 0
