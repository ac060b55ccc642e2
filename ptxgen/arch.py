"""Targets ptxgen emits for (isa/targets.toml): names, PTX ISA versions, and which target and
version the instructions a module uses need (modifier features in targets.toml, whole
instructions in the opcode table, ptxgen/ir/opcodes.py)."""
import functools
import tomllib
from pathlib import Path

from .errors import IsaDataError, PtxgenError

ISA_DIR = Path(__file__).resolve().parent.parent / "isa"

# The target every entry point uses when none is given: the lent H200 (compute capability 9.0).
DEFAULT_TARGET = "sm_90"
# Its arch-specific variant (the same chip with wgmma and setmaxnreg), for tensor-core kernels.
DEFAULT_ARCH_SPECIFIC_TARGET = "sm_90a"
# The oldest target ptxgen emits for, and the PTX ISA version it needs: what an instruction
# without a stated requirement needs (the opcode table's baseline).
BASELINE_TARGET, BASELINE_PTX = "sm_80", "7.0"


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


def requirement(feature, instruction_needs=None):
    """(min PTX ISA version, min target) of a feature: a targets.toml modifier feature, else
    the entry of `instruction_needs` ({opcode-table row name: needs}, which the emitter reads
    from ptxgen.ir.opcodes — a stage above this one); None when it needs nothing more."""
    f = _targets().get("features", {}).get(feature)
    if f is not None:
        return f["min_ptx_version"], f.get("min_target", "")
    return (instruction_needs or {}).get(feature)


def ptx_version(arch, features=(), instruction_needs=None):
    """The PTX ISA version to emit: the smallest the target and the used features accept."""
    data = _targets()
    check_arch(arch)
    need = [version_tuple(data["targets"][arch]["min_ptx_version"])]
    for f in features:
        req = requirement(f, instruction_needs)
        if req is not None:
            need.append(version_tuple(req[0]))
    v = max(need)
    if v > version_tuple(data["driver"]["max_ptx_version"]):
        raise PtxgenError(f"{arch} with {', '.join(features)} needs PTX ISA {v[0]}.{v[1]}, "
                          f"newer than the driver's {data['driver']['max_ptx_version']}")
    return f"{v[0]}.{v[1]}"


def sm_number(arch):
    return int(arch.split("_")[1].rstrip("a"))


def is_arch_specific(arch):
    """sm_90a and the like: features that exist only on that one architecture (wgmma,
    setmaxnreg); code for it runs on no other."""
    return arch.endswith("a")


def base_arch(arch):
    """The family target of an arch-specific one (sm_90a → sm_90); others unchanged."""
    return arch[:-1] if is_arch_specific(arch) else arch


def arch_specific_variant(arch):
    """The arch-specific target of arch's chip (sm_90 → sm_90a) where the targets table has
    one, else arch."""
    v = base_arch(arch) + "a"
    return v if v in targets() else arch


def target_for(arch, features=(), instruction_needs=None):
    """The target to emit for `arch` given the features used: arch itself, or its
    arch-specific variant when a feature needs one (wgmma on sm_90 → sm_90a). PtxgenError when
    a feature needs a newer target than arch."""
    out = arch
    for f in features:
        req = requirement(f, instruction_needs)
        if req is None or not req[1]:
            continue
        need = req[1]
        if is_arch_specific(need):
            if sm_number(arch) != sm_number(need):
                raise PtxgenError(f"{f} needs {need} (arch-specific); it cannot be emitted "
                                  f"for {arch}")
            out = need
        elif sm_number(arch) < sm_number(need):
            raise PtxgenError(f"{f} needs {need} or newer; it cannot be emitted for {arch}")
    return out
