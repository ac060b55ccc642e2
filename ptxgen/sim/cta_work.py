"""Per-CTA work that differs over the grid (causal attention's query blocks, triangular tiles):
a full wave is simulated with the few CTAs spread_ctas picks to stand for all of them, which are
not the mean where trip counts follow the CTA's index. Warp 0's instructions along its whole
path are counted for CTAs spread over the grid (spread_ctas again, so a 2-D grid's columns and
rows are both covered), and the full waves' count is scaled by the grid's mean over the mean of
the CTAs simulated: the block scheduler refills a slot as its CTA ends, so the further waves
cost the mean CTA's work, not the simulated ones'.

Applied to kernels with tensor-pipe work only (sim/launch.py): instructions stand for work
where CTAs differ by loop trips over the same tiles; on the SIMT model set it moved 14 cases
and worsened the held-out figures (stencil3d's boundary CTAs exit early yet cost their memory
traffic: -49 %; bfs_level's data-dependent frontier)."""
from .paths import follow
from .waves import path_instructions, spread_ctas

PROBE, SAMPLES = 8, 64      # CTAs counted first (all alike: done), then over the grid
THRESHOLD = 0.02            # a smaller difference is left alone


def grid_work_ratio(plan, prog, specs, grid, simulated, trip, budget, warnings):
    """The grid's mean CTA work over the simulated CTAs' mean (1.0 when alike)."""
    n = grid[0] * grid[1] * grid[2]
    memo = {}

    def work(c):
        if c not in memo:
            memo[c] = path_instructions(prog, follow(plan, specs(c, 0), trip=trip,
                                                     budget=budget, warnings=warnings).trace)
        return memo[c]
    sim = [work(c) for c in simulated]
    probe = [work(c) for c in spread_ctas(n, grid[0], min(PROBE, n))]
    if max(probe + sim) <= min(probe + sim) * (1 + THRESHOLD):
        return 1.0
    ids = spread_ctas(n, grid[0], min(SAMPLES, n))
    mean_grid = sum(work(c) for c in ids) / len(ids)
    mean_sim = sum(sim) / len(sim)
    r = mean_grid / mean_sim if mean_sim else 1.0
    return 1.0 if abs(r - 1.0) <= THRESHOLD else r
