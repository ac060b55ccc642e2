"""The named GEMM epilogues (`ptxgen.matmul(a, b, epilogue="bias_gelu")`), each traced from a
small Python function with schedule/epilogue.py's operations, and the names' parser."""
import math

from ..errors import PtxgenError
from .epilogue import Epilogue, Tensor, erf, maximum, sigmoid, tanh, trace_epilogue

GELU_K0 = 2.0 * math.sqrt(2.0 / math.pi)       # 0.5x(1 + tanh(u)) = x * sigmoid(2u)
GELU_K1 = GELU_K0 * 0.044715


def gelu_tanh(x):
    """GELU, tanh form: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), written x*sigmoid(2u)."""
    return x * sigmoid(x * (GELU_K0 + GELU_K1 * (x * x)))


def gelu_erf(x):
    """GELU, exact form: 0.5x(1 + erf(x/sqrt(2)))."""
    return 0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))


def silu(x):
    return x * sigmoid(x)


def relu(x):
    return maximum(x, 0.0)


ACTIVATIONS = {"gelu": gelu_tanh, "gelu_tanh": gelu_tanh, "gelu_erf": gelu_erf, "silu": silu,
               "relu": relu, "sigmoid": sigmoid, "tanh": tanh}


def _named(name):
    """One of NAMED: a plain one, or bias_<activation> / <activation> / residual ..."""
    if name == "bias":
        return trace_epilogue(lambda acc, row, col, bias: acc + bias[col], name,
                              bias=Tensor("col"))
    if name == "residual":
        return trace_epilogue(lambda acc, row, col, residual: acc + residual[row, col], name,
                              residual=Tensor("elem"))
    if name == "row_scale":
        return trace_epilogue(lambda acc, row, col, scale: acc * scale[row], name,
                              scale=Tensor("row"))
    if name == "col_scale":
        return trace_epilogue(lambda acc, row, col, scale: acc * scale[col], name,
                              scale=Tensor("col"))
    if name in ACTIVATIONS:
        f = ACTIVATIONS[name]
        return trace_epilogue(lambda acc, row, col: f(acc), name)
    if name.startswith("bias_") and name[5:] in ACTIVATIONS:
        f = ACTIVATIONS[name[5:]]
        return trace_epilogue(lambda acc, row, col, bias: f(acc + bias[col]), name,
                              bias=Tensor("col"))
    if name == "bias_gelu_residual":
        return trace_epilogue(lambda acc, row, col, bias, residual:
                              gelu_tanh(acc + bias[col]) + residual[row, col], name,
                              bias=Tensor("col"), residual=Tensor("elem"))
    raise PtxgenError(f"unknown epilogue {name!r}; one of {', '.join(NAMED)}")


NAMED = ("bias", "relu", "gelu_tanh", "gelu_erf", "silu", "residual", "row_scale", "col_scale",
         "bias_relu", "bias_gelu", "bias_gelu_tanh", "bias_gelu_erf", "bias_silu",
         "bias_gelu_residual", "gelu", "sigmoid", "tanh", "bias_sigmoid", "bias_tanh")


def named_epilogue(name):
    """A named epilogue (NAMED): "bias", "bias_gelu" (= tanh GELU), "silu", ..."""
    if not isinstance(name, str):
        raise PtxgenError(f"epilogue name must be a string, got {name!r}")
    return _named(name)


def as_epilogue(e):
    """None, an Epilogue, or a name of NAMED (with ":fast" for the .approx math, e.g.
    "bias_gelu:fast") -> None or an Epilogue."""
    if e is None or isinstance(e, Epilogue):
        return e
    if isinstance(e, str):
        name, _, math = e.partition(":")
        return named_epilogue(name).with_math(math or "ieee")
    raise PtxgenError(f"epilogue must be None, a name ({', '.join(NAMED[:6])}, ...) or a traced "
                      f"Epilogue (trace_epilogue), got {type(e).__name__}")
