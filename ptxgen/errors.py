"""Error types. Every error a user can provoke is a PtxgenError whose str() is one line.

A message that names an argument names it in the words of the interface the user called:
`Spelled("...use ", Arg("backend='emu'", "--backend emu"), "...")` is a str in Python's words
(what str(error) gives) with the command line's words in `.cli`, which the CLI prints
(`cli_text`)."""
from typing import NamedTuple


class Arg(NamedTuple):
    """An argument (and value) as Python spells it and as the command line does."""
    python: str
    cli: str


class Spelled(str):
    """Text built from str and Arg parts: the str is the Python spelling, `.cli` the command
    line's."""

    def __new__(cls, *parts):
        self = super().__new__(cls, "".join(p.python if isinstance(p, Arg) else p for p in parts))
        self.cli = "".join(p.cli if isinstance(p, Arg) else p for p in parts)
        return self


def cli_text(obj):
    """An error's (or a message's) text in the command line's words."""
    if isinstance(obj, BaseException) and len(obj.args) == 1:
        obj = obj.args[0]
    return getattr(obj, "cli", None) or str(obj)


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


class NativeUnsupported(EmulationError):
    """The emulator's native engine does not run this kernel (raised before anything ran, so
    the interpreter can run it instead)."""


class IsaDataError(PtxgenError):
    """An isa/*.toml file is missing, malformed or lacks a source for a number."""


class LoweringError(PtxgenError):
    """An IR instruction has no lowering to LLVM IR (names the instruction and its line)."""
