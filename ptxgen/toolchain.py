"""Find and run NVIDIA's ptxas and nvdisasm: PTX → cubin with resource usage, cubin → SASS.

Search order for each tool: $PTXGEN_PTXAS / $PTXGEN_NVDISASM, the pip wheels
(nvidia-cuda-nvcc, nvidia-cuda-nvdisasm), $CUDA_HOME/bin, then $PATH.
"""
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .arch import DEFAULT_TARGET
from .errors import ToolchainError

_WHEEL_HINT = {"ptxas": "nvidia-cuda-nvcc", "nvdisasm": "nvidia-cuda-nvdisasm"}


def _wheel_dirs():
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = []
    for root in spec.submodule_search_locations:
        for sub in ("cu13/bin", "cu12/bin", "cuda_nvcc/bin", "cuda_nvdisasm/bin"):
            d = Path(root) / sub
            if d.is_dir():
                dirs.append(d)
    return dirs


@functools.lru_cache(maxsize=None)
def find_tool(name):
    """Path of ptxas or nvdisasm; ToolchainError (one sentence) when it is nowhere."""
    env = os.environ.get(f"PTXGEN_{name.upper()}")
    if env:
        if Path(env).is_file() and os.access(env, os.X_OK):
            return env
        raise ToolchainError(f"PTXGEN_{name.upper()}={env} is not an executable file")
    candidates = [d / name for d in _wheel_dirs()]
    if os.environ.get("CUDA_HOME"):
        candidates.append(Path(os.environ["CUDA_HOME"]) / "bin" / name)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which(name)
    if found:
        return found
    raise ToolchainError(f"{name} not found: install it with `pip install ptxgen[cuda]` "
                         f"(the {_WHEEL_HINT[name]} wheel), or set PTXGEN_{name.upper()} or "
                         f"CUDA_HOME")


def have_tool(name):
    try:
        find_tool(name)
        return True
    except ToolchainError:
        return False


@dataclass
class Resources:
    """What ptxas -v reports for one kernel."""
    registers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    constant_bytes: int = 0

    @property
    def spills(self):
        return self.spill_stores + self.spill_loads


@dataclass
class Assembled:
    cubin: bytes
    arch: str
    resources: dict = field(default_factory=dict)     # kernel name → Resources
    log: str = ""


_FUNC = re.compile(r"Compiling entry function '([^']+)'|Function properties for (\S+)")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas_log(log):
    """Resources per kernel from `ptxas -v` output."""
    res, current = {}, None
    for line in log.splitlines():
        m = _FUNC.search(line)
        if m:
            current = m.group(1) or m.group(2)
            res.setdefault(current, Resources())
            continue
        if current is None:
            continue
        r = res[current]
        m = _STACK.search(line)
        if m:
            r.stack_bytes, r.spill_stores, r.spill_loads = map(int, m.groups())
        m = _USED.search(line)
        if m:
            r.registers = int(m.group(1))
            s = _SMEM.search(line)
            r.shared_bytes = int(s.group(1)) if s else 0
            c = _CMEM.search(line)
            r.constant_bytes = int(c.group(1)) if c else 0
    return res


_ARCH_SPECIFIC_TARGET = re.compile(r"^[ \t]*\.target[ \t]+(sm_\d+a)\b", re.M)


def assemble(ptx_text, arch=DEFAULT_TARGET, opt_level=3, extra=()):
    """ptxas: PTX text → cubin bytes and per-kernel resources. Rejected PTX → ToolchainError
    with ptxas's first error line. PTX whose .target is the arch-specific variant of `arch`
    (sm_90a for sm_90: wgmma, setmaxnreg) is assembled for that variant, the same chip."""
    m = _ARCH_SPECIFIC_TARGET.search(ptx_text)
    if m and m.group(1) == arch + "a":
        arch = m.group(1)
    ptxas = find_tool("ptxas")
    with tempfile.TemporaryDirectory(prefix="ptxgen-") as tmp:
        src, out = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx_text)
        cmd = [ptxas, f"-arch={arch}", f"-O{opt_level}", "-v", *extra, str(src), "-o", str(out)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        log = p.stdout + p.stderr
        if p.returncode != 0:
            errs = [l for l in log.splitlines() if "error" in l.lower()] or log.splitlines() or [""]
            raise ToolchainError(f"ptxas rejected the PTX for {arch}: "
                                 f"{errs[0].replace(str(src), '<ptx>').strip()}")
        return Assembled(out.read_bytes(), arch, parse_ptxas_log(log), log)


def disassemble(cubin):
    """nvdisasm: cubin bytes → SASS text."""
    nvdisasm = find_tool("nvdisasm")
    with tempfile.TemporaryDirectory(prefix="ptxgen-") as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        p = subprocess.run([nvdisasm, "-c", "-hex", str(path)], capture_output=True, text=True)
        if p.returncode != 0:
            p = subprocess.run([nvdisasm, "-c", str(path)], capture_output=True, text=True)
        if p.returncode != 0:
            raise ToolchainError(f"nvdisasm failed: {(p.stderr or p.stdout).strip()[:200]}")
        return p.stdout


_SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")
_SASS_FUNC = re.compile(r"^\s*\.text\.(\S+):|^\s*(\S+):\s*$")


def sass_instructions(sass_text):
    """{kernel: [full SASS opcode, …]} from nvdisasm output (NOPs kept, so counts are exact)."""
    kernels, current = {}, None
    for line in sass_text.splitlines():
        if line.lstrip().startswith(".text."):
            current = line.strip().split(".text.", 1)[1].rstrip(":")
            kernels.setdefault(current, [])
            continue
        m = _SASS_LINE.match(line)
        if m and current is not None:
            kernels[current].append(m.group(3))
    return kernels


_SASS_LABEL = re.compile(r"^\s*\.(L_x_\d+):")


def sass_regions(sass_text, kernel):
    """One kernel's SASS as the opcodes between consecutive branch-target labels (a loop's
    body and the code it branches around are separate regions): [[opcode, …], …]."""
    regions, on = [], False
    for line in sass_text.splitlines():
        if line.lstrip().startswith(".text."):
            on = line.strip().split(".text.", 1)[1].rstrip(":") == kernel
            if on:
                regions.append([])
            continue
        if not on:
            continue
        if _SASS_LABEL.match(line):
            regions.append([])
            continue
        m = _SASS_LINE.match(line)
        if m:
            regions[-1].append(m.group(3))
    return regions


def sass_mix(sass_text):
    """{kernel: {opcode: count}} with the base opcode (before the first dot)."""
    mix = {}
    for k, ops in sass_instructions(sass_text).items():
        d = {}
        for op in ops:
            d[op] = d.get(op, 0) + 1
        mix[k] = dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))
    return mix
