"""Long randomized reliability runs on the CPU (no GPU needed), one subcommand each: parser
fuzzing, the IR property tests at nightly size, and the emulator's native engine against its
interpreter on random programs.

    python benchmarks/reliability_cpu.py fuzz --count 100000           # all CPUs but one
    python benchmarks/reliability_cpu.py fuzz --count 300 --workers 1  # a quick one
    python benchmarks/reliability_cpu.py fuzz --repro 1:4242           # input 4242 of seed 1
    python benchmarks/reliability_cpu.py fuzz --count 20000 --analyze  # the analyzer too
    python benchmarks/reliability_cpu.py properties                    # 10 000 programs each
    python benchmarks/reliability_cpu.py properties --programs 500 --json out.json
    python benchmarks/reliability_cpu.py native [N]                    # default 1000 programs

fuzz: mutation fuzzing of the PTX parser: `parse_ptx` must return a Module or raise a located
ParseError, for any input, in bounded time. Each input is a real PTX file from tests/data/ptx
with one to six mutations: truncation, deleted / duplicated / swapped tokens, garbage bytes
(non-UTF-8, NUL, control characters), huge numbers and register ranges, deep nesting of braces /
parentheses / brackets, unbalanced braces, unknown opcodes, undeclared registers, very long
lines, lines spliced from another file, injected directives, unterminated comments and strings.
Input i of seed s is a pure function of (s, i), so any finding is reproduced with --repro s:i.
An input passes when parsing returns a Module whose emitted PTX parses again, or raises a
ParseError whose line and column lie inside the input, whose text is one line starting with
'file:line:col: ', and which is not the parser's internal-error wrapper ('cannot parse: …').
Anything else is a crash; an input that runs longer than --timeout seconds is a hang (the
worker is killed and replaced). With --analyze every module that parses also goes through the
static analyzer (what `ptxgen analyze` runs), which may refuse it with a PtxgenError but must not
crash. Exit status 1 when there was a crash or a hang.

properties: the IR property tests (tests/test_property_ir.py), each over --programs random
programs from tests/irgen.py:
  assemble        verifier + ptxas for sm_80 and sm_90 (8 programs per module, one ptxas call
                  per module and architecture)
  schedule        list scheduling for sm_90 keeps every result (reference interpreter)
  round_trip      emit -> parse keeps every result (reference interpreter)
  emulator        ptxgen.emulate == the reference interpreter (Module and PTX text input)
  emu_schedule    scheduling keeps every result on the emulator (a quarter of --programs)
The emulator properties are skipped while ptxgen.emu is missing. Properties run in parallel
processes (--jobs). A failing property stops at its first (shrunk) counterexample, which is
printed; the exit status is 1 when any property failed.

native: draws N programs from tests/irgen.py (hypothesis, no example database), runs each on the
interpreter and on the native engine (check='off' for both) and compares the output buffers as
the property tests do. Prints progress every 500 programs and, at the end, how many were
bit-identical, how many the native engine refused (with the most common reasons) and how many
differed; the first difference stops the run with the program. The program about to run is
kept in $TMPDIR/native_property_last.txt, so a crash leaves it behind.
"""
import argparse
import collections
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import platform
import random
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from ptxgen.errors import EmulationError, ParseError, PtxgenError  # noqa: E402


def _machine():
    return (f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()})")


def _command():
    return "python benchmarks/reliability_cpu.py " + " ".join(sys.argv[1:])


# -- fuzz: the parser on mutated real PTX ----------------------------------------------------------
DATA = ROOT / "tests" / "data" / "ptx"
FILENAME = "fuzz.ptx"

_TOKEN = re.compile(rb"[A-Za-z_$%.][A-Za-z0-9_$.:]*|0[fFdDxX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?"
                    rb"|\S")
