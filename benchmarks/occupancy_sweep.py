"""Occupancy ground truth (run on a GPU): ask the driver how many blocks fit, for many kernels.

    python benchmarks/occupancy_sweep.py                 # writes tests/data/occupancy_sweep_<arch>.json
    python benchmarks/occupancy_sweep.py --dry-run       # no GPU: emit + ptxas only, print registers

Kernels are built with ptxgen's builder to hold K values live at once (K volatile loads, all of
which the first FMA of a chain needs), so ptxas must give them about K+few registers; a few also
declare static shared arrays. Nothing is launched: for each kernel, block size, dynamic shared size
and carveout preference the script calls the driver's occupancy API
(numba: ctx.get_active_blocks_per_multiprocessor → cuOccupancyMaxActiveBlocksPerMultiprocessor)
and records the kernel's real register count (fn.attrs.regs) next to the answer. Each kernel's
dynamic shared limit is first raised to the device maximum (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_
SIZE_BYTES), as a launch above 48 KB would need.

Output: a JSON list of {threads, regs, smem, static_smem, dynamic_smem, carveout, blocks, kernel}
(smem = static + dynamic; carveout null = no preference), and <name>.meta.json with the device.
tests/test_occupancy.py compares ptxgen.analysis.occupancy against it.
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxgen import emit_module  # noqa: E402
from ptxgen.ir import Addr, Builder, Instr, Module, Param, ptr  # noqa: E402
from ptxgen.ir import types as T  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Live values per kernel: ptxas gives these kernels about 10 to 255 registers (checked with --dry-run).
LIVE = [1, 6, 10, 14, 18, 22, 24, 26, 30, 34, 40, 46, 56, 60, 72, 88, 100, 120, 128, 150, 170,
        200, 230, 250]
STATIC_SMEM = [(30, 8192), (60, 32768), (100, 49152 - 1024)]     # (live, static shared bytes)
THREADS = [32, 64, 96, 100, 128, 192, 256, 320, 384, 512, 640, 768, 800, 1024]
CARVEOUT_THREADS = [64, 128, 256, 512, 1024]
DYN_KB = [0, 1, 2, 4, 8, 16, 24, 40, 47, 49, 64, 100, 113, 150, 200, 227]
CARVEOUTS = [None, 0, 10, 25, 50, 75, 100]         # % preference; a subset of kernels only


def live_kernel(name, live, static_smem=0, arch="sm_90"):
    """A kernel whose first FMA needs all `live` volatile loads at once."""
    m = Module(target=arch)
    k = m.add_kernel(name, [Param("x", T.u64, ptr(T.f32)), Param("out", T.u64, ptr(T.f32))])
    b = Builder(k)
    x, out = b.param("x"), b.param("out")
    tid = b.special("tid.x")
    base = b.element_addr(x, b.mul(tid, live, name="row"), 4)
    vals = []
    for i in range(live):
        # volatile loads are neither merged nor reordered, so all are issued before the first use
        v = b.reg(T.f32, "v")
        b.emit(Instr("ld", ("volatile", "global", "f32"), (v, Addr(base, 4 * i))))
        vals.append(v)
    acc = vals[0]
    for j in range(1, live):
        acc = b.fma(acc, vals[j], vals[live - j], name="acc")
    if static_smem:
        tile = b.shared("tile", T.f32, static_smem // 4)
        sa = b.address_of(tile)
        slot = b.add(sa, b.shl(tid, 2, name="o"), name="slot")
        b.st("shared", slot, acc)
        b.bar_sync()
        acc = b.ld("shared", T.f32, b.xor(slot, 4, name="peer"), name="acc")
    b.st("global", b.element_addr(out, tid, 4), acc)
    b.ret()
    return m


def kernels(arch):
    ks = [(f"live{n}", n, 0) for n in LIVE]
    ks += [(f"live{n}_smem{s}", n, s) for n, s in STATIC_SMEM]
    return [(name, n, s, emit_module(live_kernel(name, n, s, arch), arch)) for name, n, s in ks]


def dry_run(arch):
    from ptxgen import toolchain
    for name, n, s, ptx in kernels(arch):
        r = toolchain.assemble(ptx, arch).resources[name]
        print(f"{name:<22} live {n:>3}  regs {r.registers:>3}  smem {r.shared_bytes:>6}  "
              f"spill {r.spills}")


def sweep(arch_override=None):
    from numba import cuda
    from numba.cuda.cudadrv.driver import get_version

    from ptxgen.runtime import load_kernel

    dev = cuda.get_current_device()
    cc = dev.compute_capability
    arch = arch_override or f"sm_{cc[0]}{cc[1]}"
    ctx = cuda.current_context()
    optin = dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    entries = []
    for idx, (name, n, static, ptx) in enumerate(kernels(arch)):
        k = load_kernel(ptx, name, [])
        fn = k.fn
        regs, static_real = fn.attrs.regs, fn.attrs.shared
        max_dyn = optin - static_real
        k.max_dynamic_shared(max_dyn)
        # carveout preferences on every third kernel, fewer block sizes: keeps the file small
        plans = [(None, THREADS)] + [(c, CARVEOUT_THREADS) for c in CARVEOUTS[1:] if idx % 3 == 0]
        # one request just over the kernel's limit: the API must answer 0 (or refuse)
        dyn_sizes = sorted({min(int(kb * 1024), max_dyn) for kb in DYN_KB} | {max_dyn + 128})
        for carve, threads_list in plans:
            fn.set_shared_memory_carveout(-1 if carve is None else carve)
            for threads in threads_list:
                for dyn in dyn_sizes:
                    err = None
                    try:
                        blocks = ctx.get_active_blocks_per_multiprocessor(fn, threads, dyn)
                    except Exception as e:          # recorded, never guessed
                        blocks = None
                        err = str(e).splitlines()[0] if str(e) else type(e).__name__
                    entry = {"threads": threads, "regs": regs, "smem": static_real + dyn,
                             "static_smem": static_real, "dynamic_smem": dyn,
                             "carveout": carve, "blocks": blocks, "kernel": name}
                    if err is not None:
                        entry["error"] = err
                    entries.append(entry)
        fn.set_shared_memory_carveout(-1)
    # one entry per distinct configuration
    seen, unique = set(), []
    for e in entries:
        key = (e["threads"], e["regs"], e["static_smem"], e["dynamic_smem"], e["carveout"])
        if key not in seen:
            seen.add(key)
            unique.append(e)
    meta = {"device": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
            "compute_capability": list(cc), "arch": arch, "driver_version": list(get_version()),
            # the device's own limits, to check isa/<arch>.toml's header against
            "multiprocessor_count": dev.MULTIPROCESSOR_COUNT,
            "max_shared_memory_per_multiprocessor": dev.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            "max_shared_memory_per_block_optin": optin,
            "reserved_shared_memory_per_block": dev.RESERVED_SHARED_MEMORY_PER_BLOCK,
            "max_registers_per_multiprocessor": dev.MAX_REGISTERS_PER_MULTIPROCESSOR,
            "max_threads_per_multiprocessor": dev.MAX_THREADS_PER_MULTIPROCESSOR,
            "max_blocks_per_multiprocessor": dev.MAX_BLOCKS_PER_MULTIPROCESSOR,
            "l2_cache_size": dev.L2_CACHE_SIZE,
            "configs": len(unique), "errors": sum(1 for e in unique if e["blocks"] is None)}
    return arch, unique, meta


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="output JSON (default tests/data/occupancy_sweep_<arch>.json)")
    p.add_argument("--dry-run", action="store_true", help="emit and assemble only (no GPU)")
    p.add_argument("--arch", default=None, help="with --dry-run: target (default sm_90)")
    args = p.parse_args(argv)
    if args.dry_run:
        dry_run(args.arch or "sm_90")
        return 0
    arch, entries, meta = sweep()
    out = args.out or os.path.join(ROOT, "tests", "data", f"occupancy_sweep_{arch}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:                  # one configuration per line
        f.write("[\n" + ",\n".join(json.dumps(e) for e in entries) + "\n]\n")
    meta_path = out[:-len(".json")] + ".meta.json"
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    if os.environ.get("OUT"):                   # the device runner collects $OUT
        for path in (out, meta_path):
            shutil.copy(path, os.environ["OUT"])
    print(f"{meta['device']} ({arch}): {meta['configs']} configurations, {meta['errors']} "
          f"errors → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
