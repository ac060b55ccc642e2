"""Static bank-conflict analysis: addresses rebuilt from the IR, checked against the addresses
the emulator really uses, on the library transpose and matmul, hand-built kernels and PTX
files."""
import json
from pathlib import Path

import numpy as np
import pytest

from ptxgen.analysis.banks import bank_conflicts
from ptxgen.analysis.banks_static import static_bank_conflicts
from ptxgen.emit import emit_module
from ptxgen.ir import Addr, Builder, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.ops.matmul import Matmul
from ptxgen.ops.transpose import Transpose
from ptxgen.parse import parse_ptx
from ptxgen.schedule import CANDIDATES, MatmulSchedule

PTX = Path(__file__).parent / "data" / "ptx"


def _report(op, shape):
    module = parse_ptx(emit_module(op.build(shape)))
    return module, static_bank_conflicts(module.kernel(op.kernel_name()), op.launch(shape).block,
                                         module=module)


def _loads(rep):
    return [a for a in rep.accesses if a.kind == "load"]


def _stores(rep):
    return [a for a in rep.accesses if a.kind == "store"]


def _t32(pad):
    """The classic scalar 32×32 tile, 32×4 threads, padded or not."""
    return Transpose(tile=32, block_rows=4, vec=1, group=0, pad=pad)


def test_transpose_padded_is_conflict_free():
    op = _t32(pad=1)
    _, rep = _report(op, op.shape(M=96, N=64))
    assert len(rep.accesses) == 16 and not rep.conflicted
    assert all(a.note is None and a.variable == "tile" for a in rep.accesses)
    assert all(a.wavefronts == a.ideal == 1 for a in rep.accesses)
    assert _loads(rep)[0].expression == "tile + 132*tid.x + 4*tid.y"
    assert _stores(rep)[0].expression == "tile + 4*tid.x + 132*tid.y"
    assert "suggestion" not in rep.variables["tile"]


def test_transpose_unpadded_column_read_is_32_way():
    op = _t32(pad=0)
    _, rep = _report(op, op.shape(M=96, N=64))
    for a in _loads(rep):
        assert (a.wavefronts, a.ideal, a.degree) == (32, 1, 32.0)
        assert a.lane_addresses[:3] == [a.lane_addresses[0] + 128 * i for i in range(3)]
        assert "pad each 128-byte row (32 elements of 4 B) by 1 element" in a.suggestion
    assert all(a.wavefronts == 1 for a in _stores(rep))
    tile = rep.variables["tile"]
    assert tile["padding"]["pad_bytes"] == 4 and tile["padding"]["row_bytes"] == 128
    assert tile["padding"]["wavefronts"] == tile["ideal"] < tile["wavefronts"]
    assert tile["swizzle"]["wavefronts"] == tile["ideal"]


def test_the_suggested_padding_is_the_padded_kernel():
    """Padding the unpadded kernel as suggested gives exactly what pad=1 measures."""
    _, bad = _report(_t32(pad=0), {"M": 64, "N": 64})
    _, good = _report(_t32(pad=1), {"M": 64, "N": 64})
    assert bad.variables["tile"]["padding"]["wavefronts"] == good.variables["tile"]["wavefronts"]


@pytest.mark.parametrize("schedule", ["auto", None, CANDIDATES["128x128x8_cp3"],
                                      MatmulSchedule(BM=32, BN=32, BK=8, WM=32, WN=32, TM=4,
                                                     TN=8, min_ctas_per_sm=1)])
def test_matmul_schedules_are_derived_and_conflict_free(schedule):
    op = Matmul(schedule)
    _, rep = _report(op, op.shape(M=256, N=256, K=256))
    assert len(rep.accesses) > 10
    assert [a.note for a in rep.accesses if a.note] == []
    assert not rep.conflicted
    # the fragment loads are 128-bit where the schedule says so
    if schedule is not None:
        assert any(a.width == 16 and a.kind == "load" for a in rep.accesses)


