"""Nightly-size run of the IR property tests (tests/test_property_ir.py) on random programs.

    python benchmarks/property_nightly.py                       # 10 000 programs per property
    python benchmarks/property_nightly.py --programs 500 --json out.json

Properties, each over --programs random programs from tests/irgen.py:
  assemble        verifier + ptxas for sm_80 and sm_90 (8 programs per module, one ptxas call
                  per module and architecture)
  schedule        list scheduling for sm_90 keeps every result (reference interpreter)
  round_trip      emit -> parse keeps every result (reference interpreter)
  emulator        ptxgen.emulate == the reference interpreter (Module and PTX text input)
  emu_schedule    scheduling keeps every result on the emulator (a quarter of --programs)
The emulator properties are skipped while ptxgen.emu is missing. Properties run in parallel
processes (--jobs). A failing property stops at its first (shrunk) counterexample, which is
printed; the exit status is 1 when any property failed.
"""
import argparse
import concurrent.futures as cf
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

BATCH = 8


def run_property(name, programs, seed):
    """Run one property over `programs` programs; returns a result dict (never raises)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    import irgen
    stats = {"programs": 0, "instructions": 0, "threads": 0}

    def count(cases):
        for c in cases:
            stats["programs"] += 1
            stats["instructions"] += c.n_instructions
            stats["threads"] += c.threads

    examples = programs
    if name == "assemble":
        examples = -(-programs // BATCH)
        strategy = st.lists(irgen.programs(), min_size=BATCH, max_size=BATCH)

        def body(cases):
            count(cases)
            irgen.check_assembles(cases)
    elif name in ("emulator", "emu_schedule") and irgen.emulator() is None:
        return {"property": name, "skipped": "ptxgen.emu is not there"}
    elif name == "schedule":
        strategy = irgen.programs()

        def body(case):
            count([case])
            irgen.check_schedule(case)
    elif name == "round_trip":
        strategy = irgen.programs()

        def body(case):
            count([case])
            irgen.check_round_trip(case)
    elif name == "emulator":
        strategy = st.tuples(irgen.programs(), st.booleans())

        def body(pair):
            count([pair[0]])
            irgen.check_emulator(pair[0], via_text=pair[1])
    elif name == "emu_schedule":
        examples = max(1, programs // 4)
        strategy = irgen.programs()

        def body(case):
            count([case])
            irgen.check_schedule(case, run=lambda c, k: irgen.run_emulator(c, k))
    else:
        raise ValueError(name)

    test = given(strategy)(body)
    test = settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))(test)
    if seed is not None:
        test = hseed(seed)(test)
    t0 = time.monotonic()
    failure = None
    try:
        test()
    except Exception as e:          # noqa: BLE001 - the counterexample is the result
        failure = f"{type(e).__name__}: {e}"
    return {"property": name, "examples": examples, **stats,
            "seconds": round(time.monotonic() - t0, 1), "failure": failure}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=10_000, help="programs per property")
    ap.add_argument("--properties", default="assemble,schedule,round_trip,emulator,emu_schedule")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    ap.add_argument("--json", help="also write the summary here")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.properties.split(",") if n.strip()]
    t0 = time.monotonic()
    results = []
    with cf.ProcessPoolExecutor(max_workers=max(1, min(args.jobs, len(names)))) as ex:
        futures = [ex.submit(run_property, n, args.programs, args.seed) for n in names]
        for f in cf.as_completed(futures):
            r = f.result()
            results.append(r)
            status = "skipped: " + r["skipped"] if "skipped" in r else (
                "FAILED" if r["failure"] else "ok")
            print(f"{r['property']:<13} {r.get('programs', 0):>7} programs "
                  f"{r.get('seconds', 0):>8.1f} s  {status}", flush=True)
            if r.get("failure"):
                print(r["failure"], flush=True)
    results.sort(key=lambda r: names.index(r["property"]))
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, "
                   f"Python {platform.python_version()})",
        "command": "python benchmarks/property_nightly.py " + " ".join(argv or sys.argv[1:]),
        "seconds": round(time.monotonic() - t0, 1),
        "results": [{k: (v[:2000] if isinstance(v, str) else v) for k, v in r.items()}
                    for r in results],
    }
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "results"}))
    return 1 if any(r.get("failure") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
