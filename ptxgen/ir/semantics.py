"""What an opcode computes, once, next to the opcode table (opcodes.py): the evaluation
function of each arithmetic and logic opcode on known values, the comparisons of setp and the
predicate combinations. The simulator's value walk (sim/values.py) folds constants and follows
loop counters with these; the static bank analysis (analysis/banks_static.py) applies them per
thread. The emulator has its own bit-exact, vectorised semantics (emu/): these are the plain
integer and float meanings that control flow and addresses are made of.

`evaluation(op, mods, t)` gives fn(*values) -> value for opcode `op` with modifiers `mods` on
values of IR type `t`, or None when the table does not evaluate that form. Values are Python
ints (already wrapped to the type's width by the caller), floats or bools; the functions also
accept numpy arrays where the operation is elementwise (+, -, &, comparisons)."""

# setp's comparisons (the unordered float forms compare like the ordered ones: the walk's
# values are never NaN where it decides a branch)
COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b,
    "hi": lambda a, b: a > b, "hs": lambda a, b: a >= b,
    "equ": lambda a, b: a == b, "neu": lambda a, b: a != b,
    "ltu": lambda a, b: a < b, "leu": lambda a, b: a <= b,
    "gtu": lambda a, b: a > b, "geu": lambda a, b: a >= b,
}
UNSIGNED_COMPARE = frozenset(("lo", "ls", "hi", "hs"))
# and/or/xor/not on predicates (setp's combining operation too); bools or numpy bool arrays
PREDICATE = {"and": lambda a, b: a & b, "or": lambda a, b: a | b,
             "xor": lambda a, b: a != b, "not": lambda a: a ^ True}


def _float(t):
    return t is not None and t.is_float


def _pred(t):
    return t is not None and t.kind == "pred"


def _mul(mods, t):
    if _float(t) or "lo" in mods or "wide" in mods:
        return lambda a, b: a * b
    if "hi" in mods:
        bits = t.bits
        return lambda a, b: (a * b) >> bits
    return None


def _mad(mods, t):
    if _float(t) or "lo" in mods or "wide" in mods:
        return lambda a, b, c: a * b + c
    if "hi" in mods:
        bits = t.bits
        return lambda a, b, c: ((a * b) >> bits) + c
    return None


def _div(mods, t):
    if _float(t):
        return lambda a, b: a / b if b else None
    # integer division truncates toward zero (PTX div.s32); by zero: unknown
    return lambda a, b: (abs(a) // abs(b)) * (1 if (a >= 0) == (b >= 0) else -1) if b else None


def _rem(mods, t):
    # the remainder takes the dividend's sign (PTX rem.s32); floats and by zero: unknown
    fl = _float(t)
    return lambda a, b: (abs(a) % abs(b)) * (1 if a >= 0 else -1) if b and not fl else None


def _popc(mods, t):
    if t is None:
        return None
    mask = (1 << t.bits) - 1
    return lambda a: bin(a & mask).count("1")


def _brev(mods, t):
    # bit-reversed indices (FFT reorderings) address scattered stores: the walk must see them
    if t is None:
        return None
    bits = t.bits
    return lambda a: int(format(a & ((1 << bits) - 1), f"0{bits}b")[::-1], 2)


def _logic(op):
    bitwise = {"and": lambda a, b: a & b, "or": lambda a, b: a | b,
               "xor": lambda a, b: a ^ b}[op]
    return lambda mods, t: PREDICATE[op] if _pred(t) else bitwise


def _not(mods, t):
    return PREDICATE["not"] if _pred(t) else (lambda a: ~a)


EVALUATE = {
    "add": lambda mods, t: lambda a, b: a + b,
    "sub": lambda mods, t: lambda a, b: a - b,
    "mul": _mul,
    "mad": _mad,
    "fma": _mad,
    "div": _div,
    "rem": _rem,
    "popc": _popc,
    "brev": _brev,
    "min": lambda mods, t: min,
    "max": lambda mods, t: max,
    "neg": lambda mods, t: lambda a: -a,
    "abs": lambda mods, t: abs,
    "and": _logic("and"),
    "or": _logic("or"),
    "xor": _logic("xor"),
    "not": _not,
    "shl": lambda mods, t: lambda a, b: a << min(b, 64),
    "shr": lambda mods, t: lambda a, b: a >> min(b, 64),
}


def evaluation(op, mods, t):
    """fn(*values) -> value of opcode `op` (modifiers `mods`, type `t`), or None when the
    table does not evaluate it (see the module docstring)."""
    make = EVALUATE.get(op)
    return None if make is None else make(mods, t)
