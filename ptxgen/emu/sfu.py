"""The special-function unit's ex2, lg2 and rcp (.approx.ftz.f32) as the Hopper SM computes
them, from tables measured on the GPU (isa/sm_90_sfu.npz, made by benchmarks/numerics.py;
source: isa/sm_90.toml [ops.SFU]; held-out agreement: docs/EMULATOR.md, "Special functions").

Each table holds, per point of its grid, the unit's result as an offset in units of the last
place from the correctly rounded value. How every other input reduces to the tables (rules
fitted on the grids, checked on random inputs of every exponent):
- ex2: |x| truncated to the 2^-23 grid, = n + f; 2^(±x) = 2^(±n) · T±(f), one table per sign;
- rcp: 1/(m · 2^e) = R(m) · 2^-e for the significand m of [1, 2);
- lg2 of m · 2^e: e + L(m) rounded toward zero, where the unit's L(m) lies just above the
  table's (its truncation to f32) unless the table's is 0; e = -1 has its own measured table.
Without the table file the correctly rounded value stands in (within the documented bound).
"""
import functools

import numpy as np

from .fp import flush_subnormal

GRID = 1 << 23
_BELOW_TABLE = 2.0 ** -40        # under every f32 step of e + L(m) for |e| <= 126, above f64's


_REFERENCE = {"ex2_pos": lambda g: np.exp2(g), "ex2_neg": lambda g: np.exp2(-g),
              "rcp": lambda g: 1.0 / (1.0 + g), "lg2": lambda g: np.log2(1.0 + g),
              "lg2_half": lambda g: np.log2((1.0 + g) / 2)}


@functools.lru_cache(maxsize=None)
def _delta(name):
    """Table `name`'s measured offsets (ulps), or None without the table file; only the member
    asked for is read (each takes 16-40 ms to decompress)."""
    from ..arch import isa_dir
    path = isa_dir() / "sm_90_sfu.npz"
    if not path.exists():
        return None
    with np.load(path) as d:
        return d[name]


def lookup(name, k):
    """The unit's f32 results at the points k (int array) of `name`'s grid: computed for those
    points alone, as each result depends on its point only (the whole table takes 0.5 s)."""
    return _apply(_REFERENCE[name](np.asarray(k).astype(np.float64) / GRID), _delta(name)[k])


def table(name):
    """The unit's f32 results on `name`'s whole grid (32 MB), or None without the table file."""
    if _delta(name) is None:
        return None
    return lookup(name, np.arange(GRID))


def measured():
    """Whether the table file is at hand (else the correctly rounded values stand in)."""
    return _delta("rcp") is not None


def _apply(ref64, delta):
    """The correctly rounded f32 of ref64 moved by `delta` steps away from zero."""
    ref = ref64.astype(np.float32)
    bits = ref.view(np.int32).astype(np.int64)
    step = np.where(np.signbit(ref), -1, 1) * delta.astype(np.int64)
    return (bits + step).astype(np.int32).view(np.float32)


def _ftz(x):
    return flush_subnormal(np.asarray(x, np.float32))


def _toward_zero(exact):
    """f64 values rounded to f32 toward zero."""
    r = exact.astype(np.float32)
    over = np.abs(r.astype(np.float64)) > np.abs(exact)
    return np.where(over, np.nextafter(r, np.float32(0)), r).astype(np.float32)


def _split(x):
    """(table index of the significand in [1, 2), exponent) of positive finite f32 x."""
    m, e = np.frexp(x.astype(np.float64))
    k = np.clip((m * (2 * GRID)).astype(np.int64) - GRID, 0, GRID - 1)
    return k, (e - 1).astype(np.int64)


def ex2(x):
    """ex2.approx.ftz.f32 of an f32 array."""
    x = _ftz(x)
    if not measured():
        with np.errstate(over="ignore"):
            return _ftz(np.exp2(x.astype(np.float64)).astype(np.float32))
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.floor(np.minimum(np.abs(x.astype(np.float64)), 256.0) * GRID).astype(np.int64)
        n, f = q >> 23, q & (GRID - 1)
        neg = np.signbit(x)
        r = np.ldexp(np.where(neg, lookup("ex2_neg", f), lookup("ex2_pos", f)).astype(np.float64),
                     np.where(neg, -n, n).astype(np.int32)).astype(np.float32)
    return _ftz(np.where(np.isnan(x), np.float32(np.nan), r))


def rcp(x):
    """rcp.approx.ftz.f32 of an f32 array."""
    x = _ftz(x)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        exact = (np.float32(1) / x).astype(np.float32)
        if not measured():
            return _ftz(exact)
        ax = np.abs(x)
        finite = np.isfinite(ax) & (ax > 0)
        k, e = _split(np.where(finite, ax, np.float32(1)))
        r = np.ldexp(lookup("rcp", k).astype(np.float64), (-e).astype(np.int32))
        r = np.copysign(r, x).astype(np.float32)
    return _ftz(np.where(finite, r, exact))


def lg2(x):
    """lg2.approx.ftz.f32 of an f32 array."""
    x = _ftz(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.log2(x.astype(np.float64)).astype(np.float32)
        if not measured():
            return exact
        normal = np.isfinite(x) & (x > 0)
        k, e = _split(np.where(normal, x, np.float32(1)))
        # the unit's log of the significand has bits below the table's f32 (the table is its
        # truncation): a sum landing on the f32 grid still moves one step toward zero below 0
        low = lookup("lg2", k).astype(np.float64)
        r = _toward_zero(e.astype(np.float64) + low + np.where(low > 0, _BELOW_TABLE, 0.0))
        r = np.where(e == -1, lookup("lg2_half", k), r)
    return np.where(normal, r, exact).astype(np.float32)
