"""Static instruction mix: how many of each opcode and of each class a function contains."""
from ..ir.instr import Instr


def _sorted(counts):
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def opcode_mix(instrs):
    """{full opcode with modifiers, guard stripped: count}, most frequent first."""
    counts = {}
    for ins in instrs:
        key = ins.full_opcode
        counts[key] = counts.get(key, 0) + 1
    return _sorted(counts)


def base_opcode_mix(instrs):
    """{opcode without modifiers: count}, most frequent first."""
    counts = {}
    for ins in instrs:
        counts[ins.opcode] = counts.get(ins.opcode, 0) + 1
    return _sorted(counts)


def class_mix(instrs):
    """{Instr.cls: count}, most frequent first."""
    counts = {}
    for ins in instrs:
        c = ins.cls
        counts[c] = counts.get(c, 0) + 1
    return _sorted(counts)


def instructions_of(kernel):
    return [s for s in kernel.body if isinstance(s, Instr)]