_NUMBER = re.compile(rb"(?<![A-Za-z0-9_$%.])[0-9]+(?:\.[0-9]*)?|0[xX][0-9a-fA-F]+")
_OPCODE = re.compile(rb"(?m)^[ \t]*(?:@!?%\w+[ \t]+)?([a-z][a-z0-9_.:]*)")
_REGISTER = re.compile(rb"%[A-Za-z_$][A-Za-z0-9_$]*")
_BRACKETS = re.compile(rb"[{}()\[\]]")


def corpus():
    """The PTX files mutated, as bytes (sorted by name, so runs are reproducible)."""
    return [p.read_bytes() for p in sorted(DATA.glob("*.ptx"))]


# -- mutations: each takes (rng, data: bytearray, corpus) and returns new bytes ------------------
def _spans(data, pattern=_TOKEN):
    return [m.span() for m in pattern.finditer(data)]


def _pos(rng, data):
    return rng.randrange(len(data) + 1)


def truncate(rng, data, _):
    return data[:_pos(rng, data)]


def delete_tokens(rng, data, _):
    spans = _spans(data)
    for a, b in sorted(rng.sample(spans, min(len(spans), rng.randint(1, 5))), reverse=True):
        del data[a:b]
    return data


def duplicate_tokens(rng, data, _):
    spans = _spans(data)
    if not spans:
        return data
    a, b = rng.choice(spans)
    piece = data[a:b] * rng.choice([1, 2, 3, 50])
    at = rng.choice([b, _pos(rng, data)])
    return data[:at] + b" " + piece + b" " + data[at:]


def swap_tokens(rng, data, _):
    spans = _spans(data)
    if len(spans) < 2:
        return data
    i = rng.randrange(len(spans) - 1)
    j = rng.choice([i + 1, rng.randrange(len(spans))])
    (a, b), (c, d) = sorted([spans[i], spans[j]])
    if b > c:
        return data
    return data[:a] + data[c:d] + data[b:c] + data[a:b] + data[d:]


GARBAGE = [b"\x00", b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
           b"\x80", b"\x1b[31m", b"\r", b"\r\n", b"\t\v\f", b"\xe2\x80\xae", b"\xef\xbb\xbf",
           b"#", b"`", b"\\", b"~", b"?", b"'", b"\x7f", "é".encode(), "∞".encode()]


def insert_garbage(rng, data, _):
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            junk = rng.choice(GARBAGE)
        else:
            junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        at = _pos(rng, data)
        data = data[:at] + junk + data[at:]
    return data


def huge_number(rng, data, _):
    k = rng.choice([20, 40, 400, 5000, 100_000])
    big = rng.choice([b"9" * k, b"0x" + b"f" * k, b"1" + b"0" * k + b".5", b"1e" + b"9" * min(k, 30),
                      b"-" + b"9" * k, b"0f" + b"F" * 8, b"0d" + b"7" * 16, b"0f" + b"1" * k,
                      b"18446744073709551616", b"9223372036854775808", b"-9223372036854775809",
                      b"4294967296", b"0x10000000000000000"])
    spans = _spans(data, _NUMBER)
    if spans and rng.random() < 0.7:
        a, b = rng.choice(spans)
        return data[:a] + big + data[b:]
    forms = [b".reg .b32 %big<" + big + b">;", b".shared .b8 big[" + big + b"];",
             b"mov.u32 %r1, " + big + b";", b"ld.global.u32 %r1, [%rd1+" + big + b"];"]
    at = _pos(rng, data)
    return data[:at] + b"\n" + rng.choice(forms) + b"\n" + data[at:]


