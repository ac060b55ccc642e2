"""Lift stage, writing: a parsed Module → a Python script that rebuilds it with the Builder.

The script declares the module (target, version, header directives, variables), then one
`build_<name>` function per kernel: its parameters, register declarations (`r = declare_range(k,
"%r", T.b32, 12)` for PTX's %r<12>, so %r5 reads r[5]), shared/local variables and every body
statement in order. Guarded runs sit under `with b.predicated(p):`; simple natural loops (a
contiguous run of blocks entered at its header label and closed by one branch back to it) sit
indented under `with loop(b, "$header"):`. Statement order is exactly the original's, which is
what makes ptxas produce the same SASS.
"""
import re

from ..analysis.cfg import build_cfg
from ..ir.instr import Instr, Label, Verbatim
from ..ir.values import Addr, LabelRef, regs_in
from .calls import GLOBALS, Checker, Renderer
from ..names import short_name
from .names import identifier
from .prelude import AddrPlus0

_NUMBERED = re.compile(r"^%([A-Za-z_$][A-Za-z_$]*?)(\d+)$")
_TARGET = re.compile(r"^\s*\.target\s+([^;/\n]+)", re.M)
RESERVED = set(GLOBALS) | {"b", "k", "m", "Builder", "Module", "Param", "Pointer", "Var",
                           "Verbatim", "declare_range", "loop", "emit_module", "build_module",
                           "sys", "AddrPlus0"}
IMPORTS = [
    ("ptxgen.emit", ["emit_module"]),
    ("ptxgen.ir", ["types as T"]),
    ("ptxgen.ir.builder", ["Builder"]),
    ("ptxgen.ir.instr", ["Instr", "Verbatim"]),
    ("ptxgen.ir.module", ["Module", "Param", "Pointer", "Var"]),
    ("ptxgen.ir.values", ["Addr", "Imm", "LabelRef", "PredPair", "Raw", "Reg", "Special", "Sym",
                          "Vec"]),
    ("ptxgen.lift.prelude", ["AddrPlus0", "declare_range", "loop"]),
]


def lift_module(module, text, filename, kernel=None):
    """Python source rebuilding `module` (parsed from `text`); with `kernel`, only that entry
    (exact, demangled or unique-substring name) and the module's .func functions."""
    kernels = module.kernels
    if kernel is not None:
        entry = module.kernel(kernel)
        kernels = [k for k in module.kernels if k is entry or k.kind != "entry"]
    target = module.target
    m = _TARGET.search(text)
    if m and "," in m.group(1):
        # target options ('sm_90, debug') change how ptxas compiles; the IR keeps only the
        # name, so the script restores the directive's full text
        target = ", ".join(x.strip() for x in m.group(1).split(","))
    keep_zero_offsets(kernels, text)
    fn_names, builders = set(RESERVED), []
    for k in kernels:
        base = short_name(k.name) + ("_func" if k.kind == "func" else "")
        fn = identifier("build_" + base, fn_names)
        fn_names.add(fn)
        builders.append((fn, k))
    lines = [f'"""{_title(kernels, filename)}: lifted from {filename} by `ptxgen lift`.',
             "",
             "Edit the Builder calls, then `python THIS_FILE > kernel.ptx` re-emits the PTX.",
             '"""']
    body = []
    body.append("HEADER = [")
    body.extend(f"    {h!r}," for h in module.header)
    body.append("]")
    body.append("")
    for fn, k in builders:
        body.append("")
        body.extend(KernelWriter(k, fn).lines())
        body.append("")
    body.append("")
    body.append("def build_module():")
    body.append(f"    m = Module(target={target!r}, version={module.version!r}, "
                f"address_size={module.address_size})")
    body.append("    m.header.extend(HEADER)")
    for v in module.vars:
        body.append(f"    m.vars.append({_var(v)})")
    for fn, _ in builders:
        body.append(f"    {fn}(m)")
    body.append("    return m")
    body.append("")
    body.append("")
    body.append('if __name__ == "__main__":')
    # the lifted kernel is foreign PTX that ptxas judged, not IR this script vouches for; once
    # edited, drop verify=False to have the verifier check it like any Builder-made kernel
    body.append("    sys.stdout.write(emit_module(build_module(), verify=False))")
    code = "\n".join(body)
    lines.append("import sys")
    lines.append("")
    for mod, names in IMPORTS:
        used = [n for n in names if re.search(r"\b%s\b" % n.split()[-1], code)]
        if used:
            lines.append(f"from {mod} import {', '.join(used)}")
    lines.append("")
    return "\n".join(lines) + "\n" + code + "\n"


