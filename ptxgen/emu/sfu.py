"""The special-function unit's ex2, lg2 and rcp (.approx.ftz.f32) bit for bit, from tables
measured on the GPU (isa/sm_90_sfu.npz, made by benchmarks/sfu_numerics.py; its source and the
held-out agreement are in isa/sm_90.toml [sfu] and docs/EMULATOR.md, "Special functions").

Each table holds, per point of its grid, the hardware's result as an offset in units of the last
place from the correctly rounded one (int8, compressed). The grids and how other inputs reduce
to them:
- ex2: x on the 2^-23 grid of [0, 1); x = n + f with n = floor(x) gives 2^n · T(f), the input
  first truncated to the grid (what the unit's fixed-point argument keeps);
- rcp: the significand m of [1, 2) on its own 2^-23 grid; 1/(m · 2^e) = R(m) · 2^-e;
- lg2: the significand m of [1, 2); lg2(m · 2^e) = e + L(m), rounded as the unit rounds it.
Without the table file the correctly rounded value stands in (within the documented bound).
"""
import functools

import numpy as np

GRID = 1 << 23
_TINY = np.float32(2.0 ** -126)


@functools.lru_cache(maxsize=None)
def tables():
    """{'ex2': f32[2^23], 'lg2': f32[2^23], 'rcp': f32[2^23]} or None without the file."""
    from ..arch import isa_dir
    path = isa_dir() / "sm_90_sfu.npz"
    if not path.exists():
        return None
    with np.load(path) as d:
        k = np.arange(GRID, dtype=np.float64)
        grid = k / GRID
        mant = 1.0 + grid
        return {"ex2": _apply(np.exp2(grid), d["ex2"]),
                "lg2": _apply(np.log2(mant), d["lg2"]),
                "rcp": _apply(1.0 / mant, d["rcp"])}


def _apply(ref64, delta):
    """The correctly rounded f32 of ref64 moved by `delta` units in the last place (away from
    zero for positive deltas)."""
    ref = ref64.astype(np.float32)
    bits = ref.view(np.int32).astype(np.int64)
    bits = np.where(np.signbit(ref), bits - delta, bits + delta)
    return bits.astype(np.int32).view(np.float32)


def _flush(x):
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < _TINY, np.float32(0) * np.sign(x), x).astype(np.float32)


def ex2(x):
    """ex2.approx.ftz.f32 of an f32 array."""
    t = tables()
    x = _flush(x)
    if t is None:
        return _flush(np.exp2(x.astype(np.float64)).astype(np.float32))
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = np.trunc(np.clip(x.astype(np.float64), -256, 256) * GRID)
        q = scaled.astype(np.int64)
        n = q >> 23
        frac = t["ex2"][q & (GRID - 1)].astype(np.float64)
        r = np.ldexp(frac, n.astype(np.int32)).astype(np.float32)
    r = np.where(np.isnan(x), np.float32(np.nan), r)
    return _flush(r)


def rcp(x):
    """rcp.approx.ftz.f32 of an f32 array."""
    t = tables()
    x = _flush(x)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        exact = (np.float32(1) / x).astype(np.float32)
        if t is None:
            return _flush(exact)
        m, e = np.frexp(x.astype(np.float64))               # x = m · 2^e, |m| in [0.5, 1)
        k = (np.abs(m) * 2 * GRID).astype(np.int64) - GRID
        k = np.clip(k, 0, GRID - 1)
        r = np.ldexp(t["rcp"][k].astype(np.float64), (1 - e).astype(np.int32))
        r = np.copysign(r, x).astype(np.float32)
    special = ~np.isfinite(x) | (x == 0)
    return _flush(np.where(special, exact, r))


def lg2(x):
    """lg2.approx.ftz.f32 of an f32 array."""
    t = tables()
    x = _flush(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.log2(x.astype(np.float64)).astype(np.float32)
        if t is None:
            return exact
        m, e = np.frexp(x.astype(np.float64))
        k = np.clip((m * 2 * GRID).astype(np.int64) - GRID, 0, GRID - 1)
        r = ((e - 1).astype(np.float64) + t["lg2"][k].astype(np.float64)).astype(np.float32)
    special = ~np.isfinite(x) | (x <= 0)
    return np.where(special, exact, r)
