"""`ptxgen analyze` as a user runs it: a subprocess, its exit status, stdout and stderr."""
import json
from pathlib import Path

import pytest


from test_parse import independent_opcodes

DATA = Path(__file__).resolve().parent / "data" / "ptx"


def _one_error_line(rc, out, err):
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ptxgen: error: ")
    assert "Traceback" not in err and out == ""
    return lines[0]


def test_json_counts_match_independent_count(cli):
    path = DATA / "numba_matmul_shared_sm90.ptx"
    rc, out, err = cli("analyze", str(path), "--json")
    assert rc == 0, err
    d = json.loads(out)
    (k,) = d["kernels"]
    assert k["instructions"] == len(independent_opcodes(path.read_text()))
    assert k["loops"] and k["blocks"] and k["register_pressure"]["max_live_total"] > 0


def test_text_report(cli):
    rc, out, err = cli("analyze", str(DATA / "hand_loops.ptx"), "--arch", "sm_80")
    assert rc == 0 and err == ""
    assert "entry loops" in out and "Loops" in out and "$L__inner" in out


def test_kernel_option(cli):
    rc, out, err = cli("analyze", str(DATA / "hand_features.ptx"), "--kernel", "twice",
                       "--json")
    assert rc == 0, err
    assert [k["name"] for k in json.loads(out)["kernels"]] == ["twice"]


def test_stdin(cli):
    import subprocess
    import sys
    text = (DATA / "hand_loops.ptx").read_text()
    p = subprocess.run([sys.executable, "-m", "ptxgen", "analyze", "-", "--json"], input=text,
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["kernels"][0]["instructions"] == 27


def test_parse_error_is_one_line_with_position(cli, tmp_path):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 7.8\n.target sm_80\n.address_size 64\n.entry k()\n{\n"
                   " .reg .b32 %r<2>;\n add.s32 %r1, %r0 %r1;\n}\n")
    line = _one_error_line(*cli("analyze", str(bad)))
    assert line.startswith(f"ptxgen: error: {bad}:7:19: ")


@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe garbage", b".version 7.8\n.entry k() {"])
def test_bad_inputs_exit_nonzero(cli, tmp_path, content):
    bad = tmp_path / "bad.ptx"
    bad.write_bytes(content)
    line = _one_error_line(*cli("analyze", str(bad)))
    assert f"{bad}:" in line


def test_missing_file_unknown_kernel_unknown_arch(cli):
    _one_error_line(*cli("analyze", "/nonexistent/k.ptx"))
    line = _one_error_line(*cli("analyze", str(DATA / "hand_loops.ptx"), "--kernel", "nope"))
    assert "nope" in line
    line = _one_error_line(*cli("analyze", str(DATA / "hand_loops.ptx"), "--arch", "sm_70"))
    assert "sm_70" in line


@pytest.mark.needs_nvdisasm
def test_sass_option(cli):
    rc, out, err = cli("analyze", str(DATA / "numba_saxpy_sm80.ptx"), "--sass", "--json")
    assert rc == 0, err
    s = json.loads(out)["kernels"][0]["sass"]
    assert s["in_cubin"] and s["instructions"] > 0 and s["resources"]["registers"] > 0
    # a .target sm_90 module cannot be assembled for sm_80: a toolchain error, one line
    line = _one_error_line(*cli("analyze", str(DATA / "numba_saxpy_sm90.ptx"), "--sass",
                                "--arch", "sm_80"))
    assert "ptxas" in line


@pytest.mark.needs_nvdisasm
def test_sass_report_fits_a_terminal_unless_wide(cli):
    """Triton's attention kernel: hundreds of SASS opcodes and a block table with every
    unit; at most 100 columns (tables split, long lines wrapped), whole with --wide."""
    path = str(DATA / "triton_attention_causal_d64_sm90a.ptx")
    rc, out, err = cli("analyze", path, "--sass", "--arch", "sm_90a")
    assert rc == 0, err
    assert max(map(len, out.splitlines())) <= 100
    assert "Busy cycles per unit and basic block" in out and "SASS opcodes:" in out
    rc, wide, err = cli("analyze", path, "--sass", "--arch", "sm_90a", "--wide")
    assert rc == 0 and max(map(len, wide.splitlines())) > 400
    assert wide.split() == out.split()
