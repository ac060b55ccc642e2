"""Scheduling regions and the dependence graph of one region.

A region is a maximal run of instructions between labels something refers to, branches and
verbatim statements that carry structure ('{', '}', '.reg'); comments, '.loc' lines and labels
nothing refers to ride along with the instruction that follows them. Inside a region an edge
i → j (i before j in program order) means j must stay after i:

- registers and predicates, the guard included: read after write, write after read, write after
  write (so every use keeps the same reaching definitions, predicated or not);
- memory, per state space: loads may pass loads; a store is ordered with every load and store
  of a space it may touch (generic addresses may touch global, shared and local memory;
  parameter and constant memory are read-only, so nothing orders with their loads);
- fences: barriers, branches and other control, atomics and reductions, asynchronous copies
  and MMAs, memory fences, clock reads, and any opcode not known to be free of side effects
  order with every instruction of the region.

Which instructions are pure, loads or stores is the opcode table's `effect` (ir/opcodes.py).

The rules are decided per instruction by `access(instr)`, which the property tests check
against a brute-force pairwise definition (`conflict`).
"""
import re
from dataclasses import dataclass, field

from ..ir.instr import Instr, Label, Verbatim
from ..ir.values import Addr, LabelRef, Raw, Special, Sym

# Spaces a store in each space may write; read-only spaces have none.
WRITABLE = {"global": ("global",), "shared": ("shared",), "local": ("local",),
            "generic": ("global", "shared", "local"), "param": ("param",)}
# Spaces a load in each space may read.
READABLE = {"global": ("global",), "shared": ("shared",), "local": ("local",),
            "generic": ("global", "shared", "local"), "param": ("param",),
            "const": ("const",)}
# Clock reads measure time: instructions must not move across them.
CLOCKS = ("clock", "clock64", "globaltimer")
_WORD = re.compile(r"[$%\w.]+")


@dataclass(frozen=True)
class Access:
    """What an instruction does besides registers: kind is None, 'load', 'store' or 'fence'."""
    kind: object = None
    spaces: tuple = ()


def access(ins):
    if any(isinstance(o, Raw) for o in ins.operands):
        return Access("fence")
    if any(isinstance(o, Special) and o.name.split(".")[0] in CLOCKS for o in ins.operands):
        return Access("fence")
    effect = ins.row.effect
    if effect == "load":
        return Access("load", READABLE.get(ins.space or "generic", ("global", "shared", "local")))
    if effect == "store":
        return Access("store", WRITABLE.get(ins.space or "generic", ("global", "shared", "local")))
    if effect == "pure":
        return Access()
    return Access("fence")


def conflict(a, b):
    """Whether two instructions must keep their relative order (the reference definition)."""
    da, db = set(a.defs()), set(b.defs())
    ua, ub = set(a.uses()), set(b.uses())
    if da & ub or ua & db or da & db:
        return True
    xa, xb = access(a), access(b)
    if "fence" in (xa.kind, xb.kind):
        return True
    if "store" in (xa.kind, xb.kind) and xa.kind and xb.kind:
        return bool(set(xa.spaces) & set(xb.spaces))
    return False


# -- regions -----------------------------------------------------------------------------------
def _rides_along(stmt, targets=frozenset()):
    """Comments, line info and labels nothing refers to (Triton's $L__tmp debug marks) travel
    with the next instruction; other verbatim text is structure ('{', '}', '.reg' …) and
    other labels are branch targets: the scheduler must not cross them."""
    if isinstance(stmt, Label):
        return stmt.name not in targets
    if not isinstance(stmt, Verbatim):
        return False
    t = stmt.text.strip()
    return t.startswith("//") or t.startswith(".loc") or t == ""


def _referenced(body):
    """Names any instruction operand or verbatim statement (a .branchtargets table) mentions."""
    names = set()
    for s in body:
        if isinstance(s, Instr):
            for o in s.operands:
                if isinstance(o, (LabelRef, Sym)):
                    names.add(o.name)
                elif isinstance(o, Addr) and isinstance(o.base, Sym):
                    names.add(o.base.name)
        elif isinstance(s, Verbatim):
            names.update(_WORD.findall(s.text))
    return names