def keep_zero_offsets(kernels, text):
    """Addresses the source spelled '[%r+0]' become AddrPlus0 (see there), found on the
    instruction's own source line."""
    lines = text.splitlines()
    for k in kernels:
        for s in k.body:
            if not isinstance(s, Instr) or not 0 < s.line <= len(lines):
                continue
            src = lines[s.line - 1]
            if "+" not in src:
                continue
            ops = list(s.operands)
            for j, o in enumerate(ops):
                if type(o) is Addr and o.offset == 0 and re.search(
                        r"\[\s*%s\s*\+\s*0\s*\]" % re.escape(str(o.base)), src):
                    ops[j] = AddrPlus0(o.base)
            s.operands = tuple(ops)


def _title(kernels, filename):
    entries = [short_name(k.name) for k in kernels if k.kind == "entry"]
    return ", ".join(entries) or filename


def _param(p, R):
    args = [R.name(p.name), f"T.{p.type}"]
    if p.pointer is not None:
        q = p.pointer
        args.append(f"pointer=Pointer(T.{q.elem}, {q.space!r}, {q.align})")
    if p.array:
        args.append(f"array={p.array}")
    if p.align:
        args.append(f"align={p.align}")
    if p.reg is not None:                  # a .func's .reg parameter: the register itself
        args.append(f"reg=Reg({p.reg.name!r}, T.{p.reg.type})")
    return f"Param({', '.join(args)})"


def _var(v):
    args = [repr(v.name), repr(v.space), f"T.{v.type}"]
    for field, default in (("count", 1), ("align", 0), ("extern", False), ("init", ""),
                           ("linkage", "")):
        value = getattr(v, field)
        if value != default:
            args.append(f"{field}={value!r}")
    return f"Var({', '.join(args)})"


