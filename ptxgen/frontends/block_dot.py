"""`acc += bk.dot(a, b)`: block matmul kernels handed to ptxgen's SGEMM schedule.

A register-blocked SGEMM is not something elementwise tracing can produce (fragments, shared
tiles, double buffering), so a kernel that calls `dot` is recognised as a whole and lowered
with ptxgen.schedule's MatmulSchedule / ptxgen.lower's lower_matmul. The form accepted is the usual one:

    @bk.kernel(num_warps=8)
    def mm(A: bk.pointer, B: bk.pointer, C: bk.pointer, M: bk.int32, N: bk.int32, K: bk.int32,
           BM: bk.constexpr, BN: bk.constexpr, BK: bk.constexpr):
        ...                                     # rows/cols of the C tile
        acc = bk.zeros([BM, BN])
        for k in bk.range(0, K, BK):
            a = bk.load(...)                    # the A tile
            b = bk.load(...)                    # the B tile
            acc += bk.dot(a, b)
        bk.store(..., acc, mask=...)

with row-major, contiguous A [M, K], B [K, N], C [M, N]: the three pointers in that order, the
three sizes in that order, and the tile sizes as constexprs BM, BN, BK. The structure is checked
on the source; the tile addressing itself is the schedule's. The kernel keeps the schedule's
parameter order (M, N, K, A, B, C) and grid; BlockKernel's launcher reorders the arguments.
"""
import ast
import inspect
import textwrap

from ..errors import PtxgenError


def _source_tree(fn):
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


def _is_call(node, name):
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == name) or \
        (isinstance(f, ast.Name) and f.id == name)


def find_dot(fn):
    """Whether the kernel's source calls a `dot` (bk.dot or a bare dot)."""
    tree = _source_tree(fn)
    return tree is not None and any(_is_call(n, "dot") for n in ast.walk(tree))


def check_form(kernel):
    """The roles {A, B, C, M, N, K} → parameter names; PtxgenError when the kernel is not of the
    accepted form."""
    fn, name = kernel.fn, kernel.name
    tree = _source_tree(fn)
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For) and _is_call(n.iter, "range")
             and isinstance(n.iter.func, ast.Attribute)]
    dots = [(loop, s) for loop in loops for s in ast.walk(loop) if isinstance(s, ast.AugAssign)
            and isinstance(s.op, ast.Add) and _is_call(s.value, "dot")]
    if len(dots) != 1:
        raise PtxgenError(f"{name}: bk.dot is supported as one `acc += bk.dot(a, b)` inside a "
                          f"`for k in bk.range(...)` loop")
    loop, aug = dots[0]
    loaded = {t.id for s in ast.walk(loop) if isinstance(s, ast.Assign)
              and _is_call(s.value, "load") for t in s.targets if isinstance(t, ast.Name)}
    args = aug.value.args
    if len(args) != 2 or not all(isinstance(a, ast.Name) and a.id in loaded for a in args):
        raise PtxgenError(f"{name}: bk.dot's operands must be tiles loaded in the loop")
    if not any(_is_call(n, "store") for n in ast.walk(tree)):
        raise PtxgenError(f"{name}: a matmul kernel must store its accumulator")
    pointers, ints = [], []
    for pname, p in inspect.signature(fn).parameters.items():
        kind = getattr(p.annotation, "kind", None)
        if kind == "pointer":
            pointers.append(pname)
        elif kind == "scalar":
            ints.append(pname)
    if len(pointers) != 3 or len(ints) != 3:
        raise PtxgenError(f"{name}: a matmul kernel takes pointers A, B, C and sizes M, N, K")
    return dict(zip("ABC", pointers)) | dict(zip("MNK", ints))


def pick_schedule(BM, BN, BK, warps, arch):
    """The first valid MatmulSchedule with these tiles and warps (thread tiles 8x8, then 4x4)."""
    from ..schedule.matmul import MatmulSchedule
    from ..errors import ScheduleError
    tried = []
    for TM, TN in ((8, 8), (4, 8), (8, 4), (4, 4)):
        for lanes_m in (4, 8, 2, 16, 1, 32):
            lanes_n = 32 // lanes_m
            WM, WN = TM * lanes_m, TN * lanes_n
            if WM > BM or WN > BN or (BM // WM) * (BN // WN) != warps:
                continue
            for ctas in (2, 1):
                s = MatmulSchedule(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, TM=TM, TN=TN,
                                   min_ctas_per_sm=ctas)
                try:
                    return s.validate(arch)
                except ScheduleError as e:
                    tried.append(str(e))
    raise PtxgenError(f"no SGEMM schedule has a {BM}x{BN}x{BK} tile with {warps} warps"
                      + (f" ({tried[0]})" if tried else ""))


def lower_dot_kernel(kernel, arch, warps, hints, constexprs):
    try:
        from ..lower import lower_matmul
    except ImportError:
        raise PtxgenError(f"{kernel.name}: bk.dot needs ptxgen.lower (the SGEMM "
                          f"lowering), which this build lacks") from None
    roles = check_form(kernel)
    missing = [c for c in ("BM", "BN", "BK") if c not in constexprs]
    if missing:
        raise PtxgenError(f"{kernel.name}: a matmul kernel needs constexprs BM, BN, BK "
                          f"(missing {', '.join(missing)})")
    s = pick_schedule(constexprs["BM"], constexprs["BN"], constexprs["BK"], warps, arch)
    # 128-bit global tiles only when K and N are promised multiples of 4; else scalar loads
    wide = all(hints.get(roles[d], 1) % 4 == 0 for d in "KN")
    shape = None if wide else {"M": 1, "N": 1, "K": 1}
    kernel.dot_roles, kernel.dot_schedule = roles, s
    return lower_matmul(s, arch, shape, name=kernel.name)
