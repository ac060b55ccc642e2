"""matmul: C = A @ B, row-major fp32 (FFMA only).

By default the kernel is lowered from a MatmulSchedule (ptxgen.schedule): a register-blocked
SIMT SGEMM whose schedule is chosen per shape — the tuned one cached for the shape's class and
target (ptxgen.tune, `ptxgen tune matmul`) when there is one, else default_schedule — or the one
given. With schedule=None it is the simple tiled kernel: one output per thread, 16x16 threads,
shared-memory tiles with predicated edges.

When K or N is not a multiple of 4, rows of A or B are not 16-byte aligned and the kernel
loads that operand 32 bits at a time (C rows then go through shared memory in the epilogue, so
its stores stay whole 128-byte rows). pack=True instead copies A into an M x K4 buffer and B
into a K4 x N4 one (rounded up to 4, zero-filled; ops/pack.py), runs the kernel with 128-bit
loads on them and leaves the last 1-4 columns past a multiple of BN to matmul_edge
(ops/matmul_edge.py): up to four launches (steps()), scratch buffers A_packed and B_packed
(workspace()). It is off by default: the copies cost what the wide loads save
(docs/PERF.md#fp32-gemm-no-tensor-cores).
"""
import numpy as np

from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from ..lower import lower_matmul
from ..schedule import MatmulSchedule, default_schedule
from ..schedule.tuned import tuned_matmul_schedule
from . import matmul_edge as edgemod
from . import pack as packmod
from .base import Launch, Operator, Step

_UNBUILT = object()


