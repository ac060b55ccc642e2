"""Warp execution efficiency: the share of a warp's 32 lanes that do work per issued instruction.

Three launches of y = 2x + 1 over the same elements, counted lane by lane on the CPU emulator
(ptxgen.warp_efficiency; the results are also computed on the GPU when there is one):

1. blocks of 28 threads: every warp has 28 of 32 lanes, 87.5% at best, whatever the code does;
2. blocks of 32 threads with a bounds check: full warps, only the last one has 28 of 32 lanes
   in bounds (the other 4 skip the body);
3. a branch on the lane index (lanes 0-3 of every 8 take a longer path): the warp runs both
   paths one after the other with the other lanes idle.

    python samples/warp_efficiency.py
"""
import numpy as np
from _common import backend, run_kernel, say_backend

from ptxgen import emit_module, warp_efficiency
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T

N = 28 * 65                       # elements: 65 blocks of 28, or 57 blocks of 32 (28 in the last)


def axpb(bounds, branchy=False):
    """y[i] = 2*x[i] + 1 for i = ctaid*ntid + tid (with `bounds`: only i < n); `branchy` sends
    lanes with (lane & 4) == 0 through a detour that adds and subtracts x (same result)."""
    m = Module(target="sm_90")
    k = m.add_kernel("axpb", [Param("n", T.u32), Param("x", T.u64, ptr(T.f32)),
                              Param("y", T.u64, ptr(T.f32))])
    b = Builder(k)
    i = b.global_index()

    def body():
        xa = b.element_addr(b.param("x"), i, 4)
        v = b.fma(b.ld("global", T.f32, xa), 2.0, 1.0, name="v")
        if branchy:
            lane = b.and_(b.special("tid.x"), 4)
            with b.if_(b.setp("eq", lane, 0)):
                for _ in range(8):                       # the detour: x added and taken back
                    b.add(v, b.ld("global", T.f32, xa), out=v)
                    b.sub(v, b.ld("global", T.f32, xa), out=v)
        b.st("global", b.element_addr(b.param("y"), i, 4), v)

    if bounds:
        with b.if_(b.setp("lt", i, b.param("n"))):
            body()
    else:
        body()
    b.ret()
    return m


def main():
    where = backend()
    x = np.linspace(-1, 1, N, dtype=np.float32)
    want = 2 * x + 1
    print(f"y = 2x + 1 over {N} elements; lanes counted on the emulator, results computed on "
          f"{say_backend(where)}")
    cases = [("1. blocks of 28 threads (28 of 32 lanes per warp)", axpb(False), N // 28, 28),
             ("2. blocks of 32 threads, bounds-checked (i < n)", axpb(True), -(-N // 32), 32),
             ("3. blocks of 32, a branch on the lane index", axpb(True, True), -(-N // 32), 32)]
    ok = True
    for title, module, grid, block in cases:
        y = np.zeros(N, np.float32)
        run_kernel(module, "axpb", grid, block, [np.uint32(N), x, y])
        good = bool(np.allclose(y, want, atol=1e-6))
        ok &= good
        # measured on the printed PTX, so the lines below are lines of `ptx`
        ptx = emit_module(module)
        rep = warp_efficiency(ptx, "axpb", grid, block, np.uint32(N), x.copy(),
                              np.zeros(N, np.float32))
        print(f"\n{title}: result {'ok' if good else 'WRONG'}")
        print(rep.to_text(worst=2))
        lost = max(("partial_warps", "exited", "diverged"), key=lambda k: rep.lost[k])
        why = {"partial_warps": f"each warp has only {block % 32 or 32} threads: "
                                f"{32 - (block % 32 or 32)} lanes are never there",
               "diverged": "lanes of one warp on different paths (in or out of bounds, one "
                           "side of the branch or the other) run one path at a time",
               "exited": "threads that returned leave their lanes empty"}[lost]
        if rep.efficiency < 1:
            print(f"  why: {why}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
