"""`ptxgen emit --schedule` on every library kernel and on parsed PTX: the list-scheduled text
parses again, keeps every instruction of every kernel (only their order inside basic blocks
moves) and ptxas assembles it."""
import collections
import glob
import os

import pytest

from ptxgen.cli import main
from ptxgen.parse import parse_ptx
from ptxgen.toolchain import assemble, have_tool
from model_data import measured_cases

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "ptx", "*.ptx")))
MODEL_SET = "model_set_2026-12-01b.json"

# every library kernel: the fp32 operators, the tensor-core GEMM for each input type and the
# fused attention (sm_90a), causal and not
LIBRARY = [[k] for k in ("saxpy", "add", "scale", "matmul", "transpose", "row_reduce",
                         "row_max", "softmax")] + [
    ["matmul", "--dtype", d, "--arch", "sm_90a"] for d in ("bf16", "f16", "tf32")] + [
    ["matmul", "--dtype", "bf16", "--out-dtype", "bf16", "--arch", "sm_90a"],
    ["attention", "--dtype", "bf16", "--arch", "sm_90a"],
    ["attention", "--dtype", "bf16", "--causal", "--D", "64", "--arch", "sm_90a"]]


def _arch_of(argv):
    return argv[argv.index("--arch") + 1] if "--arch" in argv else "sm_90"


def _emit(argv, tmp_path, name):
    out = tmp_path / f"{name}.ptx"
    assert main(["emit", *argv, "-o", str(out)]) == 0
    return out.read_text()


def _kernels(text):
    """{kernel name: Counter of its lines}: scheduling moves lines inside basic blocks only."""
    out, name = {}, None
    for line in text.splitlines():
        if ".entry" in line or ".func" in line:
            name = line.split("(")[0].split()[-1]
        out.setdefault(name, collections.Counter())[line.strip()] += 1
    return out


def _check(plain, scheduled, arch):
    assert _kernels(plain) == _kernels(scheduled)    # the same lines, kernel by kernel
    parse_ptx(scheduled)                             # and it parses again
    if have_tool("ptxas"):
        assemble(scheduled, arch)


@pytest.mark.parametrize("argv", LIBRARY, ids=lambda a: " ".join(a))
def test_library_kernel_emits_scheduled(argv, tmp_path):
    plain = _emit(argv, tmp_path, "plain")
    scheduled = _emit([*argv, "--schedule"], tmp_path, "scheduled")
    assert scheduled != plain                        # every library kernel has something to move
    _check(plain, scheduled, _arch_of(argv))


def _corpus_arch(path):
    base = os.path.basename(path)
    if "sm80" in base:
        return "sm_80"
    return "sm_90a" if any(s in base for s in ("sm90a", "hopper", "tma", "softmax")) \
        else "sm_90"


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_parsed_ptx_emits_scheduled(path, tmp_path):
    arch = _corpus_arch(path)
    plain = _emit([path, "--arch", arch], tmp_path, "plain")
    scheduled = _emit([path, "--arch", arch, "--schedule"], tmp_path, "scheduled")
    _check(plain, scheduled, arch)


def test_model_set_kernels_emit_scheduled(tmp_path):
    """The 73 Numba, Triton and hand-written kernels that ran on the H200 (model set run b)."""
    cases = measured_cases(MODEL_SET).values()
    seen = {}
    for c in cases:
        seen.setdefault(c["ptx"], c["name"])
    assert len(seen) >= 25
    for text, name in seen.items():
        src = tmp_path / "k.ptx"
        src.write_text(text)
        arch = "sm_90a" if ".target sm_90a" in text else "sm_90"
        plain = _emit([str(src), "--arch", arch], tmp_path, "plain")
        scheduled = _emit([str(src), "--arch", arch, "--schedule"], tmp_path, "scheduled")
        _check(plain, scheduled, arch)
