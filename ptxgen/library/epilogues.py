"""What an epilogue or a score/mask function may call (`from ptxgen.epilogues import *`):
traced operations on symbolic values (ptxgen/schedule/epilogue.py), never evaluated per element.
NAMED lists the epilogues `ptxgen.matmul(..., epilogue="name")` knows."""
from ..schedule.epilogue import (Tensor, cast, erf, exp, maximum, minimum, sigmoid, sqrt, tanh,
                                 trace_epilogue, where)
from ..schedule.named_epilogues import NAMED, gelu_erf, gelu_tanh, relu, silu

__all__ = ["NAMED", "Tensor", "cast", "erf", "exp", "gelu_erf", "gelu_tanh", "maximum",
           "minimum", "relu", "sigmoid", "silu", "sqrt", "tanh", "trace_epilogue", "where"]
