"""Tuned schedules on disk: one JSON file per (operator, arch), one entry per shape class.
The tuner (ptxgen.tune) writes them and the operators (ptxgen.ops) read them, so this store
lives in the schedule layer below both.

Two places are read, the user's first:

    $PTXGEN_TUNE_CACHE/matmul_sm_90.json      (default ~/.cache/ptxgen/tune, or under
                                              $XDG_CACHE_HOME) written by `ptxgen tune`
    ptxgen/tune/cache/matmul_sm_90.json       shipped with the package, from GPU runs of
                                              benchmarks/tune_matmul.py (committed)

PTXGEN_TUNE=off makes every lookup miss (builds then use the default schedule).

A shape class groups shapes that want the same schedule: M, N and K each rounded to the
nearest power of two (M and N from 4096 up, K from 2048 up, are one bucket: the grid is many
waves deep and the k loop dominates), plus the alignment that picks the kernel's global access
widths (K % 4, N % 4, N % 2).
"""
import json
import math
import os
import warnings
from pathlib import Path

from ..errors import PtxgenError, ScheduleError

FORMAT = 1
PACKAGE_DIR = Path(__file__).resolve().parent.parent / "tune" / "cache"     # shipped results
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


def file_name(operator, arch):
    return f"{operator}_{arch}.json"


def user_dir():
    env = os.environ.get("PTXGEN_TUNE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ptxgen" / "tune"


def user_path(operator, arch):
    return user_dir() / file_name(operator, arch)


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


def lookup(operator, arch, shape, paths=None):
    """(entry, path) of the first cache holding `shape`'s class, else (None, None)."""
    if not enabled():
        return None, None
    cls = shape_class(shape)
    for path in paths or (user_path(operator, arch), package_path(operator, arch)):
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


def tuned_tc_schedule(arch, shape, dtype, paths=None):
    """The cached TcMatmulSchedule (`ptxgen tune matmul --dtype`) for `shape`'s class, valid
    for `dtype`, or None (an unusable entry warns and is skipped)."""
    from .tc_matmul import TcMatmulSchedule
    return _cached(f"tc_matmul_{dtype}", arch, shape, paths,
                   lambda d: TcMatmulSchedule.from_dict(d).validate(arch, dtype))


def _cached(operator, arch, shape, paths, make):
    entry, path = lookup(operator, arch, shape, paths)
    if entry is None:
        return None
    try:
        return make(entry["schedule"])
    except (KeyError, TypeError, ScheduleError) as e:
        warnings.warn(f"tune cache {path}: entry {shape_class(shape)} unusable ({e}); using "
                      f"the default schedule", stacklevel=3)
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
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError as e:
        raise PtxgenError(f"cannot write the tune cache {path}: {e.strerror or e}") from None
    _loaded.pop(path, None)
    return path
