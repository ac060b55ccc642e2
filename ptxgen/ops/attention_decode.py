"""Attention decode over a K/V cache, and the cache append (the public functions
ptxgen.attention_decode and ptxgen.kv_cache_append, library/attention_ops.py).

    Q          B x S_q x H x D: the S_q (1..16) new tokens of every sequence
    K, V       the cache: B x S_max x H_kv x D (contiguous), or a page pool
               pages x page x H_kv x D read through block_table B x ceil(S_max / page) (int32
               page ids; page a multiple of 16 up to 256)
    seqlens    B int32: the keys of each sequence, the S_q new ones included (they are its last
               S_q: query token t sees keys < seqlens[b] - S_q + 1 + t)
    O, LSE     B x S_q x H x D in the input type; B x S_q x H f32 (natural log)

H is a multiple of H_kv (grouped-query attention): the G = H / H_kv query heads of a K/V head
and the S_q tokens are the rows of one mma.sync tile, so each K/V read serves them all. Two
kernels (lower/attention_decode.py): the split kernel (each warp one range of keys: a partial O
and LSE in an f32 workspace) and the combine kernel. Splits: schedule/attention_decode.py.

Reference: float64 of the exact 16-bit inputs, attention_reference's bound (ops/attention.py):
P is rounded to the input type before P·V and O once at the end; the partial O, the split
statistics and the combine stay in f32, whose few ulps the bound's f32 terms hold.

KvCacheAppend writes K_new, V_new (B x S_q x H_kv x D) at positions seqlens[b] .. + S_q - 1
(seqlens before the append); positions past the cache are skipped. Exact.
"""
import math

import numpy as np

from .. import arch as archmod
from ..errors import PtxgenError
from ..lower.attention_decode import (APPEND_THREADS, COMBINE_WARPS, add_combine, add_split,
                                      lower_append)
from ..ir import Module
from ..schedule.attention import DTYPES, HEAD_DIMS
from ..schedule.attention_decode import (BLOCK_KEYS, DecodeSchedule, default_decode_schedule,
                                         m_tiles)
from ..schedule.mma_matmul import CHUNK
from .attention import UNIT_ROUNDOFF, HalfArrays, attention_reference
from .base import Launch, Operator, Step

MAX_QUERY_TOKENS = 16
MAX_PAGE = 256


def check_page_size(page_size, who):
    if page_size is None:
        return None
    if isinstance(page_size, bool) or not isinstance(page_size, (int, np.integer)) or \
            page_size < BLOCK_KEYS or page_size > MAX_PAGE or page_size % BLOCK_KEYS:
        raise PtxgenError(f"{who}: page_size must be a multiple of {BLOCK_KEYS} from "
                          f"{BLOCK_KEYS} to {MAX_PAGE}, got {page_size!r}")
    return int(page_size)


