"""Run the microbenchmarks on the GPU through ptxgen.runtime and collect raw numbers.

Only this module touches the GPU. It returns plain data (cycles, bytes, milliseconds), which
ptxgen.calibrate.results turns into model values; that split keeps everything but the launches
testable without a GPU.
"""
import time
from dataclasses import dataclass

import numpy as np

from ..arch import arch_specific_variant
from ..arrays import TiledMap
from ..emit import emit_module
from ..errors import Arg, LaunchError, PtxgenError, Spelled
from ..ir.verify import verify_module
from . import kernels as K
from . import kernels_tensor as KT
from . import kernels_tma as KM

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Plan:
    """Sizes of every microbenchmark (what is measured, not what it should give)."""
    chain_ops: int = 1024            # dependent instructions per latency chain (unrolled)
    tput_warps: int = 16             # warps of the one CTA that measures issue intervals
    tput_chains: int = 8             # independent chains per thread
    tput_rounds: int = 32            # rounds unrolled per loop trip
    tput_trips: int = 32
    chase_steps: int = 4096          # timed dependent loads
    shared_nodes: int = 256          # 1 KB chain in shared memory
    l1_bytes: int = 16 * 1024        # fits L1 (ld.global.ca)
    l1_stride: int = 128
    l2_bytes: int = 8 * MiB          # far beyond L1, well inside L2 (ld.global.cg)
    l2_stride: int = 256
    dram_bytes: int = GiB            # far beyond L2
    dram_stride: int = 4096          # nodes on distinct 4 KB slots, visited in random order
    dram_nodes: int = 8192
    flush_bytes: int = 256 * MiB     # written before the DRAM chase: evicts L2
    bar_count: int = 1024
    bar_warps: int = 8
    copy_bytes: int = GiB            # per buffer (read + written bytes are counted)
    l2_copy_bytes: int = 8 * MiB     # per buffer, copied `l2_copy_reps` times in one launch
    l2_copy_reps: int = 64
    ffma_ctas_per_sm: int = 8
    ffma_threads: int = 256
    ffma_iters: int = 512
    repeats: int = 3                 # clock-timed kernels: the minimum of this many runs
    event_repeats: int = 10          # event-timed kernels: median of this many launches
    launch_repeats: int = 201        # the empty kernel: its time is noisy (34-69 us seen)
    mma_chain_ops: int = 256         # dependent mma.sync per latency chain (unrolled)
    mma_tput_warps: int = 16
    mma_tput_chains: int = 4         # independent accumulators per warp
    mma_tput_rounds: int = 64
    wgmma_lat_reps: int = 32         # issue → wait_group 0 rounds, one wgmma each
    wgmma_count: int = 64            # wgmma in flight per warpgroup (one commit group)
    wgmma_warpgroups: int = 2        # warpgroups of the CTA that measures wgmma throughput
    tma_box_rows: int = 128          # TMA boxes of 128 rows x 128 bytes (16 KB: the GEMM's tiles)
    tma_small_rows: int = 8          # and of 8 rows (1 KB): the latency's fixed part
    tma_boxes: int = 8               # distinct boxes the copies cycle through (L2-resident)
    tma_lat_reps: int = 32           # issue → complete rounds, one box each
    tma_slots: int = 12              # boxes in flight while streaming (192 KB of shared memory)
    tma_count: int = 384             # copies per streaming run, and per shorter run: the
    tma_base_count: int = 96         # difference cancels the ramp-up and the drain
    seed: int = 2026


