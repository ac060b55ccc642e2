"""Function bodies: labels, guarded instructions with their operands, register declarations
and the verbatim pieces (inline-asm scopes, call sequences, .loc lines) kept for the round trip.

Operands map onto the IR values: registers (looked up through the enclosing scopes, so an
inline-asm scope's registers shadow the function's), special registers, symbols, labels,
immediates (hex floats included), addresses, vectors and setp's predicate pairs; text the IR does
not model (call argument lists, expressions, tensor coordinates) stays a Raw operand.
"""
import math
import re
import struct

from ..ir import types as T
from ..ir.instr import Instr, Label, Verbatim
from ..ir.values import Addr, Imm, LabelRef, PredPair, Raw, Reg, Special, Sym, Vec
from .lexer import NUMBER_KINDS as _NUMBER_KINDS, show as _show
from ..ir.opcodes import lookup
from .opcodes import PTX_OPCODES

VAR_SPACES = (".global", ".shared", ".const", ".local")
# '%r<N>' and all declarations of a module together: far above any real kernel (thousands), low
# enough that a few bytes of text cannot make the parser allocate gigabytes of registers
MAX_REG_RANGE = 1 << 18
MAX_REGS_PER_MODULE = 1 << 20
_SPECIAL = re.compile(
    r"(?:tid|ntid|ctaid|nctaid)(?:\.[xyz])?"
    r"|(?:clusterid|nclusterid|cluster_ctaid|cluster_nctaid)(?:\.[xyzw])?"
    r"|laneid|warpid|nwarpid|smid|nsmid|gridid|lanemask_(?:eq|le|lt|ge|gt)|clock|clock_hi"
    r"|clock64|globaltimer|globaltimer_lo|globaltimer_hi|total_smem_size|aggr_smem_size"
    r"|dynamic_smem_size|current_graph_exec|is_explicit_cluster|cluster_ctarank"
    r"|cluster_nctarank|envreg\d+|pm[0-7](?:_64)?|reserved_smem_offset_\w+", re.ASCII)


