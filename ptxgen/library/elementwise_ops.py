"""The fp32 memory-bound operators — softmax, transpose, row_sum, row_max, saxpy, add, scale —
on torch tensors and numpy arrays (docs/operators.md): FFMA (SIMT) kernels."""
import numpy as np

from ..errors import PtxgenError
from .common import IMPLS, cached_op, contiguous, pick_backend, pick_target, public_call, \
    run_op, scalar_arg
from .inputs import operand, same_place


def _f32_call(fn, factory, named, shape_of, outputs, scalars=None, backend="auto", target=None):
    """Run one of the fp32 SIMT operators: `named` {kernel array name: (argument name, value)},
    shape_of(first operand's shape) -> the operator's shape, outputs {name: shape function}."""
    ops = [operand(arg, v, fn, ("f32",)) for arg, v in named.values()]
    on_gpu = same_place(fn, *ops) if len(ops) > 1 else ops[0].on_gpu
    be = pick_backend(fn, backend, on_gpu)
    arch = pick_target(fn, target, be, False)
    op = cached_op(factory)
    try:
        shape = op.shape(**shape_of(ops[0].shape))
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {e}") from None
    arrays = {name: contiguous(v) for name, (_, v) in named.items()}
    scal = {k: np.float32(v) for k, v in (scalars or {}).items()}
    res = run_op(fn, op, shape, arch, be, "f32", arrays,
                 {n: (f(shape), "f32") for n, f in outputs.items()}, on_gpu, ops[0].is_torch,
                 scalars=scal)
    return res["out"]


def _rows(function, shape):
    if len(shape) != 2:
        raise PtxgenError(f"ptxgen.{function}: x must be 2-D (rows, cols), got shape {shape}")
    return {"M": shape[0], "N": shape[1]}


def _flat(function, *shapes):
    if len({tuple(s) for s in shapes}) > 1:
        raise PtxgenError(f"ptxgen.{function}: operands differ in shape: "
                          f"{', '.join(str(tuple(s)) for s in shapes)}")
    return {"n": int(np.prod(shapes[0]))}


def softmax(x, *, backend="auto", target=None):
    """Row-wise softmax of a 2-D f32 array (rows, cols)."""
    return public_call("softmax", (x,), backend, target)


def softmax_impl(x, *, backend="auto", target=None):
    from ..ops.softmax import Softmax
    return _f32_call("softmax", Softmax, {"x": ("x", x)}, lambda s: _rows("softmax", s),
                     {"out": lambda sh: (sh["M"], sh["N"])}, backend=backend, target=target)


def transpose(x, *, backend="auto", target=None):
    """The transpose of a 2-D f32 array, as a new (cols, rows) array."""
    return public_call("transpose", (x,), backend, target)


def transpose_impl(x, *, backend="auto", target=None):
    from ..ops.transpose import Transpose
    return _f32_call("transpose", Transpose, {"x": ("x", x)}, lambda s: _rows("transpose", s),
                     {"out": lambda sh: (sh["N"], sh["M"])}, backend=backend, target=target)


def row_sum(x, *, backend="auto", target=None):
    """The sum of each row of a 2-D f32 array."""
    return public_call("row_sum", (x,), backend, target)


def row_sum_impl(x, *, backend="auto", target=None):
    from ..ops.reduce import RowReduce
    return _f32_call("row_sum", lambda: RowReduce("sum"), {"x": ("x", x)},
                     lambda s: _rows("row_sum", s), {"out": lambda sh: (sh["M"],)},
                     backend=backend, target=target)


def row_max(x, *, backend="auto", target=None):
    """The largest element of each row of a 2-D f32 array."""
    return public_call("row_max", (x,), backend, target)


def row_max_impl(x, *, backend="auto", target=None):
    from ..ops.reduce import RowReduce
    return _f32_call("row_max", lambda: RowReduce("max"), {"x": ("x", x)},
                     lambda s: _rows("row_max", s), {"out": lambda sh: (sh["M"],)},
                     backend=backend, target=target)


def saxpy(a, x, y, *, backend="auto", target=None):
    """a·x + y for a float a and f32 arrays x, y of one shape."""
    return public_call("saxpy", (a, x, y,), backend, target)


def saxpy_impl(a, x, y, *, backend="auto", target=None):
    from ..ops.saxpy import Saxpy
    shape = getattr(x, "shape", ())
    out = _f32_call("saxpy", Saxpy, {"x": ("x", x), "y": ("y", y)},
                    lambda s: _flat("saxpy", s, getattr(y, "shape", ())),
                    {"out": lambda sh: (sh["n"],)}, {"a": scalar_arg("saxpy", "a", a)},
                    backend, target)
    return out.reshape(shape)


def add(x, y, *, backend="auto", target=None):
    """x + y for f32 arrays of one shape."""
    return public_call("add", (x, y,), backend, target)


def add_impl(x, y, *, backend="auto", target=None):
    from ..ops.elementwise import Add
    shape = getattr(x, "shape", ())
    out = _f32_call("add", Add, {"x": ("x", x), "y": ("y", y)},
                    lambda s: _flat("add", s, getattr(y, "shape", ())),
                    {"out": lambda sh: (sh["n"],)}, backend=backend, target=target)
    return out.reshape(shape)


def scale(s, x, *, backend="auto", target=None):
    """s·x for a float s and an f32 array x."""
    return public_call("scale", (s, x,), backend, target)


def scale_impl(s, x, *, backend="auto", target=None):
    from ..ops.elementwise import Scale
    shape = getattr(x, "shape", ())
    out = _f32_call("scale", Scale, {"x": ("x", x)}, lambda sh: _flat("scale", sh),
                    {"out": lambda sh: (sh["n"],)}, {"s": scalar_arg("scale", "s", s)},
                    backend, target)
    return out.reshape(shape)


IMPLS.update(softmax=softmax_impl, transpose=transpose_impl, row_sum=row_sum_impl,
             row_max=row_max_impl, saxpy=saxpy_impl, add=add_impl, scale=scale_impl)
