"""Numba kernels of the eleventh held-out group (held11) of the model benchmark set
(benchmarks/model_set_held11.py): kinds of kernel in none of the other parts, written the way a
Numba user would write them, not tuned. model_set.py compiles them on the GPU machine;
tests/test_model_set.py compiles them with compile_ptx and runs them on ptxgen's emulator at
small sizes.
"""
import math

from numba import cuda, float32, int32, uint8


def lif_step(v, refr, cur, v_out, refr_out, spike, dt_tau, v_th, t_ref):
    # one time step of a population of leaky integrate-and-fire neurons (rest and reset at
    # 0): a neuron in its refractory period counts down and stays at reset; the others
    # integrate their input current, v += dt/tau (I - v), and fire (spike, reset, refractory
    # for t_ref steps) on reaching the threshold; one thread per neuron, state out of place
    i = cuda.grid(1)
    if i < v.shape[0]:
        r = refr[i]
        if r > 0:
            v_out[i] = float32(0.0)
            refr_out[i] = r - 1
            spike[i] = uint8(0)
        else:
            v0 = v[i]
            vn = v0 + dt_tau * (cur[i] - v0)
            if vn >= v_th:
                v_out[i] = float32(0.0)
                refr_out[i] = t_ref
                spike[i] = uint8(1)
            else:
                v_out[i] = vn
                refr_out[i] = 0
                spike[i] = uint8(0)


def cic_deposit(px, py, q, grid):
    # cloud-in-cell charge deposition of a particle-in-cell step: each particle (one thread)
    # spreads its charge over the four grid nodes around it with bilinear weights, four
    # float atomic adds into a (ny, nx) grid
    i = cuda.grid(1)
    if i < px.shape[0]:
        x = px[i]
        y = py[i]
        ix = min(int32(x), grid.shape[1] - 2)
        iy = min(int32(y), grid.shape[0] - 2)
        fx = x - float32(ix)
        fy = y - float32(iy)
        w = q[i]
        gx = float32(1.0) - fx
        gy = float32(1.0) - fy
        cuda.atomic.add(grid, (iy, ix), w * gx * gy)
        cuda.atomic.add(grid, (iy, ix + 1), w * fx * gy)
        cuda.atomic.add(grid, (iy + 1, ix), w * gx * fy)
        cuda.atomic.add(grid, (iy + 1, ix + 1), w * fx * fy)


def haversine(lat1, lon1, lat2, lon2, dist):
    # great-circle distance in km between pairs of (latitude, longitude) points in degrees
    # by the haversine formula: sin, cos, sqrt and asin (libdevice) per pair
    i = cuda.grid(1)
    if i < dist.shape[0]:
        d2r = float32(math.pi / 180.0)
        p1 = lat1[i] * d2r
        p2 = lat2[i] * d2r
        sa = math.sin((p2 - p1) * float32(0.5))
        so = math.sin((lon2[i] - lon1[i]) * d2r * float32(0.5))
        a = sa * sa + math.cos(p1) * math.cos(p2) * so * so
        dist[i] = float32(2.0 * 6371.0) * math.asin(math.sqrt(min(a, float32(1.0))))


# name: (function, Numba signature)
KERNELS = {
    "lif_step": (lif_step, "void(float32[:], int32[:], float32[:], float32[:], int32[:], "
                           "uint8[:], float32, float32, int32)"),
    "cic_deposit": (cic_deposit, "void(float32[:], float32[:], float32[:], float32[:,:])"),
    "haversine": (haversine, "void(float32[:], float32[:], float32[:], float32[:], "
                             "float32[:])"),
}
