"""The operator library: each operator builds IR and knows its launch, inputs and reference."""
from ..errors import PtxgenError
from .base import Launch, Operator
from .matmul import Matmul
from .saxpy import Saxpy
from .elementwise import Add, Scale
from .reduce import RowReduce
from .softmax import Softmax
from .transpose import Transpose

OPERATORS = {op.name: op for op in (Saxpy(), Matmul(), Add(), Scale(), Transpose(),
                                    RowReduce("sum"), RowReduce("max"), Softmax())}


def get_operator(name):
    try:
        return OPERATORS[name]
    except KeyError:
        raise PtxgenError(f"unknown kernel {name!r}; known: {', '.join(sorted(OPERATORS))}") \
            from None


__all__ = ["OPERATORS", "get_operator", "Launch", "Operator"]
