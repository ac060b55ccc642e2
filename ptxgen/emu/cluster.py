"""Clusters (sm_90): CTAs that run together and see each other's shared memory.

A launch with a cluster shape (the kernel's .reqnctapercluster, or emulate(cluster=...)) is run
cluster by cluster: every batch of the executor holds whole clusters, their CTAs side by side
(ranks in order: %cluster_ctarank = x + cx·(y + cy·z) within the cluster), so a CTA waiting at
barrier.cluster.wait or on an mbarrier that another CTA arrives on simply waits while the other
CTAs run, and a wait that nothing can end is the executor's deadlock report. Without a cluster
shape every CTA is a cluster of one (%is_explicit_cluster = 0), as on the hardware.

Distributed shared memory: a shared::cluster address of CTA rank r is (r + 1) << RANK_SHIFT |
offset (what mapa returns); a plain shared::cta address (below RANK_SHIFT) is the executing CTA's
own. ld/st/atom on shared memory, mbarrier operations and TMA destinations resolve either form
to the right CTA's part of the batch's shared buffer, so the racecheck shadow sees accesses of
every CTA of the cluster.

st.async / red.async (sm_90): the store or reduction into a CTA of the cluster lands when
issued and completes its bytes on the mbarrier the instruction names.

barrier.cluster: arrive records the thread's arrival in the cluster's current phase; wait holds
the thread (the executor's WAIT op) until every non-exited thread of the cluster has arrived,
which completes the phase (and, like bar.sync, ends the racecheck's epoch).
"""
import numpy as np

from ..errors import PtxgenError

RANK_SHIFT = 24                 # above the largest shared space of one CTA (228 KiB on sm_90)
MAX_CLUSTER_CTAS = 16           # PTX: %cluster_nctarank is at most 16 (non-portable size)
LOW = (1 << RANK_SHIFT) - 1
_U64 = np.dtype(np.uint64)
_U32 = np.dtype(np.uint32)


# -- launch shape --------------------------------------------------------------------------------
def cluster_shape(kernel, grid, cluster=None):
    """((cx, cy, cz), explicit) of a launch: the kernel's .reqnctapercluster or the `cluster`
    argument (int or tuple); PtxgenError when they disagree or do not divide the grid."""
    declared = None
    for d in kernel.directives:
        words = d.replace(",", " ").split()
        if words and words[0] == ".reqnctapercluster":
            declared = _dims([int(w) for w in words[1:]], kernel.name, d)
    given = None
    if cluster is not None:
        vals = [cluster] if isinstance(cluster, (int, np.integer)) else list(cluster)
        given = _dims(vals, kernel.name, f"cluster={cluster!r}")
    if declared and given and declared != given:
        raise PtxgenError(f"kernel {kernel.name}: cluster={given} differs from the kernel's "
                          f".reqnctapercluster {declared}")
    shape = declared or given
    if shape is None:
        return (1, 1, 1), False
    if any(g % c for g, c in zip(grid, shape)):
        raise PtxgenError(f"kernel {kernel.name}: cluster dims {shape} do not divide the grid "
                          f"{tuple(grid)} (every grid dimension must be a multiple)")
    return shape, True


def _dims(vals, name, where):
    if not 1 <= len(vals) <= 3 or any(not isinstance(v, (int, np.integer)) or v < 1
                                      for v in vals):
        raise PtxgenError(f"kernel {name}: bad cluster shape in {where!r}: 1 to 3 positive ints")
    dims = tuple(int(v) for v in vals) + (1,) * (3 - len(vals))
    n = dims[0] * dims[1] * dims[2]
    if n > MAX_CLUSTER_CTAS:
        raise PtxgenError(f"kernel {name}: a cluster of {n} CTAs ({where}) exceeds "
                          f"{MAX_CLUSTER_CTAS}")
    return dims


