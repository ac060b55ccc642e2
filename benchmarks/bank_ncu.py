"""Shared-memory wavefronts measured by Nsight Compute, per access pattern (run on a GPU).

One kernel per pattern, each one warp issuing exactly one shared load of 4, 8 or 16 bytes per
lane (ld.shared.f32 / .v2.f32 / .v4.f32 → LDS / LDS.64 / LDS.128) at a byte offset it reads from
a table in global memory; lanes whose table entry is 0xFFFFFFFF skip the load (predicated off).
Built with ptxgen's builder, loaded through Numba.

    # 1. launch every pattern kernel under Nsight Compute, CSV to a file
    ncu --clock-control none --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum \
        --csv python benchmarks/bank_ncu.py run > bank_ncu.csv
    # 2. join the measurements with the patterns → tests/data/bank_conflicts_ncu.json
    python benchmarks/bank_ncu.py collect bank_ncu.csv
    # or both steps at once (ncu on $PATH or --ncu PATH):
    python benchmarks/bank_ncu.py all

    python benchmarks/bank_ncu.py list        # the patterns and ptxgen's prediction, no GPU

The JSON is a list of {name, width, addresses (null = inactive lane), wavefronts, kernel};
tests/test_banks.py compares ptxgen.analysis.banks.bank_conflicts with it.
"""
import argparse
import csv
import io
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxgen import emit_module  # noqa: E402
from ptxgen.analysis.banks import bank_conflicts  # noqa: E402
from ptxgen.ir import Builder, Module, Param, ptr  # noqa: E402
from ptxgen.ir import types as T  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRIC = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
SHARED_BYTES = 32 * 1024          # the shared buffer every pattern addresses into
INACTIVE = 0xFFFFFFFF
WIDTHS = (4, 8, 16)
WARP = 32


