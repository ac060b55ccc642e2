"""Helpers the simulator's tests share: a PTX header, a pointer-argument placeholder, the
accesses simulate() computes for a kernel, and the instructions each event-loop run issues."""
from ptxgen.parse import parse_ptx
from ptxgen.sim import access as A
from ptxgen.sim import simulate
from ptxgen.sim.engine import Sm

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n\n"


class Arr:
    """A pointer argument."""


def parse_kernel(text):
    """(module, its first kernel) of PTX text."""
    m = parse_ptx(text)
    return m, m.kernels[0]


def accesses(text, grid, block, args, sample=16):
    """{instruction text: Access} as simulate() computes them, and the report."""
    m, k = parse_kernel(text)
    seen = {}
    orig = A.analyze

    def spy(prog, table, records, warps, later=None):
        out = orig(prog, table, records, warps, later)
        seen.update({prog.instrs[i].text: a for i, a in out.items()})
        return out
    A.analyze = spy
    try:
        rep = simulate(k, grid, block, args=args, module=m, registers=32, sample=sample)
    finally:
        A.analyze = orig
    return seen, rep


def find(seen, prefix):
    """The one access whose instruction text starts with prefix."""
    hits = [a for t, a in seen.items() if t.startswith(prefix)]
    assert len(hits) == 1, (prefix, list(seen))
    return hits[0]


def count_issues(monkeypatch):
    """A list that collects, per event loop run (the copies of sim/fork.py included), the
    instructions it issued: their sum is what the launch simulated."""
    counts, loop = [], Sm.loop

    def counted(self, now, s0, busy):
        before = self.issued
        r = loop(self, now, s0, busy)
        counts.append(r.issued - before)
        return r

    monkeypatch.setattr(Sm, "loop", counted)
    return counts
