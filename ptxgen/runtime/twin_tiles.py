"""The Numba twins' tile sizes: read by the kernel sources (twin_sources.py, which import
numba) and by their launch shapes (twins.py, which must not)."""
TILE = 16
TILE_T, ROWS_T = 32, 8      # transpose twin: tile and thread rows
TILE_PAD = TILE_T + 1       # transpose twin: tile row pitch, one padding column
RED_T = 256                # reduction and softmax twins: threads per row
