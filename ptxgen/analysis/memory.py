"""Memory operations: which space, how wide, which cache modifier, and bytes per loop iteration.

Byte counts are per thread and per execution of the instruction: a v4.f32 load moves 16 bytes,
cp.async its copy size, ldmatrix 4 bytes per 8x8 matrix per thread (a 128-byte matrix spread
over the 32 lanes of a warp). Instructions whose size is a register (bulk copies) count 0 bytes
and are listed as unsized.
"""
from dataclasses import dataclass

from ..ir.instr import CACHE_OPS
from ..ir.values import Addr, Imm, Raw

_KIND = {"ld": "load", "ldu": "load", "ldmatrix": "load", "st": "store", "stmatrix": "store",
         "atom": "atomic", "red": "reduction", "prefetch": "prefetch", "prefetchu": "prefetch"}
_SEMANTICS = frozenset({"volatile", "relaxed", "acquire", "release", "weak", "mmio"})
_SCOPES = frozenset({"cta", "cluster", "gpu", "sys"})


@dataclass(frozen=True)
class MemOp:
    opcode: str            # full opcode
    kind: str              # load, store, atomic, reduction, copy, prefetch
    space: str             # global, shared, local, param, const, generic
    bytes: int             # per thread; 0 when not known statically
    cache: str             # cache operator ('default' when none)
    hints: tuple           # L1::/L2:: eviction and prefetch hints, semantics and scope
    line: int
    dst_space: str = ""    # copies: where the data goes

    @property
    def bits(self):
        return self.bytes * 8


def memory_op(ins):
    """The MemOp of an instruction, or None when it does not access memory."""
    op = ins.opcode
    mods = ins.mods
    if op == "cp":
        if not mods or mods[0] != "async" or not any(
                isinstance(o, Addr) or (isinstance(o, Raw) and o.text.startswith("["))
                for o in ins.operands):
            return None            # commit_group / wait_group move no data
        size = 0
        if len(ins.operands) >= 3 and isinstance(ins.operands[2], Imm):
            size = int(ins.operands[2].value)
        spaces = [m.split("::")[0] for m in mods if m.split("::")[0] in
                  ("global", "shared", "local")]
        dst = spaces[0] if spaces else "shared"
        src = spaces[1] if len(spaces) > 1 else "global"
        return MemOp(ins.full_opcode, "copy", src, size, _cache(mods), _hints(mods), ins.line,
                     dst)
    kind = _KIND.get(op)
    if kind is None:
        return None
    if op in ("ldmatrix", "stmatrix"):
        n = next((int(m[1:]) for m in mods if m in ("x1", "x2", "x4")), 1)
        return MemOp(ins.full_opcode, kind, _space(ins, "shared"), 4 * n, _cache(mods),
                     _hints(mods), ins.line)
    if kind == "prefetch":
        return MemOp(ins.full_opcode, kind, _space(ins, "generic"), 0, _cache(mods),
                     _hints(mods), ins.line)
    t = ins.type
    size = t.nbytes * ins.vector_width if t is not None else 0
    return MemOp(ins.full_opcode, kind, _space(ins, "generic"), size, _cache(mods),
                 _hints(mods), ins.line)


def _space(ins, default):
    for m in ins.mods:
        base = m.split("::")[0]
        if base in ("global", "shared", "local", "param", "const"):
            return base
    return default


def _cache(mods):
    for m in mods:
        if m in CACHE_OPS:
            return m
    return "default"


def _hints(mods):
    return tuple(m for m in mods if "::" in m and m.split("::")[0] in ("L1", "L2")
                 or m in _SEMANTICS or m in _SCOPES)


def memory_ops(instrs):
    return [m for m in (memory_op(i) for i in instrs) if m is not None]


def summarize(ops):
    """Counts and bytes by space, width, cache operator and opcode."""
    by_space, by_width, by_cache, by_opcode = {}, {}, {}, {}
    unsized = 0
    for m in ops:
        s = by_space.setdefault(m.space, {"loads": 0, "stores": 0, "atomics": 0, "copies": 0,
                                          "prefetches": 0, "load_bytes": 0, "store_bytes": 0})
        if m.kind == "load":
            s["loads"] += 1
            s["load_bytes"] += m.bytes
        elif m.kind == "store":
            s["stores"] += 1
            s["store_bytes"] += m.bytes
        elif m.kind in ("atomic", "reduction"):
            s["atomics"] += 1
            s["load_bytes"] += m.bytes if m.kind == "atomic" else 0
            s["store_bytes"] += m.bytes
        elif m.kind == "copy":
            s["copies"] += 1
            s["load_bytes"] += m.bytes
            d = by_space.setdefault(m.dst_space, {"loads": 0, "stores": 0, "atomics": 0,
                                                  "copies": 0, "prefetches": 0,
                                                  "load_bytes": 0, "store_bytes": 0})
            d["store_bytes"] += m.bytes
        else:
            s["prefetches"] += 1
        if m.bytes == 0 and m.kind != "prefetch":
            unsized += 1
        w = str(m.bits)
        by_width[w] = by_width.get(w, 0) + 1
        by_cache[m.cache] = by_cache.get(m.cache, 0) + 1
        by_opcode[m.opcode] = by_opcode.get(m.opcode, 0) + 1
    return {
        "operations": len(ops),
        "by_space": dict(sorted(by_space.items())),
        "by_width_bits": dict(sorted(by_width.items(), key=lambda kv: int(kv[0]))),
        "by_cache": dict(sorted(by_cache.items(), key=lambda kv: (-kv[1], kv[0]))),
        "by_opcode": dict(sorted(by_opcode.items(), key=lambda kv: (-kv[1], kv[0]))),
        "unsized": unsized,
    }


def bytes_per_iteration(cfg, ops=None):
    """Per loop: bytes each thread moves per iteration, by space and direction, counting the
    blocks of the loop itself (inner loops report their own). Every block counts once, as if
    each conditional path ran: an upper bound where the body branches.

    ops: optional memory_op() of every instruction in CFG order, when already computed."""
    if ops is None:
        ops = [memory_op(i) for b in cfg.blocks for i in b.instrs]
    out = []
    for li, loop in enumerate(cfg.loops):
        per = {}
        total = 0
        for bi in cfg.own_blocks(li):
            b = cfg.blocks[bi]
            for m in ops[b.first:b.first + len(b.instrs)]:
                if m is None or m.kind == "prefetch":
                    continue
                reads = m.bytes if m.kind in ("load", "atomic", "copy") else 0
                writes = m.bytes if m.kind in ("store", "atomic", "reduction") else 0
                s = per.setdefault(m.space, {"read": 0, "write": 0})
                s["read"] += reads
                if m.kind == "copy":
                    d = per.setdefault(m.dst_space, {"read": 0, "write": 0})
                    d["write"] += m.bytes
                    total += m.bytes
                else:
                    s["write"] += writes
                total += reads + writes
        out.append({"loop": li, "header": cfg.blocks[loop.header].name, "depth": loop.depth,
                    "bytes_per_iteration": dict(sorted(per.items())),
                    "total_bytes_per_iteration": total})
    return out