def test_unpadded_a_tile_conflicts_and_the_fix_is_the_schedules_padding():
    """pad_a=0 makes the transposed A stores conflict; the analysis asks for 4 floats per row,
    the padding MatmulSchedule uses by default. (stage_c=False: the staged C epilogue reuses
    the same shared buffer with rows of its own, which would mix into the padding advice.)"""
    op = Matmul(MatmulSchedule(pad_a=0, stage_c=False))
    _, rep = _report(op, op.shape(M=256, N=256, K=256))
    conflicted = rep.conflicted
    assert conflicted and all(a.kind == "store" and a.width == 4 for a in conflicted)
    smem = rep.variables["smem"]
    assert smem["padding"]["pad_bytes"] == 4 * MatmulSchedule().pad_a
    assert smem["padding"]["wavefronts"] == smem["ideal"]


# -- the static addresses are the emulator's -----------------------------------------------------
class _SharedAddresses:
    """Observer: warp 0 of CTA 0's lane addresses at the first execution of each shared access."""

    def __init__(self, prog):
        self.prog, self.seen = prog, {}

    def __call__(self, batch, p, mask):
        op = self.prog.code[p]
        ins = op.instr
        if ins is None or p in self.seen or ins.space != "shared" or ins.opcode not in (
                "ld", "st"):
            return
        addr = ins.operands[0] if ins.opcode == "st" else ins.operands[1]
        base = batch.R[self.prog.slot(addr.base)][:32].astype(np.int64)
        active = np.ones(32, bool) if mask is None else mask[:32].copy()
        if ins.guard is not None:
            g = batch.R[self.prog.slot(ins.guard)][:32]
            active &= ~g if ins.guard_negated else g
        self.seen[p] = (ins, [int(x) + addr.offset if m else None
                              for x, m in zip(base, active)])


@pytest.mark.parametrize("op, shape", [
    (_t32(pad=0), {"M": 64, "N": 32}), (Transpose(pad=1, tile=64, vec=1), {"M": 64, "N": 64}),
    (Transpose(), {"M": 64, "N": 64}), (Transpose(), {"M": 130, "N": 70}),
    (Matmul(), {"M": 64, "N": 64, "K": 32}), (Matmul(None), {"M": 32, "N": 32, "K": 32}),
    (Matmul(MatmulSchedule(BM=32, BN=32, BK=8, WM=32, WN=32, TM=4, TN=8, min_ctas_per_sm=1)),
     {"M": 32, "N": 32, "K": 16})])
def test_static_addresses_match_the_emulator(op, shape):
    from ptxgen.emu import compile_kernel, emulate
    module, rep = _report(op, shape)
    prog = compile_kernel(module, op.kernel_name())
    obs = _SharedAddresses(prog)
    arrays = op.make_inputs(shape, np.random.default_rng(0))
    cfg = op.launch(shape)
    emulate(module, op.kernel_name(), cfg.grid, cfg.block, *op.kernel_args(shape, arrays),
            observer=obs)
    by_line = {a.line: a for a in rep.accesses}
    compared = 0
    for ins, lanes in obs.seen.values():
        a = by_line[ins.line]
        static = a.lane_addresses
        if a.guard == "evaluated per thread" or not a.predicated:
            # the same lanes, the same addresses, hence the same wavefronts
            assert static == lanes, (ins, static[:8], lanes[:8])
            assert bank_conflicts(lanes, a.width).wavefronts == a.wavefronts
        else:
            # a runtime guard: every lane is counted statically; the live ones must agree
            live = [(x, d) for x, d in zip(static, lanes) if d is not None]
            assert all(x == d for x, d in live), (ins, static[:8], lanes[:8])
        compared += 1
    assert compared == len({a.line for a in rep.accesses if a.kind in ("load", "store")})


# -- hand-built kernels --------------------------------------------------------------------------
def _kernel(body, threads=32):
    m = Module(target="sm_90")
    k = m.add_kernel("k", [Param("x", T.u64, ptr(T.f32)), Param("n", T.u32)])
    b = Builder(k)
    buf = b.shared("buf", T.f32, 4096)
    body(b, buf, b.special("tid.x"))
    b.ret()
    return static_bank_conflicts(k, (threads,), module=m)


def test_stride_32_words_is_a_4_way_conflict_for_four_lanes():
    def body(b, buf, tid):
        a = b.add(b.address_of(buf), b.shl(tid, 7))            # 32 words = 128 B apart
        b.ld("shared", T.f32, a)
    rep = _kernel(body, threads=4)
    a = rep.accesses[0]
    assert a.lane_addresses[:4] == [0, 128, 256, 384]
    assert (a.wavefronts, a.ideal, a.degree) == (4, 1, 4.0)
    assert a.expression == "buf + 128*tid.x"


