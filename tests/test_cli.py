"""CLI: outputs and one-line errors with non-zero exits."""
import re

import pytest

from ptxgen.cli import main
from ptxgen.errors import LaunchError, PtxgenError


@pytest.mark.parametrize("argv,fragment", [
    (["emit", "nope"], "unknown kernel 'nope'"),
    (["emit", "matmul", "--M", "-4"], "must be positive"),
    (["emit", "matmul", "--M", "abc"], "not an integer"),
    (["emit", "saxpy", "--arch", "sm_70"], "unknown arch 'sm_70'"),
    (["emit", "saxpy", "-o", "/nonexistent/dir/x.ptx"], "cannot write"),
    (["run", "saxpy", "--backend", "tpu"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
    (["emit", "matmull"], "known: add, attention, matmul"),
    (["emit", "saxpy", "--dtype", "bf16"], "--dtype applies to matmul and attention only"),
])
def test_bad_arguments_give_one_line(cli, argv, fragment):
    rc, out, err = cli(*argv)
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in err
    assert not lines[0].startswith("ptxgen: error: ptxgen:")


def test_bare_ptxgen_prints_the_commands(cli):
    """No command: a short usage and every command with its one-line help, exit 2."""
    from ptxgen.cli import COMMANDS
    rc, out, err = cli()
    assert rc == 2 and out == "" and "error" not in err
    assert err.startswith("usage: ptxgen COMMAND")
    listed = [line.split()[0] for line in err.splitlines() if line.startswith("  ") and
              not line.startswith("    ")]
    assert listed == COMMANDS
    assert max(map(len, err.splitlines())) <= 100


def test_errors_name_flags_on_the_command_line_and_arguments_in_python(cli):
    """One refusal, two interfaces: Python argument words from Python, flags from the CLI."""
    from ptxgen.ops.tc_matmul import TcMatmul
    op = TcMatmul("bf16", a_layout="col")
    with pytest.raises(PtxgenError) as e:
        op.build(op.shape(M=64, N=64, K=64), "sm_80")
    assert "a_layout='col'" in str(e.value) and "arch='sm_90a'" in str(e.value)
    assert "--" not in str(e.value)
    rc, out, err = cli("run", "matmul", "--dtype", "bf16", "--a-layout", "col", "--arch",
                       "sm_80", "--backend", "emu")
    assert rc == 1 and "--a-layout col" in err and "(use --arch sm_90a)" in err
    assert "a_layout=" not in err and "arch=" not in err
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        from ptxgen.runtime.driver import numba_cuda
        with pytest.raises(LaunchError) as e:
            numba_cuda()
        assert "ptxgen.emulate" in str(e.value) and "--backend" not in str(e.value)
        rc, out, err = cli("run", "saxpy", "--backend", "gpu")
        assert rc == 1 and "--backend emu" in err and "ptxgen.emulate" not in err


def test_run_ragged_gemm_on_the_emulator_with_progress():
    """The issue's run: M=100000 rows of bf16 on the emulated tensor cores (wgmma, TMA) passes
    its float64 check; with stderr on a terminal a progress line counts the CTAs, erased at
    the end; with --quiet there is none."""
    import os
    import subprocess
    import sys
    import time
    argv = [sys.executable, "-m", "ptxgen", "run", "matmul", "--dtype", "bf16", "--M", "100000",
            "--N", "45", "--K", "40", "--backend", "emu", "--check"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for quiet in (False, True):
        master, slave = os.openpty()
        t0 = time.perf_counter()
        p = subprocess.run(argv + ["--quiet"] * quiet, stdout=subprocess.PIPE, stderr=slave,
                           text=True, cwd=root)
        seconds = time.perf_counter() - t0
        os.close(slave)
        err = _read_all(master)
        assert p.returncode == 0, err
        assert "ran on the CPU emulator" in p.stdout and "check: PASS" in p.stdout
        drawn = re.findall(r"emulating tc_matmul: (\d+)/132 CTAs done", err)
        if quiet:
            assert not drawn
        elif seconds > 3:                   # a line is drawn once a launch has run a second
            assert drawn and list(map(int, drawn)) == sorted(map(int, drawn)), err
            assert err.endswith(" \r"), err                   # and erased at the end


def _read_all(fd):
    import os
    chunks = []
    while True:
        try:
            b = os.read(fd, 65536)
        except OSError:                     # EIO: the other side closed
            break
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks).decode()


def test_tune_help_documents_the_cache_directory(cli):
    rc, out, err = cli("tune", "--help")
    assert rc == 0
    for name in ("PTXGEN_CACHE_DIR", "~/.cache/ptxgen", "tune/", "ptxas/", "PTXGEN_TUNE_CACHE"):
        assert name in out, name


@pytest.mark.parametrize("argv", [
    ("compare", "matmul", "--no-gpu"),
    ("roofline", "saxpy", "matmul", "softmax"),
    ("simulate", "saxpy"),
])
def test_reports_fit_a_terminal_unless_wide(cli, argv):
    """At most 100 columns by default (tables rearranged, long lines wrapped); --wide gives
    the lines whole."""
    rc, out, err = cli(*argv)
    assert rc == 0, err
    assert max(map(len, out.splitlines())) <= 100, out
    rc, wide, err = cli(*argv, "--wide")
    assert rc == 0 and max(map(len, wide.splitlines())) > 100
    if argv[0] == "roofline":                       # the same words, only the line breaks
        assert wide.split() == out.split()


def test_fit_wraps_under_the_last_column():
    from ptxgen.cli.common import fit
    line = "    L2     8,204 GB/s     " + "measured on the H200 by ptxgen calibrate " * 4
    lines = fit(line).splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 100
    hang = line.index("measured")                      # under the last column's start
    assert all(x.startswith(" " * hang) and x[hang] != " " for x in lines[1:])
    assert fit(line, wide=True) == line


def test_cta_progress_draws_only_on_a_terminal():
    import io
    import time
    from ptxgen.cli.progress import CtaProgress

    class Tty(io.StringIO):
        def isatty(self):
            return True
    for file, enabled, shown in ((Tty(), True, True), (io.StringIO(), True, False),
                                 (Tty(), False, False)):
        with CtaProgress(enabled, file=file, every=0.05) as progress:
            progress("k", 0, 8)
            time.sleep(0.2)
            progress("k", 4, 8)
            time.sleep(0.2)
            progress("k", 8, 8)
        text = file.getvalue()
        assert ("emulating k: 4/8 CTAs done" in text) == shown, text
        assert text.endswith("\r") or not text         # the line is erased at the end


def test_emit_prints_ptx(cli, tmp_path):
    rc, out, err = cli("emit", "matmul", "--M", "67", "--N", "45", "--K", "33", "--arch", "sm_80")
    assert rc == 0 and ".target sm_80" in out and ".entry matmul" in out
    f = tmp_path / "s.ptx"
    assert cli("emit", "saxpy", "-o", str(f))[0] == 0
    assert ".entry saxpy" in f.read_text()


def test_main_returns_codes():
    assert main(["emit", "saxpy", "-o", "/dev/null"]) == 0
    assert main(["emit", "bogus"]) == 1


def test_compare_static_side_by_side(cli):
    """Without a GPU: both kernels assembled, counted and printed; the dict has the same figures."""
    from ptxgen.ops import get_operator
    from ptxgen.reports.compare import compare
    op = get_operator("saxpy")
    c = compare(op, op.shape(n=1000), "sm_90", gpu=False, paths=("llvm", "nvvm"))  # CLI default
    d = c.to_dict()
    assert d["operator"] == "saxpy" and d["ours"]["registers"] > 0 and d["theirs"]["registers"] > 0
    assert set(d["via"]) == {"ptxgen→LLVM", "ptxgen→NVVM"}
    assert d["ours"]["ok"] is None                  # nothing ran
    rc, out, err = cli("compare", "saxpy", "--n", "1000", "--no-gpu")
    assert rc == 0 and err == ""
    # Numba's mangled kernel name carries a count of what the process compiled before it (it
    # differs between this process and the CLI's): compared without it
    def unmangled(text):
        return re.sub(r"_Z\S+", "<mangled>", text.strip())
    assert unmangled(out) == unmangled(c.to_text())
    assert "registers" in out and str(c.ours.sass_instructions) in out


def test_run_says_which_instruction_path_and_kernels_ran(cli):
    rc, out, err = cli("run", "matmul", "--dtype", "bf16", "--M", "33", "--N", "20", "--K", "19",
                       "--backend", "emu", "--check")
    assert rc == 0, err
    assert "path: wgmma (sm_90a); kernels pad_copy_b16, pad_copy_b16, tc_matmul" in out
    rc, out, err = cli("run", "matmul", "--dtype", "bf16", "--M", "33", "--N", "24", "--K", "32",
                       "--arch", "sm_80", "--backend", "emu", "--check")
    assert rc == 0, err
    assert "path: mma.sync (sm_80); kernels tc_matmul" in out
