"""Static instruction mix: how many of each opcode and of each class a function contains."""
from ..ir.values import Special


def _sorted(counts):
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def opcode_mix(instrs):
    """{full opcode with modifiers, guard stripped: count}, most frequent first."""
    counts = {}
    for ins in instrs:
        key = ins.full_opcode
        counts[key] = counts.get(key, 0) + 1
    return _sorted(counts)


def class_mix(instrs):
    """{Instr.cls: count}, most frequent first."""
    counts, cache = {}, {}
    for ins in instrs:
        # the class depends on opcode, modifiers and whether a special register is read
        key = (ins.opcode, ins.mods, any(isinstance(o, Special) for o in ins.operands))
        c = cache.get(key)
        if c is None:
            c = cache[key] = ins.cls
        counts[c] = counts.get(c, 0) + 1
    return _sorted(counts)

