"""The simulator's benchmark set: kernels ptxgen did not write, measured on a GPU in one run.

    python benchmarks/model_set.py collect $OUT/model_set.json   # GPU machine
    python benchmarks/model_eval.py docs/data/model_set_<date>.json.gz   # CPU: simulate, compare
    python benchmarks/model_set.py                                # list the cases
    python benchmarks/model_set.py save-triton tests/data/model_set_triton_small.json
                                   # the small Triton cases the CPU tests emulate (Triton, no GPU)

Each case is a kernel (Numba, Triton, hand-written or Builder-made PTX) at one size. The kernel
families are records (model_common.Family: sizes, setup with its check, kernel, tolerance)
registered by their subject modules: cases_numba.py and cases_triton.py (kernels in
model_numba.py and model_triton.py), cases_ptx.py (kernels and records) and model_micro.py
(the fitting microbenchmarks, one mechanism each). On the GPU machine this script compiles
every kernel there and saves the PTX that ran, its launch (grid, block, dynamic shared
memory), its arguments (arrays by shape and dtype, scalars by value) and its GPU time without
launch overhead (ptxgen.runtime.timing held batches: back-to-back launches queued behind a spin
kernel, median of 5 batches). Beside the cases it measures the launch overhead of each launch path (cuda.core
on raw PTX, Numba's dispatcher, Triton's launcher): the CUDA-event time of one launch on an
idle stream minus the same kernel's held-batch GPU time.

SPLITS fixes, per family, the part of the set it belongs to: `fit` (the model may be fitted on
these), `held` and `held2` (held out, fixed before any model change), and the blind groups
held3 .. held11 (kinds of kernel in no other part, built without simulating any of their cases
before the model was frozen; model_eval.py --hide keeps a group unseen while the model
changes). model_eval.py reports each split apart. The table is in the collect's order, which
is the order the cases are measured in (each case's torch seed is its index).
"""
import json
import os
import platform
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import cases_numba  # noqa: E402,F401  (each subject module registers its families)
import cases_ptx  # noqa: E402,F401
import cases_triton  # noqa: E402,F401
import model_micro  # noqa: E402,F401
from model_common import FAMILIES  # noqa: E402

