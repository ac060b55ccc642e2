"""Tensor-core matmul: C = A @ B with bf16, f16 or tf32 inputs, f32 accumulation, f32 or bf16 C.

Layouts: A row-major (a_layout="row", the array "A", M x K) or column-major ("col": the array "At",
K x M); B column-major (b_layout="col", the array "Bt", N x K) or row-major ("row": "B", K x N).
Row-major A and column-major B are K-major, as wgmma reads them without transposing; the other two
are M-/N-major, loaded in 64-wide boxes and read through wgmma's transpose bits (bf16 and f16
only: tf32 wgmma has no transpose, so tf32 takes the K-major layouts). 16-bit inputs travel as numpy uint16 bit patterns for bf16 (numpy
has no bfloat16) and as float16 for f16; a bf16 C is uint16 bits too. tf32 inputs are float32
arrays: the tensor cores read their top 19 bits (sign, exponent, 10 fraction bits). The kernel is lowered from
a TcMatmulSchedule for sm_90a (ptxgen/lower/tc_matmul.py): TMA loads, an mbarrier
ring, wgmma, persistent CTAs. Tensor maps need 16-byte aligned rows: an operand whose
stored rows are not (K, or M / N for the transposed layouts, not a multiple of 8; tf32: 4) is first
copied into a zero-padded workspace array (ops/pack.py, pad_copy_b16), or, for a K-major operand
with k_pack="ldg", copied by the producer warpgroup itself with cp.async and re-aligned in shared
memory (lower/ldg_producer.py), or with k_pack="fused" pad-copied inside the GEMM kernel by
the producer's idle warps while it runs (lower/fused_pad.py); k_pack="auto" is the measured
choice of the shipped defaults (schedule/data/defaults.json, docs/PERF.md#odd-shapes).
M and N may be anything (TMA fills and clips the edges).

The reference is float64 of the exact 16-bit inputs. Products of 16-bit floats are exact in the
f32 accumulator, so the error is the accumulation's: at most about K units in the last place of
f32 relative to sum |a||b| (check() bounds each element by that), plus the final rounding of a
bf16 C.
"""
import dataclasses

import numpy as np

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from ..errors import Arg, PtxgenError, Spelled
from ..arrays import TiledMap
from ..lower import lower_tc_matmul
from ..schedule.tc_matmul import ELEM_BYTES, MN_BOX, OUT_BYTES, SWIZZLE_BYTES, TcMatmulSchedule
from ..ir import types as T
from ..lower.fused_pad import chunk_table, first_wave_rows, HEADER_WORDS, staging_bytes
from ..lower.ldg_producer import side_bytes
from ..lower.split_k import split_k_workspace
from ..schedule.matmul import target_limits
from ..schedule.defaults import choice
from ..schedule.tuned import tuned_tc_schedule
from ..schedule.named_epilogues import as_epilogue
from . import pack as packmod
from .base import Launch, Operator, Step, sm_count_or_default
from .mma_matmul import MmaSyncMatmulPath
from .tensor_path import INSTRUCTIONS, MMA_SYNC, WGMMA, InstructionPaths

# the chip sm_90a code runs on: its SM count (isa) sizes default grids and picks schedules
TC_CHIP = DEFAULT_TARGET
F32_ULP = 2.0 ** -23
BF16_ULP = 2.0 ** -7
TF32_ULP = 2.0 ** -10         # tf32 keeps 10 fraction bits of an f32 input
MAP_DTYPE = {"bf16": "bf16", "f16": "f16", "tf32": "f32",     # the tensor maps' element type
             "e4m3": "u8", "e5m2": "u8"}
# How K-major operands whose rows are not 16-byte aligned reach the kernel: "pad" (a zero-padded
# copy, then TMA), "ldg" (the producer's cp.async copies), "fused" (the padded copy made inside
# the GEMM by the producer's idle warps; pad copies where the schedule is not persistent with
# cluster_m=1), "fused1" (only the operand the first wave needs fewer rows of copied inside);
# "auto": the measured default "tc_matmul.k_pack" (docs/PERF.md#odd-shapes). M-/N-major
# misaligned operands are always pad-copied.
K_PACKS = ("auto", "pad", "ldg", "fused", "fused1")
FUSED_PACKS = ("fused", "fused1")