@dataclass
class Region:
    """Instructions scheduled together, with their riders (comments before each one)."""
    start: int                      # index in the body of the first statement
    instrs: list = field(default_factory=list)
    riders: list = field(default_factory=list)   # riders[i]: statements printed before instrs[i]


def split_body(body):
    """The body as a list of items: Region (schedulable) or a lone statement kept in place."""
    items, cur, pending = [], None, []
    targets = _referenced(body)

    def close():
        nonlocal cur
        if cur is not None and cur.instrs:
            items.append(cur)
        cur = None

    for idx, s in enumerate(body):
        if isinstance(s, Instr):
            if cur is None:
                cur = Region(idx)
            cur.instrs.append(s)
            cur.riders.append(pending)
            pending = []
            if s.is_terminator:
                close()
        elif _rides_along(s, targets):
            pending.append(s)
        else:
            close()
            items.extend(pending)
            pending = []
            items.append(s)
    close()
    items.extend(pending)
    return items


# -- the graph ---------------------------------------------------------------------------------
@dataclass
class DepGraph:
    instrs: list
    succs: list                      # succs[i]: list of (j, delay)
    preds: list                      # preds[i]: list of (j, delay)
    kinds: dict                      # (i, j) → "raw" | "war" | "waw" | "mem" | "fence"

    def edges(self):
        return sorted(self.kinds)


def build_graph(instrs, latency):
    """The dependence graph of one region. `latency(instr)` gives the cycles a register result
    takes; read-after-write edges carry it, order-only edges carry 0."""
    n = len(instrs)
    kinds = {}

    def add(i, j, kind):
        if i != j and (i, j) not in kinds:
            kinds[(i, j)] = kind

    last_def, readers = {}, {}
    last_store = {}                  # space → index of the last store that may write it
    loads_since = {}                 # space → loads that may read it since that store
    last_fence, since_fence = None, []
    for j, ins in enumerate(instrs):
        for r in ins.uses():
            if r in last_def:
                add(last_def[r], j, "raw")
        for r in ins.defs():
            if r in last_def:
                add(last_def[r], j, "waw")
            for u in readers.get(r, ()):
                add(u, j, "war")
        for r in ins.uses():
            readers.setdefault(r, []).append(j)
        for r in ins.defs():
            last_def[r] = j
            readers[r] = []

        acc = access(ins)
        if last_fence is not None:
            add(last_fence, j, "fence")
        if acc.kind == "fence":
            for i in since_fence:
                add(i, j, "fence")
            last_fence, since_fence = j, []
        else:
            since_fence.append(j)
        if acc.kind == "load":
            for s in acc.spaces:
                if s in last_store:
                    add(last_store[s], j, "mem")
                loads_since.setdefault(s, []).append(j)
        elif acc.kind == "store":
            for s in acc.spaces:
                if s in last_store:
                    add(last_store[s], j, "mem")
                for i in loads_since.get(s, ()):
                    add(i, j, "mem")
            for s in acc.spaces:
                last_store[s] = j
                loads_since[s] = []

    succs = [[] for _ in range(n)]
    preds = [[] for _ in range(n)]
    for (i, j), kind in sorted(kinds.items()):
        d = latency(instrs[i]) if kind == "raw" else 0
        succs[i].append((j, d))
        preds[j].append((i, d))
    return DepGraph(list(instrs), succs, preds, kinds)


def critical_path(graph, latency):
    """Cycles from each instruction's issue to the end of the region along its longest path
    (its own latency included)."""
    n = len(graph.instrs)
    height = [0.0] * n
    for i in range(n - 1, -1, -1):
        own = latency(graph.instrs[i])
        best = own
        for j, d in graph.succs[i]:
            best = max(best, d + height[j])
        height[i] = best
    return height
