"""A persistent kernel's tiles dealt to its CTAs on the host from their known costs (a causal
query block's key blocks, a block mask's counts), with no atomic counter to reset between
launches. Two ways keep the tile order (so the CTAs at work at once share their heads' K/V in
L2) and plan() takes the one whose busiest CTA has less work:
- greedy: each tile to the CTA with the least work so far (ties: the lowest), as the hardware
  deals one-tile CTAs to SMs;
- boustrophedon: waves of one tile per CTA, odd waves dealt in reverse CTA order, so a CTA
  given a long tile in one wave gets a short one in the next (when tiles get shorter along a
  wave, as a head's causal blocks do, greedy can leave a long last tile to a busy CTA).

    plan = [n, start_0, …, start_n, CTA 0's tiles …, CTA 1's tiles …, …]   (uint32)

n lists; start_x is the index in `plan` of list x's first tile, start_n one past the last. A
grid of nctaid CTAs walks lists x, x + nctaid, … < n, so a plan made for more CTAs than launched
still covers every tile.
"""
import heapq

import numpy as np


def plan(costs, ctas):
    """The plan of len(costs) tiles (tile t costing costs[t], in tile order) over at most
    `ctas` lists: the greedy or the boustrophedon one, whichever has the lighter busiest list."""
    n = max(1, min(int(ctas), len(costs)))
    options = [greedy(costs, n), boustrophedon(len(costs), n)]
    heaviest = [max(sum(int(costs[t]) for t in tiles) for tiles in lists) for lists in options]
    return layout(options[heaviest.index(min(heaviest))])


def greedy(costs, n):
    """n lists: each tile, in order, to the list with the least cost so far."""
    loads = [(0, x) for x in range(n)]
    lists = [[] for _ in range(n)]
    for t, cost in enumerate(costs):
        load, x = heapq.heappop(loads)
        lists[x].append(t)
        heapq.heappush(loads, (load + int(cost), x))
    return lists


def boustrophedon(tiles, n):
    """n lists: waves of n tiles, odd waves dealt from the last list back."""
    lists = [[] for _ in range(n)]
    for t in range(tiles):
        wave, pos = divmod(t, n)
        lists[n - 1 - pos if wave % 2 else pos].append(t)
    return lists


def layout(lists):
    """[n, start_0 … start_n, tiles …] as uint32."""
    n = len(lists)
    starts = (n + 2) + np.cumsum([0] + [len(tiles) for tiles in lists])
    return np.concatenate([[n], starts] + [np.asarray(t, np.int64) for t in lists]).astype(
        np.uint32)


def lists_of(plan):
    """[[tile, …] per list] of a plan (the inverse of layout)."""
    n = int(plan[0])
    starts = plan[1:n + 2]
    return [[int(t) for t in plan[starts[x]:starts[x + 1]]] for x in range(n)]