# family -> split, in the collect's order
SPLITS = {
    "saxpy": "fit", "matmul_naive": "fit", "matmul_shared": "fit", "block_reduce": "fit",
    "transpose_padded": "held",
    "stencil1d": "fit",
    "stencil2d": "held",
    "hist_shared": "fit",
    "hist_global": "held", "block_scan": "held", "gather": "held",
    "scatter": "fit",
    "layernorm": "held", "divergent": "held",
    "triton_add": "fit", "triton_matmul": "fit",
    "triton_softmax": "held", "triton_layernorm": "held",
    "copy_v4": "fit", "fma_chain": "fit", "smem_stride": "fit",
    "smem_stride8": "held",
    "smem_stride32": "fit", "atomic_one": "fit", "atomic_spread": "fit", "store_lanes": "fit",
    "gather_hash": "fit", "fit10a_store_ld": "fit", "fit10a_store_gen": "fit",
    "fit10a_lines_l1": "fit", "fit10a_lines_l2": "fit",
    "transpose_naive": "held2", "warp_reduce": "held2", "spmv_csr": "held2", "row_scan": "held2",
    "bitonic_step": "held2", "stencil3d": "held2", "softmax_rows": "held2",
    "strided_copy": "held2", "triton_fused": "held2", "triton_rowmax": "held2",
    "gemv_warp": "held3", "conv3x3_smem": "held3", "hist_warp_bytes": "held3",
    "poly_horner": "held3", "sfu_trig": "held3", "nbody_tiled": "held3", "permute_nchw": "held3",
    "block_compact": "held3", "triton_transpose": "held3", "triton_colsum": "held3",
    "triton_bmm_small": "held3",
    "radix_digits": "held4", "gemv_colmajor": "held4", "inv4x4_batch": "held4",
    "fft_radix2": "held4", "ell_spmv": "held4", "maxpool3x3s2": "held4",
    "bilinear_resize": "held4", "kmeans_assign": "held4", "f64_rk4": "held4", "hash_bits": "held4",
    "mandelbrot": "held4", "triton_rmsnorm": "held4", "triton_gelu": "held4",
    "triton_argmax": "held4", "triton_embbag": "held4", "triton_logsumexp": "held4",
    "ptx_dp4a_dot": "held4", "ptx_xorshift": "held4",
    "csr_expand": "held5", "merge_path": "held5", "pointer_chase": "held5", "bfs_level": "held5",
    "sobel_u8": "held5", "dgemm_tiled": "held5", "conv1d_smem": "held5",
    "find_first_vote": "held5", "atomic_minmax": "held5", "triton_dropout": "held5",
    "triton_xent": "held5", "triton_swish_f16": "held5", "ptx_hfma2_axpy": "held5",
    "ptx_divmod_roll": "held5",
    "quant_int8_rows": "held6", "sort8_network": "held6", "newton_cubic": "held6",
    "complex_mac": "held6", "int4_gemv": "held6", "triton_rope": "held6",
    "triton_causal_softmax": "held6", "triton_adam": "held6", "ptx_cvt_roundtrip": "held6",
    "ptx_prmt_bits": "held6", "ptx_red_scatter": "held6",
    "life_u8": "held7", "bsearch_keys": "held7", "rownorm_f64": "held7", "bitmap_dot": "held7",
    "triton_add_layernorm": "held7", "triton_l2dist": "held7", "triton_masked_mean": "held7",
    "triton_transpose_add": "held7", "ptx_splitmix64": "held7", "ptx_tanh_ex2": "held7",
    "ptx_axpy_v2f64": "held7",
    "xform_points_aos": "held8", "box_rows_running": "held8", "lut_u8": "held8",
    "triton_scale_bias_relu": "held8", "triton_top2": "held8", "triton_cosine_rows": "held8",
    "ptx_quarter_round": "held8", "ptx_round_sat": "held8", "ptx_byte_bins": "held8",
    "tridiag_thomas": "held9", "edit_distance_local": "held9", "bitrev_rows": "held9",
    "im2col3x3": "held9", "triton_group_norm": "held9", "triton_bce_fused": "held9",
    "triton_decode_gqa": "held9", "ptx_tanimoto": "held9", "ptx_modinv_fermat": "held9",
    "ptx_seg_scan_warp": "held9",
    "floyd_warshall_k": "held10", "nv12_to_rgb": "held10", "black_scholes": "held10",
    "triton_layernorm_bwd": "held10", "triton_cumsum_rows": "held10",
    "triton_causal_dwconv": "held10", "ptx_rgb10a2_unpack": "held10", "ptx_sad_match": "held10",
    "ptx_match_hist": "held10",
    "lif_step": "held11", "cic_deposit": "held11", "haversine": "held11",
    "triton_swiglu_f16": "held11", "triton_kl_div_rows": "held11",
    "triton_paged_kv_write": "held11", "ptx_crc32c": "held11", "ptx_morton3d": "held11",
    "ptx_warp_l2norm": "held11",
    "fitd_atom": "fit", "fitd_rows": "fit", "fit14a_store": "fit", "fit14a_sector": "fit",
    "fit14a_pitch": "fit", "fit15b_atom": "fit", "fit15c_sort": "fit",
}
BLIND = tuple(f"held{i}" for i in range(3, 12))       # the groups built blind


def families(split):
    """The families of one split."""
    return {f for f, s in SPLITS.items() if s == split}


