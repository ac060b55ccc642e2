"""An instruction compiled for the executor: its kind (how the executor treats it) and its
closure `fn(state, mask)`. The op builders (alu, memops, calls, ...) and the program that
collects them both use these; neither imports the other through this module."""
from ..errors import EmulationError

NORMAL, BRANCH, BARRIER, EXIT, WAIT = range(5)   # WAIT: may hold lanes (mbarrier.py)


class Op:
    __slots__ = ("kind", "fn", "target", "guard", "neg", "instr", "index", "line", "span")

    def __init__(self, kind, fn, instr, index, target=-1, guard=-1, neg=False):
        self.kind, self.fn, self.instr, self.index = kind, fn, instr, index
        self.target, self.guard, self.neg = target, guard, neg
        self.line = instr.line if instr is not None else 0
        self.span = 1              # ops this one executes (a fused run covers several)

    @property
    def where(self):
        return f"PTX line {self.line}" if self.line else f"instruction {self.index}"

    @property
    def text(self):
        return str(self.instr).split("  //")[0] if self.instr is not None else "<end of kernel>"


def raiser(message):
    def fn(st, m):
        if m is None or m.any():                 # only when some thread really executes it
            raise EmulationError(message)
    return fn


def guarded_op(fn, slot, neg):
    if neg:
        def g(st, m):
            p = ~st.R[slot]
            fn(st, p if m is None else p & m)
    else:
        def g(st, m):
            p = st.R[slot]
            fn(st, p if m is None else p & m)
    return g
