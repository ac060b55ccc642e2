"""Emulated memory: global allocations, per-CTA shared, per-thread local, param and const.

Addresses are 64-bit. Global allocations live at GLOBAL_BASE and up, each followed by a gap at
least as large as itself (and >= 64 KiB), so running off the end of one array lands in no
allocation and is reported instead of silently touching a neighbour. The other spaces have
their own addresses starting at 0 (what `mov %r, sym` and ld.shared/ld.local use) and a window
in the generic address space (what cvta.shared/cvta.local give), recognised by the bits above
WINDOW_SHIFT. cvta.to.global is the identity, as on the hardware.
"""
import bisect
import re

import numpy as np

from ..errors import EmulationError
from .values import STORAGE, const

WINDOW_SHIFT = 44
CONST_WINDOW = 1 << WINDOW_SHIFT
SHARED_WINDOW = 2 << WINDOW_SHIFT
LOCAL_WINDOW = 3 << WINDOW_SHIFT
PARAM_WINDOW = 4 << WINDOW_SHIFT
GLOBAL_BASE = 7 << WINDOW_SHIFT
WINDOWS = {"const": CONST_WINDOW, "shared": SHARED_WINDOW, "local": LOCAL_WINDOW,
           "param": PARAM_WINDOW, "global": 0}
WINDOW_OF = {1: "const", 2: "shared", 3: "local", 4: "param"}
MIN_GAP = 64 * 1024
ALLOC_ALIGN = 256
EMPTY = np.empty(0, np.int64)


class Region:
    """A contiguous byte buffer with typed views (global allocation, const, param, shared)."""

    def __init__(self, start, buf, name, origin=None):
        self.start = start
        self.buf = buf
        self.size = buf.nbytes
        self.name = name
        self.origin = origin          # user array to copy back into after the launch
        self._views = {}

    @property
    def end(self):
        return self.start + self.size

    def view(self, dt, vec=1):
        """The buffer as an array of dt; with vec > 1 as rows of vec elements (for aligned
        vector accesses: row i is bytes [i*width, (i+1)*width))."""
        key = (dt.str, vec)
        v = self._views.get(key)
        if v is None:
            width = dt.itemsize * vec
            n = self.size - self.size % width
            v = self.buf[:n].view(dt)
            if vec > 1:
                v = v.reshape(-1, vec)
            self._views[key] = v
        return v