def test_guard_on_the_thread_index_switches_lanes_off_and_runtime_guards_do_not():
    def body(b, buf, tid):
        a = b.add(b.address_of(buf), b.shl(tid, 4))
        with b.predicated(b.setp("lt", tid, 8)):
            b.ld("shared", T.f32, a, vec=4)
        with b.predicated(b.setp("lt", tid, b.param("n"))):
            b.ld("shared", T.f32, a, vec=4)
    first, second = _kernel(body).accesses
    assert first.guard == "evaluated per thread" and first.lane_addresses[8:] == [None] * 24
    assert (first.wavefronts, first.ideal) == (1, 1)
    assert second.guard.startswith("runtime") and (second.wavefronts, second.ideal) == (4, 4)


def test_non_affine_and_underivable_addresses():
    def body(b, buf, tid):
        base = b.address_of(buf)
        sw = b.xor(b.and_(tid, 31), b.shr(tid, 3))              # a swizzle: evaluated per thread
        b.ld("shared", T.f32, b.add(base, b.shl(sw, 2)))
        off = b.ld("global", T.u32, b.element_addr(b.param("x"), tid, 4))
        b.ld("shared", T.f32, b.add(base, off))                  # data-dependent
        with b.for_range(0, b.param("n"), 1, type=T.u32) as i:   # a uniform loop counter
            b.ld("shared", T.f32, Addr(b.add(base, b.shl(b.add(tid, i), 2)), 8))
    sw, data, loop = _kernel(body).accesses
    assert sw.expression is None and sw.wavefronts == 1
    assert [(i ^ (i >> 3)) * 4 for i in range(32)] == sw.lane_addresses
    assert data.wavefronts is None and "memory" in data.note
    assert loop.expression == "buf + 4*tid.x + 8" and loop.uniform_terms and loop.wavefronts == 1


def test_a_pointer_stepping_by_the_thread_index_is_flagged():
    def body(b, buf, tid):
        p = b.mov(b.address_of(buf))
        with b.for_range(0, b.param("n"), 1, type=T.u32):
            b.ld("shared", T.f32, p)
            b.mad(tid, 4, p, out=p)                             # advances per thread
    (a,) = _kernel(body).accesses
    assert a.varies_per_trip


# -- PTX files and the command ---------------------------------------------------------------------
def test_numba_padded_transpose_file():
    module = parse_ptx((PTX / "numba_transpose_padded_sm90.ptx").read_text())
    rep = static_bank_conflicts(module.entries[0], (32, 32), module=module)
    assert len(rep.accesses) == 2 and not rep.conflicted
    assert all(a.note is None and a.variable for a in rep.accesses)


def test_cli_library_kernel(cli):
    rc, out, err = cli("banks", "transpose", "--opt", "pad=0", "--json")
    assert rc == 0, err
    d = json.loads(out)
    bad = [a for a in d["accesses"] if a["conflicted"]]
    # pad=0 is the scalar 64×64 tile: 2 columns × 8 rows of column reads per thread
    assert len(bad) == 16 and {a["degree"] for a in bad} == {32.0}
    op = Transpose(pad=0)                   # the command's kernel at the default shape
    emitted = emit_module(op.build(op.shape())).splitlines()
    assert all("ld.shared" in emitted[a["line"] - 1] for a in bad)
    rc, out, _ = cli("banks", "transpose", "--conflicts")
    # the default float4 tile: 4 chunks × 4 scalar stores, 4 float4 loads, swizzled
    assert rc == 0 and "20 shared accesses, 0 with bank conflicts" in out


def test_cli_file_and_errors(cli):
    rc, out, err = cli("banks", str(PTX / "numba_matmul_shared_sm90.ptx"), "--block", "16,16")
    assert rc == 0, err and "0 with bank conflicts" in out
    rc, _, err = cli("banks", "transpose", "--opt", "bogus=1")
    assert rc == 1 and "bogus" in err
    rc, _, err = cli("banks", "transpose", "--block", "32")
    assert rc == 1 and "PTX files" in err