def cta_order(grid, shape):
    """Linear CTA ids cluster by cluster (clusters in x-fastest order), each cluster's CTAs in
    rank order: consecutive runs of prod(shape) ids are whole clusters."""
    gx, gy, gz = grid
    cx, cy, cz = shape
    if cx * cy * cz == 1:
        return np.arange(gx * gy * gz, dtype=np.int64)
    r = np.arange(cx * cy * cz)
    rx, ry, rz = r % cx, (r // cx) % cy, r // (cx * cy)
    k = np.arange((gx // cx) * (gy // cy) * (gz // cz))
    kx, ky, kz = k % (gx // cx), (k // (gx // cx)) % (gy // cy), k // ((gx // cx) * (gy // cy))
    x = (kx[:, None] * cx + rx[None, :])
    y = (ky[:, None] * cy + ry[None, :])
    z = (kz[:, None] * cz + rz[None, :])
    return (x + gx * (y + gy * z)).ravel().astype(np.int64)


# -- special registers ----------------------------------------------------------------------------
SPECIALS = frozenset(
    [f"{n}.{c}" for n in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid")
     for c in "xyz"] + ["cluster_ctarank", "cluster_nctarank", "is_explicit_cluster"])


def special(st, name):
    """The value (one per lane) of a cluster special register."""
    L = st.launch
    shape, grid = L.cluster, L.grid
    n = st.n
    parts = name.split(".")
    if name == "cluster_ctarank":
        return (st.lane_cta % st.csize).astype(_U32)
    if name == "cluster_nctarank":
        return np.full(n, st.csize, _U32)
    if name == "is_explicit_cluster":
        return np.full(n, bool(L.explicit_cluster))           # a .pred register
    i = "xyz".index(parts[1])
    if parts[0] == "cluster_nctaid":
        return np.full(n, shape[i], _U32)
    if parts[0] == "nclusterid":
        return np.full(n, grid[i] // shape[i], _U32)
    c = st.ctas[st.lane_cta]
    comp = (c % grid[0], (c // grid[0]) % grid[1], c // (grid[0] * grid[1]))[i]
    v = comp % shape[i] if parts[0] == "cluster_ctaid" else comp // shape[i]
    return v.astype(_U32)


# -- distributed shared memory ---------------------------------------------------------------------
def address(rank, offset):
    """The shared::cluster address of `offset` in CTA `rank` (what mapa returns)."""
    return (int(rank) + 1) << RANK_SHIFT | int(offset)


def cta_base(st, lane, rank):
    """Byte offset in the batch's shared buffer of CTA `rank` of lane's cluster."""
    pos = int(st.lane_cta[lane]) // st.csize * st.csize + int(rank)
    return pos * st.shared.stride


def split(st, lane, addr, fail):
    """(buffer base of the CTA, offset in it) of shared address `addr` (shared::cta or
    shared::cluster) of `lane`; fail(why) raises for a rank outside the cluster."""
    addr = int(addr)
    hi = addr >> RANK_SHIFT
    if hi == 0:
        return int(st.shared.base[lane]), addr
    if hi - 1 >= st.csize:
        fail(rank_error(st, hi - 1, addr))
    return cta_base(st, lane, hi - 1), addr & LOW


def rank_error(st, rank, addr):
    return (f"shared::cluster address {addr:#x} names CTA rank {rank}, but the cluster has "
            f"{st.csize} CTA{'s' if st.csize > 1 else ''} (ranks 0..{st.csize - 1})")


def locate_remote(st, lanes, addr, width, off, bad, opi, what):
    """Resolve the shared accesses LaneSpace.locate found out of range (`bad`) that are
    shared::cluster addresses of a CTA of the cluster; returns (off, positions still bad).
    A rank outside the cluster is reported here."""
    a = addr[bad]
    hi = (a >> np.uint64(RANK_SHIFT)).astype(np.int64)
    low = (a & np.uint64(LOW)).astype(np.int64)
    ids = bad if lanes is None else lanes[bad]
    remote = (hi >= 1) & (hi <= MAX_CLUSTER_CTAS + 1) & (low <= st.shared.size - width)
    wrong = remote & (hi - 1 >= st.csize)
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        st.report("oob", opi, int(ids[i]), int(a[i]),
                  f"{what} through a shared::cluster address naming CTA rank {int(hi[i]) - 1}, "
                  f"but the cluster has {st.csize} CTA{'s' if st.csize > 1 else ''} (ranks "
                  f"0..{st.csize - 1})", space="shared::cluster")
        remote &= ~wrong
    if not remote.any():
        return off, bad
    cta = st.lane_cta[ids[remote]]
    off = off.copy()
    off[bad[remote]] = (cta // st.csize * st.csize + hi[remote] - 1) * st.shared.stride + \
        low[remote]
    return off, bad[~remote]            # a wrong rank stays bad: dropped in check='warn'


# -- barrier.cluster -------------------------------------------------------------------------------
class ClusterBarrier:
    """The hardware barrier of one cluster of the batch (index k: batch CTAs k·csize …)."""
    __slots__ = ("k", "phase", "arrived", "name", "mine")

    def __init__(self, st, k):
        self.k, self.phase = k, 0
        self.arrived = np.zeros(st.n, bool)          # arrived in the phase in progress
        self.mine = np.flatnonzero(st.lane_cta // st.csize == k)      # the cluster's lanes
        self.name = f"the cluster barrier of the cluster of {st.block_name(int(self.mine[0]))}"

    def _live(self, st):
        alive = getattr(st, "alive", None)
        return self.mine if alive is None else self.mine[alive[self.mine]]

    def try_complete(self, st):
        """Complete the phase when every non-exited thread of the cluster has arrived."""
        if self.arrived[self._live(st)].all():
            self.phase += 1
            self.arrived[self.mine] = False
            if st.shadow is not None:
                st.shadow.barrier()

    def describe(self, st):
        live = self._live(st)
        return (f"phase {self.phase}: {int(self.arrived[live].sum())} of {live.size} "
                f"live threads arrived")
