"""Mutation fuzzing of the PTX parser (a CI-sized sample of benchmarks/reliability_cpu.py fuzz).

Real PTX files, mutated (truncation, token edits, garbage and non-UTF-8 bytes, huge numbers,
deep nesting, unbalanced braces, unknown opcodes, undeclared registers, very long lines …),
must parse to a Module whose emitted PTX parses again (and which the static analyzer takes
without crashing), or raise a ParseError located inside the input — nothing else, and never
hang: the sample runs in a worker process that is killed
when one input takes longer than the timeout. The long run is
`python benchmarks/reliability_cpu.py fuzz --count 100000`; its results are in
docs/RELIABILITY.md.

Inputs that once crashed are kept below as regression tests.
"""
import os
from pathlib import Path

import pytest

from ptxgen import emit_module
from ptxgen.errors import ParseError
from ptxgen.ir import Imm
from ptxgen.ir import types as T
from ptxgen.parse import parse_ptx

import reliability_cpu as fz

ROOT = Path(__file__).resolve().parent.parent

SEED = int(os.environ.get("PTXGEN_FUZZ_SEED", "8"))
COUNT = int(os.environ.get("PTXGEN_FUZZ_COUNT", "300"))
TIMEOUT = 15.0


def test_mutated_real_ptx_parses_or_fails_with_a_located_error(tmp_path):
    s = fz.fuzz(COUNT, seed=SEED, workers=min(2, os.cpu_count() or 1), timeout=TIMEOUT,
                crash_dir=tmp_path, progress=False, analyze=True)
    assert not s["hangs"], f"inputs of seed {SEED} ran over {TIMEOUT} s: {s['hangs']} " \
                           f"(reproduce with benchmarks/reliability_cpu.py fuzz --repro {SEED}:INDEX)"
    assert not s["crashes"], "\n".join(
        f"--repro {SEED}:{c['index']} {c['mutations']}: {c['what']}" for c in s["crashes"])
    assert s["inputs"] == COUNT
    # the mutations reach both outcomes: a fuzzer whose inputs all fail (or all parse) tests
    # one path only
    assert s["parsed"] >= COUNT // 20 and s["parse_errors"] >= COUNT // 2


def test_every_mutator_changes_its_input():
    import random
    files = fz.corpus()
    for m in fz.MUTATORS:
        changed = 0
        for i in range(20):
            rng = random.Random(f"m:{m.__name__}:{i}")
            base = rng.choice(files)
            changed += bytes(m(rng, bytearray(base), files)) != base
        assert changed >= 10, m.__name__


def test_inputs_are_reproducible():
    files = fz.corpus()
    assert fz.make_input(3, 17, files) == fz.make_input(3, 17, files)
    assert fz.make_input(3, 17, files) != fz.make_input(3, 18, files)


def test_checker_flags_what_it_must():
    """check_one tells a crash from a clean ParseError (the fuzzer can fail)."""
    good = (ROOT / "tests" / "data" / "ptx" / "hand_loops.ptx").read_bytes()
    assert fz.check_one(good, True) == "parsed"
    assert fz.check_one(good[:good.index(b"fma.rn")], True) == "error"
    text = good.decode()
    e = ParseError("boom", 999, 1, fz.FILENAME)
    assert "outside" in fz.located_error_problem(e, text)
    e = ParseError("boom", 1, 10_000, fz.FILENAME)
    assert "outside" in fz.located_error_problem(e, text)
    e = ParseError("cannot parse: IndexError: x", 1, 1, fz.FILENAME)
    assert "internal" in fz.located_error_problem(e, text)
    e = ParseError("two\nlines", 1, 1, fz.FILENAME)
    assert "several lines" in fz.located_error_problem(e, text)
    assert fz.located_error_problem(ParseError("fine", 1, 1, fz.FILENAME), text) is None


# -- regressions: inputs the fuzzer found ------------------------------------------------------
HEAD = ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"


@pytest.mark.parametrize("literal,bits", [("1e39", "0f7F800000"), ("-1e39", "0fFF800000"),
                                          ("3.5e38", "0f7F800000")])
def test_out_of_range_single_precision_literal_emits_infinity(literal, bits):
    """Found by fuzz seed 1 input 5 (a huge number in mov.f32): emitting the parsed module
    raised OverflowError from struct. ptxas reads such a literal as an infinity."""
    m = parse_ptx(HEAD + f".reg .f32 %f<2>;\nmov.f32 %f1, {literal};\nret;\n}}\n")
    text = emit_module(m)
    assert f"mov.f32 %f1, {bits};" in text
    parse_ptx(text)


def test_builder_immediate_beyond_single_precision_is_infinity():
    assert str(Imm(1e300, T.f32)) == "0f7F800000"
    assert str(Imm(-1e300, T.f32)) == "0fFF800000"
    assert str(Imm(3.4028235e38, T.f32)) == "0f7F7FFFFF"         # rounds to the largest float
    assert str(Imm(float("inf"), T.f32)) == "0f7F800000"
