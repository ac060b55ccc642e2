"""Does a TMA *load* accept a box that starts off a 16-byte boundary along x, and at what speed?

Part 1 (each case in its own process: a fault ends the CUDA context): ops.tensor_probes.tma_probe
loads one box at (x0, 0) and stores it back at (0, 0) (an aligned store), and the shared tile it
copied out is compared with the expected swizzled box. Part 2: 132 CTAs stream boxes of
`rows` x 64 bf16 (128-byte swizzle) through a 4-slot mbarrier ring from a 4096 x 4096 bf16 tensor
at x = 64 i + shift; GB/s for shift 0 and unaligned shifts, same kernel, same run.

    python benchmarks/tma_unaligned_probe.py [--part 1|2|all]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ptxgen.arrays import TiledMap                                    # noqa: E402
from ptxgen.emit import emit_module                                   # noqa: E402
from ptxgen.ir import Addr, Builder, Module, Param                    # noqa: E402
from ptxgen.ir import types as T                                      # noqa: E402
from ptxgen.ir import fragments as F                                  # noqa: E402
from ptxgen.ir.builder_tensor import tensor_map_param                 # noqa: E402

ARCH = "sm_90a"


def one_case(x0, box_cols, box_rows, swizzle, esize):
    from ptxgen.ops import tensor_probes as P
    from ptxgen.runtime import launch, load_kernel
    H, W = 16, 256
    dt, name = (np.uint16, "bf16") if esize == 2 else (np.uint32, "f32")
    rng = np.random.default_rng(x0)
    A = rng.integers(1, 1 << (8 * esize - 1), (H, W)).astype(dt)
    m = P.tma_probe((box_cols, box_rows), esize, target=ARCH)
    k = m.kernels[0]
    kern = load_kernel(emit_module(m), k.name, k.params, k.directives)
    tin = TiledMap(A, name, box_rows, box_cols, swizzle=swizzle or 0)
    tout = TiledMap(np.zeros_like(A), name, box_rows, box_cols, swizzle=swizzle or 0)
    raw = np.zeros(box_cols * box_rows * esize // 4, np.uint32)
    launch(kern, (1,), (128,), [tin, tout, raw, *map(np.int32, (x0, 0, 0, 0))])
    ys, xs = np.meshgrid(np.arange(box_rows), np.arange(box_cols), indexing="ij")
    inside = (xs + x0 >= 0) & (xs + x0 < W)
    tile = np.where(inside, A[ys, np.clip(xs + x0, 0, W - 1)], 0)
    smem = np.zeros(tile.size, dt)
    smem[F.swizzle(np.arange(tile.size) * esize, swizzle or None) // esize] = tile.ravel()
    return bool((raw.view(dt) == smem).all())


def stream_module(rows, count=256, slots=4):
    """Kernel tma_stream_x(tmap, shift, sink): thread 0 of each CTA copies `count` boxes."""
    m = Module(target=ARCH)
    k = m.add_kernel(f"tma_stream_r{rows}", [tensor_map_param("tmap"), Param("shift", T.s32),
                                             Param("sink", T.u64)])
    b = Builder(k)
    size = rows * 128
    with b.if_(b.setp("eq", b.special("tid.x"), 0)):
        raw = b.address_of(b.dynamic_shared("smem", align=16))
        base = b.and_(b.add(raw, 1023), -1024 & 0xFFFFFFFF, name="base")
        bufs = [b.add(base, s * size, name="slot") for s in range(slots)]
        bars = [b.add(base, slots * size + 8 * s, name="bar") for s in range(slots)]
        for bar in bars:
            b.mbarrier_init(Addr(bar), 1)
        b.fence_mbarrier_init()
        cta = b.special("ctaid.x")
        shift = b.param("shift")
        nblk = 4096 // rows
        for i in range(count):
            s = i % slots
            if i >= slots:
                b.mbarrier_wait_parity(Addr(bars[s]), ((i - slots) // slots) & 1)
            x = b.add(shift, (i % 63) * 64, name="x")
            y = b.mul(b.and_(b.add(cta, 132 * (i // 63)), nblk - 1), rows, name="y")
            b.mbarrier_arrive_expect_tx(Addr(bars[s]), size)
            b.cp_async_bulk_tensor_load(Addr(bufs[s]), "tmap", (x, y), Addr(bars[s]))
        for i in range(count - slots, count):
            b.mbarrier_wait_parity(Addr(bars[i % slots]), (i // slots) & 1)
        v = b.ld("shared", T.b32, Addr(bufs[0]), name="v")
        b.st("global", Addr(b.param("sink")), v, type=T.b32)
    b.ret()
    return m, 1024 + slots * size + 8 * slots


def part2():
    import torch
    from ptxgen.runtime import bound_launch, load_kernel, time_calls
    A = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)
    sink = torch.zeros(4, dtype=torch.int32, device="cuda")
    rows_out = []
    for rows in (16, 32, 64):
        m, shared = stream_module(rows)
        k = m.kernels[0]
        kern = load_kernel(emit_module(m), k.name, k.params, k.directives)
        tmap = TiledMap(A, "bf16", rows, 64, swizzle=128)
        for shift in (0, 8, 1, 3, 7):
            fn = bound_launch(kern, (132,), (32,), [tmap, np.int32(shift), sink], shared)
            t = time_calls(fn)
            nbytes = 132 * 256 * rows * 128
            rows_out.append(dict(rows=rows, shift=shift, us=t * 1e3, gbs=nbytes / (t * 1e-3) / 1e9))
    return rows_out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="all")
    ap.add_argument("--case", default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    if a.case:
        x0, bc, br, sw, es = map(int, a.case.split(","))
        print("OK" if one_case(x0, bc, br, sw, es) else "WRONG")
        return
    res = {}
    if a.part in ("1", "all"):
        cases = [(0, 64, 8, 128, 2), (8, 64, 8, 128, 2), (1, 64, 8, 128, 2), (3, 64, 8, 128, 2),
                 (39, 64, 8, 128, 2), (5, 8, 8, 0, 2), (3, 32, 4, 128, 4), (1, 16, 8, 0, 4)]
        res["part1"] = []
        for c in cases:
            p = subprocess.run([sys.executable, __file__, "--case", ",".join(map(str, c))],
                               capture_output=True, text=True, timeout=120)
            out = (p.stdout.strip().splitlines() or [""])[-1]
            err = (p.stderr.strip().splitlines() or [""])[-1]
            res["part1"].append(dict(case=c, rc=p.returncode, out=out, err=err[-200:]))
            print(f"x0={c[0]:3d} box={c[1]}x{c[2]} swz={c[3]} esize={c[4]}: rc={p.returncode} "
                  f"{out} {err[-160:] if p.returncode else ''}", flush=True)
    if a.part in ("2", "all"):
        res["part2"] = part2()
        for r in res["part2"]:
            print(f"rows={r['rows']:3d} shift={r['shift']}: {r['us']:8.1f} us {r['gbs']:8.0f} GB/s")
    with open(os.path.join(a.out, "tma_unaligned_probe.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
