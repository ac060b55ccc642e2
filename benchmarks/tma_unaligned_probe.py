"""Does a TMA *load* accept a box that starts off a 16-byte boundary along x? (If it did, an
operand with misaligned rows could be loaded through 8 tensor maps, one per row residue mod 8,
with 16-byte aligned strides, and odd K would need no pad copy.)

Each case runs in its own process (a fault ends the CUDA context): ops.tensor_probes.tma_probe
loads one box at (x0, 0) and stores it back at (0, 0) (an aligned store), and the shared tile it
copied out is compared with the expected swizzled box.

    python benchmarks/tma_unaligned_probe.py [--out DIR]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ptxgen.arrays import TiledMap                                    # noqa: E402
from ptxgen.ir import fragments as F                                  # noqa: E402

ARCH = "sm_90a"


def one_case(x0, box_cols, box_rows, swizzle, esize):
    from ptxgen.emit import emit_module
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    if a.case:
        x0, bc, br, sw, es = map(int, a.case.split(","))
        print("OK" if one_case(x0, bc, br, sw, es) else "WRONG")
        return
    res = {}
    cases = [(0, 64, 8, 128, 2), (8, 64, 8, 128, 2), (1, 64, 8, 128, 2), (3, 64, 8, 128, 2),
             (39, 64, 8, 128, 2), (5, 8, 8, 0, 2), (3, 32, 4, 128, 4), (1, 16, 8, 0, 4)]
    res["cases"] = []
    for c in cases:
        p = subprocess.run([sys.executable, __file__, "--case", ",".join(map(str, c))],
                           capture_output=True, text=True, timeout=120)
        out = (p.stdout.strip().splitlines() or [""])[-1]
        err = (p.stderr.strip().splitlines() or [""])[-1]
        res["cases"].append(dict(case=c, rc=p.returncode, out=out, err=err[-200:]))
        print(f"x0={c[0]:3d} box={c[1]}x{c[2]} swz={c[3]} esize={c[4]}: rc={p.returncode} "
              f"{out} {err[-160:] if p.returncode else ''}", flush=True)
    with open(os.path.join(a.out, "tma_unaligned_probe.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
