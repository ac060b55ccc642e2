"""Targets ptxgen emits for (isa/targets.toml): names and PTX ISA versions."""
import functools
import tomllib
from pathlib import Path

from .errors import IsaDataError, PtxgenError

ISA_DIR = Path(__file__).resolve().parent.parent / "isa"

# The target every entry point uses when none is given: the lent H200 (compute capability 9.0).
DEFAULT_TARGET = "sm_90"


def isa_dir():
    """The machine models: isa/ beside the package in a checkout (the source of truth), or
    ptxgen/isa_data/ inside an installed wheel (setup.py maps isa/ there)."""
    inside = Path(__file__).resolve().parent / "isa_data"
    return inside if inside.is_dir() else ISA_DIR


@functools.lru_cache(maxsize=None)
def _targets():
    path = isa_dir() / "targets.toml"
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise IsaDataError(f"{path}: cannot read target table: {e}") from None


def targets():
    return sorted(_targets()["targets"])


def target_entry(arch):
    """The target's table in isa/targets.toml (PTX versions, and limits where it has no model)."""
    return _targets()["targets"][check_arch(arch)]


def launch_table():
    """The [launch] table of isa/targets.toml: CUDA API launch limits common to every target
    (ptxgen.isa.launch_limits checks and reads it)."""
    return _targets().get("launch")


def check_arch(arch):
    if arch not in _targets()["targets"]:
        raise PtxgenError(f"unknown arch {arch!r}; known: {', '.join(targets())}")
    return arch


def version_tuple(v):
    major, minor = v.split(".")
    return int(major), int(minor)


def ptx_version(arch, features=()):
    """The PTX ISA version to emit: the smallest the target and the used features accept."""
    data = _targets()
    check_arch(arch)
    need = [version_tuple(data["targets"][arch]["min_ptx_version"])]
    for f in features:
        if f in data.get("features", {}):
            need.append(version_tuple(data["features"][f]["min_ptx_version"]))
    v = max(need)
    if v > version_tuple(data["driver"]["max_ptx_version"]):
        raise PtxgenError(f"{arch} with {', '.join(features)} needs PTX ISA {v[0]}.{v[1]}, "
                          f"newer than the driver's {data['driver']['max_ptx_version']}")
    return f"{v[0]}.{v[1]}"


def sm_number(arch):
    return int(arch.split("_")[1].rstrip("a"))
