"""Tuned schedules on disk: one JSON file per (operator, arch), one entry per shape class.
The tuner (ptxgen.tune) writes them and the operators (ptxgen.ops) read them, so this store
lives in the schedule layer below both.

Two places are read, the user's first:

    $PTXGEN_TUNE_CACHE/matmul_sm_90.json      (default: tune/ under the cache root,
                                              ptxgen.cachedir) written by `ptxgen tune`
    ptxgen/schedule/data/matmul_sm_90.json     shipped with the package, from GPU runs of
                                              benchmarks/tune_matmul.py (committed)
    ptxgen/schedule/data/tc_matmul_bf16_sm_90a.json the tensor-core GEMM's, from `ptxgen tune
                                              matmul --dtype bf16 --shapes ...` (committed)

PTXGEN_TUNE=off makes every lookup miss (builds then use the default schedule). With
PTXGEN_CACHE_DIR=off and no PTXGEN_TUNE_CACHE there is no user cache: only the shipped one is
read, and `ptxgen tune` keeps its winner in the report alone.

A shape class groups shapes that want the same schedule. The FP32 SGEMM's (shape_class): M, N
and K each rounded to the nearest power of two (M and N from 4096 up, K from 2048 up, are one
bucket: the grid is many waves deep and the k loop dominates), plus the alignment that picks
the kernel's global access widths (K % 4, N % 4, N % 2).

The sm_90a tensor-core GEMM's (tc_shape_class) is finer, because its persistent CTAs walk the
tiles in rounds ("waves") of one tile per SM and the winning schedule moves with that count
(clusters win on deep grids, not on shallow ones; a ragged N wants the turned tile; a quarter
wave wants smaller tiles: docs/PERF.md#tune-cache). So the class is
    waves     ceil(tiles / SMs) with the default 128x256 tile, exact up to 8 (the tail round's
              share and the cluster crossover fall there), then up to 16, 32, 64 and 64+
              (deep grids behave alike); under one wave the quarters of a wave
              filled ("q1" .. "q4": a grid that leaves most SMs idle wants smaller tiles)
    turned    the same count with 256x128 tiles where it differs ("w5t4": a ragged N or M
              whose last tile column or row costs a round that turning the tile saves)
    K         the nearest power of two, 64 .. 8192+ (the k loop's length against the
              epilogue's fixed cost: 6144 goes with 8192)
    alignment whether K and N rows are 16-byte aligned in the input and C types ("a8x8" for
              bf16, "a1x1" neither): an unaligned K pads both operands by copies, an unaligned
              N stores C by rows instead of TMA — different code
    C type    "cbf16" or "cf32" (an f32 C's staged tile leaves room for fewer stages)
The SM count is the target's (isa), like default_tc_schedule's.
"""
import json
import math
import os
import warnings
from pathlib import Path

from .. import cachedir, isa
from ..arch import base_arch
from ..errors import PtxgenError, ScheduleError

FORMAT = 1
PACKAGE_DIR = Path(__file__).resolve().parent / "data"     # shipped results
_TOP = {"M": 12, "N": 12, "K": 11}            # log2 of the last bucket of each dimension
_BOTTOM = 4


def shape_class(shape):
    """'m4096+_n4096+_k2048+_a4x4' for 4096³; 'm1024_n1024_k1024_a4x4' for 1000³."""
    parts = []
    for dim in ("M", "N", "K"):
        v = shape[dim]
        e = min(max(round(math.log2(v)), _BOTTOM), _TOP[dim])
        parts.append(f"{dim.lower()}{2 ** e}{'+' if e == _TOP[dim] else ''}")
    ka = 4 if shape["K"] % 4 == 0 else 1
    na = next(w for w in (4, 2, 1) if shape["N"] % w == 0)
    parts.append(f"a{ka}x{na}")
    return "_".join(parts)


_TC_K = (6, 13)                               # log2 of K's first and last bucket
_TC_WAVES_EXACT = 8                           # exact wave counts up to this, then up to 16, 32..
_TC_WAVES_TOP = 64


