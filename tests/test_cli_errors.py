"""Every ptxgen command fails cleanly on bad input: a non-zero exit, exactly one line on stderr
('ptxgen: error: …'), no traceback. The commands are the ones `python -m ptxgen --help` lists,
so a new command is covered the day it appears.

Each command gets an unknown option, a missing file, a directory, a path through a regular file
and (when not running as root, for whom nothing is unreadable) an unreadable file as its
argument, and each of its value-taking options gets a value that is not valid for anything (an
unwritable path that is also no number, name or architecture) after arguments that are valid on
their own. `ptxgen analyze` on truncated, garbage, unknown-opcode, unbalanced and empty PTX must
name the place: 'FILE:LINE:COL: …'.

Each command's unknown-option case runs as its own `python -m ptxgen` process (the real entry
point); the other cases run one after another in a single helper process that calls
`ptxgen.cli.main(argv)` the way `python -m ptxgen` does, so imports are paid once. There, an
exception escaping main() counts as a traceback. A module fixture runs everything once and the
tests only read the results.
"""
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "ptx"
VALID_PTX = DATA / "hand_loops.ptx"
NONSENSE = "@@not-valid@@"

# Arguments that are valid on their own for the commands known today; an option's bad value
# is appended to these so that the option itself, not a missing argument, is what fails.
BASE_ARGS = {
    "emit": ["saxpy"],
    "run": ["saxpy", "--backend", "emu", "--n", "64"],
    "compare": ["saxpy", "--no-gpu"],
    "analyze": [str(VALID_PTX)],
    "isa": ["sm_90"],
    "simulate": ["saxpy"],
    "occupancy": ["--threads", "128", "--regs", "32"],
}


