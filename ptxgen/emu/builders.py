"""The table of op builders {opcode: build(ctx, ins)}: every semantics module's BUILDERS,
collected once per process. The builder modules define ops; the program (program.py) looks
them up here, so no builder imports the program."""
import functools


@functools.lru_cache(maxsize=1)
def builder_table():
    """Every opcode's op builder from the modules that define them, built once per process."""
    from . import (alu, async_copy, bits, cluster_ops, convert as conv, floats, mbarrier,
                   memops, tensor, warp)
    table = {}
    for mod in (alu, bits, floats, conv, memops, warp, tensor, mbarrier, async_copy, cluster_ops):
        table.update(mod.BUILDERS)
    return table
