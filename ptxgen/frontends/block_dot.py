"""`acc += bk.dot(a, b)`: block matmul kernels handed to ptxgen's SGEMM schedule."""
import ast
import inspect
import textwrap

from ..errors import PtxgenError


def find_dot(fn):
    """Whether the kernel's source calls a `dot` (bk.dot or a bare dot)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "dot") or \
                    (isinstance(f, ast.Name) and f.id == "dot"):
                return True
    return False


def lower_dot_kernel(kernel, arch, warps, hints, constexprs):
    raise PtxgenError(f"{kernel.name}: bk.dot needs ptxgen.schedule.matmul.lower_matmul")