def run_cli(args, timeout=300):
    p = subprocess.run([sys.executable, "-m", "ptxgen", *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


# Runs a list of argv (JSON on stdin) through ptxgen.cli.main as `python -m ptxgen` would:
# stdout and stderr captured per invocation, an escaping exception printed as Python would.
DRIVER = r"""
import contextlib, io, json, sys, traceback
from ptxgen.cli import main
results = []
for argv in json.load(sys.stdin):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            rc = 1
    results.append([rc, out.getvalue()[-2000:], err.getvalue()[-4000:]])
json.dump(results, sys.stdout)
"""


def run_in_one_process(argvs, timeout=600):
    p = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(argvs),
                       capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return [tuple(r) for r in json.loads(p.stdout)]


def listed_commands():
    """Subcommand names from `ptxgen --help` (the block under 'COMMAND')."""
    rc, out, _ = run_cli(["--help"])
    assert rc == 0
    block = out.split("COMMAND\n", 1)[1].split("\noptions:", 1)[0]
    return re.findall(r"^ {4}([a-z][a-z0-9_-]*)", block, re.M)


def value_options(command):
    """(option, kind) for each option of `command` that takes a value, from its parser."""
    from ptxgen.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    opts = []
    for a in sub.choices[command]._actions:
        if not a.option_strings or a.nargs == 0 or a.dest == "help":
            continue
        opts.append(max(a.option_strings, key=len))
    return opts


COMMANDS = listed_commands()


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    ptx = VALID_PTX.read_text()
    body_at = ptx.index("ld.param")
    files = {
        "missing": d / "no-such-dir" / "missing.ptx",
        "directory": d,
        "through_file": d / "plain.ptx" / "x.ptx",
        "unreadable": d / "unreadable.ptx",
        "bad_value": d / "no-such-dir" / NONSENSE,
        "empty": d / "empty.ptx",
        "truncated": d / "truncated.ptx",
        "garbage": d / "garbage.ptx",
        "unknown_opcode": d / "unknown_opcode.ptx",
        "unbalanced": d / "unbalanced.ptx",
    }
    (d / "plain.ptx").write_text(ptx)
    files["unreadable"].write_text(ptx)
    files["unreadable"].chmod(0)
    files["empty"].write_text("")
    files["truncated"].write_text(ptx[:ptx.index("fma.rn.f32")])
    files["garbage"].write_bytes(ptx[:body_at].encode() + b"\x00\xff\xfe garbage \x80\x81\n"
                                 + ptx[body_at:].encode())
    files["unknown_opcode"].write_text(ptx.replace("fma.rn.f32", "frobnicate.rn.f32", 1))
    files["unbalanced"].write_text(ptx[:body_at] + "{\n" + ptx[body_at:])
    return files


def invocations(paths):
    """(id, argv, expect_location, own_process) for every check."""
    cases = []
    for c in COMMANDS:
        cases.append((f"{c}-unknown-option", [c, "--definitely-not-an-option"], False, True))
        for what in ("missing", "directory", "through_file", "unreadable"):
            if what == "unreadable" and os.geteuid() == 0:
                continue
            cases.append((f"{c}-{what}", [c, str(paths[what])], False, False))
        for opt in value_options(c):
            cases.append((f"{c}-{opt}", [c, *BASE_ARGS.get(c, []), opt, str(paths["bad_value"])],
                          False, False))
    if "analyze" in COMMANDS:
        for what in ("empty", "truncated", "garbage", "unknown_opcode", "unbalanced"):
            cases.append((f"analyze-{what}-ptx", ["analyze", str(paths[what])], True, False))
    return cases


@pytest.fixture(scope="module")
def results(paths):
    cases = invocations(paths)
    own = [(cid, argv) for cid, argv, _, alone in cases if alone]
    shared = [(cid, argv) for cid, argv, _, alone in cases if not alone]
    with cf.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        futures = {cid: ex.submit(run_cli, argv) for cid, argv in own}
        batch = ex.submit(run_in_one_process, [argv for _, argv in shared])
        got = {cid: f.result() for cid, f in futures.items()}
        got.update({cid: r for (cid, _), r in zip(shared, batch.result())})
    return {cid: (argv, loc, got[cid]) for cid, argv, loc, _ in cases}


def check_one_line_error(argv, rc, out, err):
    shown = f"ptxgen {' '.join(argv)}\nrc={rc}\nstdout={out[-500:]!r}\nstderr={err[-2000:]!r}"
    assert rc != 0, shown
    assert "Traceback" not in err and "Traceback" not in out, shown
    lines = err.splitlines()
    assert len(lines) == 1, shown
    assert lines[0].startswith("ptxgen: error: "), shown
    return lines[0]


def test_help_lists_every_registered_command():
    from ptxgen.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sorted(COMMANDS) == sorted(sub.choices)
    assert len(COMMANDS) >= 5


def test_every_command_rejects_bad_arguments_in_one_line(results):
    failures = []
    for cid, (argv, loc, (rc, out, err)) in sorted(results.items()):
        if loc:
            continue
        try:
            check_one_line_error(argv, rc, out, err)
        except AssertionError as e:
            failures.append(f"[{cid}] {e}")
    assert not failures, "\n\n".join(failures)


def located(results, paths, what):
    if "analyze" not in COMMANDS:
        pytest.skip("no analyze command yet")
    argv, _, (rc, out, err) = results[f"analyze-{what}-ptx"]
    line = check_one_line_error(argv, rc, out, err)
    m = re.match(r"ptxgen: error: (.+?):(\d+):(\d+): \S", line)
    assert m, line
    assert m.group(1) == str(paths[what])
    n_lines = Path(paths[what]).read_bytes().count(b"\n") + 1
    assert 1 <= int(m.group(2)) <= n_lines and int(m.group(3)) >= 1, line
    return line, int(m.group(2))


@pytest.mark.parametrize("what", ["empty", "truncated", "garbage", "unbalanced"])
def test_analyze_bad_ptx_names_file_line_and_column(results, paths, what):
    located(results, paths, what)


def test_analyze_unknown_opcode_names_the_instruction(results, paths):
    line, lineno = located(results, paths, "unknown_opcode")
    text = Path(paths["unknown_opcode"]).read_text().split("\n")
    assert "frobnicate" in text[lineno - 1] and "frobnicate" in line, line


def test_library_errors_name_flags_only_in_their_cli_spelling():
    """An error raised outside ptxgen/cli names a command-line flag only as the CLI spelling
    of an errors.Arg (Python callers read the argument's name; the CLI prints cli_text). The
    command line's own spec parsers (*_from_spec) are the exception."""
    import ast
    flag = re.compile(r"(?<![\w-])--[a-z]")
    bad = []
    for path in sorted((ROOT / "ptxgen").rglob("*.py")):
        if "cli" in path.relative_to(ROOT / "ptxgen").parts[:1]:
            continue
        tree = ast.parse(path.read_text())
        cli_parts = {id(n.args[1]) for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and getattr(n.func, "id", None) == "Arg" and len(n.args) == 2}
        spec_parsers = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                        and n.name.endswith("_from_spec")]
        skip = {id(x) for f in spec_parsers for x in ast.walk(f)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or id(node) in skip:
                continue
            inside = {id(x) for n in ast.walk(node) if id(n) in cli_parts for x in ast.walk(n)}
            for c in ast.walk(node):
                if isinstance(c, ast.Constant) and isinstance(c.value, str) and \
                        flag.search(c.value) and id(c) not in inside:
                    bad.append(f"{path.relative_to(ROOT)}:{c.lineno}: {c.value!r}")
    assert not bad, "\n".join(bad)


def test_checks_can_fail():
    """The one-line check rejects a traceback, two lines, success and a bare message."""
    for rc, err in ((1, "Traceback (most recent call last):\n  x\nValueError: y\n"),
                    (1, "ptxgen: error: a\nptxgen: error: b\n"), (0, "ptxgen: error: a\n"),
                    (1, "something went wrong\n")):
        with pytest.raises(AssertionError):
            check_one_line_error(["x"], rc, "", err)
