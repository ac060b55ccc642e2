"""Simulate every case of a model-set run (benchmarks/model_set.py) on the CPU and compare.

    python benchmarks/model_eval.py docs/data/model_set_2026-12-02h_onerun.json.gz [--json OUT]
           [-j N] [--only SUBSTRING] [--hide SPLIT]

For each measured case: the saved PTX is parsed, its arguments rebuilt in the kernel's own
parameter order (Numba passes an array as meminfo, parent, nitems, itemsize, data, shape...,
strides...; Triton drops integer arguments equal to 1 and appends two scratch pointers), and
ptxgen.sim predicts the kernel's device time with the register count the driver reported.
The prediction's `device_us` is compared with the held-batch GPU time (no launch overhead);
the launch overhead of each path is reported apart. MAPE is given per split of the data file
(fit, held, held2, ...: fixed before any fitting; held3 onwards built blind and evaluated once
with the model frozen) and for the aggregates the model is judged on: the kernels (every case but
the fitting microbenchmarks of model_micro.py), their fitting part, the held-out part and the
microbenchmarks, each with its count of cases beyond +-50 %; --hide held6 keeps a group unseen
while the model is being changed.
"""
import argparse
import gzip
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

ITEMSIZE = {"float32": 4, "int32": 4, "int64": 8, "float64": 8, "float16": 2, "uint8": 1,
            "int8": 1}


class Pointer:
    """An array argument: the simulator gives it a synthetic address."""

    def __init__(self, what):
        self.what = what


def pointer(d, rng=None):
    """What the simulator gets for an array argument: the values themselves when the run
    recorded how they were drawn (`init`: index arrays, whose values steer addresses; drawn
    again here), else a placeholder. `rng` is the case's one generator (sim_args), so a case's
    arrays are drawn independently, as the GPU run drew them: two sorted inputs of a merge
    drawn each from a fresh seed 0 were the same array, and every binary search on the merge
    diagonal ended in its middle. Without it a fresh seed-0 generator (the first array a case
    draws is the same either way)."""
    init = d.get("init") if isinstance(d, dict) else None
    if not init:
        return Pointer(d)
    n, dt = int(np.prod(d["array"])), np.dtype(d["dtype"])
    rng = rng if rng is not None else np.random.default_rng(0)
    if init["kind"] == "randint":
        v = rng.integers(init["low"], init["high"], size=n)
        return (np.sort(v) if init.get("sorted") else v).astype(dt)
    if init["kind"] == "offsets":           # CSR row offsets: a scan of random row lengths,
        lens = rng.integers(init["low"], init["high"], size=n - 1)   # held within the arrays
        off = np.concatenate([[0], np.cumsum(lens)])                 # the run recorded
        return np.minimum(off, init.get("total", off[-1])).astype(dt)
    if init["kind"] == "randn":             # values that steer branches (an early exit)
        return rng.standard_normal(n, dtype=np.float32).astype(dt)
    if init["kind"] == "randperm":
        return rng.permutation(n).astype(dt)
    if init["kind"] == "arange":
        return (np.arange(n) * init.get("step", 1)).astype(dt)
    raise ValueError(f"unknown init {init['kind']!r}")


def _nbytes(d):
    return int(np.prod(d["array"])) * ITEMSIZE[d["dtype"]]


def sim_args(case, params):
    """The case's argument values in the PTX parameter order."""
    src, out = case["source"], []
    rng = np.random.default_rng(0)
    if src == "numba":
        for d in case["args"]:
            if "array" in d:
                shape, isz = d["array"], ITEMSIZE[d["dtype"]]
                strides = [isz * int(np.prod(shape[k + 1:])) for k in range(len(shape))]
                out += [0, 0, int(np.prod(shape)), isz, pointer(d, rng), *shape, *strides]
            else:
                out.append(d["scalar"])
    elif src == "triton":
        for d in case["args"]:
            if "array" in d:
                out.append(pointer(d, rng))
            elif d["dtype"] == "int" and d["scalar"] == 1:
                continue                    # Triton specialises integers equal to 1 away
            else:
                out.append(d["scalar"])
        out += [Pointer("scratch")] * (len(params) - len(out))
    else:
        out = [pointer(d, rng) if "array" in d else d["scalar"] for d in case["args"]]
    if len(out) != len(params):
        raise ValueError(f"{case['name']}: {len(out)} arguments for {len(params)} parameters")
    return out


def predict(case, **kw):
    from ptxgen.parse import parse_ptx
    from ptxgen.sim import simulate
    module = parse_ptx(case["ptx"])
    kernel = module.kernel(case["entry"])
    args = sim_args(case, kernel.params)
    footprint = sum(_nbytes(d) for d in case["args"] if "array" in d)
    t, c = time.perf_counter(), time.process_time()
    rep = simulate(kernel, case["grid"], case["block"], args=args,
                   shared_bytes=case.get("shared", 0), module=module,
                   registers=case.get("registers"), footprint=footprint, **kw)
    predict.cpu_s = time.process_time() - c
    return rep, time.perf_counter() - t


def _bound(d):
    b = d["details"].get("bound") or {}
    r = b.get("resource", "")
    return f"{r} ({b['waiting_on']})" if "waiting_on" in b else f"{r} {100 * b.get('share', 0):.0f}%"


