"""The package as `pip install` builds it: the wheel must carry the machine models, the tune
cache and the license, and work from outside the source tree (issue 16, problem 1)."""
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    # built as pip builds it for a user (isolated, setuptools from the package index); a copy
    # of the tree keeps build/ and *.egg-info out of the checkout
    src = out / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".wt", ".venv", ".ci-venv*", "build", "*.egg-info", "__pycache__", "tests",
        "docs", "benchmarks", ".whl", ".hypothesis"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src),
                        "-w", str(out)], capture_output=True, text=True, cwd=out)
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = out.glob("ptxgen-*.whl")
    site = out / "site"
    with zipfile.ZipFile(whl) as z:
        z.extractall(site)
        names = set(z.namelist())
    return names, site


def test_wheel_carries_machine_models_and_tune_cache(wheel):
    names, _ = wheel
    shipped = {p.name for p in (ROOT / "isa").glob("*.toml")}
    assert shipped >= {"targets.toml", "sm_90.toml"}
    for f in shipped:
        assert f"ptxgen/isa_data/{f}" in names
    for f in (ROOT / "ptxgen" / "schedule" / "data").glob("*.json"):
        assert f"ptxgen/schedule/data/{f.name}" in names


def test_test_extra_installs_what_ci_runs():
    """CI installs the `test` extra: ray is in it, so the Ray executor's local-instance test
    runs there instead of skipping (tests/test_tune_executor.py)."""
    import tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    names = {re.split(r"[<>=!~\[ ]", r, maxsplit=1)[0] for r in extras["test"]}
    assert {"ray", "torch", "pytest", "pytest-xdist", "hypothesis"} <= names


def test_wheel_carries_the_license(wheel):
    """The MIT license: its text in the wheel, its SPDX expression in the metadata."""
    names, site = wheel
    assert "Copyright (c) 2026 the ptxgen authors" in (ROOT / "LICENSE").read_text()
    (meta,) = site.glob("ptxgen-*.dist-info/METADATA")
    headers = meta.read_text().split("\n\n", 1)[0].splitlines()
    assert "License-Expression: MIT" in headers and "License-File: LICENSE" in headers
    (lic,) = site.glob("ptxgen-*.dist-info/licenses/LICENSE")
    assert lic.read_text() == (ROOT / "LICENSE").read_text()


def test_installed_wheel_runs_outside_the_tree(wheel, tmp_path):
    _, site = wheel
    env = dict(os.environ, PYTHONPATH=str(site))
    run = [sys.executable, "-c", "import sys; from ptxgen.cli import main; sys.exit(main())"]
    where = subprocess.run(run[:2] + ["import ptxgen; print(ptxgen.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.stdout.strip().startswith(str(site)), where
    isa = subprocess.run(run + ["isa", "sm_90"], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert isa.returncode == 0, isa.stderr
    assert "sm_count" in isa.stdout and "132" in isa.stdout
    demo = subprocess.run(run + ["demo", "--backend", "emu"], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.count("PASS") == 2
