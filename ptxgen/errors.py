"""Error types. Every error a user can provoke is a PtxgenError whose str() is one line."""


class PtxgenError(Exception):
    """Base of all errors ptxgen reports to users (the CLI prints them as one line)."""


class VerifyError(PtxgenError):
    """The IR of a kernel is malformed (names the kernel and the instruction)."""


class ParseError(PtxgenError):
    """PTX text could not be parsed; carries file, line and column."""

    def __init__(self, message, line=0, col=0, filename="<ptx>"):
        self.message = message
        self.line = line
        self.col = col
        self.filename = filename
        super().__init__(f"{filename}:{line}:{col}: {message}")


class ToolchainError(PtxgenError):
    """A CUDA tool is missing or rejected its input."""


class LaunchError(PtxgenError):
    """A kernel launch was refused or faulted (names the kernel)."""


class ScheduleError(PtxgenError):
    """A schedule is invalid for the operator or the target."""


class EmulationError(PtxgenError):
    """The emulator met an invalid access or an unsupported instruction."""


class IsaDataError(PtxgenError):
    """An isa/*.toml file is missing, malformed or lacks a source for a number."""


class LoweringError(PtxgenError):
    """An IR instruction has no lowering to LLVM IR (names the instruction and its line)."""
