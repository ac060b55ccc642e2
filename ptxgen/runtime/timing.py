"""GPU time of a callable that enqueues work on the default stream, without the host's cost.

CUDA events around one call measure the host's launch latency as well whenever the stream is
idle when the start event fires (tens of microseconds through Python, more than a short kernel
runs). Back-to-back calls hide it only while the host enqueues faster than the GPU drains. For
any kernel length, time_calls first enqueues a `hold` kernel that spins on %globaltimer for
longer than the host needs to enqueue the whole batch; the start event, the batch and the stop
event queue up behind it and then run back to back on the GPU, so the events see only GPU time
(plus the GPU's own gap between consecutive kernels, which every implementation pays alike).
"""
import functools
import time

import numpy as np

from .cuda import numba_cuda
from .driver import load_kernel, raw_launch

MAX_HOLD_MS = 500.0


def hold_module(arch):
    """A one-thread kernel hold(u64 ns) that returns once %globaltimer has advanced ns."""
    from ..ir import Builder, Module, Param
    from ..ir import types as T
    m = Module(target=arch)
    k = m.add_kernel("hold", [Param("ns", T.u64)])
    b = Builder(k)
    ns = b.param("ns")
    t0 = b.special("globaltimer")
    spin = b.new_label("spin")
    b.label(spin)
    waited = b.sub(b.special("globaltimer"), t0, name="waited")
    b.branch(spin, b.setp("lt", waited, ns))
    b.ret()
    return m


@functools.lru_cache(maxsize=1)
def _hold_kernel():
    from ..emit import emit_module
    from .device import device_arch
    arch = device_arch()
    m = hold_module(arch)
    return load_kernel(emit_module(m, arch), "hold", m.kernel("hold").params)


def hold(ms):
    """Enqueue a kernel that keeps the default stream busy for `ms` milliseconds."""
    raw_launch(_hold_kernel(), (1, 1, 1), (1, 1, 1), [np.uint64(int(ms * 1e6))], 0)


def _held_batch(fn, n):
    """GPU ms per call of n back-to-back calls queued behind a hold kernel."""
    cuda = numba_cuda()
    t = time.perf_counter()
    fn()                                       # host cost of one call, for the hold's length
    host_ms = (time.perf_counter() - t) * 1e3
    cuda.synchronize()
    hold(min(MAX_HOLD_MS, 2.0 + 1.5 * n * host_ms))
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(n):
        fn()
    stop.record()
    stop.synchronize()
    return cuda.event_elapsed_time(start, stop) / n


def batch_for(fn, target_ms=20.0):
    """Calls of `fn` in about target_ms of GPU work (1 to 500: more could fill the launch
    queue, and the host would then block and fall behind the GPU)."""
    first = max(_held_batch(fn, 3), 1e-3)
    return int(min(500, max(1, target_ms / first)))


def time_calls(fn, batch=None, repeat=5, target_ms=20.0):
    """Median GPU milliseconds per call of `fn` (which enqueues work on the default stream)
    over `repeat` held batches of `batch` back-to-back calls; with batch=None the batch is
    sized to about target_ms of GPU work."""
    if batch is None:
        batch = batch_for(fn, target_ms)
    _held_batch(fn, max(1, batch // 4))       # warm-up: clocks up, TLBs filled
    return float(np.median([_held_batch(fn, batch) for _ in range(repeat)]))
