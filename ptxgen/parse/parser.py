"""PTX text → the ptxgen IR (ptxgen.ir.Module).

A single pass over the token list. Module directives fill Module fields; what the IR does not
model at module scope (.file, .section debug blocks, function prototypes, .alias) is kept as
verbatim header text so that emit_module(parse_ptx(text)) is accepted by ptxas. Inside a function
every instruction becomes an Instr, whatever its opcode; inline-asm scopes and their local
declarations stay as Verbatim statements so the round trip preserves them.

Every failure is a ParseError naming file, line and column; nothing in here recurses, so deep
nesting cannot exhaust the Python stack.
"""
import math
import re

from ..errors import ParseError
from ..ir import types as T
from ..ir.module import Kernel, Module, Param, Pointer, Var
from ..ir.values import Reg
from .body import VAR_SPACES, FunctionBody
from .lexer import Source, show as _show, tokenize

LINKAGE = (".visible", ".extern", ".weak", ".common")
PTR_SPACES = (".global", ".shared", ".const", ".local")
# Function-header directives between the parameter list and the body (kept verbatim).
FUNC_DIRECTIVES = frozenset({
    ".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".noreturn",
    ".pragma", ".explicitcluster", ".reqnctapercluster", ".maxclusterrank", ".blocksareclusters",
})


