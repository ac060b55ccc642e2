"""Grouped CTA raster: a 1-D grid walked `group` tile rows at a time, column by column.

CTAs are dispatched roughly in ctaid order, so the ones resident together are consecutive ids.
Walking down `group` tile rows before moving to the next tile column makes them cover a patch
about group tall instead of one long tile row: for a matmul they share B's columns in L2, for a
transpose their reads and writes both form long runs. Used by lower_matmul (group_m) and the
transpose operator (group).
"""
from ..ir.builder import pow2_exponent


def grouped_tile(b, rows, cols, tile_rows, tile_cols, group, pid=None):
    """(row tile, column tile) registers of this CTA for a rows x cols problem of
    tile_rows x tile_cols tiles (powers of two), ctaid.x walked `group` tile rows at a time;
    the last band of tile rows may be shorter. pid: a tile number register to place instead
    of ctaid.x (a persistent kernel's current tile)."""
    pid = pid if pid is not None else b.special("ctaid.x")
    tiles_n = b.shr(b.add(cols, tile_cols - 1), pow2_exponent(tile_cols), name="tiles_n")
    tiles_m = b.shr(b.add(rows, tile_rows - 1), pow2_exponent(tile_rows), name="tiles_m")
    width = b.mul(tiles_n, group, name="gw")                    # CTAs per band
    band = b.div(pid, width, name="grp")
    first = b.mul(band, group, name="gfirst")
    gsize = b.min(b.sub(tiles_m, first), group, name="gsize")   # tile rows in this band
    r = b.sub(pid, b.mul(band, width), name="gr")
    pid_n = b.div(r, gsize, name="pid_n")
    pid_m = b.add(first, b.sub(r, b.mul(pid_n, gsize)), name="pid_m")
    return pid_m, pid_n

