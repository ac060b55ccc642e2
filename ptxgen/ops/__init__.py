"""The operator library: each operator builds IR and knows its launch, inputs and reference."""
from ..errors import PtxgenError
from .base import Launch, Operator
from .matmul import Matmul
from .saxpy import Saxpy

OPERATORS = {op.name: op for op in (Saxpy(), Matmul())}


def get_operator(name):
    try:
        return OPERATORS[name]
    except KeyError:
        raise PtxgenError(f"unknown kernel {name!r}; known: {', '.join(sorted(OPERATORS))}") \
            from None


__all__ = ["OPERATORS", "get_operator", "Launch", "Operator"]