def deep_nesting(rng, data, _):
    n = rng.choice([10, 1000, 20_000, 200_000])
    o, c = rng.choice([(b"{", b"}"), (b"(", b")"), (b"[", b"]"), (b"<", b">")])
    piece = rng.choice([o * n, o * n + c * n, c * n, (o + c) * n, (o + b"%r1" + c) * (n // 10 + 1)])
    at = _pos(rng, data)
    return data[:at] + piece + data[at:]


def unbalance(rng, data, _):
    spans = _spans(data, _BRACKETS)
    if spans and rng.random() < 0.6:
        a, b = rng.choice(spans)
        return data[:a] + data[b:]
    at = _pos(rng, data)
    return data[:at] + rng.choice([b"{", b"}", b"(", b")", b"[", b"]"]) + data[at:]


def unknown_opcode(rng, data, _):
    spans = [m.span(1) for m in _OPCODE.finditer(data)]
    name = rng.choice([b"frobnicate", b"add.s99", b"ld.global.v16.f32", b"x" * 300, b"mov..u32",
                       b"setp.lt.banana", b"ld.", b"bra.uni.uni.uni", b"a" + b".b" * 2000,
                       b"cvt.rn", b"st"])
    if spans:
        a, b = rng.choice(spans)
        return data[:a] + name + data[b:]
    return data + b"\n" + name + b";\n"


def undeclared_register(rng, data, _):
    spans = _spans(data, _REGISTER)
    name = rng.choice([b"%undeclared", b"%r999999", b"%p", b"%", b"%%", b"%tid.w", b"%r1.x.y",
                       b"%" + b"z" * 5000])
    if spans:
        a, b = rng.choice(spans)
        return data[:a] + name + data[b:]
    return data + name


def long_line(rng, data, _):
    n = rng.choice([10_000, 200_000, 1_000_000])
    unit = rng.choice([b"a", b"9", b" ", b", %r1", b"+1", b"\t", b"%r1 ", b"$L__BB0_1", b"//"])
    piece = unit * (n // len(unit))
    at = _pos(rng, data)
    return data[:at] + piece + data[at:]


def splice(rng, data, files):
    other = rng.choice(files).split(b"\n")
    a = rng.randrange(len(other))
    piece = b"\n".join(other[a:a + rng.randint(1, 30)])
    at = _pos(rng, data)
    return data[:at] + b"\n" + piece + b"\n" + data[at:]


DIRECTIVES = [b".reg .b32 %r<5>;", b".reg .pred %p;", b".version 99.99", b".version 8",
              b".target", b".target sm_999", b".address_size 48", b".entry k(", b".func (",
              b".visible .entry x()\n{\n", b".shared .b8 x[", b".section .debug_info {",
              b"$L__X:", b"$L__X:\n$L__X:", b"@%p1 bra $L__nowhere;", b"@!%r1 ret;",
              b".param .u64 .ptr .global .align 0 p", b".loc 1 2 3", b".file 1 \"",
              b".pragma \"nounroll\";", b".maxntid 1, 2, 3, 4, 5", b".extern .shared .b8 s[];",
              b".global .align 4 .b8 g[4] = {1, 2, 3, 4, 5};", b".const .f32 c = 0f3F800000;",
              b"{ .reg .b32 %t; }", b"call (%r1), f, (%r2);", b".alias a, b;",
              b".weak .extern .func f;", b".common .global .u32 c;"]


def insert_directive(rng, data, _):
    lines = data.split(b"\n")
    at = rng.randrange(len(lines) + 1)
    lines.insert(at, rng.choice(DIRECTIVES))
    return b"\n".join(lines)


def lines_edit(rng, data, _):
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    kind = rng.randrange(3)
    if kind == 0:
        del lines[i]
    elif kind == 1:
        lines.insert(i, lines[i])
    else:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def unterminated(rng, data, _):
    at = _pos(rng, data)
    return data[:at] + rng.choice([b"/*", b"\"", b"//", b"/* */ /*", b"\"\\", b"'"]) + data[at:]


def flip_bytes(rng, data, _):
    for _ in range(rng.randint(1, 8)):
        if data:
            i = rng.randrange(len(data))
            data[i] = rng.randrange(256)
    return data


MUTATORS = [truncate, delete_tokens, duplicate_tokens, swap_tokens, insert_garbage, huge_number,
            deep_nesting, unbalance, unknown_opcode, undeclared_register, long_line, splice,
            insert_directive, lines_edit, unterminated, flip_bytes]


def make_input(seed, index, files):
    """Input `index` of `seed`: (payload, as_text, mutator names). as_text: the bytes are given
    to the parser as a str (undecodable bytes become lone surrogates), else as bytes."""
    rng = random.Random(f"{seed}:{index}")
    data = bytearray(rng.choice(files))
    names = []
    for _ in range(min(6, 1 + int(rng.expovariate(0.8)))):
        m = rng.choice(MUTATORS)
        names.append(m.__name__)
        data = bytearray(m(rng, data, files))
    return bytes(data), rng.random() < 0.5, names


# -- checking one input ------------------------------------------------------------------------
def check_one(payload, as_text, analyze=False):
    """'parsed' or 'error' when the parser behaved; otherwise ('crash', description).
    analyze: also run the static analyzer (what `ptxgen analyze` does) on parsed modules; it
    may refuse one with a PtxgenError, never crash."""
    from ptxgen.emit import emit_module
    from ptxgen.parse import parse_ptx
    text = payload.decode("utf-8", "surrogateescape" if as_text else "replace")
    try:
        module = parse_ptx(text if as_text else payload, FILENAME)
    except ParseError as e:
        problem = located_error_problem(e, text)
        return ("crash", f"bad ParseError: {problem}: {str(e)[:300]!r}") if problem else "error"
    except Exception as e:          # noqa: BLE001 - anything else is exactly what we look for
        return "crash", f"{type(e).__name__} from parse_ptx: {_tb(e)}"
    try:
        again = emit_module(module)
    except PtxgenError:
        return "parsed"             # e.g. a target the emitter has no version for: reported
    except Exception as e:          # noqa: BLE001
        return "crash", f"{type(e).__name__} from emit_module of a parsed module: {_tb(e)}"
    try:
        parse_ptx(again, "reemitted.ptx")
    except ParseError as e:
        return "crash", f"emitted PTX of a parsed module does not parse: {str(e)[:300]}"
    except Exception as e:          # noqa: BLE001
        return "crash", f"{type(e).__name__} parsing re-emitted PTX: {_tb(e)}"
    if analyze:
        from ptxgen.analysis.analyzer import analyze as run_analysis
        try:
            run_analysis(module).to_text()
        except PtxgenError:
            pass
        except Exception as e:      # noqa: BLE001
            return "crash", f"{type(e).__name__} from the analyzer on a parsed module: {_tb(e)}"
    return "parsed"


def located_error_problem(e, text):
    """What is wrong with a ParseError's location or text, or None."""
    s = str(e)
    if "\n" in s or "\r" in s:
        return "message spans several lines"
    if e.message.startswith("cannot parse"):
        return "internal error wrapped as a ParseError"
    if not s.startswith(f"{FILENAME}:{e.line}:{e.col}: "):
        return "message does not start with file:line:col"
    lines = text.split("\n")
    if not 1 <= e.line <= len(lines):
        return f"line {e.line} outside 1..{len(lines)}"
    if not 1 <= e.col <= len(lines[e.line - 1]) + 1:
        return f"column {e.col} outside 1..{len(lines[e.line - 1]) + 1}"
    return None


def _tb(e):
    frames = traceback.extract_tb(e.__traceback__)[-3:]
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames))
    return f"{str(e)[:200]!r} at {where}"


# -- the long run --------------------------------------------------------------------------------
def _worker(wid, seed, start, stop, stride, current, results, analyze=False):
    files = corpus()
    counts = {"parsed": 0, "error": 0}
    last_flush = time.monotonic()
    for index in range(start, stop, stride):
        payload, as_text, names = make_input(seed, index, files)
        current[wid] = index
        t0 = time.monotonic()
        out = check_one(payload, as_text, analyze)
        dt = time.monotonic() - t0
        current[wid] = -1
        if isinstance(out, tuple):
            results.put(("crash", index, out[1], names, dt))
        else:
            counts[out] += 1
        if dt > 1.0:
            results.put(("slowest", index, dt))
        if time.monotonic() - last_flush > 2.0:
            results.put(("counts", wid, dict(counts)))
            counts = {"parsed": 0, "error": 0}
            last_flush = time.monotonic()
    results.put(("counts", wid, dict(counts)))
    results.put(("done", wid))


def fuzz(count, seed=1, workers=None, timeout=20.0, crash_dir=None, progress=True,
         analyze=False):
    """Run inputs 0..count-1 of `seed` over worker processes; returns a summary dict."""
    workers = workers or max(1, (os.cpu_count() or 2) - 1)
    ctx = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
    current = ctx.Array("q", [-1] * workers, lock=False)
    results = ctx.Queue()
    procs = {}

    def launch(wid, start):
        p = ctx.Process(target=_worker, args=(wid, seed, start, count, workers, current, results,
                                              analyze), daemon=True)
        p.start()
        procs[wid] = p

    t0 = time.monotonic()
    for w in range(workers):
        launch(w, w)
    totals = {"parsed": 0, "error": 0}
    crashes, hangs, slow = [], [], []
    done = set()
    watch = {}                       # wid -> (index, first seen running)
    last_report = t0
    while len(done) < workers:
        try:
            msg = results.get(timeout=0.5)
        except Exception:            # queue.Empty
            msg = None
        if msg is not None:
            kind = msg[0]
            if kind == "counts":
                for k, v in msg[2].items():
                    totals[k] += v
            elif kind == "crash":
                crashes.append({"index": msg[1], "what": msg[2], "mutations": msg[3]})
                _save(crash_dir, seed, msg[1], msg[2])
            elif kind == "slowest":
                slow.append((msg[2], msg[1]))
            elif kind == "done":
                done.add(msg[1])
        now = time.monotonic()
        for wid, p in list(procs.items()):
            if wid in done:
                continue
            idx = current[wid]
            if idx < 0:
                watch.pop(wid, None)
                continue
            seen = watch.get(wid)
            if seen is None or seen[0] != idx:
                watch[wid] = (idx, now)
            elif now - seen[1] > timeout:
                p.kill()
                p.join()
                hangs.append({"index": idx, "seconds": round(now - seen[1], 1)})
                _save(crash_dir, seed, idx, f"hang: no result after {timeout} s")
                watch.pop(wid, None)
                current[wid] = -1
                if idx + workers < count:
                    launch(wid, idx + workers)
                else:
                    done.add(wid)
            if not p.is_alive() and wid not in done and current[wid] < 0 and p.exitcode:
                # a worker died (killed by the OS, say) without reporting: its range is lost
                crashes.append({"index": None, "what": f"worker {wid} died with exit code "
                                f"{p.exitcode}", "mutations": []})
                done.add(wid)
        if progress and now - last_report > 30:
            n = totals["parsed"] + totals["error"] + len(crashes) + len(hangs)
            print(f"  {n}/{count} inputs, {now - t0:.0f} s, {len(crashes)} crashes, "
                  f"{len(hangs)} hangs", flush=True)
            last_report = now
    for p in procs.values():
        p.join(timeout=5)
    elapsed = time.monotonic() - t0
    slow.sort(reverse=True)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": _machine(),
        "command": _command(),
        "seed": seed, "workers": workers, "timeout_s": timeout, "analyze": analyze,
        "inputs": totals["parsed"] + totals["error"] + len(crashes) + len(hangs),
        "parsed": totals["parsed"], "parse_errors": totals["error"],
        "crashes": crashes, "hangs": hangs, "seconds": round(elapsed, 1),
        "slowest": [{"index": i, "seconds": round(s, 2)} for s, i in slow[:5]],
    }


def _save(crash_dir, seed, index, what):
    if not crash_dir or index is None:
        return
    d = Path(crash_dir)
    d.mkdir(parents=True, exist_ok=True)
    payload, as_text, names = make_input(seed, index, corpus())
    (d / f"input-{seed}-{index}.ptx").write_bytes(payload)
    (d / f"input-{seed}-{index}.txt").write_text(
        f"seed {seed} index {index} as_text={as_text} mutations={names}\n{what}\n")


def repro(spec, analyze=False):
    seed, index = (int(x) for x in spec.split(":"))
    payload, as_text, names = make_input(seed, index, corpus())
    print(f"seed {seed} index {index}: {len(payload)} bytes, as_text={as_text}, mutations {names}")
    t0 = time.monotonic()
    print(check_one(payload, as_text, analyze), f"({time.monotonic() - t0:.2f} s)")


def fuzz_main(args):
    if args.repro:
        repro(args.repro, args.analyze)
        return 0
    s = fuzz(args.count, args.seed, args.workers, args.timeout, args.crash_dir,
             analyze=args.analyze)
    text = json.dumps(s, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 1 if s["crashes"] or s["hangs"] else 0


# -- properties: the IR property tests at nightly size --------------------------------------------
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


def properties_main(args):
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
        "machine": _machine(),
        "command": _command(),
        "seconds": round(time.monotonic() - t0, 1),
        "results": [{k: (v[:2000] if isinstance(v, str) else v) for k, v in r.items()}
                    for r in results],
    }
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "results"}))
    return 1 if any(r.get("failure") for r in results) else 0


