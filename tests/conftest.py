"""Shared test setup: the benchmark modules on the import path, the GPU and toolchain markers,
the sm_90 ISA table, and the CLI runner."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tests import the model set's records and helpers (benchmarks/model_*.py, cases_*.py)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
DATA = os.path.join(ROOT, "tests", "data")

# marker -> the tools it needs; a test so marked skips where one is not found
TOOL_MARKERS = {"needs_ptxas": ("ptxas",), "needs_nvdisasm": ("ptxas", "nvdisasm")}


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_ptxas: needs ptxas (skipped without it)")
    config.addinivalue_line("markers", "needs_nvdisasm: needs ptxas and nvdisasm (skipped "
                            "without them)")


def pytest_collection_modifyitems(config, items):
    """GPU tests skip on machines where Numba finds no CUDA GPU; toolchain tests where the
    tool is not found."""
    from ptxgen.runtime import gpu_available
    from ptxgen.toolchain import have_tool
    gpu = gpu_available()
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))
        for marker, tools in TOOL_MARKERS.items():
            missing = [t for t in tools if marker in item.keywords and not have_tool(t)]
            if missing:
                item.add_marker(pytest.mark.skip(reason=f"{' and '.join(missing)} not found"))


@pytest.fixture(scope="session")
def sm90():
    """The sm_90 (H200) ISA table."""
    from ptxgen import isa
    return isa.load("sm_90")


def run_cli(*args, check=False):
    """Run `python -m ptxgen ARGS` in a subprocess; returns (rc, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "ptxgen", *args], capture_output=True, text=True,
                       cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def cli():
    return run_cli
