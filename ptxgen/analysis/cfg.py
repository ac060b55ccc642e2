"""Control-flow graph of one function: basic blocks, successors, dominators, natural loops.

A block starts at a labelled instruction or after a branch or return; it ends at a branch, a
return or before the next label. A guarded branch or return also falls through. Loops are the
natural loops of back edges (an edge to a block that dominates its source); loops sharing a
header are one loop. Irreducible cycles have no back edge of that kind and are not reported.
"""
import re
from dataclasses import dataclass, field

from ..ir.instr import Instr, Label, Verbatim
from ..ir.values import LabelRef, Sym

_BRANCHTARGETS = re.compile(r"^\s*\.branchtargets\s+(.*?);?\s*$", re.S)


@dataclass(eq=False)
class Block:
    index: int
    labels: list = field(default_factory=list)
    instrs: list = field(default_factory=list)
    first: int = 0                # index of its first instruction in the function
    succs: list = field(default_factory=list)
    preds: list = field(default_factory=list)
    loop_depth: int = 0
    reachable: bool = True

    @property
    def name(self):
        return self.labels[0] if self.labels else f"B{self.index}"

    @property
    def line(self):
        return self.instrs[0].line if self.instrs else 0


@dataclass(eq=False)
class Loop:
    header: int                   # block index
    blocks: list                  # block indices, sorted
    back_edges: list              # (source block, header)
    depth: int = 1                # 1 for an outermost loop
    parent: int = None            # index into CFG.loops of the enclosing loop
    children: list = field(default_factory=list)

    @property
    def innermost(self):
        return not self.children


class CFG:
    def __init__(self, blocks):
        self.blocks = blocks
        self.idom = []
        self.loops = []
        self._rpo = []
        if blocks:
            self._link_preds()
            self._dominators()
            self._natural_loops()

    @property
    def instructions(self):
        return [i for b in self.blocks for i in b.instrs]

    def _link_preds(self):
        for b in self.blocks:
            for s in b.succs:
                self.blocks[s].preds.append(b.index)

    # -- dominators (Cooper, Harvey and Kennedy, "A Simple, Fast Dominance Algorithm") ------------
    def _dominators(self):
        n = len(self.blocks)
        order, seen = [], [False] * n
        stack = [(0, iter(self.blocks[0].succs))]
        seen[0] = True
        while stack:                      # iterative DFS: deep CFGs must not hit recursion limits
            node, it = stack[-1]
            for s in it:
                if not seen[s]:
                    seen[s] = True
                    stack.append((s, iter(self.blocks[s].succs)))
                    break
            else:
                order.append(node)
                stack.pop()
        rpo = order[::-1]
        self._rpo = rpo
        pos = {b: i for i, b in enumerate(rpo)}
        for b in self.blocks:
            b.reachable = seen[b.index]
        idom = [None] * n
        idom[0] = 0
        changed = True
        while changed:
            changed = False
            for b in rpo[1:]:
                new = None
                for p in self.blocks[b].preds:
                    if idom[p] is None:
                        continue
                    if new is None:
                        new = p
                        continue
                    a, c = p, new
                    while a != c:
                        while pos[a] > pos[c]:
                            a = idom[a]
                        while pos[c] > pos[a]:
                            c = idom[c]
                    new = a
                if idom[b] != new:
                    idom[b] = new
                    changed = True
        self.idom = idom

    def dominates(self, a, b):
        """Whether block a dominates block b (both reachable)."""
        if self.idom[b] is None or self.idom[a] is None:
            return False
        while True:
            if a == b:
                return True
            if b == 0:
                return False
            b = self.idom[b]

    def dominators(self, b):
        """Blocks dominating b, from b up to the entry."""
        out = []
        if self.idom[b] is None:
            return out
        while True:
            out.append(b)
            if b == 0:
                return out
            b = self.idom[b]

    # -- loops ----------------------------------------------------------------------------------
    def _natural_loops(self):
        bodies, backs = {}, {}
        for b in self.blocks:
            if not b.reachable:
                continue
            for s in b.succs:
                if self.dominates(s, b.index):
                    body = bodies.setdefault(s, {s})
                    backs.setdefault(s, []).append((b.index, s))
                    work = [b.index]
                    while work:
                        x = work.pop()
                        if x in body:
                            continue
                        body.add(x)
                        work.extend(p for p in self.blocks[x].preds if self.blocks[p].reachable)
        loops = [Loop(h, sorted(body), backs[h]) for h, body in bodies.items()]
        loops.sort(key=lambda l: (len(l.blocks), l.header))
        sets = [set(l.blocks) for l in loops]
        for i, l in enumerate(loops):
            for j in range(i + 1, len(loops)):      # smallest strictly larger loop containing it
                if loops[j].header != l.header and sets[i] <= sets[j]:
                    l.parent = j
                    break
        # in program order of their headers, an enclosing loop before loops inside it
        order = sorted(range(len(loops)), key=lambda i: (loops[i].header, self._nesting(loops, i)))
        remap = {old: new for new, old in enumerate(order)}
        self.loops = [loops[i] for i in order]
        for l in self.loops:
            l.parent = remap[l.parent] if l.parent is not None else None
        for i, l in enumerate(self.loops):
            l.depth = self._nesting(self.loops, i)
            if l.parent is not None:
                self.loops[l.parent].children.append(i)
            for b in l.blocks:
                self.blocks[b].loop_depth = max(self.blocks[b].loop_depth, l.depth)

    @staticmethod
    def _nesting(loops, i):
        d = 1
        while loops[i].parent is not None:
            i = loops[i].parent
            d += 1
        return d

    def innermost_loop_of(self, block):
        """Index of the innermost loop containing the block, or None."""
        best = None
        for i, l in enumerate(self.loops):
            if block in l.blocks and (best is None or l.depth > self.loops[best].depth):
                best = i
        return best

    def own_blocks(self, loop_index):
        """Blocks of a loop that no inner loop contains (they run once per iteration)."""
        inner = set()
        for c in self.loops[loop_index].children:
            inner.update(self.loops[c].blocks)
        return [b for b in self.loops[loop_index].blocks if b not in inner]


