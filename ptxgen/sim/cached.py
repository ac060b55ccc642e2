"""The simulator's scheduled and compiled kernel kept on disk (ptxgen.progcache, `sim/`), by the
kernel's PTX text, the target, the machine model and whether it was list-scheduled: a
second process simulating a known kernel skips the scheduler and the compiler."""
from .. import progcache
from ..emit.ptx import emit_kernel_text
from .program import compile_kernel


def _model_digest(table):
    """What of the machine model compiling reads, as text (a table changed in memory, as a
    test or a calibration does, is a new key)."""
    return repr((table.name, table.header, table.units, sorted(table.ops.items()),
                 sorted((table.memory_model or {}).items()), sorted(table.memory.items())))


def scheduled_program(kernel, table, module, arch, order):
    """(kernel, Program): `kernel` reordered by order(kernel) when order is given, compiled
    against `table`; from the cache when this text was compiled so before."""
    text = emit_kernel_text(kernel) + "".join(v.decl() for v in module.vars)
    k = progcache.key("sim-program", text, arch, order is not None,
                      _model_digest(table))
    hit = progcache.load("sim", k)
    if hit is not None:
        return hit
    if order is not None:
        kernel = order(kernel)
    prog = compile_kernel(kernel, table)
    progcache.store("sim", k, (kernel, prog))
    return kernel, prog