class GlobalMemory:
    """The launch's global allocations: user arrays (aliased, so results land in place) and
    module .global variables."""

    def __init__(self):
        self.regions = []
        self._starts = []
        self._next = GLOBAL_BASE
        self._by_array = {}
        self.starts = np.empty(0, np.uint64)
        self.ends = np.empty(0, np.uint64)

    def add(self, buf, name, origin=None):
        start = self._next
        r = Region(start, buf, name, origin)
        gap = max(MIN_GAP, r.size)
        self._next = -(-(start + r.size + gap) // ALLOC_ALIGN) * ALLOC_ALIGN
        self.regions.append(r)
        self._starts.append(start)
        self.starts = np.array(self._starts, np.uint64)
        self.ends = np.array([x.end for x in self.regions], np.uint64)
        return r

    def place_array(self, arr, name):
        """Put a numpy array in global memory; returns its address. The same array passed twice
        gets one allocation."""
        key = (arr.__array_interface__["data"][0], arr.nbytes, arr.dtype.str, arr.shape)
        hit = self._by_array.get(key)
        if hit is not None:
            return hit.start
        if arr.dtype.hasobject:
            raise EmulationError(f"{name}: arrays of Python objects cannot live in GPU memory")
        if arr.flags.c_contiguous:
            flat = arr.reshape(-1)
        elif arr.flags.f_contiguous:
            flat = arr.T.reshape(-1)
        else:
            raise EmulationError(f"{name}: the array is not contiguous; pass "
                                 f"np.ascontiguousarray(...) (a kernel sees one flat buffer)")
        data = arr.__array_interface__["data"][0]
        if arr.flags.writeable and data % 16 == 0:
            r = self.add(flat.view(np.uint8), name)
        else:
            # a copy with natural alignment; written back after the launch when possible
            buf = np.empty(arr.nbytes, np.uint8)
            buf[:] = flat.view(np.uint8)
            r = self.add(buf, name, origin=flat if arr.flags.writeable else None)
        self._by_array[key] = r
        return r.start

    def write_back(self):
        for r in self.regions:
            if r.origin is not None:
                r.origin.view(np.uint8)[:] = r.buf

    def find(self, addr):
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self.regions[i].end:
            return self.regions[i]
        return None

    def describe(self, addr, width):
        """Where a faulting address lies relative to the nearest allocation."""
        i = bisect.bisect_right(self._starts, addr) - 1
        parts = []
        if i >= 0:
            r = self.regions[i]
            if addr >= r.end:
                parts.append(f"{addr - r.end} bytes past the end of {r.name} "
                             f"[{r.start:#x}, +{r.size})")
            elif addr + width > r.end:
                parts.append(f"straddles the end of {r.name} [{r.start:#x}, +{r.size})")
        if i + 1 < len(self.regions) and not parts:
            r = self.regions[i + 1]
            parts.append(f"{r.start - addr} bytes before {r.name} [{r.start:#x}, +{r.size})")
        if not parts:
            parts.append("no allocation there")
        return "; ".join(parts)

    def locate(self, addr, width):
        """Map accesses of `width` bytes at uint64 addresses to allocations.

        Returns (segments, bad): segments is a list of (region, positions or None for all,
        int64 byte offsets); bad lists the positions outside every allocation."""
        lo, hi = int(addr.min()), int(addr.max())
        r = self.find(lo)
        if r is not None and hi + width <= r.end:
            return [(r, None, (addr - np.uint64(r.start)).view(np.int64))], EMPTY
        k = np.searchsorted(self.starts, addr, side="right").astype(np.int64) - 1
        ok = k >= 0
        kk = np.where(ok, k, 0)
        if self.ends.size:
            ok &= addr <= self.ends[kk] - np.uint64(width)
        else:
            ok[:] = False
        segs = []
        for u in np.unique(kk[ok]):
            pos = np.flatnonzero(ok & (kk == u))
            reg = self.regions[int(u)]
            segs.append((reg, pos, (addr[pos] - np.uint64(reg.start)).view(np.int64)))
        return segs, np.flatnonzero(~ok)


class LaneSpace:
    """Memory partitioned by lane group: shared (one part per CTA) or local (one per thread).
    Address a of lane l is byte base[l] + a of one buffer holding every part of the batch."""

    ALIGN = 32          # part boundaries keep every aligned access (up to .v8.b32) in a row

    def __init__(self, name, parts, size, part_of_lane):
        self.name = name
        self.size = size                                    # valid bytes per part
        self.stride = max(self.ALIGN, -(-size // self.ALIGN) * self.ALIGN)
        buf = np.zeros(parts * self.stride, np.uint8)
        self.region = Region(0, buf, name)
        self.base = part_of_lane.astype(np.int64) * self.stride

    def view(self, dt, vec=1):
        return self.region.view(dt, vec)

    def locate(self, lanes, addr, width):
        """int64 buffer offsets of the accesses, and positions out of bounds."""
        lim = self.size - width
        bad = np.ones(addr.shape, bool) if lim < 0 else addr > np.uint64(lim)
        base = self.base if lanes is None else self.base[lanes]
        off = base + addr.view(np.int64)
        if bad.any():
            return np.where(bad, 0, off), np.flatnonzero(bad)
        return off, EMPTY


# -- variable initializers -------------------------------------------------------------------------
_INIT_TOKEN = re.compile(r"\s*(-?0[fF][0-9a-fA-F]{8}|-?0[dD][0-9a-fA-F]{16}|-?0[xX][0-9a-fA-F]+"
                         r"[uU]?|-?[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|-?[0-9]+[eE][+-]?[0-9]+|"
                         r"-?[0-9]+[uU]?)\s*(?:,|$)")


def var_image(var, kernel_name):
    """The bytes of a variable with its initializer (zeros where it has none)."""
    dt = STORAGE[var.type.name]
    n = max(var.count, 0)
    out = np.zeros(n * var.type.nbytes, np.uint8)
    text = var.init.strip()
    if not text:
        return out.tobytes()
    body = text[1:-1] if text.startswith("{") and text.endswith("}") else text
    body = body.replace("{", "").replace("}", "")
    values, pos = [], 0
    while pos < len(body.strip()):
        m = _INIT_TOKEN.match(body, pos)
        if not m:
            raise EmulationError(f"kernel {kernel_name}: cannot emulate the initializer of "
                                 f"{var.name} ({text[:40]!r}): only numeric values are supported")
        values.append(_literal(m.group(1)))
        pos = m.end()
        if pos >= len(body):
            break
    if len(values) > max(n, 1):
        raise EmulationError(f"kernel {kernel_name}: initializer of {var.name} has "
                             f"{len(values)} values for {n} elements")
    typed = out.view(dt)
    for i, v in enumerate(values):
        typed[i] = const(v, var.type)
    return out.tobytes()


def _literal(tok):
    neg = tok.startswith("-")
    t = tok.lstrip("-").rstrip("uU")
    if t[:2] in ("0f", "0F"):
        v = np.array(int(t[2:], 16), np.uint32).view(np.float32).item()
    elif t[:2] in ("0d", "0D"):
        v = np.array(int(t[2:], 16), np.uint64).view(np.float64).item()
    elif t[:2] in ("0x", "0X"):
        v = int(t[2:], 16)
    elif any(c in t for c in ".eE"):
        v = float(t)
    else:
        v = int(t)
    return -v if neg else v
