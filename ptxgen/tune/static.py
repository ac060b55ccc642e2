"""The static models the tuner prunes with, one schedule at a time (picklable in and out, so a
process pool can run them): ptxas resources, occupancy, an FFMA lower bound and the simulator's
predicted time."""
import math

from .. import isa as isamod
from ..errors import PtxgenError
from ..schedule import MatmulSchedule
from . import ptxas_cache


def assemble(sched, arch, shape):
    """ptxas resources of the kernel `sched` lowers to for `shape`: a dict with registers,
    spills (bytes stored + loaded), stack and shared bytes, or error."""
    from ..emit import emit_module
    from ..lower import lower_matmul
    from ..toolchain import assemble as ptxas
    s = MatmulSchedule.from_dict(sched) if isinstance(sched, dict) else sched
    try:
        text = emit_module(lower_matmul(s, arch, shape), arch)
        return ptxas_cache.cached_resources(text, arch, "matmul", ptxas)
    except PtxgenError as e:
        return {"error": str(e)[:200]}


def ctas_per_sm(sched, registers, arch):
    """CTAs of `sched` resident per SM with `registers` per thread (the occupancy calculator)."""
    from ..analysis.occupancy import occupancy
    return occupancy(sched.threads, registers, sched.shared_bytes, arch).active_blocks_per_sm


def ffma_bound_us(sched, shape, arch):
    """A lower bound of any prediction: the busiest SM runs ceil(CTAs / SMs) CTAs, each
    BM*BN*K' FMAs (K rounded up to whole k tiles) at the SM's FP32 lane count per cycle."""
    h = isamod.load(arch).header
    ctas = math.prod(sched.grid(shape))
    k_pad = -(-shape["K"] // sched.BK) * sched.BK
    fmas = -(-ctas // h.sm_count) * sched.BM * sched.BN * k_pad
    return fmas / h.fp32_lanes_per_sm / h.clock_mhz


def simulate(sched, arch, shape, registers, sample=16):
    """{'us': predicted device microseconds of one launch at `shape` (the kernel as
    back-to-back launches see it, what the GPU trials measure), 'launch_us': the launch
    overhead a lone launch adds}, or {'error': ...}."""
    from ..ops.matmul import Matmul
    from ..sim import simulate_operator
    s = MatmulSchedule.from_dict(sched) if isinstance(sched, dict) else sched
    try:
        rep = simulate_operator(Matmul(s), shape, arch=arch, registers=registers,
                                sample=sample)
    except Exception as e:           # noqa: BLE001 (one point's failure must not end a search)
        return {"error": f"{type(e).__name__}: {e}"[:200]}
    return {"us": rep.device_us, "launch_us": rep.time_us - rep.device_us}


def run_job(job):
    """Entry point of pool workers: ('assemble'|'simulate', schedule dict, args...)."""
    kind, sched, *rest = job
    if kind == "assemble":
        return assemble(sched, *rest)
    if kind == "simulate":
        return simulate(sched, *rest)
    raise ValueError(kind)