def _waves(shape, bm, bn, sms):
    tiles = -(-shape["M"] // bm) * -(-shape["N"] // bn)
    if tiles < sms:
        return f"q{-(-4 * tiles // sms)}"
    w = -(-tiles // sms)
    if w <= _TC_WAVES_EXACT:
        return f"w{w}"
    if w > _TC_WAVES_TOP:
        return f"w{_TC_WAVES_TOP}+"
    return f"w{2 ** math.ceil(math.log2(w))}"


def tc_shape_class(shape, arch, dtype="bf16", out="bf16"):
    """The tensor-core GEMM's class (module docstring): 'w4_k4096_a8x8_cbf16' for 4096^3 bf16
    with a bf16 C on sm_90a, 'w5t4_k4096_a8x1_cbf16' for 4096x4097x4096."""
    from .tc_matmul import ELEM_BYTES, OUT_BYTES
    sms = isa.sm_count(base_arch(arch))
    wide, turned = _waves(shape, 128, 256, sms), _waves(shape, 256, 128, sms)
    e = min(max(round(math.log2(shape["K"])), _TC_K[0]), _TC_K[1])
    per_in, per_out = 16 // ELEM_BYTES[dtype], 16 // OUT_BYTES[out]
    ka = per_in if shape["K"] % per_in == 0 else 1
    na = per_out if shape["N"] % per_out == 0 else 1
    return (f"{wide}{'' if turned == wide else 't' + turned.lstrip('w')}_k{2 ** e}"
            f"{'+' if e == _TC_K[1] else ''}_a{ka}x{na}_c{out}")


def file_name(operator, arch):
    return f"{operator}_{arch}.json"


def user_dir():
    """$PTXGEN_TUNE_CACHE, else tune/ under the cache root; None when caches are off."""
    env = os.environ.get("PTXGEN_TUNE_CACHE")
    if env:
        return Path(env).expanduser()
    return cachedir.subdir("tune") if cachedir.enabled() else None


def user_path(operator, arch):
    d = user_dir()
    return None if d is None else d / file_name(operator, arch)


def package_path(operator, arch):
    return PACKAGE_DIR / file_name(operator, arch)


def enabled():
    return os.environ.get("PTXGEN_TUNE", "").lower() not in ("off", "0", "no")


_loaded = {}          # path → (mtime, entries)


def load_entries(path):
    """{shape class: entry} of one cache file; {} when it is missing. A malformed file warns
    once and reads as empty (a build must not fail over a cache)."""
    path = Path(path)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return {}
    hit = _loaded.get(path)
    if hit and hit[0] == mtime:
        return hit[1]
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT or \
                not isinstance(data.get("entries"), dict):
            raise ValueError(f"not a format-{FORMAT} tune cache")
        entries = data["entries"]
    except (OSError, ValueError) as e:
        warnings.warn(f"ignoring tune cache {path}: {e}", stacklevel=2)
        entries = {}
    _loaded[path] = (mtime, entries)
    return entries


def lookup(operator, arch, shape, paths=None, cls=None):
    """(entry, path) of the first cache holding `shape`'s class (`cls`, default the SGEMM's
    shape_class), else (None, None)."""
    if not enabled():
        return None, None
    cls = cls or shape_class(shape)
    for path in paths or (user_path(operator, arch), package_path(operator, arch)):
        if path is None:
            continue
        entry = load_entries(path).get(cls)
        if entry is not None:
            return entry, path
    return None, None


def tuned_matmul_schedule(arch, shape, paths=None):
    """The cached MatmulSchedule for `shape`'s class on `arch`, valid for `shape`, or None.
    An entry that no longer validates (an older field set, another limit) warns and is
    skipped."""
    from .matmul import MatmulSchedule
    return _cached("matmul", arch, shape, paths,
                   lambda d: MatmulSchedule.from_dict(d).validate(arch, shape))


# f16 reads bf16's entries where it has none of its own: the same element size, so the same
# tiles, shared memory, tensor maps and code but for the wgmma type, and the same tensor-core
# rate (ptxgen f16 at 0.96-0.99x its bf16 figure per shape in PERF.md's same-run table).
TC_FALLBACK = {"f16": "bf16"}


def tuned_tc_schedule(arch, shape, dtype, out="bf16", paths=None):
    """The cached TcMatmulSchedule (`ptxgen tune matmul --dtype`) for `shape`'s tc_shape_class,
    valid for `dtype`, or None (an unusable entry warns and is skipped). An f16 lookup falls
    back to bf16's entry (TC_FALLBACK)."""
    from .tc_matmul import TcMatmulSchedule
    cls = tc_shape_class(shape, arch, dtype, out)
    def make(d):
        return TcMatmulSchedule.from_dict(d).validate(arch, dtype)
    for dt in filter(None, (dtype, TC_FALLBACK.get(dtype))):
        s = _cached(f"tc_matmul_{dt}", arch, shape, paths, make, cls)
        if s is not None:
            return s
    return None


def _cached(operator, arch, shape, paths, make, cls=None):
    entry, path = lookup(operator, arch, shape, paths, cls)
    if entry is None:
        return None
    try:
        return make(entry["schedule"])
    except (KeyError, TypeError, ScheduleError) as e:
        warnings.warn(f"tune cache {path}: entry {cls or shape_class(shape)} unusable ({e}); "
                      f"using the default schedule", stacklevel=3)
        return None


def store(path, operator, arch, cls, entry):
    """Add or replace one entry; the file is rewritten whole (sorted keys, readable diff)."""
    path = Path(path)
    data = {"format": FORMAT, "operator": operator, "arch": arch, "entries": {}}
    if path.exists():
        try:
            old = json.loads(path.read_text())
            if isinstance(old, dict) and old.get("format") == FORMAT:
                data["entries"] = dict(old.get("entries") or {})
        except (OSError, ValueError):
            pass                               # replaced by a well-formed file
    data["entries"][cls] = entry
    try:
        cachedir.write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    except OSError as e:
        raise PtxgenError(f"cannot write the tune cache {path}: {e.strerror or e}") from None
    _loaded.pop(path, None)
    return path
