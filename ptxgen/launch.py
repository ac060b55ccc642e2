"""Launch-shape rules shared by the GPU runtime and the emulator, so both refuse the same launches
with the same one-line messages.

The limits are CUDA API limits of every target ptxgen emits for (CUDA C Programming Guide,
"Technical Specifications per Compute Capability", identical for cc 8.x and 9.0), not
performance data, so they live here rather than in isa/.
"""
import re

from .errors import LaunchError

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2 ** 31 - 1, 65535, 65535)


def check_launch_shape(name, grid, block, directives=()):
    """grid and block (3-tuples of positive ints) against the device limits and the kernel's
    .reqntid/.maxntid directives; LaunchError naming the kernel on the first violation."""
    if any(d <= 0 for d in tuple(grid) + tuple(block)):
        raise LaunchError(f"kernel {name}: grid {grid} and block {block} must be positive")
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise LaunchError(f"kernel {name}: block {block} has more than {MAX_THREADS_PER_BLOCK} "
                          f"threads")
    for d, lim, what in zip(block, MAX_BLOCK_DIM, "xyz"):
        if d > lim:
            raise LaunchError(f"kernel {name}: block.{what}={d} exceeds {lim}")
    for d, lim, what in zip(grid, MAX_GRID_DIM, "xyz"):
        if d > lim:
            raise LaunchError(f"kernel {name}: grid.{what}={d} exceeds {lim}")
    for d in directives:
        words = d.replace(",", " ").split()
        if not words or words[0] not in (".reqntid", ".maxntid"):
            continue
        dims = tuple(int(x) for x in words[1:]) + (1,) * (4 - len(words))
        if words[0] == ".reqntid" and dims != tuple(block):
            raise LaunchError(f"kernel {name}: declared {d.strip()} but launched with block "
                              f"{block}")
        if words[0] == ".maxntid" and threads > dims[0] * dims[1] * dims[2]:
            raise LaunchError(f"kernel {name}: declared {d.strip()} but launched with block "
                              f"{block}")


def declared_block(directives, keys=(".reqntid", ".maxntid")):
    """The block shape a kernel declares with the first of `keys` it carries (None if none)."""
    for key in keys:
        for d in directives:
            m = re.match(rf"\s*\{key}\s+([\d\s,]+)", d)
            if m:
                return tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x)
    return None