def default_tc_schedule(shape, sm_count=None, dtype=None):
    """The schedule for a shape the tune cache has no entry for: by the rounds ("waves") of
    128x256 tiles the shape takes over the SMs (and for the smallest, of 128x64 tiles), as the
    measured default "tc_matmul.schedule" says (schedule/data/defaults.json, docs/PERF.md#against-cublas); 256x128 tiles where they
    take fewer rounds (a ragged N: 4095x4097 has 544 = 5 x 132 - 116 tiles of 128x256 but
    528 = 4 x 132 of 256x128). bf16 skinny shapes (decode: a few rows against wide weights)
    stream the weights with split-K (docs/PERF.md#llm-gemms-fp8-split-k-grouped)."""
    rule = choice("tc_matmul.schedule")
    sm_count = sm_count_or_default(sm_count, TC_CHIP)
    skinny = skinny_tc_schedule(shape, dtype, sm_count)
    if skinny is not None:
        return skinny
    tiles = _tiles(shape, 128, 256)
    if dtype == "bf16" and _tiles(shape, 128, 64) <= sm_count and \
            shape["K"] <= rule["bf16_one_wave_of_128x64_max_k"]:
        return TcMatmulSchedule(**rule["bf16_one_wave_of_128x64"])
    if tiles < sm_count:
        return TcMatmulSchedule(**rule["bf16_under_one_wave" if dtype == "bf16" else
                                       "under_one_wave"])
    deep = tiles >= rule["deep_from_waves"] * sm_count
    s = TcMatmulSchedule(**rule["deep" if deep else "shallow"])
    if -(-_tiles(shape, 256, 128) // sm_count) < -(-tiles // sm_count):
        s = dataclasses.replace(s, **rule["turned"])
    return s


def skinny_tc_schedule(shape, dtype, sm_count=None):
    """The measured skinny-shape schedule ("tc_matmul.skinny_bf16": split-K on 64-row tiles)
    where it applies: bf16, at most its rows, K at least its min_k, the split units within one
    wave of the SMs; else None."""
    if dtype != "bf16":
        return None
    rule = choice("tc_matmul.skinny_bf16")
    s = rule["schedule"]
    units = _tiles(shape, s["BM"], s["BN"]) * s["split_k"]
    if shape["M"] <= rule["max_rows"] and shape["K"] >= rule["min_k"] and \
            units <= sm_count_or_default(sm_count, TC_CHIP):
        return TcMatmulSchedule(**s)
    return None


def _tiles(shape, bm, bn):
    return -(-shape["M"] // bm) * -(-shape["N"] // bn)


def bf16_bits(x):
    """float array -> bf16 bit patterns (uint16), rounded to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_values(bits):
    """bf16 bit patterns (uint16) -> float64 values."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32) \
        .astype(np.float64)


class WgmmaMatmulPath:
    """TcMatmul on sm_90a: TMA loads, an mbarrier ring, wgmma, persistent CTAs (module
    docstring); misaligned K-major operands as k_pack says."""
    instruction = WGMMA
    own_loads = True                # k_pack "ldg" / "fused" apply

    @staticmethod
    def schedule_for(op, shape):
        """The given schedule, or with "auto" the tune cache's for the shape's class (`ptxgen
        tune matmul --dtype`), else default_tc_schedule(shape); the measured skinny-shape
        schedule first where it applies (its candidates were not in the tune cache's sweep)."""
        if op.schedule == "auto":
            s = skinny_tc_schedule(shape, op.dtype) or \
                tuned_tc_schedule(DEFAULT_ARCH_SPECIFIC_TARGET, shape, op.dtype, op.out) \
                or default_tc_schedule(shape, dtype=op.dtype).for_dtype(op.dtype)
            # no TMA multicast of B with the ld.global producer or the fused copy (their
            # registers: lower_tc_matmul)
            return dataclasses.replace(s, cluster_m=1) if op.ldg_wanted(shape) or \
                (op.packing in FUSED_PACKS and any(op.misaligned_k_major(shape))) else s
        return op.schedule

    @staticmethod
    def build(op, shape):
        """The GEMM kernel's module (TcMatmul.build adds the pad copy)."""
        return lower_tc_matmul(op.schedule_for(shape), op.built_arch, shape, dtype=op.dtype,
                               out=op.out, name=op.kernel_name(), a_major=op.a_layout == "row",
                               b_major=op.b_layout == "col", ldg=op.ldg(shape),
                               fused=op.fused(shape), epilogue=op.epilogue,
                               b_dtype=op.b_dtype if op.b_dtype != op.dtype else None,
                               scales=op.scaling == "tensor",
                               block_scales=op.scaling == "block")

    @staticmethod
    def tiles(op, shape):
        """Tiles of C the kernel walks: cluster_m x BM by BN (one per cluster)."""
        s = op.schedule_for(shape)
        return -(-shape["M"] // (s.BM * s.cluster_m)) * -(-shape["N"] // s.BN)

    @staticmethod
    def launch(op, shape, sm_count=None):
        """One CTA per tile, or with a persistent schedule one per SM (sm_count: the SMs, or
        for clusters the CTAs of the clusters that fit at once, runtime.max_cluster_ctas)."""
        s = op.schedule_for(shape)
        clusters = op.tiles(shape) * s.split_k            # work units: tiles x K pieces
        if s.persistent:
            clusters = min(clusters, sm_count_or_default(sm_count, TC_CHIP) // s.cluster_m)
        return Launch(grid=(clusters * s.cluster_m, 1, 1), block=(s.threads, 1, 1),
                      shared_bytes=op.shared_bytes(s, shape, op.fused(shape)))

    @staticmethod
    def kernel_args(op, shape, arrays):
        """The GEMM kernel's arguments (TcMatmul.kernel_args adds the epilogue's)."""
        s = op.schedule_for(shape)
        (a, _, _), (b, _, _) = op.operands(shape)
        packed = [o[0] for o in op.packed(shape)] + \
            [x for x, f in zip((a, b), op.fused(shape)) if f]
        a_arr, b_arr = (arrays[x + "_packed" if x in packed else x] for x in (a, b))
        dt = MAP_DTYPE[op.dtype]
        # K-major operands: boxes of tile rows x BK; M-/N-major: BK rows of 64 (128 bytes);
        # operands the producer loads with ld.global: the array itself (rows K apart)
        ldg = op.ldg(shape)
        maps = [a_arr if ldg[0] else TiledMap(a_arr, dt, s.BM, s.BK) if a == "A" else
                TiledMap(a_arr, dt, s.BK, MN_BOX),
                b_arr if ldg[1] else TiledMap(b_arr, dt, s.b_box_rows, s.BK) if b == "Bt" else
                TiledMap(b_arr, dt, s.BK, MN_BOX)]
        kind = s.c_store(op.out, shape["M"], shape["N"])
        cols = SWIZZLE_BYTES // OUT_BYTES[op.out]         # a box row: 128 bytes of C
        if kind == "tile":                  # C stored by TMA from shared memory in 2-D boxes
            maps.append(TiledMap(arrays["C"], op.out, s.rows_per_consumer, cols))
        elif kind == "rows":                # ... or one row piece at a time, C seen as flat
            mn = shape["M"] * shape["N"]    # (one row of M*N; its stride is never used)
            maps.append(TiledMap(arrays["C"], op.out, 1, cols, rows=1, cols=mn,
                                 row_stride=packmod.padded(mn, 16 // OUT_BYTES[op.out])))
        args = maps + [arrays["C"], np.uint32(shape["M"]), np.uint32(shape["N"]),
                       np.uint32(shape["K"])]
        fused = op.fused(shape)
        if any(fused):
            for x, on in zip((a, b), fused):
                if on:
                    _check_16_byte_aligned(arrays[x], x)
                    args += [arrays[x], arrays[x + "_packed"]]
            order = arrays["fused_order"]
            args += [order, arrays["fused_flags"], np.uint32(order.shape[0])]
        # fp8 scales, then split-K's workspace (lower/split_k.py)
        return args + [arrays[x] for x in op.scale_inputs] + \
            [arrays[x] for x in split_k_workspace(s, 1)]


class TcMatmul(InstructionPaths, Operator):
    """The tensor-core matmul, one operator for both instruction paths (PATHS): wgmma on
    sm_90a, mma.sync on the other targets or for an MmaMatmulSchedule. launch() and
    kernel_args() take no target: they follow the last build()/steps() (built_arch)."""
    name = "tc_matmul"
    label = "matmul"
    shape_names = ("M", "N", "K")
    defaults = {"M": 256, "N": 256, "K": 256}
    outputs = ("C",)
    PATHS = {WGMMA: WgmmaMatmulPath, MMA_SYNC: MmaSyncMatmulPath}
    dtypes = ("bf16", "f16", "tf32")        # fp8: ops/fp8_matmul.Fp8Matmul
    scale_inputs = ()                       # fp8's scale arrays (Fp8Matmul)
    scaling = None                          # fp8: "tensor" or "block" scales (Fp8Matmul)
    b_dtype = None                          # fp8: B's format where it differs from A's

    def __init__(self, dtype="bf16", out="f32", schedule="auto", a_layout="row", b_layout="col",
                 k_pack="auto", epilogue=None):
        if dtype not in self.dtypes:
            raise PtxgenError(Spelled("matmul: ", Arg("dtype", "--dtype"), f" must be one of "
                                      f"{', '.join(self.dtypes)} on the tensor-core path, got "
                                      f"{dtype!r}"))
        if out not in ("f32", "bf16"):
            raise PtxgenError(f"matmul: output type must be f32 or bf16, got {out!r}")
        if schedule != "auto" and getattr(schedule, "instruction", None) not in INSTRUCTIONS:
            raise PtxgenError(f"matmul: schedule must be 'auto', a TcMatmulSchedule or an "
                              f"MmaMatmulSchedule, got {schedule!r}")
        for what, v, k_major in (("a_layout", a_layout, "row"), ("b_layout", b_layout, "col")):
            if v not in ("row", "col"):
                raise PtxgenError(f"matmul: {what} must be 'row' or 'col', got {v!r}")
            if dtype == "tf32" and v != k_major:
                raise PtxgenError(f"matmul: tf32 wgmma reads K-major operands only (no "
                                  f"transpose): {what} must be {k_major!r} for tf32")
        if k_pack not in K_PACKS:
            raise PtxgenError(f"matmul: k_pack must be one of {', '.join(K_PACKS)}, got "
                              f"{k_pack!r}")
        self.dtype, self.out = dtype, out
        self.schedule = schedule
        self.k_pack = k_pack
        self.a_layout, self.b_layout = a_layout, b_layout
        self.inputs = ("A" if a_layout == "row" else "At", "Bt" if b_layout == "col" else "B")
        self.epilogue = as_epilogue(epilogue)
        if self.epilogue is not None:
            taken = set(self.inputs) | {"C", "A_packed", "Bt_packed", "At_packed", "B_packed",
                                        "fused_order", "fused_flags"}
            clash = sorted(set(self.epilogue.tensors) & taken)
            if clash:
                raise PtxgenError(f"matmul: epilogue tensor name {clash[0]!r} is taken by the "
                                  f"GEMM's own arrays; rename it")
            self.inputs += tuple(self.epilogue.tensors)
        self.path()

    def check_path(self, path):
        if path.instruction == MMA_SYNC and (self.a_layout, self.b_layout) != ("row", "col"):
            raise PtxgenError(Spelled(
                "matmul: the sm_80 (mma.sync) path reads a row-major A and a column-major B "
                "only, got ", Arg(f"a_layout={self.a_layout!r}", f"--a-layout {self.a_layout}"),
                ", ", Arg(f"b_layout={self.b_layout!r}", f"--b-layout {self.b_layout}"),
                " (use ", Arg("arch='sm_90a'", "--arch sm_90a"), ")"))

    def schedule_for(self, shape):
        return self.path().schedule_for(self, shape)

    @property
    def packing(self):
        """k_pack, with "auto" the measured default (docs/PERF.md#odd-shapes)."""
        return choice("tc_matmul.k_pack") if self.k_pack == "auto" else self.k_pack

    def ldg_wanted(self, shape):
        """Whether misaligned K-major operands come by the producer's cp.async copies:
        k_pack "ldg" and some operand needs it."""
        return self.packing == "ldg" and any(self.misaligned_k_major(shape))

    def misaligned_k_major(self, shape):
        """(A, B): K-major and rows not 16-byte aligned (K % 8, tf32 K % 4)."""
        return tuple(name in ("A", "Bt") and cols % self.per16 != 0
                     for name, _, cols in self.operands(shape))

    def ldg(self, shape):
        """(A, B): loaded by the producer's cp.async copies (lower/ldg_producer.py) instead of a
        pad copy and TMA (k_pack="ldg"; a schedule that cannot take it, clusters or < 3
        stages, is lower_tc_matmul's one-line error)."""
        if not self.path().own_loads or not self.ldg_wanted(shape):
            return (False, False)
        return self.misaligned_k_major(shape)

    def fused(self, shape):
        """(A, B): K-major operands with misaligned rows pad-copied inside the GEMM kernel
        (k_pack="fused"; "fused1": only the one of the two whose panels the first wave needs
        fewer rows of), where the schedule allows it: persistent and one CTA
        per cluster, so the grid is at most one CTA per SM and all of it is resident at once
        (validate() guarantees one CTA fits an SM); otherwise pad copies (never a hang)."""
        if not self.path().own_loads or self.packing not in FUSED_PACKS:
            return (False, False)
        s = self.schedule_for(shape)
        if not s.persistent or s.cluster_m != 1:
            return (False, False)
        want = self.misaligned_k_major(shape)
        if self.packing == "fused1" and all(want):
            grid = min(self.tiles(shape), sm_count_or_default(None, TC_CHIP))
            a_rows, b_rows = first_wave_rows(s, shape["M"], shape["N"], grid)
            want = (True, False) if a_rows <= b_rows else (False, True)
        limit = target_limits(DEFAULT_TARGET)["max_shared_per_block"]
        if self.shared_bytes(s, shape, want) > limit:
            return (False, False)           # no room for the copy's staging buffer
        return want

    def _chunks(self, shape, sm_count=None):
        """The fused copy's chunk order and flag count (lower/fused_pad.chunk_table) for
        the grid launch() gives with `sm_count` SMs."""
        grid = self.launch(shape, sm_count).grid[0]
        return chunk_table(self.schedule_for(shape), shape, self.fused(shape), grid)

    def kernel_name(self):
        """tc_matmul, or with an epilogue tc_matmul_<its name>_<hash of its graph>."""
        return "tc_matmul" if self.epilogue is None else f"tc_matmul_{self.epilogue.key}"

    @property
    def per16(self):
        """Elements in 16 bytes: tensor-map rows are padded to a multiple of it."""
        return 16 // ELEM_BYTES[self.dtype]

    def operands(self, shape):
        """(array name, rows, cols) of A's and B's stored (row-major) arrays."""
        M, N, K = shape["M"], shape["N"], shape["K"]
        return [("A", M, K) if self.a_layout == "row" else ("At", K, M),
                ("Bt", N, K) if self.b_layout == "col" else ("B", K, N)]

    def packed(self, shape):
        """The operands first copied into zero-padded arrays of 16-byte aligned rows (cols
        rounded up to 8 16-bit or 4 tf32 elements: tensor maps need 16-byte row strides)."""
        inside = [a or b for a, b in zip(self.ldg(shape), self.fused(shape))]
        return [o for o, own in zip(self.operands(shape), inside) if o[2] % self.per16 and not own]

    def packs(self, shape):
        return bool(self.packed(shape))

    def _pad_elem(self):
        """The pad copy's element type: the inputs' width (tf32 f32, 16-bit b16, fp8 b8)."""
        return {4: T.f32, 2: T.b16, 1: T.b8}[ELEM_BYTES[self.dtype]]

    def _pad_kernel(self):
        return {32: packmod.KERNEL, 16: packmod.KERNEL16, 8: packmod.KERNEL8}[
            self._pad_elem().bits]

    def build(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        m = self.for_target(arch).build(self, shape)
        if not self.packs(shape):
            return m
        return packmod.add_pad_copy(m, self._pad_elem())

    def steps(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET, sm_count=None):
        self.for_target(arch)
        main = super().steps(shape, arch, sm_count_or_default(sm_count, TC_CHIP))
        per = self.per16

        def pad(name, rows, cols):
            c8 = packmod.padded(cols, per)
            return Step(self._pad_kernel(), packmod.pad_launch(rows, c8, per),
                        lambda a: packmod.pad_args(rows, cols, rows, c8, a[name],
                                                   a[name + "_packed"], per))
        return [pad(*o) for o in self.packed(shape)] + main

    def workspace(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        padded = self.packed(shape) + [o for o, f in zip(self.operands(shape),
                                                          self.fused(shape)) if f]
        ws = {name + "_packed": ((rows, packmod.padded(cols, self.per16)), self._np_in())
              for name, rows, cols in padded}
        s = self.schedule_for(shape)
        if getattr(s, "split_k", 1) > 1:
            ws.update({k: (shp, np.dtype(dt)) for k, (shp, dt) in
                       split_k_workspace(s, self.tiles(shape)).items()})
        if any(self.fused(shape)):
            order, nflags = self._chunks(shape)
            ws["fused_order"] = (order.shape, np.uint32)
            ws["fused_flags"] = ((HEADER_WORDS + nflags,), np.uint32)
        return ws

    def workspace_arrays(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        """The workspace, zero-filled but for the fused copy's chunk order."""
        ws = super().workspace_arrays(shape, arch)
        if "fused_order" in ws:
            ws["fused_order"][...] = self._chunks(shape)[0]
        return ws

    def tiles(self, shape):
        return self.path().tiles(self, shape)

    def launch(self, shape, sm_count=None):
        return self.path().launch(self, shape, sm_count)

    def shared_bytes(self, s, shape, fused):
        """Dynamic shared memory of schedule s at shape: its stages and staged C, the cp.async
        producer's side words, the fused copy's staging (for `fused`)."""
        staged = s.c_store(self.out, shape["M"], shape["N"])
        return (s.shared_bytes(ELEM_BYTES[self.dtype], staged, self.out) +
                side_bytes(s, self.ldg(shape)) + staging_bytes(fused))

    def _np_in(self):
        return {"bf16": np.uint16, "f16": np.float16, "tf32": np.float32}[self.dtype]

    def to_input(self, x):
        """float array -> this operator's 16-bit input array."""
        return bf16_bits(x) if self.dtype == "bf16" else np.asarray(x, dtype=self._np_in())

    def values(self, a, dtype):
        """Stored 16-bit (or f32) array -> float64 values."""
        return bf16_values(a) if dtype == "bf16" else np.asarray(a).astype(np.float64)

    def make_inputs(self, shape, rng):
        c_dtype = np.float32 if self.out == "f32" else np.uint16
        fill = np.nan if self.out == "f32" else 0x7FC0            # NaN in either format
        arrays = {name: self.to_input(rng.standard_normal((rows, cols)))
                  for name, rows, cols in self.operands(shape)}
        arrays.update(epilogue_inputs(self.epilogue, shape, rng))
        return dict(arrays, C=np.full((shape["M"], shape["N"]), fill, dtype=c_dtype))

    def kernel_args(self, shape, arrays):
        return self.path().kernel_args(self, shape, arrays) + epilogue_args(self.epilogue, arrays)

    def matrices(self, arrays):
        """float64 A (M x K) and B (K x N) from the input arrays, whatever their layouts."""
        a = self.values(arrays["A"], self.dtype) if self.a_layout == "row" else \
            self.values(arrays["At"], self.dtype).T
        b = self.values(arrays["Bt"], self.dtype).T if self.b_layout == "col" else \
            self.values(arrays["B"], self.dtype)
        return a, b

    def reference(self, shape, arrays, rows=None):
        """float64 C and its per-element bound; rows: only these rows of C (large shapes)."""
        if self.epilogue is None:
            c, bound = self.product(shape, arrays, rows, self.out)
            return {"C": c, "bound": bound}
        acc, acc_err = self.product(shape, arrays, rows, "f32")
        v, e = self.epilogue.evaluate(acc, acc_err, arrays, rows=rows)
        if self.out == "bf16":
            e = e + BF16_ULP * np.abs(v)
        return {"C": v, "bound": e + 1e-30}

    def product(self, shape, arrays, rows, out):
        """float64 A @ B (only `rows` of it, when given) and its per-element bound stored as
        `out`: the accumulators the epilogue receives (out="f32") or C without one."""
        a, b = self.matrices(arrays)
        if rows is not None:
            a = a[np.asarray(rows)]
        return a @ b, self.error_bound(shape, np.abs(a) @ np.abs(b), out=out)

    def error_bound(self, shape, abs_products, out=None):
        """Largest error allowed per element: K f32 ulps of sum |a||b| (the accumulation), plus
        one bf16 ulp of that sum for a bf16 C; for tf32 inputs, which lose up to a tf32 ulp each
        (relative), each product may be off by 2 tf32 ulps (+ their square) as well."""
        bound = 2.0 * shape["K"] * F32_ULP * abs_products
        if self.dtype == "tf32":
            bound += (2 * TF32_ULP + TF32_ULP ** 2) * abs_products
        if (out or self.out) == "bf16":
            bound += BF16_ULP * abs_products
        return bound + 1e-30

    def check(self, shape, arrays, reference=None, rows=None):
        """(ok, worst relative error) of C (only `rows` of it, when given) against float64."""
        ref = reference or self.reference(shape, arrays, rows=rows)
        got = self.values(arrays["C"], self.out)
        if rows is not None:
            got = got[np.asarray(rows)]
        err = np.abs(got - ref["C"])
        ok = bool(np.all(np.isfinite(got)) and np.all(err <= ref["bound"]))
        worst = float(np.max(err / np.maximum(np.abs(ref["C"]), 1.0))) if err.size else 0.0
        return ok, worst

    def flops(self, shape):
        return 2 * shape["M"] * shape["N"] * shape["K"]

    def bytes_moved(self, shape):
        e = ELEM_BYTES[self.dtype]
        return e * (shape["M"] + shape["N"]) * shape["K"] + \
            OUT_BYTES[self.out] * shape["M"] * shape["N"]


def epilogue_inputs(epi, shape, rng):
    """Random extra tensors of an epilogue: standard normal, in each tensor's element type
    (bf16 as uint16 bits); a scalar is a numpy float32."""
    if epi is None:
        return {}
    out = {}
    for name, spec in epi.tensors.items():
        x = rng.standard_normal(spec.shape(shape["M"], shape["N"]))
        if spec.kind == "scalar":
            out[name] = np.float32(x)
        else:
            out[name] = bf16_bits(x) if spec.dtype == "bf16" else \
                np.ascontiguousarray(x, dtype=np.float16 if spec.dtype == "f16" else np.float32)
    return out


def epilogue_args(epi, arrays):
    """The epilogue's kernel arguments (after the GEMM's), in its tensors' order."""
    if epi is None:
        return []
    return [np.float32(arrays[n]) if spec.kind == "scalar" else arrays[n]
            for n, spec in epi.tensors.items()]


def _check_16_byte_aligned(arr, name):
    """The fused pad copy reads a source through the aligned 16-byte blocks that cover it: a
    device array must start on 16 bytes (host arrays are copied to fresh, aligned memory)."""
    cai = getattr(arr, "__cuda_array_interface__", None)
    if cai is not None and cai["data"][0] % 16:
        raise PtxgenError(f"matmul: operand {name} starts at {cai['data'][0]:#x}, not on 16 "
                          f"bytes; k_pack='fused' needs 16-byte aligned sources (use "
                          f"k_pack='pad')")