class Gpu:
    """Loads and launches ptxgen modules on the current device."""

    def __init__(self, arch):
        from .. import runtime
        from ..runtime import driver
        self.driver, self.runtime = driver, runtime
        self.name = runtime.device_name()
        self.sm_count = runtime.sm_count()
        self.arch = arch

    def load(self, module, arch=None):
        verify_module(module)
        k = module.kernels[0]
        return self.driver.load_kernel(emit_module(module, arch or self.arch), k.name,
                                       k.params)

    def run(self, module, grid, block, args, arch=None, shared_bytes=0):
        """Launch once (emitted for `arch`, default the calibrated one); numpy arrays in args
        are copied back."""
        return self.driver.launch(self.load(module, arch), grid, block, args, shared_bytes)

    def time_ms(self, module, grid, block, args, repeat):
        return self.driver.time_kernel(self.load(module), grid, block, args, warmup=2,
                                       repeat=repeat)

    def device_array(self, nbytes, dtype=np.uint64):
        return self.runtime.device_array(nbytes // np.dtype(dtype).itemsize, dtype)

    @staticmethod
    def address(darr):
        return int(darr.__cuda_array_interface__["data"][0])


def _cycle(rng, n):
    """A random cyclic order of n nodes: next[i] is the node after i (one cycle through all)."""
    order = rng.permutation(n)
    nxt = np.empty(n, dtype=np.int64)
    nxt[order] = np.roll(order, -1)
    return nxt


def _args_for(cls, t):
    if t.is_int:
        return np.int32(3), np.int32(0x5A5A)
    if t.bits == 64:
        return np.float64(1.0000001), np.float64(1e-9)
    return np.float32(1.0000001), np.float32(1e-9)


def _measure_latency(gpu, plan, cls, n):
    a, c = _args_for(cls, K.value_type(cls))
    out = np.zeros(64, dtype=np.uint64)
    best = None
    for _ in range(plan.repeats):
        gpu.run(K.latency_chain(cls, n, gpu.arch), (1,), (32,), [out, a, c])
        best = int(out[0]) if best is None else min(best, int(out[0]))
    return best


def _measure_throughput(gpu, plan, cls):
    a, c = _args_for(cls, K.value_type(cls))
    out = np.zeros(2 * plan.tput_warps, dtype=np.uint64)
    sink = np.zeros(32 * plan.tput_warps, dtype=np.uint64)
    mod = K.throughput_streams(cls, plan.tput_rounds, plan.tput_chains, gpu.arch)
    best = None
    for _ in range(plan.repeats):
        gpu.run(mod, (1,), (32 * plan.tput_warps,), [out, sink, a, c,
                                                     np.uint32(plan.tput_trips)])
        span = int(out[1::2].max()) - int(out[0::2].min())
        best = span if best is None else min(best, span)
    return best


def _chase_device(gpu, plan, rng, nbytes, stride, nodes=None):
    """A device array holding a pointer chain: nodes `stride` apart (all of them, or `nodes`
    random ones), each holding the address of the next in a random cycle. Returns
    (array, address of the first node, number of nodes)."""
    slots = nbytes // stride
    arr = gpu.device_array(nbytes)
    base = gpu.address(arr)
    pos = np.arange(slots, dtype=np.int64) if nodes is None else \
        rng.choice(slots, size=nodes, replace=False).astype(np.int64)
    nxt = _cycle(rng, len(pos))
    idx = (pos * (stride // 8)).astype(np.uint64)                  # u64 element index
    val = (base + pos[nxt] * stride).astype(np.uint64)             # address of the next node
    n = len(pos)
    gpu.run(K.scatter_u64(gpu.arch), (-(-n // 256),), (256,), [np.uint32(n), idx, val, arr])
    return arr, int(base + pos[0] * stride), n


def _chase(gpu, plan, cache, start, warm, flush=None):
    out = np.zeros(2, dtype=np.uint64)
    mod = K.chase_global(cache, plan.chase_steps, gpu.arch)
    best = None
    for _ in range(plan.repeats):
        if flush is not None:
            flush()
        gpu.run(mod, (1,), (1,), [np.uint64(start), np.uint32(warm), out])
        best = int(out[0]) if best is None else min(best, int(out[0]))
    return best


def _copy_ms(gpu, plan, nbytes, reps, repeat):
    src, dst = gpu.device_array(nbytes, np.uint32), gpu.device_array(nbytes, np.uint32)
    # one 16-byte chunk per thread per rep: on the H200 the capped grid-stride layout read
    # 3430 GB/s against torch's 4176, and saxpy lost 6 % to it (docs/PERF.md)
    grid = (max(1, -(-(nbytes // 16) // 256)),)
    ms = gpu.time_ms(K.copy_v4(arch=gpu.arch), grid, (256,),
                     [np.uint32(nbytes // 16), np.uint32(reps), src, dst], repeat)
    del src, dst
    return ms


def _clock_span(gpu, plan, module, warps, arch=None, last=None, shared_bytes=0):
    """Minimum over plan.repeats of (last warp's end - first warp's start) clock of a
    one-CTA tensor kernel (kernels_tensor's (out, sink, x) signature; `last` replaces x)."""
    out = np.zeros(2 * warps, dtype=np.uint64)
    sink = np.zeros(32 * warps, dtype=np.float32)
    # x = two bf16 1.0: finite values, so no NaN/Inf special cases are timed
    last = np.uint32(0x3F803F80) if last is None else last
    best = None
    for _ in range(plan.repeats):
        gpu.run(module, (1,), (32 * warps,), [out, sink, last], arch, shared_bytes)
        span = int(out[1::2].max()) - int(out[0::2].min())
        best = span if best is None else min(best, span)
    return best


def _measure_tensor(gpu, plan, raw, attempt):
    """mma.sync (dependent chain, independent accumulators) and wgmma.mma_async (one at a
    time to completion, many in flight) for every N of KT.WGMMA_NS."""
    tc = raw["tensor"] = {}
    wgmma_arch = arch_specific_variant(gpu.arch)     # wgmma needs the arch-specific target

    def mma():
        n = plan.mma_chain_ops
        tc["MMA"] = {
            "n": n, "cycles": _clock_span(gpu, plan, KT.mma_chains(1, n, gpu.arch), 1),
            "base": _clock_span(gpu, plan, KT.mma_chains(1, 0, gpu.arch), 1),
            "tput_cycles": _clock_span(gpu, plan, KT.mma_chains(
                plan.mma_tput_chains, plan.mma_tput_rounds, gpu.arch), plan.mma_tput_warps),
            "warps": plan.mma_tput_warps, "chains": plan.mma_tput_chains,
            "rounds": plan.mma_tput_rounds}
    attempt("mma.sync", mma)
    for n in KT.WGMMA_NS:
        def wg(n=n):
            r = plan.wgmma_lat_reps
            tc[f"WGMMA{n}"] = {
                "n": n, "reps": r,
                "cycles": _clock_span(gpu, plan, KT.wgmma_latency(n, r, wgmma_arch), 4,
                                      wgmma_arch),
                "base": _clock_span(gpu, plan, KT.wgmma_latency(n, 0, wgmma_arch), 4,
                                    wgmma_arch),
                "tput_cycles": _clock_span(gpu, plan, KT.wgmma_stream(
                    n, plan.wgmma_count, wgmma_arch), 4 * plan.wgmma_warpgroups, wgmma_arch),
                "count": plan.wgmma_count, "warpgroups": plan.wgmma_warpgroups}
        attempt(f"wgmma m64n{n}k16", wg)


def _measure_tma(gpu, plan, raw, attempt):
    """TMA 2-D loads from an L2-resident tensor: one box at a time from issue to completion
    (16 KB and 1 KB boxes), and 16 KB boxes streamed through plan.tma_slots slots."""
    tma = raw["tma"] = {}
    rows = plan.tma_box_rows * plan.tma_boxes
    src = gpu.device_array(rows * KM.SWIZZLE, np.uint16)     # timing only: contents unused

    def tmap(box_rows):
        return TiledMap(src, "bf16", box_rows, KM.SWIZZLE // 2, swizzle=KM.SWIZZLE, rows=rows,
                        cols=KM.SWIZZLE // 2)

    def span(module, box_rows, slots):
        return _clock_span(gpu, plan, module, 1, last=tmap(box_rows),
                           shared_bytes=KM.shared_bytes(box_rows, slots))

    def latency(key, box_rows):
        def go():
            r = plan.tma_lat_reps
            boxes = rows // box_rows
            tma[key] = {"box_rows": box_rows, "bytes": KM.box_bytes(box_rows), "reps": r,
                        "cycles": span(KM.tma_latency(r, box_rows, boxes, gpu.arch), box_rows, 1),
                        "base": span(KM.tma_latency(0, box_rows, boxes, gpu.arch), box_rows, 1)}
        return go

    def stream():
        b, s = plan.tma_box_rows, plan.tma_slots
        tma["stream"] = {
            "box_rows": b, "bytes": KM.box_bytes(b), "slots": s, "count": plan.tma_count,
            "base_count": plan.tma_base_count,
            "cycles": span(KM.tma_stream(plan.tma_count, s, b, plan.tma_boxes, gpu.arch), b, s),
            "base_cycles": span(KM.tma_stream(plan.tma_base_count, s, b, plan.tma_boxes,
                                              gpu.arch), b, s)}
    attempt("TMA latency", latency("latency", plan.tma_box_rows))
    attempt("TMA latency (small box)", latency("latency_small", plan.tma_small_rows))
    attempt("TMA stream", stream)


def measure(arch, plan=Plan(), only=None, log=None):
    """Raw measurements on the current GPU (a dict of plain numbers). `only`: the groups to
    run (latency, throughput, memory, barrier, bandwidth, peak, launch, tensor, tma); `log(text)`
    reports progress."""
    gpu = Gpu(arch)
    from ..runtime.device import device_arch
    have = device_arch()
    if have != arch:
        raise PtxgenError(Spelled(f"the GPU is {have} ({gpu.name}); calibrating {arch} on it "
                                  f"would measure the wrong machine (use ",
                                  Arg(f"arch={have!r}", f"--arch {have}"), ")"))
    rng = np.random.default_rng(plan.seed)
    groups = only or ("latency", "throughput", "memory", "barrier", "bandwidth", "peak",
                      "launch", "tensor", "tma")
    raw = {"device": gpu.name, "arch": arch, "sm_count": gpu.sm_count, "plan": plan.__dict__,
           "date": time.strftime("%Y-%m-%d", time.gmtime()), "errors": {}}
    say = log or (lambda text: None)

    def attempt(name, fn):
        t = time.perf_counter()
        try:
            fn()
        except (PtxgenError, LaunchError) as e:
            raw["errors"][name] = str(e)
        except Exception as e:          # a measurement failing must not lose the others
            raw["errors"][name] = f"{type(e).__name__}: {e}"
        say(f"{name}: {time.perf_counter() - t:.1f} s"
            + (f" (failed: {raw['errors'][name]})" if name in raw["errors"] else ""))

    if "latency" in groups:
        raw["latency"] = {}
        for cls in K.ARITH_CLASSES:
            def lat(cls=cls):
                raw["latency"][cls] = {
                    "n": plan.chain_ops,
                    "cycles": _measure_latency(gpu, plan, cls, plan.chain_ops),
                    "base": _measure_latency(gpu, plan, cls, 0)}
            attempt(f"latency {cls}", lat)
    if "throughput" in groups:
        raw["throughput"] = {}
        for cls in K.ARITH_CLASSES:
            def tput(cls=cls):
                raw["throughput"][cls] = {
                    "cycles": _measure_throughput(gpu, plan, cls),
                    "warps": plan.tput_warps, "chains": plan.tput_chains,
                    "ops_per_chain": plan.tput_rounds * plan.tput_trips}
            attempt(f"throughput {cls}", tput)
    if "memory" in groups:
        raw["chase"] = {}

        def shared():
            nxt = _cycle(rng, plan.shared_nodes).astype(np.uint32)
            out = np.zeros(2, dtype=np.uint64)
            mod = K.chase_shared(plan.chase_steps, plan.shared_nodes, gpu.arch)
            best = None
            for _ in range(plan.repeats):
                gpu.run(mod, (1,), (1,), [nxt, out])
                best = int(out[0]) if best is None else min(best, int(out[0]))
            raw["chase"]["SHARED"] = {"cycles": best, "steps": plan.chase_steps}

        def cached(level, cache, nbytes, stride):
            def go():
                arr, start, n = _chase_device(gpu, plan, rng, nbytes, stride)
                raw["chase"][level] = {"cycles": _chase(gpu, plan, cache, start, n),
                                       "steps": plan.chase_steps, "bytes": nbytes}
                del arr
            return go

        def dram():
            arr, start, n = _chase_device(gpu, plan, rng, plan.dram_bytes, plan.dram_stride,
                                          plan.dram_nodes)
            fsrc = gpu.device_array(plan.flush_bytes, np.uint32)
            fdst = gpu.device_array(plan.flush_bytes, np.uint32)
            copy = K.copy_v4(arch=gpu.arch)

            def flush():
                gpu.run(copy, (gpu.sm_count * 8,), (256,),
                        [np.uint32(plan.flush_bytes // 16), np.uint32(1), fsrc, fdst])
            raw["chase"]["DRAM"] = {"cycles": _chase(gpu, plan, "cg", start, 0, flush),
                                    "steps": plan.chase_steps, "bytes": plan.dram_bytes,
                                    "flush_bytes": plan.flush_bytes}
            del arr, fsrc, fdst

        attempt("chase shared", shared)
        attempt("chase L1", cached("L1", "ca", plan.l1_bytes, plan.l1_stride))
        attempt("chase L2", cached("L2", "cg", plan.l2_bytes, plan.l2_stride))
        attempt("chase DRAM", dram)
    if "barrier" in groups:
        def bar():
            out = np.zeros(2, dtype=np.uint64)
            best = None
            for _ in range(plan.repeats):
                gpu.run(K.barrier_loop(plan.bar_count, gpu.arch), (1,),
                        (32 * plan.bar_warps,), [out])
                best = int(out[0]) if best is None else min(best, int(out[0]))
            raw["barrier"] = {"cycles": best, "n": plan.bar_count, "warps": plan.bar_warps}
        attempt("bar.sync", bar)
    if "bandwidth" in groups:
        raw["copy"] = {}

        def dram_copy():
            ms = _copy_ms(gpu, plan, plan.copy_bytes, 1, plan.event_repeats)
            raw["copy"]["DRAM"] = {"bytes": 2 * plan.copy_bytes, "ms": ms}

        def l2_copy():
            ms = _copy_ms(gpu, plan, plan.l2_copy_bytes, plan.l2_copy_reps, plan.event_repeats)
            raw["copy"]["L2"] = {"bytes": 2 * plan.l2_copy_bytes * plan.l2_copy_reps, "ms": ms}
        attempt("copy DRAM", dram_copy)
        attempt("copy L2", l2_copy)
    if "peak" in groups:
        def peak():
            grid = (gpu.sm_count * plan.ffma_ctas_per_sm,)
            threads = grid[0] * plan.ffma_threads
            out = gpu.device_array(4 * threads, np.float32)
            mod = K.ffma_peak(8, 16, gpu.arch)
            ms = gpu.time_ms(mod, grid, (plan.ffma_threads,),
                             [out, np.float32(1.0000001), np.float32(1e-9),
                              np.uint32(plan.ffma_iters)], plan.event_repeats)
            raw["ffma"] = {"flops": 2 * threads * 8 * 16 * plan.ffma_iters, "ms": ms,
                           "sm_count": gpu.sm_count}
        attempt("FFMA peak", peak)
    if "launch" in groups:
        def launch():
            out = gpu.device_array(4, np.uint32)
            raw["launch_us"] = 1e3 * gpu.time_ms(K.empty_kernel(gpu.arch), (1,), (32,), [out],
                                                 plan.launch_repeats)
        attempt("empty launch", launch)
    if "tensor" in groups:
        _measure_tensor(gpu, plan, raw, attempt)
    if "tma" in groups:
        _measure_tma(gpu, plan, raw, attempt)
    return raw
