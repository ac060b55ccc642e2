"""Kernels, their parameters and variables, and the module that holds them."""
from dataclasses import dataclass, field

from ..arch import DEFAULT_TARGET
from . import types as T


@dataclass(frozen=True)
class Pointer:
    """A pointer parameter's pointee: element type, address space and the alignment promised."""
    elem: T.Type
    space: str = "global"
    align: int = 4


def ptr(elem, space="global", align=None):
    return Pointer(elem, space, align if align is not None else elem.nbytes)


@dataclass(frozen=True)
class Param:
    name: str
    type: T.Type               # the parameter's own type (u64 for pointers)
    pointer: Pointer = None    # set for pointer parameters
    array: int = 0             # byte arrays ('.b8 name[16]', used for Numba's struct args)
    align: int = 0
    reg: object = None         # a .func's '.reg' parameter: the Reg its body reads or writes

    def decl(self):
        if self.reg is not None:
            return f".reg {self.type.ptx} {self.name}"
        if self.array:
            a = f".align {self.align} " if self.align else ""
            return f".param {a}{self.type.ptx} {self.name}[{self.array}]"
        if self.pointer is not None:
            p = self.pointer
            space = f" .{p.space}" if p.space else ""       # no space: a generic pointer
            return f".param {self.type.ptx} .ptr{space} .align {p.align} {self.name}"
        return f".param {self.type.ptx} {self.name}"

    @property
    def nbytes(self):
        return self.array * self.type.nbytes if self.array else self.type.nbytes


@dataclass(frozen=True)
class Var:
    """A module- or kernel-scope variable in shared/global/const/local space."""
    name: str
    space: str                 # "shared", "global", "const", "local"
    type: T.Type
    count: int = 1             # 0 for '.extern .shared … name[]' (dynamic shared memory)
    align: int = 0
    extern: bool = False
    init: str = ""             # initializer text, verbatim
    linkage: str = ""          # "", "visible", "weak", "extern"

    def decl(self):
        parts = []
        if self.extern:
            parts.append(".extern")
        elif self.linkage:
            parts.append("." + self.linkage)
        parts.append("." + self.space)
        if self.align:
            parts.append(f".align {self.align}")
        parts.append(self.type.ptx)
        if self.extern and self.count == 0:
            name = f"{self.name}[]"
        elif self.count != 1 or self.init.startswith("{"):
            name = f"{self.name}[{self.count}]"
        else:
            name = self.name
        parts.append(name)
        text = " ".join(parts)
        if self.init:
            text += " = " + self.init
        return text + ";"

    @property
    def nbytes(self):
        return self.count * self.type.nbytes


@dataclass(eq=False)
class Kernel:
    """An '.entry' (kind 'entry') or a '.func'. `body` is a list of statements (ir.instr)."""
    name: str
    params: list = field(default_factory=list)
    body: list = field(default_factory=list)
    kind: str = "entry"
    vars: list = field(default_factory=list)          # kernel-scope shared/local variables
    directives: list = field(default_factory=list)    # performance directives, verbatim
    regs: list = field(default_factory=list)          # declared registers, in declaration order
    returns: list = field(default_factory=list)       # .func return parameters
    linkage: str = "visible"
    line: int = 0

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"kernel {self.name} has no parameter {name!r}")

    def declare(self, reg):
        self.regs.append(reg)
        return reg

    @property
    def dynamic_shared(self):
        return any(v.space == "shared" and v.extern for v in self.vars)

    @property
    def static_shared_bytes(self):
        return sum(v.nbytes for v in self.vars if v.space == "shared" and not v.extern)


@dataclass(eq=False)
class Module:
    target: str = DEFAULT_TARGET
    version: str = ""          # "" → the emitter picks one for the target
    address_size: int = 64
    vars: list = field(default_factory=list)           # module-scope variables
    kernels: list = field(default_factory=list)        # entries and functions, in order
    header: list = field(default_factory=list)         # other module directives, verbatim
    filename: str = "<ptx>"
    # True for modules read from PTX text (ptxgen.parse). Emitting, emulating and launching
    # verify Builder-made modules by default; foreign PTX is ptxas's to judge (the IR verifier
    # is stricter than PTX: it wants definitions before uses in program order, for one).
    parsed: bool = False

    def kernel(self, name):
        """The kernel called `name`; for an entry also its short name (`hist` for Numba's
        `_ZN8__main__4histB2v1...`) or a unique part of its name (ptxgen.names.resolve)."""
        for k in self.kernels:
            if k.name == name:
                return k
        from ..names import resolve
        where = "module" if self.filename == "<ptx>" else self.filename
        full = resolve([k.name for k in self.entries], name, where)
        return next(k for k in self.kernels if k.name == full)

    @property
    def entries(self):
        return [k for k in self.kernels if k.kind == "entry"]

    def add_kernel(self, name, params=(), kind="entry"):
        k = Kernel(name=name, params=list(params), kind=kind)
        self.kernels.append(k)
        return k