def cases():
    """Every case in the collect's order: family, source, size label, split, name and the
    parameters its setup needs."""
    if set(SPLITS) != set(FAMILIES):
        raise ValueError(f"families without a split: {sorted(set(FAMILIES) - set(SPLITS))}, "
                         f"splits without a family: {sorted(set(SPLITS) - set(FAMILIES))}")
    out = []
    for name, split in SPLITS.items():
        for c in FAMILIES[name].cases():
            c["split"] = split
            c["name"] = f"{name} {c['size']}"
            out.append(c)
    return out


# -- GPU side --------------------------------------------------------------------------------
class Gpu:
    def __init__(self):
        import numpy as np
        import torch
        from numba import cuda
        self.np, self.torch, self.cuda = np, torch, cuda
        self.numba_kernels = {}

    # arrays: torch tensors on the device; `desc` records them for the simulator
    def randn(self, *shape):
        return self.torch.randn(*shape, device="cuda", dtype=self.torch.float32)

    def empty(self, *shape, dtype=None):
        t = self.torch.empty(*shape, device="cuda", dtype=dtype or self.torch.float32)
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    def rand(self, *shape):
        return self.torch.rand(*shape, device="cuda", dtype=self.torch.float32)

    def randint(self, low, high, n):
        t = self.torch
        return t.randint(low, high, (n,), device="cuda", dtype=t.int64).to(t.int32)

    def zeros(self, *shape, integer=False):
        t = self.torch
        return t.zeros(*shape, device="cuda", dtype=t.int32 if integer else t.float32)

    def host(self, a):
        return a.cpu().numpy()

    def desc(self, a, init=None):
        """An argument as the simulator sees it; `init` says how the values were drawn when
        they steer addresses (index arrays: the model may draw the same kind of values)."""
        if hasattr(a, "shape") and hasattr(a, "dtype"):
            d = {"array": list(a.shape), "dtype": str(a.dtype).replace("torch.", "")}
            if init is not None:
                d["init"] = init
            return d
        return {"scalar": a, "dtype": "float32" if isinstance(a, float) else "int"}

    def numba(self, family):
        """(dispatcher, PTX, how the PTX was had) of a Numba family, compiled once."""
        import model_numba
        if family not in self.numba_kernels:
            fn, sig = model_numba.KERNELS[family]
            k = self.cuda.jit(sig)(fn)
            try:
                ptx = k.inspect_asm(k.signatures[0])
                how = "dispatcher inspect_asm"
            except Exception:
                ptx, _ = self.cuda.compile_ptx(fn, sig, cc=(9, 0))
                how = "compile_ptx (same signature)"
            self.numba_kernels[family] = (k, ptx, how)
        return self.numba_kernels[family]


def _entry_name(ptx):
    import re
    return re.search(r"\.entry\s+([\w$]+)", ptx).group(1)


def setup(g, c):
    """(launch callable, record dict, check callable or None) of case c."""
    if c["source"] == "numba":
        return _setup_numba(g, c)
    if c["source"] == "triton":
        return _setup_triton(g, c)
    np = g.np
    from ptxgen.parse import parse_ptx
    from ptxgen.runtime.driver import bound_launch, load_kernel
    fam = FAMILIES[c["family"]]
    text, entry = fam.kernel(c)
    kir = parse_ptx(text).kernel(entry)
    k = load_kernel(text, entry, kir.params)
    args, grid, block, check, inits = fam.setup(g, c)
    # parsed PTX declares pointers as plain u64: pass the tensors' addresses
    raw = [np.uint64(a.data_ptr()) if hasattr(a, "data_ptr") else a for a in args]
    go = bound_launch(k, grid, block, raw)
    rec = dict(ptx=text, entry=entry, grid=list(grid), block=list(block), shared=0,
               args=[g.desc(a.item() if isinstance(a, np.generic) else a, inits.get(i))
                     for i, a in enumerate(args)],
               path="cuda.core", registers=k.registers)
    return go, rec, check