# -- patterns --------------------------------------------------------------------------------
def patterns(width, seed=2026):
    """[(name, [byte address or None per lane])] for one access width; ≥ 20 per width."""
    rng = random.Random(seed * 100 + width)
    lanes = range(WARP)
    p = []

    def add(name, addrs):
        p.append((name, [None if a is None else int(a) for a in addrs]))

    # strides in elements of `width` bytes
    for s in (1, 2, 3, 4, 5, 7, 8, 16, 17, 32, 33):
        add(f"stride{s}", [i * s * width for i in lanes])
    # strides in 4-byte words where they keep the access aligned
    for s in (1, 2, 4, 8, 32):
        if (s * 4) % width == 0 and s * 4 != width:
            add(f"word_stride{s}", [i * s * 4 for i in lanes])
    add("broadcast", [64] * WARP)
    add("broadcast_pairs", [(i // 2) * width for i in lanes])
    add("broadcast_quads", [(i // 4) * width for i in lanes])
    add("two_addresses_same_bank", [0 if i < 16 else 128 * 4 for i in lanes])
    add("halves_swapped", [((i + 16) % WARP) * width for i in lanes])
    add("reversed", [(WARP - 1 - i) * width for i in lanes])
    add("xor1", [(i ^ 1) * width for i in lanes])
    add("xor_swizzle_8x4", [((i // 4) * 4 + ((i % 4) ^ (i // 8 % 4))) * width for i in lanes])
    perm = list(lanes)
    rng.shuffle(perm)
    add("permutation", [perm[i] * width for i in lanes])
    add("same_bank_all", [i * 128 for i in lanes])
    add("column_32x32", [(i * 32) * width for i in lanes])
    add("column_32x33_padded", [(i * 33) * width for i in lanes])
    add("tile_8x4_rows", [((i // 8) * 32 + i % 8) * width for i in lanes])
    for k in range(3):
        add(f"random{k}", [rng.randrange(SHARED_BYTES // width // 4) * width for _ in lanes])
    add("random_narrow", [rng.randrange(64) * width for _ in lanes])
    add("even_lanes_only", [i * width if i % 2 == 0 else None for i in lanes])
    add("first_quarter_only", [i * 2 * width if i < 8 else None for i in lanes])
    add("one_lane", [256 if i == 5 else None for i in lanes])
    add("random_half_active", [rng.randrange(256) * width if rng.random() < 0.5 else None
                               for _ in lanes])
    for name, addrs in p:
        assert all(a is None or (a % width == 0 and a + width <= SHARED_BYTES) for a in addrs), name
    return p


def all_patterns():
    """[(kernel name, pattern name, width, addresses)]"""
    out = []
    for w in WIDTHS:
        for i, (name, addrs) in enumerate(patterns(w)):
            out.append((f"bank_w{w}_{i:02d}", name, w, addrs))
    return out


# -- kernels ---------------------------------------------------------------------------------
def build_module(arch="sm_90"):
    m = Module(target=arch)
    for kname, _, width, _ in all_patterns():
        k = m.add_kernel(kname, [Param("table", T.u64, ptr(T.u32)),
                                 Param("out", T.u64, ptr(T.f32))])
        b = Builder(k)
        table, out = b.param("table"), b.param("out")
        buf = b.shared("buf", T.b32, SHARED_BYTES // 4)
        tid = b.special("tid.x")
        off = b.ld("global", T.u32, b.element_addr(table, tid, 4), name="off")
        active = b.setp("ne", off, INACTIVE)
        addr = b.add(b.address_of(buf), off, name="saddr")
        vec = width // 4
        with b.predicated(active):
            vals = b.ld("shared", T.f32, addr, vec=vec, name="v")   # the measured load
        vals = vals if isinstance(vals, tuple) else (vals,)
        acc = vals[0]
        for v in vals[1:]:
            acc = b.add(acc, v, name="s")
        b.st("global", b.element_addr(out, tid, 4), acc)
        b.ret()
    return m


def run():
    """Launch every pattern kernel once (one warp). Under ncu each launch is one profile row."""
    import numpy as np
    from numba import cuda

    from ptxgen.runtime import launch, load_kernel

    dev = cuda.get_current_device()
    arch = "sm_%d%d" % dev.compute_capability
    module = build_module(arch)
    ptx = emit_module(module, arch)
    for kname, name, width, addrs in all_patterns():
        k = load_kernel(ptx, kname, module.kernel(kname).params)
        table = np.array([INACTIVE if a is None else a for a in addrs], dtype=np.uint32)
        out = np.zeros(WARP, dtype=np.float32)
        launch(k, (1, 1, 1), (WARP, 1, 1), [cuda.to_device(table), cuda.to_device(out)])
    print(f"launched {len(all_patterns())} pattern kernels on {arch}", file=sys.stderr)


# -- ncu CSV → data file -------------------------------------------------------------------------
def parse_ncu_csv(text):
    """{kernel name: metric value} from `ncu --csv` output (program output lines skipped)."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise SystemExit("no ncu CSV header (a line starting with \"ID\") in the input")
    values = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") != METRIC:
            continue
        name = row["Kernel Name"].split("(")[0].strip()
        v = row["Metric Value"].replace(",", "").strip()
        if name in values:
            raise SystemExit(f"kernel {name} profiled twice; expected one launch per pattern")
        values[name] = int(float(v))
    return values


def collect(csv_text, out_path):
    measured = parse_ncu_csv(csv_text)
    entries, missing = [], []
    for kname, name, width, addrs in all_patterns():
        if kname not in measured:
            missing.append(kname)
            continue
        entries.append({"name": name, "width": width, "addresses": addrs,
                        "wavefronts": measured[kname], "kernel": kname})
    if missing:
        print(f"warning: no measurement for {len(missing)} kernels: {', '.join(missing[:5])}…",
              file=sys.stderr)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(e) for e in entries) + "\n]\n")
    if os.environ.get("OUT"):
        shutil.copy(out_path, os.environ["OUT"])
    agree = sum(1 for e in entries
                if bank_conflicts(e["addresses"], e["width"]).wavefronts == e["wavefronts"])
    print(f"{len(entries)} patterns → {out_path}; ptxgen's model agrees on {agree}")
    return entries


def list_patterns():
    for kname, name, width, addrs in all_patterns():
        r = bank_conflicts(addrs, width)
        print(f"{kname}  {name:<26} width {width:>2}  lanes {r.active_lanes:>2}  "
              f"wavefronts {r.wavefronts:>2}  ideal {r.ideal}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["run", "collect", "all", "list", "ptx"])
    p.add_argument("csv", nargs="?", help="collect: the ncu CSV file")
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "bank_conflicts_ncu.json"))
    p.add_argument("--ncu", default="ncu", help="all: the ncu executable")
    args = p.parse_args(argv)
    if args.mode == "run":
        run()
    elif args.mode == "list":
        list_patterns()
    elif args.mode == "ptx":
        sys.stdout.write(emit_module(build_module()))
    elif args.mode == "collect":
        if not args.csv:
            p.error("collect needs the ncu CSV file")
        with open(args.csv) as f:
            collect(f.read(), args.out)
    else:
        cmd = [args.ncu, "--clock-control", "none", "--metrics", METRIC, "--csv",
               sys.executable, os.path.abspath(__file__), "run"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr[-4000:])
            return r.returncode
        raw = os.path.splitext(args.out)[0] + ".csv"
        with open(raw, "w") as f:
            f.write(r.stdout)
        collect(r.stdout, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
