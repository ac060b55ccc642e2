"""The opcode → LLVM lowering table: one row per PTX opcode the lowering knows.

A row names the rule (a function in ptxgen.llvm.rules, shared by every opcode of that shape) and
the data the rule needs: which LLVM instruction an integer or floating-point variant becomes,
which NVVM intrinsic family carries PTX's rounding modes, which comparison picks min or max.
Keyed by the PTX opcode name, like ptxgen/ir's opcode table, so the two join on that key.

`asm` rows are instructions LLVM has no operation or intrinsic for that both back ends (LLVM's
NVPTX and libNVVM) accept; they become inline PTX, as cuda_fp16.h does for the same reason.
Opcodes without a row fail with a LoweringError naming the instruction and its line.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Row:
    rule: str
    data: dict = field(default_factory=dict)


LOWERING = {
    # arithmetic: int = LLVM integer instruction (sint/uint when signedness matters), float =
    # LLVM floating-point instruction for round-to-nearest, rounded = the llvm.nvvm.<stem>.<rnd>
    # intrinsic family for PTX's other rounding modes
    "add": Row("arith", {"int": "add", "float": "fadd", "rounded": "add"}),
    "sub": Row("arith", {"int": "sub", "float": "fsub", "rounded": "add", "negate_b": True}),
    "mul": Row("product", {"float": "fmul", "rounded": "mul"}),
    "div": Row("arith", {"sint": "sdiv", "uint": "udiv", "float": "fdiv", "rounded": "div"}),
    "rem": Row("arith", {"sint": "srem", "uint": "urem"}),
    "and": Row("arith", {"int": "and_"}),
    "or": Row("arith", {"int": "or_"}),
    "xor": Row("arith", {"int": "xor"}),
    "mad": Row("product", {"addend": True}),
    "fma": Row("fma"),
    # min/max: integer comparison, NVVM intrinsic for f32/f64 (PTX's NaN rule), LLVM's
    # minnum/maxnum for f16
    "min": Row("minmax", {"cmp": "<", "nvvm": "fmin", "llvm": "llvm.minnum"}),
    "max": Row("minmax", {"cmp": ">", "nvvm": "fmax", "llvm": "llvm.maxnum"}),
    "neg": Row("neg"),
    "abs": Row("abs"),
    "not": Row("not"),
    "shl": Row("shift", {"left": True}),
    "shr": Row("shift", {"left": False}),
    "popc": Row("bitcount", {"fn": "llvm.ctpop"}),
    "clz": Row("bitcount", {"fn": "llvm.ctlz"}),
    "brev": Row("bitcount", {"fn": "llvm.bitreverse", "same_width": True}),
    # special functions: llvm.nvvm.<op>.<mode>[.ftz].<f|d>, named from the modifiers
    "rcp": Row("nvvm_math"),
    "sqrt": Row("nvvm_math"),
    "rsqrt": Row("nvvm_math"),
    "sin": Row("nvvm_math"),
    "cos": Row("nvvm_math"),
    "lg2": Row("nvvm_math"),
    "ex2": Row("nvvm_math"),
    "tanh": Row("asm"),
    # comparisons, selection, moves, conversions
    "setp": Row("setp"),
    "selp": Row("selp"),
    "mov": Row("mov"),
    "cvt": Row("cvt"),
    "cvta": Row("cvta"),
    # memory
    "ld": Row("load"),
    "ldu": Row("load"),
    "st": Row("store"),
    "atom": Row("atomic", {"result": True}),
    "red": Row("atomic", {"result": False}),
    "cp": Row("cp_async"),
    "prefetch": Row("drop"),          # a hint; dropping it changes no result
    # synchronization and warp-level
    "bar": Row("barrier"),
    "barrier": Row("barrier"),
    "membar": Row("membar", {"gl": "llvm.nvvm.membar.gl", "cta": "llvm.nvvm.membar.cta",
                             "sys": "llvm.nvvm.membar.sys"}),
    "fence": Row("asm"),
    "shfl": Row("shuffle"),
    "vote": Row("vote"),
    "activemask": Row("asm"),
    "nanosleep": Row("asm"),
    # control flow (the lowering driver makes the blocks)
    "bra": Row("control"),
    "ret": Row("control"),
    "exit": Row("control"),
}

# PTX comparison → (LLVM icmp for signed, for unsigned) and LLVM fcmp (ordered flag, op)
INT_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
           "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
UNSIGNED_ONLY = {"lo", "ls", "hi", "hs"}
FLOAT_CMP = {"eq": (True, "=="), "ne": (True, "!="), "lt": (True, "<"), "le": (True, "<="),
             "gt": (True, ">"), "ge": (True, ">="), "equ": (False, "=="), "neu": (False, "!="),
             "ltu": (False, "<"), "leu": (False, "<="), "gtu": (False, ">"),
             "geu": (False, ">="), "num": (True, "ord"), "nan": (False, "uno")}

# Rounding modifiers: float rounding → NVVM intrinsic infix; integer rounding of cvt → same
ROUNDING = {"rn": "rn", "rz": "rz", "rm": "rm", "rp": "rp",
            "rni": "rn", "rzi": "rz", "rmi": "rm", "rpi": "rp"}
# Same-format round-to-integral (cvt.rni.f32.f32 …) → LLVM intrinsics
ROUND_INTEGRAL = {"rni": "llvm.rint", "rzi": "llvm.trunc", "rmi": "llvm.floor",
                  "rpi": "llvm.ceil"}
# cvt float→int and int→float intrinsic stems: (signed, bits) → NVVM letters
INT_STEM = {(True, 32): "i", (False, 32): "ui", (True, 64): "ll", (False, 64): "ull"}
FLOAT_STEM = {32: "f", 64: "d"}

# Atomic operations: PTX op → LLVM atomicrmw op (signedness picks min/max)
ATOMIC = {"add": "add", "and": "and", "or": "or", "xor": "xor", "exch": "xchg",
          "min": ("min", "umin"), "max": ("max", "umax")}

SHUFFLE_MODES = ("idx", "up", "down", "bfly")
VOTE_MODES = ("all", "any", "uni")