def build_cfg(kernel):
    """The CFG of a function body."""
    blocks, label_block, pending, cur = [], {}, [], None
    targets = _branch_tables(kernel.body)
    n = 0
    for s in kernel.body:
        if isinstance(s, Label):
            if cur is not None and cur.instrs:
                cur = None
            pending.append(s.name)
        elif isinstance(s, Instr):
            if cur is None:
                cur = Block(len(blocks), pending, [], n)
                for name in pending:
                    label_block[name] = cur.index
                pending = []
                blocks.append(cur)
            cur.instrs.append(s)
            n += 1
            if s.is_terminator:
                cur = None
    targeted = {o.name for b in blocks for i in b.instrs if i.is_branch for o in i.operands
                if isinstance(o, LabelRef)}
    if targeted.intersection(pending):   # a branch to the end of the body: an empty exit block
        b = Block(len(blocks), pending, [], n)
        for name in pending:
            label_block[name] = b.index
        blocks.append(b)
    for b in blocks:
        last = b.instrs[-1] if b.instrs else None
        nxt = b.index + 1 if b.index + 1 < len(blocks) else None
        succ = []
        if last is not None and last.is_branch:
            names = []
            for o in last.operands:
                if isinstance(o, (LabelRef, Sym)):
                    # brx.idx names a '.branchtargets' table: its entries are the successors
                    names.extend(targets.get(o.name, [o.name]) if last.opcode == "brx"
                                 else [o.name])
            succ.extend(label_block[x] for x in names if x in label_block)
            if last.guard is not None and nxt is not None:
                succ.append(nxt)
        elif last is not None and last.is_terminator:
            if last.guard is not None and nxt is not None:
                succ.append(nxt)
        elif nxt is not None:
            succ.append(nxt)
        b.succs = list(dict.fromkeys(succ))
    return CFG(blocks)


def _branch_tables(body):
    """{label: [targets]} of '.branchtargets' tables (brx.idx jumps through them)."""
    tables, last_label = {}, None
    for s in body:
        if isinstance(s, Label):
            last_label = s.name
            continue
        if isinstance(s, Verbatim) and last_label is not None:
            m = _BRANCHTARGETS.match(s.text)
            if m:
                tables[last_label] = [x.strip() for x in m.group(1).split(",") if x.strip()]
        last_label = None
    return tables
