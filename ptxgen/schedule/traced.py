"""Python operators for values traced into IR: the user's epilogue, score_mod and mask_mod
functions run once on symbolic values, and each operator records a node instead of computing.

`TracedOperators` maps the arithmetic, comparison and logical operators onto one method,
`_bin(op, other, swap)`, which each tracer implements for its own node type
(`schedule/epilogue.py`, `schedule/score_mods.py`). `ForwardedOperators` is for objects that
stand for a traced value (an extra tensor read elementwise, the block API's accumulator): the
operators apply to `_v()`, the value they stand for.
"""


class TracedOperators:
    """+ - * / < <= > >= == != & | on a traced value, each one `_bin` call."""
    __slots__ = ()

    def _bin(self, op, other, swap=False):
        raise NotImplementedError

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __truediv__(self, o): return self._bin("div", o)
    def __rtruediv__(self, o): return self._bin("div", o, True)
    def __lt__(self, o): return self._bin("lt", o)
    def __le__(self, o): return self._bin("le", o)
    def __gt__(self, o): return self._bin("gt", o)
    def __ge__(self, o): return self._bin("ge", o)
    def __eq__(self, o): return self._bin("eq", o)
    def __ne__(self, o): return self._bin("ne", o)
    def __and__(self, o): return self._bin("and", o)
    def __rand__(self, o): return self._bin("and", o, True)
    def __or__(self, o): return self._bin("or", o)
    def __ror__(self, o): return self._bin("or", o, True)


class ForwardedOperators:
    """Arithmetic and comparisons on an object that stands for a traced value `self._v()`."""
    __slots__ = ()

    def _v(self):
        raise NotImplementedError

    def __add__(self, o): return self._v() + o
    def __radd__(self, o): return o + self._v()
    def __sub__(self, o): return self._v() - o
    def __rsub__(self, o): return o - self._v()
    def __mul__(self, o): return self._v() * o
    def __rmul__(self, o): return o * self._v()
    def __truediv__(self, o): return self._v() / o
    def __rtruediv__(self, o): return o / self._v()
    def __neg__(self): return -self._v()
    def __lt__(self, o): return self._v() < o
    def __le__(self, o): return self._v() <= o
    def __gt__(self, o): return self._v() > o
    def __ge__(self, o): return self._v() >= o
