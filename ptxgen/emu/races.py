"""Shared-memory checks: reads of bytes never written, and data races between barriers.

The shadow state is kept per granule, the smallest access width any instruction of the kernel
may make to shared memory (so no access covers part of a granule and the check is exact, never a
false positive from neighbouring bytes). Per granule: written-at-all, the last writer lane since
the last barrier (and the instruction that wrote), and the reader lane since the last barrier
(-2: several different lanes) with their warp (-2: several warps), so that a warp barrier
forgets reads by several lanes of one warp too. A race is two different threads touching a granule between two
barriers with at least one of them writing; two threads writing it in one instruction is a race
only when they write different bytes (lanes storing the same value leave the same memory in any
order: the lowest such lane is recorded as the writer). Atomics neither race with each other nor are recorded (their order is the hardware's job),
but an atomic on a never-written granule is an uninitialized read.
"""
import numpy as np

NONE, MANY = -1, -2
_STEPS = {}


def _steps(k):
    a = _STEPS.get(k)
    if a is None:
        a = _STEPS[k] = np.arange(k)
    return a


class SharedShadow:
    def __init__(self, nbytes, granule):
        self.g = granule
        n = nbytes // granule
        self.init = np.zeros(n, bool)
        self.writer = np.full(n, NONE, np.int32)
        self.writer_op = np.zeros(n, np.int32)
        self.reader = np.full(n, NONE, np.int32)
        self.reader_warp = np.full(n, NONE, np.int32)
        # written by the generic proxy since the CTA's last fence.proxy.async (async_copy.py)
        self.generic = np.zeros(n, bool)

    def _granules(self, lanes, flat, width):
        gi = flat // self.g
        k = width // self.g
        if k > 1:
            gi = (gi[:, None] + _steps(k)).ravel()
            lanes = np.repeat(lanes, k)
            return gi, lanes, k
        return gi, lanes, 1

    def read(self, st, op, lanes, flat, width):
        gi, who, k = self._granules(lanes, flat, width)
        init = self.init[gi]
        if not init.all():
            i = int(np.flatnonzero(~init)[0])
            st.report("uninit", op, int(who[i]), _addr(st, flat, who, i, k),
                      f"read of shared memory never written ({width} bytes)")
        w = self.writer[gi]
        if w.max() >= 0:                   # some location written since the barrier
            bad = (w >= 0) & (w != who)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                st.report("race", op, int(who[i]), _addr(st, flat, who, i, k),
                          "shared-memory race: read of a location that "
                          f"{self._writer(st, w, gi, i, who[i])} with no barrier between")
        self._read_warps(st, gi, who)
        r = self.reader[gi]
        top = r.max()
        if top == MANY:                    # every location already read by several threads
            return
        if top == NONE:                    # none read yet: this instruction's lanes only
            new = who
        else:
            new = np.where((r == NONE) | (r == who), who, MANY).astype(np.int32)
        self.reader[gi] = new
        dup = self.reader[gi] != new       # several lanes of this instruction read one place
        if dup.any():
            self.reader[gi[dup]] = MANY

    def _read_warps(self, st, gi, who):
        """Record the readers' warp per granule (MANY once two warps read it)."""
        warp = st.warp_index[who].astype(np.int32)
        rw = self.reader_warp[gi]
        new = np.where((rw == NONE) | (rw == warp), warp, MANY).astype(np.int32)
        self.reader_warp[gi] = new
        dup = self.reader_warp[gi] != new  # lanes of several warps in this instruction
        if dup.any():
            self.reader_warp[gi[dup]] = MANY

    def write(self, st, op, lanes, flat, width, generic=True, data=None):
        """data: a function giving the stored bytes, one row of `width` per access, to tell lanes
        of this instruction storing the same value (no race) from differing ones."""
        gi, who, k = self._granules(lanes, flat, width)
        w = self.writer[gi]
        bad = (w >= 0) & (w != who)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            st.report("race", op, int(who[i]), _addr(st, flat, who, i, k),
                      "shared-memory race: write to a location that "
                      f"{self._writer(st, w, gi, i, who[i])} with no barrier between")
        r = self.reader[gi]
        bad = (r == MANY) | ((r >= 0) & (r != who))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            other = "several other threads" if r[i] == MANY else _who(st, int(r[i]), int(who[i]))
            st.report("race", op, int(who[i]), _addr(st, flat, who, i, k),
                      f"shared-memory race: write to a location that {other} read with no "
                      "barrier between")
        self.writer[gi] = who
        back = self.writer[gi]
        if (back != who).any():
            self._same_instruction(st, op, len(flat), width, gi, who, data)
        self.writer_op[gi] = op
        self.init[gi] = True
        if generic:
            self.generic[gi] = True

    def _same_instruction(self, st, op, n, width, gi, who, data):
        """Several lanes of one store hit a granule: a race where their bytes differ; where all
        store the same bytes the lowest lane stays the recorded writer."""
        order = np.lexsort((who, gi))              # by granule, then lane
        g, w = gi[order], who[order]
        first = np.ones(len(g), bool)
        first[1:] = g[1:] != g[:-1]
        head = np.maximum.accumulate(np.where(first, np.arange(len(g)), 0))
        shared = ~first                            # entries after their granule's first lane
        if data is None:
            differ = shared
        else:
            rows = np.ascontiguousarray(data()).reshape(n, width // self.g, self.g)
            byts = rows.reshape(len(g), self.g)[order]   # entry e = access e // k, granule e % k
            differ = shared & (byts != byts[head]).any(1)
        if differ.any():
            j = int(np.flatnonzero(differ)[0])
            i = int(order[j])
            st.report("race", op, int(who[i]), int(g[j]) * self.g % st.shared.stride,
                      f"shared-memory race: {_who(st, int(w[head[j]]), int(who[i]))} writes "
                      "a different value to the same location in the same instruction")
        self.writer[g[first]] = w[first]

    def atomic(self, st, op, lanes, flat, width):
        gi, who, k = self._granules(lanes, flat, width)
        init = self.init[gi]
        if not init.all():
            i = int(np.flatnonzero(~init)[0])
            st.report("uninit", op, int(who[i]), _addr(st, flat, who, i, k),
                      "atomic on shared memory never written")
        self.init[gi] = True

    def _writer(self, st, w, gi, i, who):
        return f"{_who(st, int(w[i]), int(who))} wrote at {st.op_where(int(self.writer_op[gi[i]]))}"

    def barrier(self):
        self.writer.fill(NONE)
        self.reader.fill(NONE)
        self.reader_warp.fill(NONE)

    def warp_sync(self, synced_lane, warp_index):
        """bar.warp.sync: forget accesses by lanes of the warps that synchronized
        (synced_lane: bool per lane; warp_index: each lane's warp), reads by several lanes of
        one such warp included."""
        w = self.writer
        hit = (w >= 0) & synced_lane[np.maximum(w, 0)]
        w[hit] = NONE
        r, rw = self.reader, self.reader_warp
        synced_warp = np.zeros(int(warp_index.max()) + 1, bool)
        synced_warp[warp_index[synced_lane]] = True
        hit = ((r >= 0) & synced_lane[np.maximum(r, 0)]) | \
            ((r == MANY) & (rw >= 0) & synced_warp[np.maximum(rw, 0)])
        r[hit] = NONE
        rw[hit] = NONE


def _addr(st, flat, who, i, k):
    """The shared-space address of access i in the CTA whose memory it is (a distributed
    shared-memory access of a cluster may be another CTA's)."""
    return int(flat[i // k]) % st.shared.stride


def _who(st, lane, me):
    """A thread's name, with its block when it is not `me`'s (distributed shared memory)."""
    name = st.thread_name(lane)
    if st.lane_cta[lane] != st.lane_cta[me]:
        name = f"{st.block_name(lane)} {name}"
    return name
