"""The instruction path of a tensor-core operator (matmul, attention): wgmma on the
arch-specific sm_90a, mma.sync on every target from sm_80. Each operator keeps one table
{instruction: path} and looks its path up here; a path is a stateless object whose methods
take the operator (schedule_for, build, launch, kernel_args, ...)."""
from .. import arch as archmod

WGMMA, MMA_SYNC = "wgmma", "mma.sync"
INSTRUCTIONS = (WGMMA, MMA_SYNC)


def instruction_for(arch, schedule="auto"):
    """A given schedule's instruction; with "auto", mma.sync on a target without wgmma (every
    one but the arch-specific sm_90a) and wgmma otherwise (arch None: not built yet)."""
    if schedule != "auto":
        return getattr(schedule, "instruction", None)
    return MMA_SYNC if arch is not None and not archmod.is_arch_specific(arch) else WGMMA


def uses_mma_sync(arch, schedule="auto"):
    """Whether a tensor-core operator takes the sm_80 (mma.sync) path for `arch`/`schedule`."""
    return instruction_for(arch, schedule) == MMA_SYNC


class InstructionPaths:
    """Mix-in of a tensor-core operator: PATHS maps an instruction to its path; the path
    follows the target of the last build()/steps() (launch() and kernel_args() take none)."""
    PATHS = {}
    _built_arch = None          # private: not part of the operator's configuration (cache keys)

    @property
    def built_arch(self):
        """The target of the last build()/steps() (None before the first): picks the path."""
        return self._built_arch

    def path(self):
        """The instruction path for built_arch and the operator's schedule."""
        path = self.PATHS[instruction_for(self._built_arch, self.schedule)]
        self.check_path(path)
        return path

    def check_path(self, path):
        """A one-line PtxgenError when the operator's options do not fit `path`."""

    def for_target(self, arch):
        """The path for `arch`, which later launch() and kernel_args() calls follow."""
        self._built_arch = arch
        return self.path()


def describe_path(op, arch):
    """What `ptxgen run` and ptxgen.last_launch() print of the instruction path op takes for
    `arch`: "wgmma (sm_90a)", "mma.sync (sm_80)" or "SIMT (sm_90)" for the fp32 operators."""
    inst = getattr(op, "instruction", None)         # an operator that names its own path
    if isinstance(inst, str):
        return f"{inst} ({arch})"
    if isinstance(op, InstructionPaths):
        return f"{instruction_for(arch, op.schedule)} ({arch})"
    return f"SIMT ({arch})"
