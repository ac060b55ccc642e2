"""How the emulator's instruction builders (alu, bits, floats, convert) read their source
operands and write their result: one home, below all of them, so none reaches into another's
private helpers."""
from .values import storage


def sources(ctx, ins, n, dt=None, t=None, start=1):
    """Readers of n source operands from operand `start` on, as type t (default: the
    instruction's) stored as dt; a one-line failure when the count is wrong."""
    t = t or ins.type
    dt = dt or storage(t)
    ops = ins.operands[start:start + n]
    if len(ops) != n:
        ctx.fail(f"{ins.opcode} takes {n} source operand(s)")
    return [ctx.read(o, dt, t) for o in ops]


def make(w, srcs, compute):
    """fn(state, mask) writing compute(*sources)."""
    if len(srcs) == 1:
        a, = srcs
        return lambda st, m: w(st, m, compute(a(st)))
    if len(srcs) == 2:
        a, b = srcs
        return lambda st, m: w(st, m, compute(a(st), b(st)))
    if len(srcs) == 3:
        a, b, c = srcs
        return lambda st, m: w(st, m, compute(a(st), b(st), c(st)))
    return lambda st, m: w(st, m, compute(*[f(st) for f in srcs]))


def int_type(ctx, ins):
    """The type of an integer/bit instruction, refusing untyped ones and arithmetic on
    predicates."""
    t = ins.type
    if t is None:
        ctx.fail("instruction without a type")
    if t.kind == "pred" and ins.opcode not in ("and", "or", "xor", "not"):
        ctx.fail(f"{ins.opcode} on predicates")
    return t