class Parser:
    def __init__(self, text, filename):
        self.src = Source(text, filename)
        self.text = text
        self.toks = tokenize(self.src)
        self.toks.append(("eof", "", len(text)))
        self.i = 0
        self.reg_count = 0
        self.module = Module(filename=filename, parsed=True)

    # -- token helpers ---------------------------------------------------------------------------
    def error(self, message, tok=None):
        tok = tok if tok is not None else self.toks[self.i]
        return self.src.error(message, tok[2])

    def expect(self, text, what=None):
        tok = self.toks[self.i]
        if tok[1] != text or tok[0] in ("s", "eof"):
            raise self.error(f"expected {what or repr(text)}, found {_show(tok)}")
        self.i += 1
        return tok

    def expect_int(self, what):
        tok = self.toks[self.i]
        if tok[0] not in ("i", "x"):
            raise self.error(f"expected {what}, found {_show(tok)}")
        self.i += 1
        return self.int_value(tok)

    def int_value(self, tok, negative=False):
        text = tok[1].rstrip("uU")
        if len(text) > 40:
            raise self.error("integer literal out of 64-bit range", tok)
        v = int(text[2:], 16) if tok[0] == "x" else int(text)
        if negative:
            v = -v
        if not -(1 << 63) <= v < (1 << 64):
            raise self.error("integer literal out of 64-bit range", tok)
        return v

    def end_of(self, tok):
        return tok[2] + len(tok[1])

    def slice_text(self, first, last):
        """Source text from token index first to token index last, inclusive."""
        return self.text[self.toks[first][2]:self.end_of(self.toks[last])]

    def rest_of_line(self):
        """Consume the tokens on the current line ('.loc', '.file' end at the newline)."""
        start = self.i
        eol = self.text.find("\n", self.toks[start][2])
        if eol < 0:
            eol = len(self.text)
        j = start
        while self.toks[j][0] != "eof" and self.toks[j][2] < eol:
            j += 1
        self.i = j
        return self.slice_text(start, j - 1)

    def until_semicolon(self):
        """Consume through the next ';' (outside braces); the text, ';' included."""
        start, depth = self.i, 0
        j = start
        while True:
            k, t, _ = self.toks[j]
            if k == "eof":
                raise self.error("unexpected end of input, expected ';'", self.toks[j])
            if k == "p":
                if t == ";" and depth == 0:
                    break
                if t == "{":
                    depth += 1
                elif t == "}":
                    if depth == 0:
                        raise self.error(f"expected ';' before {_show(self.toks[j])}",
                                         self.toks[j])
                    depth -= 1
            j += 1
        self.i = j + 1
        return self.slice_text(start, j)

    def line_of(self, tok):
        return self.src.line(tok[2])

    # -- module scope ----------------------------------------------------------------------------
    def parse(self):
        m = self.module
        if self.toks[0][0] == "eof":
            raise self.src.error("empty input: no PTX statements", 0)
        while True:
            tok = self.toks[self.i]
            k, t, _ = tok
            if k == "eof":
                return m
            if k == "p" and t == "}":
                raise self.error("unbalanced '}': no block is open")
            if k != "w" or t[0] != ".":
                raise self.error(f"expected a directive at module scope, found {_show(tok)}")
            if t == ".version":
                self.i += 1
                v = self.toks[self.i]
                if v[0] != "d" or not re.fullmatch(r"\d{1,3}\.\d{1,3}", v[1]):
                    raise self.error(f"expected a version like 8.0, found {_show(v)}")
                m.version = v[1]
                self.i += 1
            elif t == ".target":
                self.i += 1
                names = [self.word("target name")]
                while self.toks[self.i][1] == ",":
                    self.i += 1
                    names.append(self.word("target option"))
                m.target = names[0]
            elif t == ".address_size":
                self.i += 1
                size = self.expect_int("32 or 64")
                if size not in (32, 64):
                    raise self.error(f".address_size must be 32 or 64, not {size}", tok)
                m.address_size = size
            elif t in (".file", ".loc"):
                m.header.append(self.rest_of_line())
            elif t == ".section":
                m.header.append(self.section())
            elif t in (".pragma", ".alias"):
                m.header.append(self.until_semicolon())
            elif t in LINKAGE or t in (".entry", ".func") or t in VAR_SPACES:
                self.declaration()
            else:
                raise self.error(f"unknown module directive {_show(tok)}")

    def word(self, what):
        tok = self.toks[self.i]
        if tok[0] != "w" or tok[1][0] == ".":
            raise self.error(f"expected {what}, found {_show(tok)}")
        self.i += 1
        return tok[1]

    def section(self):
        """'.section name { … }' kept whole (DWARF bytes; ptxas needs nothing from it parsed)."""
        start = self.i
        self.i += 1
        if self.toks[self.i][0] != "w":
            raise self.error(f"expected a section name, found {_show(self.toks[self.i])}")
        while self.toks[self.i][0] != "eof" and self.toks[self.i][1] != "{":
            self.i += 1
        open_tok = self.expect("{")
        depth = 1
        while depth:
            k, t, _ = self.toks[self.i]
            if k == "eof":
                raise self.error(f"unexpected end of input: '{{' of .section at line "
                                 f"{self.line_of(open_tok)} is not closed")
            if k == "p" and t == "{":
                depth += 1
            elif k == "p" and t == "}":
                depth -= 1
            self.i += 1
        return self.slice_text(start, self.i - 1)

    def declaration(self):
        start = self.i
        linkage = []
        while self.toks[self.i][1] in LINKAGE and self.toks[self.i][0] == "w":
            linkage.append(self.toks[self.i][1][1:])
            self.i += 1
        t = self.toks[self.i][1]
        if len(linkage) > 1:
            raise self.error(f"conflicting linkage .{linkage[0]} and .{linkage[1]}")
        if t in (".entry", ".func"):
            self.function(linkage[0] if linkage else "", start)
        elif t in VAR_SPACES:
            self.variable(linkage[0] if linkage else "", start, self.module.vars,
                          self.module.header.append)
        else:
            raise self.error(f"expected .entry, .func or a variable after .{linkage[-1]}, "
                             f"found {_show(self.toks[self.i])}")

    # -- variables -------------------------------------------------------------------------------
    def variable(self, linkage, start, out, keep):
        """A variable declaration → a Var appended to `out`; shapes Var cannot express (vector
        or texture types, several names, constant banks) are passed to `keep` as text."""
        space_tok = self.toks[self.i]
        space = space_tok[1][1:]
        self.i += 1
        align, type_, modelled = 0, None, True
        while self.toks[self.i][0] == "w" and self.toks[self.i][1][0] == ".":
            w = self.toks[self.i][1]
            self.i += 1
            if w == ".align":
                align = self.expect_int("an alignment")
            elif T.type_of(w) is not None and type_ is None:
                type_ = T.type_of(w)
            else:
                modelled = False          # .v4, .texref, .attribute … : keep the text
        if self.toks[self.i][1] == "[":   # '.const[2]' banks
            modelled = False
        decl_start = self.i
        self.until_semicolon()
        full = self.slice_text(start, self.i - 1)
        if type_ is None and modelled:
            raise self.error("variable declaration without a type", space_tok)
        if not modelled:
            keep(full)
            return
        self.i = decl_start
        name = self.word("variable name")
        dims = []
        while self.toks[self.i][1] == "[" and self.toks[self.i][0] == "p":
            self.i += 1
            if self.toks[self.i][1] == "]":
                dims.append(None)
            else:
                n = self.expect_int("an array size")
                if n > (1 << 40):
                    raise self.error("array size out of range")
                dims.append(n)
            self.expect("]")
        init = ""
        if self.toks[self.i][1] == "=" and self.toks[self.i][0] == "p":
            self.i += 1
            init_first = self.i
            self.until_semicolon()
            if self.i - 1 == init_first:
                raise self.error("expected an initializer after '='", self.toks[init_first])
            init = self.slice_text(init_first, self.i - 2).strip()
        elif self.toks[self.i][1] != ";":
            # several names in one declaration, or syntax Var does not model
            self.i = decl_start
            self.until_semicolon()
            keep(full)
            return
        else:
            self.i += 1
        extern = linkage == "extern"
        if len(dims) > 1 and init.startswith("{"):
            init = "{" + init[1:-1].replace("{", "").replace("}", "") + "}"
        if None in dims:
            if len(dims) > 1 and dims.index(None) != 0:
                raise self.error("only the first array dimension may be left empty")
            known = math.prod(d for d in dims if d is not None)
            if init.startswith("{"):
                count = init.count(",") + 1 if init.strip("{} \t\n") else 0
            else:
                count = 0
            if init and known and count % known:
                raise self.error("initializer does not fill the array")
        else:
            count = math.prod(dims) if dims else 1
        out.append(Var(name, space, type_, count, align, extern=extern, init=init,
                       linkage="" if extern else linkage))

    # -- functions -------------------------------------------------------------------------------
    def function(self, linkage, start):
        kind_tok = self.toks[self.i]
        kind = "entry" if kind_tok[1] == ".entry" else "func"
        self.i += 1
        returns = []
        if kind == "func" and self.toks[self.i][1] == "(":
            returns = self.param_list(kind)
        name = self.word("a function name")
        params = self.param_list(kind) if self.toks[self.i][1] == "(" else []
        directives = []
        while self.toks[self.i][0] == "w" and self.toks[self.i][1] in FUNC_DIRECTIVES:
            first = self.i
            d = self.toks[self.i][1]
            self.i += 1
            if d == ".pragma":
                directives.append(self.slice_text(first, first) + " " + self.until_semicolon())
                continue
            while self.toks[self.i][0] in ("i", "x") or self.toks[self.i][1] == ",":
                self.i += 1
            directives.append(self.slice_text(first, self.i - 1))
        tok = self.toks[self.i]
        if tok[1] == ";" and tok[0] == "p":
            # a prototype: kept as text, the definition (if any) follows later
            self.i += 1
            self.module.header.append(self.slice_text(start, self.i - 1))
            return
        if tok[1] != "{" or tok[0] != "p":
            raise self.error(f"expected '{{' or ';' after the header of {name}, found "
                             f"{_show(tok)}")
        k = Kernel(name=name, params=params, kind=kind, returns=returns, linkage=linkage,
                   directives=directives, line=self.line_of(kind_tok))
        self.module.kernels.append(k)
        FunctionBody(self, k).parse()

    def param_list(self, kind):
        self.expect("(")
        params = []
        if self.toks[self.i][1] == ")":
            self.i += 1
            return params
        while True:
            params.append(self.param(kind))
            tok = self.toks[self.i]
            self.i += 1
            if tok[1] == ")" and tok[0] == "p":
                return params
            if tok[1] != "," or tok[0] != "p":
                raise self.error(f"expected ',' or ')' in a parameter list, found {_show(tok)}",
                                 tok)

    def param(self, kind):
        tok = self.toks[self.i]
        if tok[1] == ".reg":
            return self.reg_param(kind)
        self.expect(".param", "'.param'")
        align, type_, is_ptr, space = 0, None, False, ""
        while self.toks[self.i][0] == "w" and self.toks[self.i][1][0] == ".":
            w = self.toks[self.i][1]
            self.i += 1
            if w == ".align":
                align = self.expect_int("an alignment")
            elif w == ".ptr":
                is_ptr = True
            elif is_ptr and w in PTR_SPACES:
                space = w[1:]
            elif T.type_of(w) is not None and type_ is None:
                type_ = T.type_of(w)
            else:
                raise self.error(f"unsupported parameter attribute {w}", self.toks[self.i - 1])
        if type_ is None:
            raise self.error("parameter without a type", tok)
        name = self.word("a parameter name")
        array = 0
        if self.toks[self.i][1] == "[":
            self.i += 1
            array = self.expect_int("an array size")
            if not 0 < array <= (1 << 32):
                raise self.error("parameter array size out of range")
            self.expect("]")
        if is_ptr:
            return Param(name, type_, Pointer(T.b8, space, align or 4))
        return Param(name, type_, array=array, align=align)


    def reg_param(self, kind):
        """'.reg .b32 %a' in a .func's parameter or return list: a register the body uses
        directly (the callee's copy of the argument)."""
        tok = self.toks[self.i]
        if kind != "func":
            raise self.error("register parameters (.reg) are only allowed on a .func", tok)
        self.i += 1
        w = self.toks[self.i]
        type_ = T.type_of(w[1]) if w[0] == "w" and w[1][0] == "." else None
        if type_ is None:
            raise self.error(f"expected a register type, found {_show(w)}", w)
        self.i += 1
        name = self.word("a parameter name")
        return Param(name, type_, reg=Reg(name, type_))


def parse_ptx(text, filename="<ptx>"):
    """Parse PTX text into a Module. Any malformed input raises ParseError (file:line:col)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise ParseError(f"expected PTX text, got {type(text).__name__}", 0, 0, filename)
    parser = None
    try:
        parser = Parser(text, filename)
        return parser.parse()
    except ParseError:
        raise
    except (RecursionError, MemoryError, ValueError, OverflowError, IndexError) as e:
        # a bug or a resource limit: still report it where parsing stopped, as one line
        line, col = (0, 0)
        if parser is not None and parser.i < len(parser.toks):
            line, col = parser.src.linecol(parser.toks[parser.i][2])
        msg = " ".join(str(e).split())[:200]
        raise ParseError(f"cannot parse: {type(e).__name__}: {msg}", line, col,
                         filename) from None