def _setup_numba(g, c):
    cuda = g.cuda
    k, ptx, how = g.numba(c["family"])
    args, grid, block, check, inits = FAMILIES[c["family"]].setup(g, c)
    dargs = [cuda.as_cuda_array(a) if hasattr(a, "__cuda_array_interface__") else a
             for a in args]
    grid3, block3 = tuple(grid), tuple(block)

    def go():
        k[grid3, block3](*dargs)
    rec = dict(ptx=ptx, ptx_from=how, entry=_entry_name(ptx), grid=list(grid),
               block=list(block), shared=0,
               args=[g.desc(a, inits.get(i)) for i, a in enumerate(args)], path="numba")
    try:
        rec["registers"] = int(k.get_regs_usage(k.signatures[0]))
    except Exception:
        pass
    return go, rec, check


def _setup_triton(g, c):
    import model_triton
    kname, args, kw, grid, check, inits = FAMILIES[c["family"]].setup(g, c)
    kern = getattr(model_triton, kname)
    ck = kern[grid](*args, **kw)
    md = ck.metadata

    def go():
        kern[grid](*args, **kw)
    block = [32 * int(md.num_warps), 1, 1]
    rec = dict(ptx=ck.asm["ptx"], entry=_entry_name(ck.asm["ptx"]), grid=list(grid),
               block=block, shared=int(md.shared),
               args=[g.desc(a, inits.get(i)) for i, a in enumerate(args)],
               constexprs={k: v for k, v in kw.items() if k.isupper()},
               num_stages=kw.get("num_stages"), path="triton")
    try:
        rec["registers"] = int(ck.n_regs)
    except Exception:
        pass
    return go, rec, check


def single_launch_ms(g, go, n):
    """Median CUDA-event time of one launch on an idle stream (what a lone call sees)."""
    cuda = g.cuda
    ts = []
    for _ in range(n):
        cuda.synchronize()
        s, e = cuda.event(), cuda.event()
        s.record()
        go()
        e.record()
        e.synchronize()
        ts.append(cuda.event_elapsed_time(s, e))
    return float(g.np.median(ts))