# -- native: the native engine against the interpreter on random programs --------------------------
LAST = os.path.join(tempfile.gettempdir(), "native_property_last.txt")


def native_run(case, engine):
    from case_args import case_arguments

    from ptxgen.emu import emulate
    arrays, args = case_arguments(case)
    emulate(case.module, case.kernel.name, (case.grid, 1, 1), (case.block, 1, 1), *args,
            check="off", engine=engine)
    return {n: a.tobytes() for n, a in arrays.items()}


def native_main(args):
    from hypothesis import HealthCheck, given, settings

    import irgen
    n = args.programs
    stats, why = collections.Counter(), collections.Counter()

    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    @given(irgen.programs())
    def check(case):
        want = native_run(case, "interp")
        with open(LAST, "w") as f:
            f.write(case.describe())
        try:
            got = native_run(case, "native")
        except EmulationError as e:
            stats["refused"] += 1
            msg = str(e)
            why[msg.split("`")[1].split()[0] if "`" in msg else msg[:80]] += 1
        else:
            diff = case.outputs_equal(want, got)
            stats["identical" if diff is None else "different"] += 1
            if diff is not None:
                print(f"DIFFERENT: {diff}\n{case.describe()}", flush=True)
                os._exit(1)
        if sum(stats.values()) % 500 == 0:
            print(dict(stats), flush=True)
    check()
    print(f"{sum(stats.values())} programs: {dict(stats)}")
    print("most common refusals:", why.most_common(10))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="run", required=True)
    ap = sub.add_parser("fuzz", help="mutation fuzzing of the PTX parser")
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=None, help="default: CPUs - 1")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds before an input is a hang")
    ap.add_argument("--crash-dir", default=os.path.join(tempfile.gettempdir(), "ptxgen-fuzz"),
                    help="where failing inputs are saved")
    ap.add_argument("--json", help="also write the summary here")
    ap.add_argument("--repro", metavar="SEED:INDEX", help="re-run one input and print the outcome")
    ap.add_argument("--analyze", action="store_true",
                    help="also run the static analyzer on every module that parses")
    ap = sub.add_parser("properties", help="the IR property tests at nightly size")
    ap.add_argument("--programs", type=int, default=10_000, help="programs per property")
    ap.add_argument("--properties", default="assemble,schedule,round_trip,emulator,emu_schedule")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    ap.add_argument("--json", help="also write the summary here")
    ap = sub.add_parser("native", help="the native engine against the interpreter")
    ap.add_argument("programs", type=int, nargs="?", default=1000, help="how many programs")
    args = p.parse_args(argv)
    return {"fuzz": fuzz_main, "properties": properties_main, "native": native_main}[args.run](
        args)


if __name__ == "__main__":
    sys.exit(main())