class FunctionBody:
    """The statements of one function body."""

    def __init__(self, parser, kernel):
        self.p = parser
        self.k = kernel
        # register name → Reg, innermost last; a .func's '.reg' parameters are the outermost
        self.scopes = [{p.name: p.reg for p in kernel.params + kernel.returns
                        if p.reg is not None}, {}]
        self.labels = {}           # every label name in the body (renamed ones included)
        # per open scope: {source label name: IR name}; and branches waiting for a target
        self.scope_labels = [{}]
        self.pending = [[]]        # per open scope: (instr, operand index, token)
        self.unresolved = []       # branches whose target no enclosing scope defines

    def parse(self):
        p, toks, body = self.p, self.p.toks, self.k.body
        open_tok = toks[p.i]
        p.i += 1
        opens = []
        while True:
            tok = toks[p.i]
            k, t, pos = tok
            if k == "p":
                if t == "{":
                    opens.append(tok)
                    self.scopes.append({})
                    self.scope_labels.append({})
                    self.pending.append([])
                    body.append(Verbatim("{", line=p.line_of(tok)))
                    p.i += 1
                elif t == "}":
                    p.i += 1
                    if not opens:
                        break
                    opens.pop()
                    self.scopes.pop()
                    self.close_label_scope()
                    body.append(Verbatim("}", line=p.line_of(tok)))
                elif t == "@":
                    self.instruction(guarded=True)
                elif t == ";":
                    p.i += 1
                else:
                    raise p.error(f"expected an instruction, label or directive, found "
                                  f"{_show(tok)}")
            elif k == "w":
                if t[0] == ".":
                    self.directive(len(opens) == 0)
                elif toks[p.i + 1][1] == ":" and toks[p.i + 1][0] == "p" and t[0] != "%":
                    body.append(Label(self.define_label(t)))
                    p.i += 2
                else:
                    self.instruction(guarded=False)
            elif k == "eof":
                what = f"'{{' at line {p.line_of(opens[-1])}" if opens else \
                    f"the body of {self.k.name} (opened at line {p.line_of(open_tok)})"
                raise p.error(f"unexpected end of input: {what} is not closed")
            else:
                raise p.error(f"expected an instruction, label or directive, found {_show(tok)}")
        self.close_label_scope()
        for ins, j, tok in self.unresolved:
            raise p.error(f"branch target {ins.operands[j].name} is not a label in "
                          f"{self.k.name}", tok)

    # -- labels ----------------------------------------------------------------------------------
    def define_label(self, name):
        """The IR name of a label defined in the innermost scope. PTX scopes labels like
        registers: inline-asm blocks may each define 'waitLoop'. The IR's labels are one flat
        namespace per function, so a repeated name gets a fresh one (name$1 …); branches are
        renamed to match, and the emitted PTX means the same."""
        p, here = self.p, self.scope_labels[-1]
        if name in here:
            raise p.error(f"label {name} is defined twice in {self.k.name}")
        ir_name, n = name, 0
        while ir_name in self.labels:
            n += 1
            ir_name = f"{name}${n}"
        self.labels[ir_name] = name
        here[name] = ir_name
        return ir_name

    def close_label_scope(self):
        """Bind the branches of the closing scope to its labels; the rest look further out."""
        here = self.scope_labels.pop()
        waiting = self.pending.pop()
        outer = self.pending[-1] if self.pending else None
        for ins, j, tok in waiting:
            ir_name = here.get(ins.operands[j].name)
            if ir_name is not None:
                if ir_name != ins.operands[j].name:
                    ops = list(ins.operands)
                    ops[j] = LabelRef(ir_name)
                    ins.operands = tuple(ops)
            elif outer is not None:
                outer.append((ins, j, tok))
            else:
                self.unresolved.append((ins, j, tok))

    # -- declarations and directives -------------------------------------------------------------
    def directive(self, top):
        p, toks = self.p, self.p.toks
        tok = toks[p.i]
        t = tok[1]
        line = p.line_of(tok)
        if t == ".reg" or t.startswith(".reg."):       # '.reg.b16 a, b;' lexes as one word
            regs, text, vector = self.reg_decl()
            # vector registers keep their declaration text: the IR's Reg has no vector type
            if top and not vector:
                self.k.regs.extend(regs)
            else:
                self.k.body.append(Verbatim(text, regs=tuple(regs), line=line))
        elif t in (".loc", ".file"):
            self.k.body.append(Verbatim(p.rest_of_line(), line=line))
        elif top and (t in (".local", ".shared", ".const", ".global") or (
                t == ".extern" and toks[p.i + 1][1] in VAR_SPACES)):
            start = p.i
            linkage = ""
            if t == ".extern":
                linkage = "extern"
                p.i += 1
            p.variable(linkage, start, self.k.vars,
                       lambda text: self.k.body.append(Verbatim(text, line=line)))
        else:
            # .param in call sequences, .pragma, .branchtargets, nested declarations …
            self.k.body.append(Verbatim(p.until_semicolon(), line=line))

    def reg_decl(self):
        p, toks = self.p, self.p.toks
        first = p.i
        p.i += 1
        type_ = None
        vector = False
        # modifiers may be separate words ('.reg .v4 .f32') or joined ('.reg.v4.f32')
        words, wtok = ["." + w for w in toks[first][1].split(".")[2:]], toks[first]
        while words or (toks[p.i][0] == "w" and toks[p.i][1][0] == "."):
            if not words:
                wtok = toks[p.i]
                words = ["." + w for w in wtok[1].split(".")[1:]]
                p.i += 1
            w = words.pop(0)
            if w in (".v2", ".v4", ".v8"):
                vector = True
            elif T.type_of(w) is not None and type_ is None:
                type_ = T.type_of(w)
            else:
                raise p.error(f"unknown register type {w}", wtok)
        if type_ is None:
            raise p.error(f"expected a register type, found {_show(toks[p.i])}")
        scope = self.scopes[-1]
        regs = []
        while True:
            ntok = toks[p.i]
            name = p.word("a register name")
            if toks[p.i][1] == "<" and toks[p.i][0] == "p":
                p.i += 1
                n = p.expect_int("a register count")
                p.expect(">")
                if n > MAX_REG_RANGE:
                    raise p.error(f"register range {name}<{n}> is too large "
                                  f"(limit {MAX_REG_RANGE})", ntok)
                p.reg_count += n
                if p.reg_count > MAX_REGS_PER_MODULE:
                    raise p.error(f"more than {MAX_REGS_PER_MODULE} registers declared", ntok)
                names = [f"{name}{j}" for j in range(n)]
            else:
                names = [name]
            for nm in names:
                if nm in scope:
                    raise p.error(f"register {nm} is declared twice", ntok)
                r = Reg(nm, type_)
                scope[nm] = r
                regs.append(r)
            tok = toks[p.i]
            p.i += 1
            if tok[1] == ";" and tok[0] == "p":
                break
            if tok[1] != "," or tok[0] != "p":
                raise p.error(f"expected ',' or ';' in a register declaration, found "
                              f"{_show(tok)}", tok)
        return regs, p.slice_text(first, p.i - 1), vector

    def lookup(self, name):
        for scope in reversed(self.scopes):
            r = scope.get(name)
            if r is not None:
                return r
        return None

    # -- instructions ----------------------------------------------------------------------------
    def instruction(self, guarded):
        p, toks = self.p, self.p.toks
        first = toks[p.i]
        guard, negated = None, False
        if guarded:
            p.i += 1
            if toks[p.i][1] == "!" and toks[p.i][0] == "p":
                negated = True
                p.i += 1
            gtok = toks[p.i]
            if gtok[0] != "w" or gtok[1][0] == ".":
                raise p.error(f"expected a predicate register after '@', found {_show(gtok)}")
            guard = self.lookup(gtok[1])
            if guard is None:
                raise p.error(f"undeclared register {gtok[1]}", gtok)
            if guard.type != T.pred:
                raise p.error(f"guard {gtok[1]} is .{guard.type}, not a predicate", gtok)
            p.i += 1
        optok = toks[p.i]
        if optok[0] != "w" or not optok[1][0].isalpha():
            raise p.error(f"expected an instruction, found {_show(optok)}")
        parts = optok[1].split(".")
        opcode, mods = parts[0], tuple(parts[1:])
        if "" in mods:
            raise p.error(f"malformed opcode {_show(optok)}", optok)
        if opcode not in PTX_OPCODES:
            raise p.error(f"unknown opcode {opcode!r} (not a PTX instruction)", optok)
        p.i += 1
        row = lookup(opcode, mods)
        ctx = _Operands(self, row.effect == "branch", T.type_of(mods[-1]) if mods else None)
        operands = ctx.parse()
        ins = Instr(opcode, mods, operands, guard, negated, line=p.line_of(first))
        if opcode == "bra":
            self.pending[-1].extend((ins, j, optok) for j, o in enumerate(operands)
                                    if isinstance(o, LabelRef))
        self.k.body.append(ins)


