"""How many registers of global-load results ptxas keeps in flight, read from its SASS.

ptxas schedules under its register budget: where hoisting all of a block's loads would need
more registers than the count it settles on, it issues them in rounds, each after the
instructions that consume (and so free) results of the round before. SASS (ptxas 13.0, sm_90)
of gemv_colmajor: 4 of 8 generic loads before the first FFMA at 32 registers, all 8 with the
limit lifted (40 registers); triton_masked_mean: 12 of 32 at 32 registers, all 32 at 56. The
list scheduler (listsched.schedule_block, `in_flight`) then keeps the PTX's global loads to the
same number of result registers, from a load's issue until its first reader.
"""
import functools
import re

# nvdisasm: "/*0630*/   @!P1 LD.E.64 R24, desc[UR4][R24.64] ;"
_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_REG = re.compile(r"\bR(\d+)\b")
# loads from memory other threads share: generic (LD) and global (LDG) ones; shared (LDS),
# constant (LDC), local (LDL) and the matrix loads (LDSM) are not held back
_HELD = ("LD", "LDG")
_WIDTH = {"64": 2, "128": 4}


def load_slots(ins):
    """32-bit registers a load's result fills in SASS: the bytes it reads, rounded up to
    whole registers (ld.s32 into a 64-bit register is one LD.E then a sign extension;
    ld.v4.f32 one LDG.E.128 into four)."""
    bits = (ins.type.bits if ins.type is not None else 32) * ins.vector_width
    return max(1, -(-bits // 32))


def _width(opcode):
    for part in opcode.split(".")[1:]:
        if part in _WIDTH:
            return _WIDTH[part]
    return 1


def loads_in_flight(sass_text, kernel_name=None):
    """The most 32-bit registers of generic/global load results waiting for their first
    reader at once, walking each kernel's SASS in address order (a result counts from its
    load until an instruction reads or overwrites one of its registers). {kernel: slots}, or
    the one kernel's slots when `kernel_name` is given (None if it is not in the text)."""
    out, kernel, pending = {}, None, {}
    for line in sass_text.splitlines():
        s = line.strip()
        if s.startswith(".text."):
            kernel = s.split(".text.", 1)[1].rstrip(":")
            out.setdefault(kernel, 0)
            pending = {}
            continue
        m = _LINE.match(line)
        if not m or kernel is None:
            continue
        op, args = m.group(1), m.group(2)
        regs = [int(r) for r in _REG.findall(args)]
        # a reader (or a new writer) of any register of a pending result ends the wait of
        # the whole result (the scoreboard is the load's)
        done = {pending[r] for r in regs if r in pending}
        if done:
            pending = {r: k for r, k in pending.items() if k not in done}
        if op.split(".")[0] in _HELD and regs:
            for r in range(regs[0], regs[0] + _width(op)):
                pending[r] = line
            out[kernel] = max(out[kernel], len(pending))
    if kernel_name is not None:
        return out.get(kernel_name)
    return out


def held(ins):
    """Whether the in-flight limit applies to an instruction: a load from global memory or
    through a generic address."""
    return ins.row.effect == "load" and (ins.space or "generic") in ("global", "generic")


def most_held_in_a_block(kernel):
    """The most global/generic loads one block (deps.split_body) has: with fewer than two no
    limit changes the schedule (a lone load always goes)."""
    from .deps import Region, split_body
    return max((sum(1 for i in item.instrs if held(i))
                for item in split_body(kernel.body) if isinstance(item, Region)), default=0)


@functools.lru_cache(maxsize=16)
def sass_in_flight(cubin, kernel_name):
    """loads_in_flight of `kernel_name` in a cubin (None when nvdisasm is not at hand).
    Remembered per cubin: nvdisasm takes ~0.4 s of CPU to start, and a kernel is often
    simulated at several sizes."""
    from ..toolchain import ToolchainError, disassemble
    try:
        return loads_in_flight(disassemble(cubin), kernel_name)
    except ToolchainError:
        return None