def _one(case):
    try:
        rep, wall = predict(case, launch_path=case.get("path", "cuda.core"))
        d = rep.to_dict()
        return dict(name=case["name"], device_us=rep.device_us, time_us=rep.time_us,
                    wall_s=wall, cpu_s=predict.cpu_s, bound=_bound(d), stalls=rep.stalls)
    except Exception as e:                      # one bad case must not lose the table
        return dict(name=case["name"], error=f"{type(e).__name__}: {e}"[:300])


def summarize(cases, preds):
    rows = []
    for c in cases:
        p = preds.get(c["name"])
        if p is None or "error" in p or "gpu_us" not in c:
            continue
        err = (p["device_us"] - c["gpu_us"]) / c["gpu_us"]
        rows.append(dict(name=c["name"], split=c["split"], source=c["source"],
                         family=c["family"],
                         measured_us=c["gpu_us"], predicted_us=p["device_us"], error=err,
                         wall_s=p["wall_s"], cpu_s=p["cpu_s"], bound=p.get("bound"),
                         single_launch_us=c.get("single_launch_us"),
                         predicted_time_us=p["time_us"]))
    out = {}
    micro = micro_families()
    splits = sorted({r["split"] for r in rows}, key=lambda s: (s != "fit", len(s), s))
    # the aggregates the model is judged on: the kernels (every case but the fitting
    # microbenchmarks, which measure one mechanism each), their fitting and held-out parts
    groups = {part: (lambda r, part=part: r["split"] == part) for part in splits}
    groups.update({
        "all": lambda r: True,
        "kernels": lambda r: r["family"] not in micro,
        "fit_kernels": lambda r: r["split"] == "fit" and r["family"] not in micro,
        "held_out": lambda r: r["split"] != "fit",
        "micro": lambda r: r["family"] in micro})
    for part, inside in groups.items():
        e = [abs(r["error"]) for r in rows if inside(r)]
        out[part] = dict(n=len(e), mape=100 * float(np.mean(e)) if e else float("nan"),
                         beyond_50=sum(x > 0.5 for x in e))
    e = [abs(r["predicted_time_us"] - r["single_launch_us"]) / r["single_launch_us"]
         for r in rows if r.get("single_launch_us")]
    out["single_launch"] = dict(n=len(e), mape=100 * float(np.mean(e)) if e else float("nan"))
    worst = max(rows, key=lambda r: abs(r["error"]), default=None)
    return rows, out, worst


def micro_families():
    """The fitting microbenchmarks (model_micro.py: hand-written PTX measuring one mechanism
    each): their cases are reported apart from the kernels."""
    sys.path.insert(0, HERE)
    import model_micro  # noqa: F401  (registers its families)
    from model_common import FAMILIES
    return {n for n, f in FAMILIES.items() if f.setup.__module__ == "model_micro"}


def load_set(path):
    """A measured model set (benchmarks/model_set.py collect), .json or gzip-compressed .json.gz
    (superseded sets are stored compressed)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--json", help="write rows and summary here")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--only", help="cases whose name contains this")
    ap.add_argument("--hide", action="append", default=[],
                    help="a split (e.g. held3) whose cases are not simulated or shown: a "
                         "held-out group stays unseen while the model changes")
    a = ap.parse_args(argv)
    data = load_set(a.data)
    cases = [c for c in data["cases"] if "gpu_us" in c and c["split"] not in a.hide
             and (not a.only or a.only in c["name"])]
    with ProcessPoolExecutor(a.jobs) as ex:
        preds = {p["name"]: p for p in ex.map(_one, cases)}
    rows, summary, worst = summarize(cases, preds)
    print(f"{'case':36s} {'split':5s} {'measured':>9s} {'predicted':>9s} {'error':>8s} "
          f"{'cpu s':>6s}  bound")
    for r in rows:
        print(f"{r['name']:36s} {r['split']:5s} {r['measured_us']:9.2f} "
              f"{r['predicted_us']:9.2f} {100 * r['error']:+7.1f}% {r['cpu_s']:6.2f}  "
              f"{r['bound'] or ''}")
    for n, p in preds.items():
        if "error" in p:
            print(f"{n:36s} simulation failed: {p['error']}")
    for part, s in summary.items():
        what = ("time_us (device + the path's launch overhead from the isa file) against one "
                "launch timed with events" if part == "single_launch" else "device time")
        print(f"MAPE {part:11s} ({s['n']} cases, {what}): {s['mape']:.2f}%"
              + (f", {s['beyond_50']} beyond +-50%" if "beyond_50" in s else ""))
    if worst:
        print(f"worst: {worst['name']} {100 * worst['error']:+.1f}%")
    slow = max(rows, key=lambda r: r["cpu_s"])
    print(f"slowest simulation: {slow['name']}, {slow['cpu_s']:.2f} s of CPU "
          f"({slow['wall_s']:.2f} s wall; load average {os.getloadavg()[0]:.1f})")
    for name, v in data.get("launch", {}).items():
        print(f"launch overhead {name:10s} {v['overhead_us']:6.2f} us (single launch "
              f"{v['single_launch_us']:.2f} us, GPU {v['gpu_us']:.2f} us)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(rows=rows, summary=summary, launch=data.get("launch", {}),
                           meta=data.get("meta", {})), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
