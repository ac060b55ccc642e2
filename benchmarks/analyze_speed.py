"""Time parse + analyze on a generated 10 000-instruction PTX file (target: under 1 s).

    .venv/bin/python benchmarks/analyze_speed.py [--instructions N] [--repeat R] [--out FILE]

The kernel mixes what real kernels contain: a loop of unrolled fma chains over vector loads and
shared-memory traffic, branches with guards, a few hundred registers. It prints the instruction
count the analyzer found and the best of R timings in seconds.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxgen.analysis import analyze  # noqa: E402
from ptxgen.parse import parse_ptx  # noqa: E402

BODY_GROUP = [   # 12 instructions per group; {g} numbers registers per group
    "ld.global.nc.v4.f32 {{%f{a}, %f{b}, %f{c}, %f{d}}}, [%rd{p}+{off}];",
    "fma.rn.f32 %f{acc0}, %f{a}, %f{b}, %f{acc0};",
    "fma.rn.f32 %f{acc1}, %f{c}, %f{d}, %f{acc1};",
    "mul.f32 %f{e}, %f{a}, 0f3F000000;",
    "st.shared.f32 [%r{s}+{soff}], %f{e};",
    "ld.shared.f32 %f{x}, [%r{s}+{soff2}];",
    "add.f32 %f{acc2}, %f{acc2}, %f{x};",
    "add.s32 %r{i}, %r{i}, 1;",
    "setp.lt.s32 %p{q}, %r{i}, %r1;",
    "@%p{q} add.f32 %f{acc3}, %f{acc3}, %f{e};",
    "shl.b32 %r{t}, %r{i}, 2;",
    "add.s32 %r{s}, %r{s}, %r{t};",
]


def generate(n_instructions):
    groups = max(1, (n_instructions - 12) // len(BODY_GROUP))
    per_loop = 64                                   # groups per loop body
    lines = [".version 7.8", ".target sm_90", ".address_size 64", "",
             ".visible .entry bench(", "\t.param .u64 .ptr .global .align 16 a,",
             "\t.param .u32 n", ")", "{",
             ".shared .align 16 .f32 buf[4096];",
             f"\t.reg .pred %p<{groups + 2}>;", f"\t.reg .b32 %r<{3 * groups + 8}>;",
             f"\t.reg .f32 %f<{6 * groups + 8}>;", "\t.reg .b64 %rd<4>;", "",
             "\tld.param.u64 %rd1, [a];", "\tld.param.u32 %r1, [n];",
             "\tcvta.to.global.u64 %rd2, %rd1;", "\tmov.u32 %r2, buf;",
             "\tmov.u32 %r3, 0;"]
    count = 5
    loop = 0
    for g in range(groups):
        if g % per_loop == 0:
            loop = g // per_loop
            if g:
                lines += ["\tadd.s32 %r3, %r3, 1;", "\tsetp.lt.s32 %p1, %r3, %r1;",
                          f"\t@%p1 bra $L_loop{g // per_loop - 1};"]
                count += 3
            lines.append(f"$L_loop{g // per_loop}:")
        f0 = 8 + 6 * g
        regs = dict(a=f0, b=f0 + 1, c=f0 + 2, d=f0 + 3, e=f0 + 4, x=f0 + 5,
                    acc0=1 + g % 2, acc1=3, acc2=4 + g % 2, acc3=6, p=2, off=16 * (g % 64),
                    s=4 + 3 * g, soff=4 * (g % 512), soff2=4 * ((g + 7) % 512), i=5 + 3 * g,
                    t=6 + 3 * g, q=2 + g)
        # each group's address and counter registers start from a defined value
        lines.append(f"\tmov.u32 %r{regs['s']}, %r2;")
        lines.append(f"\tmov.u32 %r{regs['i']}, %r3;")
        count += 2
        for tmpl in BODY_GROUP:
            lines.append("\t" + tmpl.format(**regs))
            count += 1
        if count >= n_instructions - 8:
            break
    lines += ["\tadd.s32 %r3, %r3, 1;", "\tsetp.lt.s32 %p1, %r3, %r1;",
              f"\t@%p1 bra $L_loop{loop};"]
    count += 3
    while count < n_instructions - 2:
        lines.append("\tadd.f32 %f1, %f1, %f3;")
        count += 1
    lines += ["\tst.global.f32 [%rd2], %f1;", "\tret;", "}", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructions", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--out", help="also write the generated PTX here")
    args = ap.parse_args(argv)
    text = generate(args.instructions)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    best_parse = best_total = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        module = parse_ptx(text, "bench.ptx")
        t1 = time.perf_counter()
        result = analyze(module, arch=args.arch)
        t2 = time.perf_counter()
        best_parse = min(best_parse, t1 - t0)
        best_total = min(best_total, t2 - t0)
    k = result.kernels[0]
    print(f"instructions: {k.instructions}  blocks: {len(k.blocks)}  loops: {len(k.loops)}")
    print(f"parse: {best_parse:.3f} s  parse+analyze: {best_total:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
