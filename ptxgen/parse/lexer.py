"""PTX tokenizer: one compiled regex walks the text; no per-character Python loop.

A token is a tuple (kind, text, pos) with pos the offset of its first character. Kinds:
  w  word: an identifier, opcode with modifiers ('ld.global.nc.v4.f32', 'ld.L2::128B'),
     directive ('.reg') or register ('%r1', '%tid.x')
  f  hexadecimal float literal ('0f3F800000', '0d3FF0000000000000')
  x  hexadecimal integer, i decimal integer, d decimal float
  s  string literal, p punctuation
Comments and whitespace produce no tokens. `Source` turns offsets into line and column.
"""
import bisect
import re

from ..errors import ParseError

_TOKEN = re.compile(r"""
[ \t\r\n\f\v]*
(?:
   (?P<c>//[^\n]*|/\*.*?\*/)
  |(?P<w>[%.]?[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|::)[A-Za-z0-9_$]+)*)
  |(?P<f>0[fF][0-9a-fA-F]{8}(?![A-Za-z0-9_$])|0[dD][0-9a-fA-F]{16}(?![A-Za-z0-9_$]))
  |(?P<x>0[xX][0-9a-fA-F]+[uU]?)
  |(?P<d>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  |(?P<i>[0-9]+[uU]?)
  |(?P<s>"(?:[^"\\\n]|\\.)*")
  |(?P<p>[,;:{}\[\]()<>+\-*@!|=])
  |(?P<uc>/\*)
  |(?P<us>")
  |(?P<end>\Z)
  |(?P<bad>.)
)""", re.X | re.S | re.ASCII)


NUMBER_KINDS = ("i", "x", "f", "d")


def show(tok):
    """A token for an error message: its text quoted (shortened), or 'end of input'."""
    if tok[0] == "eof":
        return "end of input"
    text = tok[1]
    return repr(text if len(text) <= 40 else text[:37] + "...")


class Source:
    """The text being parsed and its file name; maps offsets to 1-based line and column."""

    def __init__(self, text, filename):
        self.text = text
        self.filename = filename
        self._newlines = None

    def linecol(self, pos):
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_left(self._newlines, pos)
        start = self._newlines[line - 1] + 1 if line else 0
        return line + 1, pos - start + 1

    def line(self, pos):
        return self.linecol(pos)[0]

    def error(self, message, pos):
        line, col = self.linecol(pos)
        return ParseError(message, line, col, self.filename)


def _describe(ch):
    if ch.isprintable() and not ch.isspace():
        return repr(ch)
    return "U+%04X" % ord(ch)


def tokenize(source):
    """All tokens of the source, in order. Invalid characters, an unterminated comment or string
    raise ParseError at their position."""
    toks = []
    append = toks.append
    for m in _TOKEN.finditer(source.text):
        kind = m.lastgroup
        if kind == "c":
            continue
        if kind == "end":
            break
        pos = m.start(kind)
        if kind == "bad":
            raise source.error(f"unexpected character {_describe(m.group(kind))}", pos)
        if kind == "uc":
            raise source.error("unterminated /* comment", pos)
        if kind == "us":
            raise source.error("unterminated string literal", pos)
        append((kind, m.group(kind), pos))
    return toks