def held_batches(g, go):
    """GPU ms per launch: 5 held batches (ptxgen.runtime.timing), all five kept."""
    from ptxgen.runtime import timing
    batch = timing.batch_for(go)
    timing._held_batch(go, max(1, batch // 4))
    return batch, [timing._held_batch(go, batch) for _ in range(5)]


def launch_paths(g):
    """Launch overhead per path: single launch (events, idle stream) minus held-batch time, and
    the host's own time per launch call."""
    import cases_ptx as P
    import model_triton as T
    from ptxgen.parse import parse_ptx
    from ptxgen.runtime.driver import bound_launch, load_kernel
    np, cuda = g.np, g.cuda
    a, b, c = g.randn(1024), g.randn(1024), g.empty(1024)
    text, entry = P.HAND_WRITTEN["empty"]
    k = load_kernel(text, entry, parse_ptx(text).kernel(entry).params)
    raw = bound_launch(k, (1,), (32,), [])
    nk, _, _ = g.numba("empty3")
    da = [cuda.as_cuda_array(t) for t in (a, b, c)]
    T.add_kernel[(1,)](a, b, c, 1024, BLOCK=1024)
    paths = {
        "cuda.core": raw,
        "numba": lambda: nk[(1,), (32,)](*da),
        "triton": lambda: T.add_kernel[(1,)](a, b, c, 1024, BLOCK=1024),
    }
    out = {}
    for name, go in paths.items():
        for _ in range(20):
            go()
        cuda.synchronize()
        t = time.perf_counter()
        for _ in range(300):
            go()
        host_us = (time.perf_counter() - t) / 300 * 1e6
        cuda.synchronize()
        single = single_launch_ms(g, go, 201)
        _, gpu = held_batches(g, go)
        gpu_ms = float(np.median(gpu))
        out[name] = dict(single_launch_us=single * 1e3, gpu_us=gpu_ms * 1e3,
                         overhead_us=(single - gpu_ms) * 1e3, host_call_us=host_us)
    return out


def check_text(err):
    """A check's relative error as the progress line prints it, exponent included (the old
    `!s:>10.9` cut gather_hash's 1.21e-07 to "1.2147079", which read as a failed check)."""
    return "" if err is None else format(err, ".3g")


def collect(path, only=None):
    """Measure every case (only: those whose name contains it, or whose split it names;
    launch paths skipped)."""
    g = Gpu()
    np, torch = g.np, g.torch
    import numba
    import triton
    dev = g.cuda.get_current_device()
    meta = dict(date=time.strftime("%Y-%m-%d"), device=dev.name.decode()
                if isinstance(dev.name, bytes) else str(dev.name),
                python=platform.python_version(), numpy=np.__version__, torch=torch.__version__,
                triton=triton.__version__, numba=numba.__version__,
                timing="ptxgen.runtime.timing held batches, median of 5 (all 5 kept)",
                **{f"{s}_families": sorted(families(s)) for s in ("held", "held2", *BLIND)},
                command="python benchmarks/model_set.py "
                "collect $OUT/model_set.json")
    try:
        import subprocess
        meta["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
             "clocks.mem,power.draw,temperature.gpu", "--format=csv"],
            capture_output=True, text=True, timeout=20).stdout
    except Exception as e:
        meta["nvidia_smi"] = repr(e)
    data = dict(meta=meta, launch={}, cases=[])
    try:
        data["launch"] = {} if only else launch_paths(g)
    except Exception:
        data["launch_error"] = traceback.format_exc()[-2000:]
    for c in (c for c in cases() if not only or only in c["name"] or only == c["split"]):
        rec = dict(c)
        t0 = time.perf_counter()
        try:
            torch.manual_seed(len(data["cases"]))
            go, info, check = setup(g, c)
            rec.update(info)
            go()
            g.cuda.synchronize()
            if check is not None:
                try:                    # a broken check must not lose the case's GPU time
                    rec["rel_error"] = check()
                except Exception:
                    rec["check_error"] = traceback.format_exc()[-1500:]
            batch, ts = held_batches(g, go)
            rec.update(batch=batch, gpu_ms_all=ts, gpu_us=float(np.median(ts)) * 1e3)
            rec["single_launch_us"] = single_launch_ms(g, go, 11) * 1e3
        except Exception:
            rec["error"] = traceback.format_exc()[-1500:]
        rec["wall_s"] = time.perf_counter() - t0
        data["cases"].append(rec)
        print(f"{rec['name']:40s} {rec.get('gpu_us', float('nan')):10.2f} us "
              f"{check_text(rec.get('rel_error')):>10s} {'ERROR' if 'error' in rec else ''}",
              flush=True)
        torch.cuda.empty_cache()
        with open(path, "w") as f:
            json.dump(data, f)
    for name, v in data["launch"].items():
        print(f"launch {name:10s} overhead {v['overhead_us']:7.2f} us  host call "
              f"{v['host_call_us']:7.2f} us  gpu {v['gpu_us']:6.2f} us")
    print(f"{sum('error' not in r for r in data['cases'])}/{len(data['cases'])} cases measured")
    return 0


if __name__ == "__main__":
    if len(sys.argv) in (3, 5) and sys.argv[1] == "collect":    # [--only SUBSTRING]
        sys.exit(collect(sys.argv[2], sys.argv[4] if len(sys.argv) == 5 else None))
    if len(sys.argv) == 3 and sys.argv[1] == "save-triton":   # with Triton, no GPU needed
        from model_common import save_triton_small
        save_triton_small(sys.argv[2], sorted(f for f, fam in FAMILIES.items()
                                              if fam.source == "triton" and fam.small))
        sys.exit(0)
    for c in cases():
        print(f"{c['split']:5s} {c['source']:7s} {c['name']}")
    counts = {s: sum(c["split"] == s for c in cases()) for s in ("held", "held2", *BLIND)}
    print(len(cases()), "cases;", ", ".join(f"{n} in {s}" for s, n in counts.items()))