class _Cache(HalfArrays):
    """What the decode and the append share: the cache's shape names, layout and arrays."""
    paged = False

    def _cache_init(self, dtype, page_size):
        if dtype not in DTYPES:
            raise PtxgenError(f"{self.name}: dtype must be one of {', '.join(DTYPES)}, got "
                              f"{dtype!r}")
        self.dtype = dtype
        self.page_size = check_page_size(page_size, self.name)
        self.paged = self.page_size is not None
        self.shape_names = self.base_names + (("pages",) if self.paged else ())

    def shape(self, **given):
        if self.paged and given.get("pages") is None:
            B = given.get("B") or self.defaults["B"]
            given = dict(given, pages=B * self.max_pages(given.get("S_max")
                                                         or self.defaults["S_max"]))
        shape = super().shape(**given)
        if shape["D"] not in HEAD_DIMS:
            raise PtxgenError(f"{self.name}: head dim D={shape['D']} must be one of "
                              f"{', '.join(map(str, HEAD_DIMS))}")
        if shape["S_q"] > MAX_QUERY_TOKENS:
            raise PtxgenError(f"{self.name}: S_q={shape['S_q']} new tokens; at most "
                              f"{MAX_QUERY_TOKENS}")
        if shape["S_q"] > shape["S_max"]:
            raise PtxgenError(f"{self.name}: S_q={shape['S_q']} new tokens do not fit a cache "
                              f"of S_max={shape['S_max']}")
        return shape

    def max_pages(self, S_max):
        return -(-S_max // self.page_size)

    def geometry(self, shape):
        g = {"D": shape["D"], "H_kv": shape["H_kv"], "S_q": shape["S_q"], "B": shape["B"],
             "page": self.page_size or 0, "cap": shape["S_max"], "max_pages": 0}
        if self.paged:
            g["max_pages"] = self.max_pages(shape["S_max"])
            g["cap"] = g["max_pages"] * self.page_size
        return g

    def cache_dims(self, shape):
        lead = (shape["pages"], self.page_size) if self.paged else (shape["B"], shape["S_max"])
        return lead + (shape["H_kv"], shape["D"])

    def cache_args(self, arrays):
        return [arrays["seqlens"]] + ([arrays["block_table"]] if self.paged else [])

    def cache_inputs(self, shape, rng, lens=None):
        """K, V caches (random everywhere), seqlens (random from S_q to S_max, the last one
        full, unless `lens` is given) and a shuffled block table of distinct pages."""
        dims = self.cache_dims(shape)
        out = {"K": self.to_input(rng.standard_normal(dims)),
               "V": self.to_input(rng.standard_normal(dims))}
        if lens is None:
            lens = rng.integers(shape["S_q"], shape["S_max"] + 1, shape["B"])
            lens[-1] = shape["S_max"]
        out["seqlens"] = np.asarray(lens, np.int32).view(np.uint32)
        if self.paged:
            mp = self.max_pages(shape["S_max"])
            if shape["pages"] < shape["B"] * mp:
                raise PtxgenError(f"{self.name}: a pool of {shape['pages']} pages is smaller "
                                  f"than B x max_pages = {shape['B'] * mp}")
            out["block_table"] = rng.permutation(shape["pages"])[:shape["B"] * mp] \
                .reshape(shape["B"], mp).astype(np.uint32)
        return out

    sim_lengths_below_max = 0     # 1: lengths before S_q new tokens (the cache append)

    def sim_arrays(self, shape):
        """The index arrays a simulation reads: every sequence at its full length S_max (the
        benchmark's case; before the append, S_max - S_q), pages in order."""
        n = shape["S_max"] - (shape["S_q"] if self.sim_lengths_below_max else 0)
        out = {"seqlens": np.full(shape["B"], n, np.uint32)}
        if self.paged:
            mp = self.max_pages(shape["S_max"])
            out["block_table"] = np.arange(shape["B"] * mp, dtype=np.uint32).reshape(
                shape["B"], mp)
        return out

    def keys_of(self, shape, arrays, name, b, n):
        """float64 rows 0..n-1 of sequence b of cache `name`: n x H_kv x D."""
        c = self.values(arrays[name])
        if not self.paged:
            return c[b, :n]
        ps = self.page_size
        pages = np.asarray(arrays["block_table"]).view(np.int32)[b, :-(-n // ps)]
        return c[pages].reshape(-1, shape["H_kv"], shape["D"])[:n]

    def lengths(self, arrays):
        return np.asarray(arrays["seqlens"]).view(np.int32)


class AttentionDecode(_Cache, Operator):
    """Attention of S_q new tokens per sequence against a K/V cache: the split kernel and the
    combine kernel (steps()); schedule "auto" or a DecodeSchedule."""
    name = "attention_decode"
    base_names = ("B", "S_q", "H", "H_kv", "D", "S_max")
    defaults = {"B": 2, "S_q": 1, "H": 8, "H_kv": 2, "D": 64, "S_max": 300}
    inputs = ("Q", "K", "V", "seqlens")
    outputs = ("O", "LSE")
    instruction = "mma.sync"

    def __init__(self, dtype="bf16", page_size=None, scale=None, schedule="auto"):
        self._cache_init(dtype, page_size)
        if scale is not None and not (isinstance(scale, (int, float)) and scale > 0
                                      and math.isfinite(scale)):
            raise PtxgenError(f"{self.name}: scale must be a positive number, got {scale!r}")
        if schedule != "auto" and not isinstance(schedule, DecodeSchedule):
            raise PtxgenError(f"{self.name}: schedule must be 'auto' or a DecodeSchedule, got "
                              f"{schedule!r}")
        self.scale, self.schedule = scale, schedule
        self._arch = archmod.BASELINE_TARGET

    def shape(self, **given):
        shape = super().shape(**given)
        if shape["H"] % shape["H_kv"]:
            raise PtxgenError(f"{self.name}: H={shape['H']} query heads are not a multiple of "
                              f"H_kv={shape['H_kv']}")
        return shape

    def rows(self, shape):
        """Query rows of one K/V head: its G query heads times the S_q tokens."""
        return shape["H"] // shape["H_kv"] * shape["S_q"]

    def schedule_for(self, shape):
        if self.schedule != "auto":
            return self.schedule
        return default_decode_schedule(shape["B"], shape["H_kv"], self.rows(shape),
                                       shape["S_max"], shape["D"], self._arch)

    def softmax_scale(self, shape):
        return 1.0 / math.sqrt(shape["D"]) if self.scale is None else float(self.scale)

    def geometry(self, shape):
        g = super().geometry(shape)
        g.update(G=shape["H"] // shape["H_kv"], splits=self.schedule_for(shape).splits,
                 rows=shape["B"] * shape["S_q"] * shape["H"])
        return g

    def build(self, shape, arch=archmod.BASELINE_TARGET):
        self._arch = archmod.check_arch(arch)
        s, g = self.schedule_for(shape), self.geometry(shape)
        m = Module(target=arch)
        add_split(m, s, g, self.dtype)
        add_combine(m, g, self.dtype)
        return m

    def launch(self, shape, sm_count=None):
        """The split kernel: (splits / warps, B·H_kv, 16-row tiles)."""
        s = self.schedule_for(shape)
        return Launch(grid=(s.splits // s.warps, shape["B"] * shape["H_kv"],
                            m_tiles(self.rows(shape))),
                      block=(s.threads, 1, 1), shared_bytes=s.shared_bytes(shape["D"]))

    def steps(self, shape, arch=archmod.BASELINE_TARGET, sm_count=None):
        self._arch = archmod.check_arch(arch)
        rows = shape["B"] * shape["S_q"] * shape["H"]
        scale = np.float32(self.softmax_scale(shape) * math.log2(math.e))
        return [Step("decode_split", self.launch(shape),
                     lambda a: [a["Q"], a["K"], a["V"]] + self.cache_args(a) +
                     [a["Opart"], a["Lpart"], scale]),
                Step("decode_combine", Launch((-(-rows // COMBINE_WARPS), 1, 1),
                                              (32 * COMBINE_WARPS, 1, 1)),
                     lambda a: [a["Opart"], a["Lpart"], a["O"], a["LSE"]])]

    def kernel_name(self):
        return "decode_split"

    def kernel_args(self, shape, arrays):
        return self.steps(shape, self._arch)[0].args(arrays)

    def workspace(self, shape, arch=archmod.BASELINE_TARGET):
        self._arch = archmod.check_arch(arch)
        rows, ns = shape["B"] * shape["S_q"] * shape["H"], self.schedule_for(shape).splits
        return {"Opart": ((rows, ns, shape["D"]), np.float32),
                "Lpart": ((rows, ns), np.float32)}

    # -- arrays --------------------------------------------------------------------------------
    def make_inputs(self, shape, rng, lens=None):
        dims = (shape["B"], shape["S_q"], shape["H"], shape["D"])
        nan = 0x7FC0 if self.dtype == "bf16" else np.nan              # unwritten → fails
        return {"Q": self.to_input(rng.standard_normal(dims)),
                **self.cache_inputs(shape, rng, lens),
                "O": np.full(dims, nan, dtype=self._np_in()),
                "LSE": np.full(dims[:3], np.nan, dtype=np.float32)}

    def reference(self, shape, arrays):
        """float64 O and LSE with their bounds (attention_reference per sequence: the query
        tokens at positions len - S_q .. len - 1, causal)."""
        G, S_q = shape["H"] // shape["H_kv"], shape["S_q"]
        q = self.values(arrays["Q"])
        out = {n: np.zeros(q.shape if n[0] == "O" else q.shape[:3]) for n in
               ("O", "O_bound", "LSE", "LSE_bound")}
        for b, n in enumerate(self.lengths(arrays)):
            n = int(min(max(n, 0), self.geometry(shape)["cap"]))
            if n == 0:
                out["LSE"][b] = -np.inf
                continue
            k, v = (np.repeat(self.keys_of(shape, arrays, x, b, n).transpose(1, 0, 2), G,
                              axis=0) for x in ("K", "V"))
            r = attention_reference(q[b].transpose(1, 0, 2), k, v, self.softmax_scale(shape),
                                    True, UNIT_ROUNDOFF[self.dtype],
                                    rows=np.arange(n - S_q, n))
            for name, x in r.items():
                out[name][b] = x.transpose(1, 0, 2) if name[0] == "O" else x.T
        return out

    def check(self, shape, arrays, reference=None):
        ref = reference or self.reference(shape, arrays)
        got_o = self.values(arrays["O"])
        got_l = np.asarray(arrays["LSE"], dtype=np.float64)
        with np.errstate(invalid="ignore"):
            err_o = np.abs(got_o - ref["O"])
            same_l = got_l == ref["LSE"]
            err_l = np.where(same_l, 0.0, np.abs(got_l - ref["LSE"]))
        ok = bool(np.isfinite(got_o).all() and (np.isfinite(got_l) | same_l).all()
                  and (err_o <= ref["O_bound"]).all() and (err_l <= ref["LSE_bound"]).all())
        worst = max(float(np.nanmax(err_o / np.maximum(np.abs(ref["O"]), 1.0))),
                    float(np.nanmax(err_l / np.maximum(np.nan_to_num(np.abs(ref["LSE"])),
                                                       1.0))))
        return ok, worst

    def flops(self, shape):
        """4·D per (query row, key) pair at S_max keys per sequence."""
        return 4 * shape["D"] * shape["B"] * shape["S_q"] * shape["H"] * shape["S_max"]

    def bytes_moved(self, shape):
        """K and V of S_max keys per sequence, Q and O."""
        kv = 2 * shape["B"] * shape["S_max"] * shape["H_kv"] * shape["D"] * 2
        return kv + 2 * 2 * shape["B"] * shape["S_q"] * shape["H"] * shape["D"]


class KvCacheAppend(_Cache, Operator):
    """K_new, V_new written into the cache at each sequence's positions seqlens[b] + t."""
    name = "kv_cache_append"
    sim_lengths_below_max = 1
    base_names = ("B", "S_q", "H_kv", "D", "S_max")
    defaults = {"B": 2, "S_q": 1, "H_kv": 2, "D": 64, "S_max": 300}
    inputs = ("K", "V", "K_new", "V_new", "seqlens")
    outputs = ("K", "V")

    def __init__(self, dtype="bf16", page_size=None):
        self._cache_init(dtype, page_size)

    def kernel_name(self):
        return "kv_append"

    def build(self, shape, arch=archmod.BASELINE_TARGET):
        return lower_append(archmod.check_arch(arch), self.geometry(shape))

    def launch(self, shape, sm_count=None):
        chunks = shape["B"] * shape["S_q"] * shape["H_kv"] * (2 * shape["D"] // CHUNK)
        return Launch(grid=(-(-chunks // APPEND_THREADS), 1, 1), block=(APPEND_THREADS, 1, 1))

    def kernel_args(self, shape, arrays):
        return [arrays["K"], arrays["V"], arrays["K_new"], arrays["V_new"]] + \
            self.cache_args(arrays)

    def make_inputs(self, shape, rng, lens=None):
        """Lengths before the append: from 0 to S_max - S_q (unless given)."""
        if lens is None:
            lens = rng.integers(0, shape["S_max"] - shape["S_q"] + 1, shape["B"])
        arrays = self.cache_inputs(shape, rng, lens)
        dims = (shape["B"], shape["S_q"], shape["H_kv"], shape["D"])
        arrays.update({"K_new": self.to_input(rng.standard_normal(dims)),
                       "V_new": self.to_input(rng.standard_normal(dims)),
                       "K_before": arrays["K"].copy(), "V_before": arrays["V"].copy()})
        return arrays

    def appended(self, shape, cache, new, lens, table=None):
        """numpy: `cache` with `new` written at lens[b] + t (positions past it skipped)."""
        out = np.array(cache, copy=True)
        cap = self.geometry(shape)["cap"]
        for b, n in enumerate(np.asarray(lens).view(np.int32)):
            for t in range(shape["S_q"]):
                pos = int(n) + t
                if not 0 <= pos < cap:
                    continue
                if self.paged:
                    page = int(np.asarray(table).view(np.int32)[b, pos // self.page_size])
                    out[page, pos % self.page_size] = new[b, t]
                else:
                    out[b, pos] = new[b, t]
        return out

    def reference(self, shape, arrays):
        table = arrays.get("block_table")
        return {n: self.appended(shape, arrays[f"{n}_before"], arrays[f"{n}_new"],
                                 arrays["seqlens"], table) for n in ("K", "V")}

    def check(self, shape, arrays, reference=None):
        ref = reference or self.reference(shape, arrays)
        ok = all(np.array_equal(np.asarray(arrays[n]).view(np.uint16),
                                np.asarray(ref[n]).view(np.uint16)) for n in ("K", "V"))
        return ok, 0.0 if ok else float("inf")

    def bytes_moved(self, shape):
        return 2 * 2 * 2 * shape["B"] * shape["S_q"] * shape["H_kv"] * shape["D"]
