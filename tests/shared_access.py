"""Bank conflicts of the shared accesses a kernel really makes, from the emulator: warp 0's
lane addresses at the first execution of each ld/st.shared (predicates and divergence honoured),
counted with ptxgen.analysis.banks (the model fitted to ncu on the H200)."""
import numpy as np


def first_shared_accesses(module, kernel, grid, block, *args, shared_bytes=0):
    """[(instruction text, BankConflicts)] in first-execution order."""
    from ptxgen.analysis.banks import bank_conflicts
    from ptxgen.emu import compile_kernel, emulate
    prog = compile_kernel(module, kernel)
    lanes, seen = np.arange(32), {}

    def observe(batch, p, mask):
        ins = prog.code[p].instr
        if ins is None or ins.opcode not in ("ld", "st") or "shared" not in ins.mods or \
                p in seen:
            return
        addr = ins.operands[1] if ins.opcode == "ld" else ins.operands[0]
        active = np.ones(32, bool) if mask is None else mask[lanes].copy()
        if ins.guard is not None:
            g = batch.R[prog.slot_of[id(ins.guard)]][lanes].astype(bool)
            active &= ~g if ins.guard_negated else g
        if active.any():
            base = batch.R[prog.slot_of[id(addr.base)]][lanes].astype(np.int64) + addr.offset
            seen[p] = (str(ins), bank_conflicts(dict(zip(lanes[active].tolist(),
                                                         base[active].tolist())),
                                                4 * ins.vector_width))
    emulate(module, kernel, grid, block, *args, shared_bytes=shared_bytes, observer=observe)
    return list(seen.values())
