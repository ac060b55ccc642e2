"""ptxgen lift: every PTX file of the corpus → a Python script → PTX that ptxas turns into the
same SASS as the original; readable names and loops; one-line errors for --kernel."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ptxgen.cli import main
from ptxgen.emit import emit_module
from ptxgen.errors import PtxgenError
from ptxgen.lift import lift_ptx
from ptxgen.lift.names import identifier
from ptxgen.names import short_name as demangle_base
from ptxgen.parse import parse_ptx
from ptxgen.toolchain import assemble, disassemble

DATA = Path(__file__).parent / "data" / "ptx"
FILES = sorted(DATA.glob("*.ptx"))
ROOT = Path(__file__).resolve().parents[1]

_ADDR = re.compile(r"/\*[0-9a-f]{4,}\*/")            # instruction addresses
_ENC = re.compile(r"/\* 0x[0-9a-f]+ \*/")             # encodings (compared via the text)
_LABEL = re.compile(r"\.L_x_\d+")


def normalized_sass(sass):
    lines = []
    for line in sass.splitlines():
        line = _LABEL.sub(".L", _ENC.sub("", _ADDR.sub("", line))).strip()
        if line and not line.startswith("//"):
            lines.append(line)
    return lines


def _ptxas_args(text):
    target = re.search(r"^\s*\.target\s+([^;/\n]+)", text, re.M).group(1)
    names = [t.strip() for t in target.split(",")]
    return names[0], (0 if "debug" in names else 3)   # debug PTX only assembles at -O0


def run_script(path):
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_lifted_script_assembles_to_the_same_sass(path, tmp_path):
    text = path.read_text()
    script = tmp_path / "kernel.py"
    assert main(["lift", str(path), "-o", str(script)]) == 0
    ptx = run_script(script)
    # the script rebuilds the parsed module statement for statement (restoring the target
    # options and the '+0' address offsets the IR does not keep)
    assert re.sub(r"\+0\]", "]", ptx) == emit_module(parse_ptx(text, path.name)).replace(
        f".target {parse_ptx(text).target}\n", f".target {_target_line(text)}\n", 1)
    arch, opt = _ptxas_args(text)
    mine = assemble(ptx, arch, opt_level=opt)
    orig = assemble(text, arch, opt_level=opt)
    a, b = normalized_sass(disassemble(mine.cubin)), normalized_sass(disassemble(orig.cubin))
    assert len(a) > 5 and a == b
    assert {k: r.registers for k, r in mine.resources.items()} == \
        {k: r.registers for k, r in orig.resources.items()}


def _target_line(text):
    target = re.search(r"^\s*\.target\s+([^;/\n]+)", text, re.M).group(1)
    return ", ".join(t.strip() for t in target.split(","))


def test_normalized_sass_tells_different_code_apart():
    # the comparison must see an instruction change, not just the opcode list
    a = "/*0010*/  IADD3 R1, R2, R3, RZ ; /* 0x000 */\n.L_x_3:\n"
    b = "/*0020*/  IADD3 R1, R2, R4, RZ ; /* 0x000 */\n.L_x_7:\n"
    assert normalized_sass(a) != normalized_sass(b)
    assert normalized_sass(a) == normalized_sass(a.replace("/*0010*/", "/*0030*/"))


def test_builder_methods_loops_and_names():
    src = lift_ptx((DATA / "numba_matmul_naive_sm90.ptx").read_text(), "m.ptx")
    assert "def build_matmul_naive(m):" in src
    assert "MATMUL_NAIVE_PTX_NAME = '_ZN8__main__12matmul_naive" in src
    assert "with loop(b, '$L__BB0_" in src               # the K loop is a structured region
    assert re.search(r"\n {8}b\.fma\(", src)            # …with its fma indented inside
    for call in ("b.setp(", "b.ld('param'", "b.branch(", "b.mul(", "declare_range(k, '%r'"):
        assert call in src
    compile(src, "lifted.py", "exec")
    hand = lift_ptx((DATA / "hand_loops.ptx").read_text(), "hand_loops.ptx")
    assert hand.count("with loop(b,") >= 2               # nested loops: two regions


def test_guarded_runs_are_grouped():
    src = lift_ptx((DATA / "triton_add.ptx").read_text(), "triton_add.ptx")
    assert re.search(r"with b\.predicated\(\w+(\[\d+\])?(, negate=True)?\):", src)


def test_demangled_names():
    assert demangle_base("_ZN8__main__4histB2v1B92cw51cE5ArrayIfLi1E") == "hist"
    assert demangle_base("_ZN8__main__12block_reduceB3v12E") == "block_reduce"
    assert demangle_base("matmul_kernel") == "matmul_kernel"
    assert identifier("class") == "class_"
    assert identifier("$L__x", {"L__x"}) == "L__x_1"
    assert identifier("9lives") == "_9lives"


def test_kernel_selection(tmp_path):
    path = DATA / "numba_block_reduce_debug_sm90.ptx"
    src = lift_ptx(path.read_text(), path.name, kernel="block_reduce")
    assert src.count("m.add_kernel(") == 2               # the entry and the function it calls
    one = lift_ptx((DATA / "hand_features.ptx").read_text(), "f.ptx", kernel="feat")
    assert "def build_features(m):" in one


def test_kernel_errors_are_one_line(tmp_path, capsys):
    two = tmp_path / "two.ptx"
    body = "{\n\tret;\n}\n"
    two.write_text(".version 8.0\n.target sm_90\n.address_size 64\n"
                   f".visible .entry hist_a()\n{body}.visible .entry hist_b()\n{body}")
    with pytest.raises(PtxgenError, match=r"ambiguous .*hist_a, hist_b"):
        lift_ptx(two.read_text(), "two.ptx", kernel="hist")
    assert main(["lift", str(two), "--kernel", "nope"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'nope'" in err and "hist_a, hist_b" in err
    assert main(["lift", str(tmp_path / "missing.ptx")]) == 1
    assert "cannot read" in capsys.readouterr().err
