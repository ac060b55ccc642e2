"""Launch-shape rules shared by the GPU runtime and the emulator, so both refuse the same launches
with the same one-line messages.

The limits are the CUDA API launch limits every target ptxgen emits for shares (identical for
cc 8.x and 9.0): isa/targets.toml [launch], each with its source, read by ptxgen.isa.
"""
import re

from . import isa
from .errors import LaunchError


def launch_dims(v, what, kernel):
    """grid or block as a 3-tuple of positive ints (an int or a tuple of 1 to 3 ints given)."""
    if isinstance(v, int) or hasattr(v, "__index__"):
        v = (int(v),)
    try:
        t = tuple(int(x) for x in v)
    except TypeError:
        raise LaunchError(f"kernel {kernel}: {what} must be an int or a tuple of up to 3 ints, "
                          f"got {v!r}") from None
    if not 1 <= len(t) <= 3:
        raise LaunchError(f"kernel {kernel}: {what} must have 1 to 3 dimensions, got {v!r}")
    t = t + (1,) * (3 - len(t))
    if any(d <= 0 for d in t):
        raise LaunchError(f"kernel {kernel}: {what} {t} must be positive")
    return t


def check_launch_shape(name, grid, block, directives=()):
    """grid and block (3-tuples of positive ints) against the device limits and the kernel's
    .reqntid/.maxntid directives; LaunchError naming the kernel on the first violation."""
    if any(d <= 0 for d in tuple(grid) + tuple(block)):
        raise LaunchError(f"kernel {name}: grid {grid} and block {block} must be positive")
    threads = block[0] * block[1] * block[2]
    lim = isa.launch_limits()
    if threads > lim["max_threads_per_block"]:
        raise LaunchError(f"kernel {name}: block {block} has more than "
                          f"{lim['max_threads_per_block']} threads")
    for d, lim_d, what in zip(block, lim["max_block_dim"], "xyz"):
        if d > lim_d:
            raise LaunchError(f"kernel {name}: block.{what}={d} exceeds {lim_d}")
    for d, lim_d, what in zip(grid, lim["max_grid_dim"], "xyz"):
        if d > lim_d:
            raise LaunchError(f"kernel {name}: grid.{what}={d} exceeds {lim_d}")
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