class _Operands:
    """The comma-separated operand list of one instruction, through its ';'."""

    def __init__(self, body, is_branch, itype):
        self.b = body
        self.p = body.p
        self.is_branch = is_branch
        self.float_type = T.f64 if itype is not None and itype.name == "f64" else T.f32

    def parse(self):
        p, toks = self.p, self.p.toks
        out = []
        tok = toks[p.i]
        if tok[1] == ";" and tok[0] == "p":
            p.i += 1
            return ()
        while True:
            tok = toks[p.i]
            if tok[0] == "p" and tok[1] in (",", ";"):
                raise p.error("missing operand")
            if tok[0] == "eof":
                raise p.error("unexpected end of input, expected an operand")
            out.append(self.operand())
            tok = toks[p.i]
            p.i += 1
            if tok[0] == "p" and tok[1] == ";":
                return tuple(out)
            if tok[0] != "p" or tok[1] != ",":
                if tok[0] == "eof":
                    raise p.error("unexpected end of input, expected ';'", tok)
                raise p.error(f"expected ',' or ';' after an operand, found {_show(tok)}", tok)

    def operand(self):
        p, toks = self.p, self.p.toks
        first = p.i
        k, t, _ = toks[p.i]
        if k == "w":
            if t[0] == ".":
                raise p.error(f"unexpected directive {_show(toks[p.i])} in an operand list")
            p.i += 1
            val = self.name(toks[first])
            nk, nt, _ = toks[p.i]
            if nk == "p" and nt == "|":
                p.i += 1
                second = toks[p.i]
                if second[0] != "w" or second[1][0] == ".":
                    raise p.error(f"expected a predicate after '|', found {_show(second)}")
                p.i += 1
                return PredPair(val, self.name(second))
            if nk == "p" and nt in ("+", "-", "("):
                return self.raw_expression(first)
            return val
        if k == "p":
            if t == "[":
                return self.address()
            if t == "{":
                return self.vector()
            if t == "(":
                p.i = self.matching(p.i, "(", ")") + 1
                return Raw(p.slice_text(first, p.i - 1))
            if t == "-":
                p.i += 1
                if toks[p.i][0] not in _NUMBER_KINDS:
                    raise p.error(f"expected a number after '-', found {_show(toks[p.i])}")
                return self.number(negative=True)
            if t == "!":
                p.i += 1
                r = toks[p.i]
                if r[0] != "w" or r[1][0] == ".":
                    raise p.error(f"expected a predicate after '!', found {_show(r)}")
                p.i += 1
                self.name(r)           # must be declared
                return Raw(p.slice_text(first, p.i - 1))
            raise p.error(f"unexpected {_show(toks[p.i])} in an operand list")
        if k in _NUMBER_KINDS:
            return self.number()
        raise p.error(f"unexpected {_show(toks[p.i])} in an operand list")

    def name(self, tok):
        """A word operand: register, special register, label or symbol."""
        t = tok[1]
        r = self.b.lookup(t)
        if r is not None:
            return r
        if t[0] == "%":
            if _SPECIAL.fullmatch(t, 1):
                return Special(t[1:])
            base = t.split(".")[0]
            if "." in t and self.b.lookup(base) is not None:
                return Raw(t)         # a component of a vector register ('%v.x')
            raise self.p.error(f"undeclared register {t}", tok)
        if self.is_branch:
            return LabelRef(t)
        return Sym(t)

    def number(self, negative=False):
        p = self.p
        tok = p.toks[p.i]
        p.i += 1
        k, t, _ = tok
        if k in ("i", "x"):
            return Imm(p.int_value(tok, negative))
        if k == "f":
            bits = int(t[2:], 16)
            if t[1] in "fF":
                v = struct.unpack("<f", struct.pack("<I", bits))[0]
                imm = Imm(-v if negative else v, T.f32)
                want = bits ^ (0x80000000 if negative else 0)
                same = str(imm) == "0f%08X" % want
            else:
                v = struct.unpack("<d", struct.pack("<Q", bits))[0]
                imm = Imm(-v if negative else v, T.f64)
                want = bits ^ (1 << 63 if negative else 0)
                same = str(imm) == "0d%016X" % want
            # NaN payloads that a float round trip would change stay as their exact text
            return imm if same else Raw(("-" if negative else "") + t)
        v = float(t)
        if not math.isfinite(v):
            raise p.error("floating-point literal out of range", tok)
        return Imm(-v if negative else v, self.float_type)

    def matching(self, j, open_, close):
        """Index of the token closing the bracket at j (no ';' or end of input before it)."""
        p, toks = self.p, self.p.toks
        depth = 0
        start = j
        while True:
            k, t, _ = toks[j]
            if k == "eof" or (k == "p" and t == ";"):
                raise p.error(f"'{open_}' is not closed", toks[start])
            if k == "p":
                if t == open_:
                    depth += 1
                elif t == close:
                    depth -= 1
                    if depth == 0:
                        return j
            j += 1

    def raw_expression(self, first):
        """An expression operand ('sym+8', 'generic(sym)'): kept as text up to ',' or ';'."""
        p, toks = self.p, self.p.toks
        j = first
        while True:
            k, t, _ = toks[j]
            if k == "eof":
                raise p.error("unexpected end of input, expected ';'", toks[j])
            if k == "p" and t in (",", ";"):
                break
            if k == "p" and t in ("(", "[", "{"):
                j = self.matching(j, t, {"(": ")", "[": "]", "{": "}"}[t])
            j += 1
        p.i = j
        return Raw(p.slice_text(first, j - 1))

    def address(self):
        """[base], [base+off], [base+-off], [base-off], [imm]; other forms stay Raw."""
        p, toks = self.p, self.p.toks
        first = p.i
        close = self.matching(first, "[", "]")
        inner = toks[first + 1:close]
        p.i = close + 1
        shape = "".join(tk[0] if tk[0] != "p" else tk[1] for tk in inner)
        if shape in ("w", "w+i", "w+x", "w+-i", "w+-x", "w-i", "w-x"):
            btok = inner[0]
            if btok[1][0] == ".":
                raise p.error(f"unexpected {_show(btok)} in an address", btok)
            base = self.name(btok)
            if isinstance(base, LabelRef):
                base = Sym(base.name)
            off = 0
            if len(inner) > 1:
                off = p.int_value(inner[-1], negative=inner[-2][1] == "-")
                if not -(1 << 63) <= off < (1 << 63):
                    raise p.error("address offset out of range", inner[-1])
            return Addr(base, off)
        if shape in ("i", "x"):
            return Addr(Imm(p.int_value(inner[0])))
        if not inner:
            raise p.error("empty address '[]'", toks[first])
        for tk in inner:                          # registers inside must still be declared
            if tk[0] == "w" and tk[1][0] == "%":
                self.name(tk)
        return Raw(p.slice_text(first, close))

    def vector(self):
        p, toks = self.p, self.p.toks
        first = p.i
        close = self.matching(first, "{", "}")
        items = []
        j = first + 1
        ok = True
        while j < close:
            k, t, _ = toks[j]
            if k == "w" and t[0] != ".":
                items.append(self.name(toks[j]))
                j += 1
            elif k in _NUMBER_KINDS or (k == "p" and t == "-" and toks[j + 1][0] in
                                        _NUMBER_KINDS):
                p.i = j + (1 if t == "-" else 0)
                items.append(self.number(negative=t == "-"))
                j = p.i
            else:
                ok = False
                break
            if j < close:
                if toks[j][1] != "," or toks[j][0] != "p":
                    ok = False
                    break
                j += 1
                if j == close:
                    raise p.error("missing vector element before '}'", toks[j])
        p.i = close + 1
        if not ok or not items:
            for tk in toks[first + 1:close]:
                if tk[0] == "w" and tk[1][0] == "%":
                    self.name(tk)
            return Raw(p.slice_text(first, close))
        return Vec(tuple(items))