class KernelWriter:
    def __init__(self, kernel, fn):
        self.k = kernel
        self.fn = fn
        self.names = {}                  # id(Reg) → Python expression
        self.taken = set(RESERVED)
        self.R = Renderer(self.names)
        self.checker = Checker({})

    def lines(self):
        k = self.k
        kind = "entry" if k.kind == "entry" else "function"
        out = [f"def {self.fn}(m):",
               f'    """The {kind} {short_name(k.name)}'
               + (f" (PTX name {k.name})" if short_name(k.name) != k.name else "") + '."""']
        name = repr(k.name)
        if len(k.name) > 40:         # a mangled name: said once, as a constant
            const = identifier(short_name(k.name).upper() + "_PTX_NAME", self.taken)
            self.taken.add(const)
            out.append(f"    {const} = {k.name!r}")
            self.R.prefixes.append((k.name, const))
            self.checker.bind(const, k.name)
            name = const
        params = "".join(f"\n        {_param(p, self.R)}," for p in k.params)
        out.append(f"    k = m.add_kernel({name}, params=[{params}\n    ], kind={k.kind!r})"
                   if k.params else f"    k = m.add_kernel({name}, kind={k.kind!r})")
        if k.linkage != "visible":
            out.append(f"    k.linkage = {k.linkage!r}")
        if k.returns:
            out.append(f"    k.returns = [{', '.join(_param(p, self.R) for p in k.returns)}]")
        if k.directives:
            out.append(f"    k.directives = {list(k.directives)!r}")
        for v in k.vars:
            out.append(f"    k.vars.append({_var(v)})")
        out.extend("    " + line for line in self.declarations())
        out.append("    b = Builder(k)")
        out.extend(self.body())
        return out

    # -- registers -----------------------------------------------------------------------------
    def _bind(self, reg, expr, name):
        self.names[id(reg)] = expr
        self.taken.add(name)

    def declarations(self):
        regs, out = self.k.regs, []
        by_stem = {}
        for pos, r in enumerate(regs):
            m = _NUMBERED.match(r.name)
            if m:
                by_stem.setdefault(m.group(1), []).append((pos, int(m.group(2)), r))
        ranges = {}
        for stem, items in by_stem.items():
            first = items[0][0]
            if len(items) >= 2 and len({r.type for _, _, r in items}) == 1 and all(
                    pos == first + j and num == j for j, (pos, num, _) in enumerate(items)):
                ranges[first] = (stem, items)
        skip = set()
        for pos, r in enumerate(regs):
            if pos in skip:
                continue
            if pos in ranges:
                stem, items = ranges[pos]
                py = identifier(stem, self.taken)
                for j, (p, _, reg) in enumerate(items):
                    self._bind(reg, f"{py}[{j}]", py)
                    skip.add(p)
                out.append(f"{py} = declare_range(k, {'%' + stem!r}, T.{r.type}, {len(items)})")
                self.checker.bind(py, [reg for _, _, reg in items])
                continue
            py = self._single(r)
            out.append(f"{py} = k.declare(Reg({r.name!r}, T.{r.type}))")
        declared = {id(r) for r in regs}
        declared.update(id(r) for s in self.k.body if isinstance(s, Verbatim) for r in s.regs)
        for s in self.k.body:          # registers used without any declaration the IR saw
            if isinstance(s, Instr):
                for r in [s.guard] + [x for o in s.operands for x in regs_in(o)]:
                    if r is not None and id(r) not in declared:
                        declared.add(id(r))
                        out.append(f"{self._single(r)} = Reg({r.name!r}, T.{r.type})")
        return out

    def _single(self, r):
        py = identifier(r.name.lstrip("%"), self.taken)
        self._bind(r, py, py)
        self.checker.bind(py, r)
        return py

    # -- statements ----------------------------------------------------------------------------
    def body(self):
        loops = simple_loops(self.k)
        starts = {s: (e, h) for s, e, h in loops}
        items, open_ends = [], []          # items: (depth, guard key or None, code)
        for i, s in enumerate(self.k.body):
            depth = len(open_ends)
            if i in starts:
                end, header = starts[i]
                items.append((depth, None, f"with loop(b, {header!r}):  # back edge at its end"))
                open_ends.append(end)
            elif isinstance(s, Label):
                items.append((depth, None, f"b.label({s.name!r})"))
            elif isinstance(s, Instr):
                code, guarded = self.checker.statement(s, self.R)
                key = (id(s.guard), s.guard_negated) if guarded else None
                items.append((depth, key, code) if not guarded else
                             (depth, key, code, s.guard, s.guard_negated))
            else:
                for r in s.regs:
                    py = self._single_local(r)
                    items.append((depth, None, f"{py} = Reg({r.name!r}, T.{r.type})"))
                regs = "".join(f"{self.names[id(r)]}, " for r in s.regs)
                extra = f", regs=({regs.rstrip(' ')})" if s.regs else ""
                items.append((depth, None, f"b.block.append(Verbatim({s.text!r}{extra}))"))
            while open_ends and open_ends[-1] == i:
                open_ends.pop()
        return self._indent(items)

    def _single_local(self, r):
        py = identifier(r.name.lstrip("%"), self.taken)
        self._bind(r, py, py)
        self.checker.bind(py, r)
        return py

    def _indent(self, items):
        out, j = [], 0
        while j < len(items):
            depth, key = items[j][0], items[j][1]
            pad = "    " * (depth + 1)
            if key is None:
                out.append(pad + items[j][2])
                j += 1
                continue
            guard, neg = items[j][3], items[j][4]
            flag = ", negate=True" if neg else ""
            out.append(f"{pad}with b.predicated({self.names[id(guard)]}{flag}):")
            while j < len(items) and items[j][0] == depth and items[j][1] == key:
                out.append(pad + "    " + items[j][2])
                j += 1
        return out


def simple_loops(kernel):
    """(first statement, last statement, header label) of each natural loop that is a
    contiguous run of blocks entered at its header's label and closed by one branch back."""
    cfg = build_cfg(kernel)
    where = {id(s): i for i, s in enumerate(kernel.body)}
    label_at = {s.name: i for i, s in enumerate(kernel.body) if isinstance(s, Label)}
    found = []
    for loop in cfg.loops:
        h, t = loop.blocks[0], loop.blocks[-1]
        head = cfg.blocks[h]
        if loop.header != h or loop.blocks != list(range(h, t + 1)) or \
                loop.back_edges != [(t, h)] or not head.labels or not cfg.blocks[t].instrs:
            continue
        last = cfg.blocks[t].instrs[-1]
        if not (last.is_branch and any(isinstance(o, LabelRef) and o.name in head.labels
                                       for o in last.operands)):
            continue
        start, end = label_at[head.labels[0]], where[id(last)]
        if start < end:
            found.append((start, end, head.labels[0]))
    found.sort()
    nested = []
    for s, e, h in found:          # keep only properly nested regions
        if all(e2 < s or s2 > e or (s2 <= s and e <= e2) or (s <= s2 and e2 <= e)
               for s2, e2, _ in nested):
            nested.append((s, e, h))
    return nested