class Matmul(Operator):
    name = "matmul"
    shape_names = ("M", "N", "K")
    defaults = {"M": 256, "N": 256, "K": 256}
    inputs = ("A", "B")
    outputs = ("C",)
    tile = 16

    def __init__(self, schedule="auto", pack=False):
        """schedule: "auto" (the default schedule for each shape), a MatmulSchedule, or None
        for the simple 16x16 tiled kernel. pack: copy misaligned operands to aligned buffers
        first (module docstring)."""
        if not (schedule == "auto" or schedule is None or isinstance(schedule, MatmulSchedule)):
            raise PtxgenError(f"matmul: schedule must be 'auto', None or a MatmulSchedule, "
                              f"got {schedule!r}")
        if not isinstance(pack, bool):
            raise PtxgenError(f"matmul: pack must be True or False, got {pack!r}")
        self.schedule, self.pack = schedule, pack
        self._built = {}            # shape → (schedule, packs) build() chose, for launch()

    def packs(self, shape, arch=DEFAULT_TARGET):
        """Whether `shape` runs on packed copies of A and B (see the module docstring)."""
        if not self.pack or self.schedule_for(shape, arch) is None:
            return False
        return shape["K"] % 4 != 0 or shape["N"] % 4 != 0

    def plan(self, shape, arch=DEFAULT_TARGET):
        """(schedule, packs, edge columns) for `shape`: with packing, when N leaves 1 to
        MAX_COLS columns past a multiple of the block tile's BN, those go to matmul_edge."""
        s = self.schedule_for(shape, arch)
        packs = self.packs(shape, arch)
        edge = shape["N"] % s.BN if packs else 0
        if not (0 < edge <= edgemod.MAX_COLS and shape["N"] > edge):
            edge = 0
        return s, packs, edge

    def schedule_for(self, shape, arch=DEFAULT_TARGET):
        """The MatmulSchedule used for `shape` on `arch` (None: the simple tiled kernel)."""
        if self.schedule == "auto":
            return tuned_matmul_schedule(arch, shape) or default_schedule(shape, arch)
        return self.schedule

    def build(self, shape, arch=DEFAULT_TARGET):
        s, packs, edge = plan = self.plan(shape, arch)
        # launch() has no arch: it uses what the last build of this shape chose
        self._built[_key(shape)] = plan
        if packs:
            m = lower_matmul(s, arch, _main_shape(shape, edge), name=self.name)
            packmod.add_pad_copy(m)
            return edgemod.add_matmul_edge(m, edge) if edge else m
        if s is not None:
            return lower_matmul(s, arch, shape, name=self.name)
        return self._build_tiled(shape, arch)

    def _choice(self, shape):
        got = self._built.get(_key(shape), _UNBUILT)
        return self.plan(shape) if got is _UNBUILT else got

    def steps(self, shape, arch=DEFAULT_TARGET, sm_count=None):
        main = super().steps(shape, arch, sm_count)
        _, packs, edge = self._choice(shape)
        if not packs:
            return main
        M, N, K = shape["M"], shape["N"], shape["K"]
        K4, N4 = packmod.padded(K), packmod.padded(N)
        steps = [Step(packmod.KERNEL, packmod.pad_launch(M, K4),
                      lambda a: packmod.pad_args(M, K, M, K4, a["A"], a["A_packed"])),
                 Step(packmod.KERNEL, packmod.pad_launch(K4, N4),
                      lambda a: packmod.pad_args(K, N, K4, N4, a["B"], a["B_packed"]))] + main
        if edge:
            steps.append(Step(edgemod.KERNEL, edgemod.edge_launch(M), lambda a: edgemod.edge_args(
                M, N - edge, K4, N4, N, a["A_packed"], a["B_packed"], a["C"])))
        return steps

    def workspace(self, shape, arch=DEFAULT_TARGET):
        if not self._choice(shape)[1]:
            return {}
        M, K4, N4 = shape["M"], packmod.padded(shape["K"]), packmod.padded(shape["N"])
        return {"A_packed": ((M, K4), np.float32), "B_packed": ((K4, N4), np.float32)}

    def _build_tiled(self, shape, arch):
        TS = self.tile
        m = Module(target=arch)
        k = m.add_kernel("matmul", [
            Param("M", T.u32), Param("N", T.u32), Param("K", T.u32),
            Param("A", T.u64, ptr(T.f32)), Param("B", T.u64, ptr(T.f32)),
            Param("C", T.u64, ptr(T.f32))])
        k.directives.append(f".reqntid {TS}, {TS}, 1")
        b = Builder(k)
        M, N, K = b.param("M"), b.param("N"), b.param("K")
        A, B, C = b.param("A"), b.param("B"), b.param("C")
        As = b.shared("As", T.f32, TS * TS, align=16)
        Bs = b.shared("Bs", T.f32, TS * TS, align=16)
        tx, ty = b.special("tid.x"), b.special("tid.y")
        row = b.mad(b.special("ctaid.y"), TS, ty, name="row")
        col = b.mad(b.special("ctaid.x"), TS, tx, name="col")
        as_base, bs_base = b.address_of(As), b.address_of(Bs)
        # this thread's slot in each tile: (ty*TS + tx)*4 bytes
        slot = b.shl(b.mad(ty, TS, tx, name="slot"), 2, name="slot")
        as_st, bs_st = b.add(as_base, slot, name="as_st"), b.add(bs_base, slot, name="bs_st")
        as_row = b.add(as_base, b.mul(ty, TS * 4, name="arow"), name="as_row")   # As[ty][*]
        bs_col = b.add(bs_base, b.shl(tx, 2, name="bcol"), name="bs_col")        # Bs[*][tx]
        row_ok, col_ok = b.setp("lt", row, M), b.setp("lt", col, N)
        acc = b.const(0.0, T.f32, name="acc")
        zero = 0.0
        with b.for_range(0, K, TS, type=T.u32, name="k0") as k0:
            # As[ty][tx] = A[row, k0+tx] (0 outside); Bs[ty][tx] = B[k0+ty, col] (0 outside)
            ka, kb = b.add(k0, tx, name="ka"), b.add(k0, ty, name="kb")
            a_ok = b.and_(row_ok, b.setp("lt", ka, K), name="aok")
            b_ok = b.and_(col_ok, b.setp("lt", kb, K), name="bok")
            av = b.const(zero, T.f32, name="av")
            bv = b.const(zero, T.f32, name="bv")
            with b.predicated(a_ok):
                b.ld("global", T.f32, b.element_addr(A, b.mad(row, K, ka, name="ai"), 4), out=av)
            with b.predicated(b_ok):
                b.ld("global", T.f32, b.element_addr(B, b.mad(kb, N, col, name="bi"), 4), out=bv)
            b.st("shared", as_st, av)
            b.st("shared", bs_st, bv)
            b.bar_sync(0)
            for kk in range(TS):
                a_s = b.ld("shared", T.f32, Addr(as_row, kk * 4), name="a")
                b_s = b.ld("shared", T.f32, Addr(bs_col, kk * TS * 4), name="b")
                b.fma(a_s, b_s, acc, out=acc)
            b.bar_sync(0)
        ok = b.and_(row_ok, col_ok, name="ok")
        with b.if_(ok):
            b.st("global", b.element_addr(C, b.mad(row, N, col, name="ci"), 4), acc)
        b.ret()
        return m

    def launch(self, shape, sm_count=None):
        """The main kernel's launch."""
        s, packs, edge = self._choice(shape)
        if s is not None:                                          # static shared memory only
            return Launch(grid=s.grid(_main_shape(shape, edge) if packs else shape),
                          block=s.block())
        TS = self.tile
        return Launch(grid=(-(-shape["N"] // TS), -(-shape["M"] // TS), 1), block=(TS, TS, 1))

    def make_inputs(self, shape, rng):
        M, N, K = shape["M"], shape["N"], shape["K"]
        return {"A": rng.standard_normal((M, K)).astype(np.float32),
                "B": rng.standard_normal((K, N)).astype(np.float32),
                "C": np.full((M, N), np.nan, dtype=np.float32)}

    def kernel_args(self, shape, arrays):
        """The main kernel's arguments: on A_packed and B_packed when this shape packs."""
        _, packs, edge = self._choice(shape)
        if packs:
            return [np.uint32(shape["M"]), np.uint32(shape["N"] - edge),
                    np.uint32(packmod.padded(shape["K"])), arrays["A_packed"],
                    arrays["B_packed"], arrays["C"]]
        return [np.uint32(shape["M"]), np.uint32(shape["N"]), np.uint32(shape["K"]),
                arrays["A"], arrays["B"], arrays["C"]]

    def reference(self, shape, arrays):
        return {"C": arrays["A"].astype(np.float64) @ arrays["B"].astype(np.float64)}

    def tolerance_scale(self, shape):
        # fp32 accumulation error grows like sqrt(K) for random normal data
        return 4.0 * float(np.sqrt(shape["K"]))

    def flops(self, shape):
        return 2 * shape["M"] * shape["N"] * shape["K"]

    def bytes_moved(self, shape):
        return 4 * (shape["M"] * shape["K"] + shape["K"] * shape["N"] + shape["M"] * shape["N"])


def _key(shape):
    return tuple(sorted(shape.items()))


def _main_shape(shape, edge):
    """The shape the main kernel is lowered for: with packing, K and B's stride rounded up to
    4 and the last `edge` columns left to matmul_edge (C's stride stays N)."""
    N = shape["N"]
    return {"M": shape["M"], "N": N - edge, "K": packmod.padded(shape["K"]),
            "ldb": packmod.padded(N), "ldc": N}
