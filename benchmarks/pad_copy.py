"""The pad copy on the GPU: ptxgen's realigning kernel (ops/pack.py) against the element-wise
kernel it replaced (built below as it was at commit 8ac1ddb: one thread per 16-byte chunk, an
integer divide, eight predicated 2-byte loads) and torch doing the same padded copy
(dst[:, :K].copy_(src); torch leaves the pad columns as they were, so it writes K, not the
padded width). Every kernel's result is compared bit for bit with torch's first.

    python benchmarks/pad_copy.py [--shapes 4096x4093,...] [--out DIR]

GB/s = (bytes read + bytes written) / GPU time per call (runtime.time_calls); sources of
33-134 MB, so L2 (60 MB) holds at most part of one.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness                                                        # noqa: E402
from ptxgen.emit import emit_module                                  # noqa: E402
from ptxgen.ir import Addr, Builder, Module, Param, ptr               # noqa: E402
from ptxgen.ir import types as T                                      # noqa: E402
from ptxgen.ir.values import Vec                                      # noqa: E402
from ptxgen.ops import pack                                           # noqa: E402
from ptxgen.runtime import bound_launch, load_kernel                  # noqa: E402

ARCH = "sm_90a"


def old_pad_copy_b16(module, threads=256):
    """The element-wise pad_copy_b16 of commit 8ac1ddb (the measured baseline)."""
    k = module.add_kernel("old_pad_copy_b16", [
        Param("rows", T.u32), Param("cols", T.u32), Param("out_rows", T.u32),
        Param("out_chunks", T.u32), Param("src", T.u64, ptr(T.b16)),
        Param("dst", T.u64, ptr(T.b16, align=16))])
    k.directives.append(f".reqntid {threads}, 1, 1")
    b = Builder(k)
    rows, cols, chunks = b.param("rows"), b.param("cols"), b.param("out_chunks")
    src, dst = b.param("src"), b.param("dst")
    idx = b.mad(b.special("ctaid.x"), threads, b.special("tid.x"), name="idx")
    done = b.new_label("done")
    b.branch(done, b.setp("ge", idx, b.mul(b.param("out_rows"), chunks)))
    r = b.div(idx, chunks, name="r")
    c = b.shl(b.sub(idx, b.mul(r, chunks)), 3, name="c")
    row_ok = b.setp("lt", r, rows)
    base = b.element_addr(src, b.mad(r, cols, b.cvt(T.u64, c), mode="wide", type=T.u32), 2)
    vals = []
    for i in range(8):
        v = b.const(0, T.b16, name="v")
        with b.predicated(b.and_(row_ok, b.setp("lt", b.add(c, i) if i else c, cols))):
            b.ld("global", T.b16, Addr(base, 2 * i), out=v)
        vals.append(v)
    words = [b.mov(Vec((vals[i], vals[i + 1])), type=T.b32, name="w") for i in range(0, 8, 2)]
    b.st("global", b.element_addr(dst, b.cvt(T.u64, idx), 16), words)
    b.label(done)
    b.ret()
    return module


def main():
    import torch
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096x4093,4095x4093,4097x4093,8192x8189,4096x4094")
    harness.out_argument(p)
    args = p.parse_args()
    m = old_pad_copy_b16(pack.add_pad_copy(pack.add_pad_copy(Module(target=ARCH), T.b16)))
    ptx = emit_module(m, ARCH)
    kern = {k.name: load_kernel(ptx, k.name, k.params, k.directives) for k in m.kernels}
    info = harness.run_info(cuda=torch.version.cuda)
    print(info, flush=True)
    rows_out = []
    for s in args.shapes.split(","):
        for dt, per, name in ((torch.int16, 8, pack.KERNEL16), (torch.float32, 4, pack.KERNEL)):
            if dt == torch.float32 and s != "4096x4093":
                continue
            R, K = map(int, s.split("x"))
            Kp = pack.padded(K, per)
            src = (torch.randint(-2 ** 15, 2 ** 15, (R, K), device="cuda", dtype=torch.int32)
                   .to(dt) if dt == torch.int16 else torch.randn(R, K, device="cuda"))
            want = torch.zeros(R, Kp, device="cuda", dtype=dt)
            want[:, :K].copy_(src)
            nbytes = (R * K + R * Kp) * src.element_size()
            cands = {"torch": None, "ptxgen": name}
            if dt == torch.int16:
                cands["old"] = "old_pad_copy_b16"
            for impl, kname in cands.items():
                dst = torch.full((R, Kp), -1, device="cuda", dtype=dt)
                if kname is None:
                    dst.zero_()

                    def go(dst=dst):
                        dst[:, :K].copy_(src)
                else:
                    L = (pack.pad_launch(R, Kp, per) if kname != "old_pad_copy_b16" else
                         pack.Launch(grid=(-(-R * Kp // 8 // 256), 1, 1), block=(256, 1, 1)))
                    go = bound_launch(kern[kname], L.grid, L.block,
                                      pack.pad_args(R, K, R, Kp, src, dst, per))
                go()
                torch.cuda.synchronize()
                ok = bool(torch.equal(dst.view(torch.uint8), want.view(torch.uint8)))
                t = harness.gpu_ms(go, repeat=5, target_ms=10.0)
                rows_out.append(dict(shape=s, dtype=str(dt).split(".")[-1], impl=impl, ms=t,
                                     gbs=nbytes / t / 1e6, ok=ok))
                print(rows_out[-1], flush=True)
    harness.save_json(args.out, "pad_copy.json", dict(info=info, rows=rows_out))
    print(f"{'shape':10} {'dtype':8} {'impl':7} {'us':>8} {'GB/s':>7} {'x torch':>7} ok")
    for r in rows_out:
        ref = next(x for x in rows_out if x["shape"] == r["shape"] and x["dtype"] == r["dtype"]
                   and x["impl"] == "torch")
        print(f"{r['shape']:10} {r['dtype']:8} {r['impl']:7} {1e3 * r['ms']:8.2f} "
              f"{r['gbs']:7.0f} {ref['ms'] / r['ms']:7.3f} {r['ok']}")


if __name__ == "__main__":
    main()
