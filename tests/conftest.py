import os
import subprocess
import sys

import pytest


def pytest_collection_modifyitems(config, items):
    """GPU tests skip on machines where Numba finds no CUDA GPU."""
    from ptxgen.runtime import gpu_available
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def run_cli(*args, check=False):
    """Run `python -m ptxgen ARGS` in a subprocess; returns (rc, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "ptxgen", *args], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def cli():
    return run_cli
