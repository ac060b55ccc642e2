"""The memory side of one SM: bandwidth servers per level and the choice of level for global
loads.

A level is a FIFO server of bytes: a request waits until the level's per-SM share of bandwidth
has delivered everything asked before it (each request holds it for bytes/rate cycles); its data
arrive the level's latency after it starts, so a lone request sees exactly the latency a pointer
chase measures, and a stream of them is limited to the bandwidth (a token bucket with a queue). Shared memory and L1 belong to the SM;
L2 and DRAM bandwidth are shared by every SM that runs CTAs, so each gets 1/active_sms of it.

Which level serves a global load is a reuse model: when a launch asks for R bytes of global
loads in total and touches F distinct bytes (its footprint), at best F of them come from DRAM
(first touches) and the rest hit L2, so a fraction min(1, F/R) of the loads goes to DRAM.
Without a footprint every load is a first touch (streaming). A footprint that fits in L2 stays
there across the repeated launches benchmarks time, so every global access hits L2 (`resident`).
`level="L1"|"L2"|"DRAM"` forces one.
Stores are written back to DRAM (to L2 when a level is forced on chip), so they draw that
bandwidth and no register waits on them.
"""
from dataclasses import dataclass, field

from ..errors import PtxgenError
from . import atomics, thin_stores

LEVELS = ("L1", "L2", "DRAM")


class Server:
    """Bytes through a level at `rate` bytes per cycle, first come first served."""

    __slots__ = ("rate", "free", "busy", "bytes")

    def __init__(self, rate):
        self.rate = rate
        self.free = 0.0
        self.busy = 0.0
        self.bytes = 0

    def request(self, t, nbytes):
        """The cycle at which a request made at t starts being served (its data arrive one
        latency later: a lone request sees exactly the measured latency)."""
        start = self.free if self.free > t else t
        dur = nbytes / self.rate
        self.free = start + dur
        self.busy += dur
        self.bytes += nbytes
        return start


@dataclass
class MemoryConfig:
    """Per-SM rates (bytes/cycle) and latencies (cycles) of each level, and the level mix."""
    rates: dict
    latencies: dict
    dram_fraction: float = 1.0          # global loads served by DRAM; the rest by L2
    forced: str = None                  # a level every global load goes to
    notes: list = field(default_factory=list)
    access: dict = field(default_factory=dict)   # instruction index → access.Access
    atomic_ns_rate: float = None        # ns of an atomic unit's time this SM gets per cycle
    same_address_ns: float = 0.0        # one address: one warp's atomic at a time, this long
    partial_write_bytes: float = 0.0    # L2 bytes a partial-sector store costs (0: a sector)
    red_partial_bytes: float = 0.0      # the same for an atomic without a reply (0: as above)
    filled_thin_bytes: tuple = (0.0, 0.0)   # L2 bytes per thin sector the warp later completes
                                        # and per line of them (0: partial_write_bytes each)
    paced_thin_bytes: tuple = (0.0, 0.0)    # the per-sector figures when loads pace the stores
    random_sector_bytes: float = 0.0    # DRAM bytes a sector at a random place costs
    random_read_sector_bytes: float = 0.0   # ... a load's (read only: no write-back)
    load_line_bytes: float = 0.0        # L2 bytes a global load costs at least per line (0: none)
    l2_load_scale: float = 1.0          # L2 bandwidth / L2's bandwidth for loads alone
    line_bytes: float = 128.0
    sector_bytes: float = 32.0
    atomic_op_ns: float = 0.0           # an atomic unit: one operation (see access.Access)
    atomic_float_op_ns: float = 0.0     # the same for a floating-point atomic at one address
    shared_atomic_cycles: float = 1.0   # cycles per bank wavefront of a shared atomic
    tma_dram_fraction: float = 0.0      # TMA bytes served by DRAM as well (async_copy.py)
    l2_tma_scale: float = 1.0           # L2 bandwidth / L2's bandwidth for TMA loads


def memory_config(table, active_sms, level="auto", dram_fraction=1.0, resident=False,
                  access=None, tma_dram_fraction=None, clock_mhz=None):
    """Rates and latencies for one SM. resident: the launch's whole footprint stays in L2
    between launches, so global loads hit L2 and stores stay in it."""
    h = table.header
    # bytes per cycle of the clock the simulated cycles are converted at (result.py)
    clock_hz = (clock_mhz or table.time_clock_mhz) * 1e6
    rates, lat = {}, {}
    for name, m in table.memory.items():
        # SHARED and L1 are per SM; L2 and DRAM are split among the SMs that work
        share = h.sm_count if name in ("SHARED", "L1") else max(1, min(active_sms, h.sm_count))
        rates[name] = m.bandwidth_gbs * 1e9 / share / clock_hz
        lat[name] = m.latency
    if level not in ("auto",) + LEVELS:
        raise PtxgenError(f"unknown memory level {level!r}; choose auto, {', '.join(LEVELS)}")
    forced = None if level == "auto" else level
    if resident and forced is None:
        forced = "L2"
    cfg = MemoryConfig(rates, lat, min(1.0, max(0.0, dram_fraction)), forced)
    cfg.access = access or {}
    cfg.tma_dram_fraction = 0.0 if forced == "L2" else cfg.dram_fraction \
        if tma_dram_fraction is None else tma_dram_fraction
    mm = table.memory_model or {}
    # atomics queue at their address and at the atomic units of the L2 slices their addresses
    # live in, which every SM with CTAs shares: this SM gets 1/active_sms of their time
    cfg.same_address_ns = mm.get("atomic_same_address_ns") or 0.0
    cfg.partial_write_bytes = mm.get("l2_partial_write_bytes") or 0.0
    cfg.red_partial_bytes = mm.get("l2_red_partial_bytes") or 0.0
    cfg.filled_thin_bytes = (mm.get("l2_filled_thin_sector_bytes") or 0.0,
                             mm.get("l2_filled_thin_line_bytes") or 0.0)
    cfg.paced_thin_bytes = thin_stores.paced_figures(mm)
    cfg.random_sector_bytes = mm.get("dram_random_sector_bytes") or 0.0
    cfg.random_read_sector_bytes = mm.get("dram_random_read_sector_bytes") or 0.0
    cfg.load_line_bytes = mm.get("l2_load_line_bytes") or 0.0
    cfg.line_bytes = mm.get("l1_line_bytes") or cfg.line_bytes
    if mm.get("l2_load_bandwidth_gbs") and "L2" in table.memory:
        cfg.l2_load_scale = table.memory["L2"].bandwidth_gbs / mm["l2_load_bandwidth_gbs"]
    if mm.get("l2_tma_bandwidth_gbs") and "L2" in table.memory:
        cfg.l2_tma_scale = table.memory["L2"].bandwidth_gbs / mm["l2_tma_bandwidth_gbs"]
    cfg.sector_bytes = mm.get("sector_bytes") or cfg.sector_bytes
    cfg.atomic_op_ns = mm.get("atomic_op_ns") or 0.0
    cfg.atomic_float_op_ns = mm.get("atomic_float_op_ns") or 0.0
    if cfg.same_address_ns or cfg.atomic_op_ns:
        cfg.atomic_ns_rate = 1e9 / clock_hz / max(1, min(active_sms, h.sm_count))
    cfg.shared_atomic_cycles = mm.get("shared_atomic_cycles_per_wavefront", 1.0)
    return cfg


class SmMemory:
    """The servers of one simulated SM."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.servers = {k: Server(r) for k, r in cfg.rates.items()}
        if cfg.atomic_ns_rate:
            self.servers["ATOMIC"] = Server(cfg.atomic_ns_rate)
        self.queues = {}                # (instruction, what) → its queue
        self._acc = 0.0
        self._miss = {}                 # instruction index → error-diffusion counter of misses
        self.loads = {k: 0 for k in LEVELS}

    def drained(self):
        """The cycle at which every level has moved all the bytes asked of it."""
        return max(s.free for s in self.servers.values())

    def global_level(self):
        """Level of the next global load: forced, or DRAM for a dram_fraction of them,
        spread evenly (an error-diffusion counter, so runs are deterministic)."""
        if self.cfg.forced:
            return self.cfg.forced
        self._acc += self.cfg.dram_fraction
        if self._acc >= 1.0 - 1e-12:
            self._acc -= 1.0
            return "DRAM"
        return "L2"

    def _hit(self, st, acc):
        """Whether this execution finds its sectors in L1 (the access's miss rate, spread
        evenly per instruction)."""
        if acc is None or acc.miss >= 1.0:
            return False
        c = self._miss.get(st.index, 1.0) + acc.miss     # the first execution misses
        if c >= 1.0 - 1e-12:
            self._miss[st.index] = c - 1.0
            return False
        self._miss[st.index] = c
        return True

    def load_global(self, t, st, through_l1=True):
        """Cycle at which a warp's global load (static instruction st) issued at t delivers its
        registers. Its sectors pass L1's data path; a miss fetches the sectors no other warp
        of the CTA brought in already from L2 or DRAM."""
        acc = self.cfg.access.get(st.index)
        nbytes = acc.bytes if acc is not None else st.bytes
        if self.cfg.forced == "L1":
            self.loads["L1"] += 1
            return self.servers["L1"].request(t, nbytes) + self.cfg.latencies["L1"]
        if through_l1 and acc is not None:
            start = self.servers["L1"].request(t, acc.l1_data_bytes or acc.l1_bytes or nbytes)
            if self._hit(st, acc):
                self.loads["L1"] += 1
                return start + self.cfg.latencies["L1"]
            nbytes = nbytes * acc.share
        if acc is not None and acc.dram_miss and not self.cfg.forced:
            return self._scattered(t, st, acc, nbytes)
        level = self.global_level()
        self.loads[level] += 1
        l2 = self._l2_load_bytes(acc, nbytes)
        done = self.servers[level].request(t, l2 if level == "L2" else nbytes)
        if level == "DRAM":
            # the line also passes through L2 on its way to the SM
            done = max(done, self.servers["L2"].request(t, l2))
        # in a loop ptxas unrolls, `unroll` iterations' loads wait for one latency together
        return done + self.cfg.latencies[level] / st.unroll

    def _l2_load_bytes(self, acc, nbytes):
        """L2 bytes of a load's request: its sectors, but no less than the per-line request
        cost of the lines they lie in (a lane per line: scattered loads are request-bound)."""
        # L2 serves loads alone faster than the copy its bandwidth figure was measured on
        # (reads and writes): the sectors at the load rate; the per-line
        # request floor stays as gather_hash measured it
        sectors = nbytes * self.cfg.l2_load_scale
        if acc is None or not acc.l1_bytes or not self.cfg.load_line_bytes:
            return sectors
        lines = acc.l1_bytes / self.cfg.line_bytes * (nbytes / max(acc.bytes, 1))
        return max(sectors, lines * self.cfg.load_line_bytes)

    def _scattered(self, t, st, acc, nbytes):
        """A load whose lanes scatter over a region larger than L2 keeps: its own share of
        executions misses L2, and each missed sector costs DRAM a random access."""
        c = self._miss.get(("dram", st.index), 0.0) + acc.dram_miss
        if c >= 1.0 - 1e-12:
            self._miss[("dram", st.index)] = c - 1.0
            self.loads["DRAM"] += 1
            sectors = nbytes / self.cfg.sector_bytes
            done = max(self.servers["DRAM"].request(t, sectors * self._random_read_bytes()),
                       self.servers["L2"].request(t, nbytes))
            return done + self.cfg.latencies["DRAM"]
        self._miss[("dram", st.index)] = c
        self.loads["L2"] += 1
        return self.servers["L2"].request(t, nbytes) + self.cfg.latencies["L2"]

    def _random_bytes(self):
        return self.cfg.random_sector_bytes or self.cfg.sector_bytes

    def _random_read_bytes(self):
        """A scattered load's missed sector is read, not written back: its own figure where the
        isa file has one (fitted on gather_hash), else a store's."""
        return self.cfg.random_read_sector_bytes or self._random_bytes()

    def store_global(self, t, st):
        """Stores pass L2, where a sector the warp writes only part of costs a read-modify-write
        (the partial-write bytes of the isa file instead of a sector); written sectors leave
        through DRAM once (sectors other warps of the CTA also write merge in L2), unless the
        data stay on chip."""
        acc = self.cfg.access.get(st.index)
        nbytes = acc.bytes if acc is not None else st.bytes
        l2 = nbytes
        if acc is not None and acc.l2_sectors >= 0:
            l2 = acc.l2_sectors * self.cfg.sector_bytes     # each written sector, merged or not
        if acc is not None and acc.merged:
            nbytes *= 1.0 - acc.merged          # the sectors an earlier store wrote: merged
        if acc is not None and acc.partial_sectors and self.cfg.partial_write_bytes:
            per_sector, per_line = self.cfg.filled_thin_bytes
            # rounds sim14a / sim15c (fit14a_store, fit15c_sort): the same thin stores take
            # 10-37 % less time when the warp loads before them, the more so after thin loads
            # (thin_stores); not when it computes. Measured, not explained.
            per_sector = thin_stores.sector_bytes(self.cfg.paced_thin_bytes, acc.paced,
                                                  per_sector)
            filled = acc.filled_thin if per_sector else 0
            l2 += (acc.partial_sectors - filled) * (self.cfg.partial_write_bytes
                                                    - self.cfg.sector_bytes)
            l2 += filled * (per_sector - self.cfg.sector_bytes) + acc.filled_thin_lines * per_line
        self.servers["L2"].request(t, l2)
        if self.cfg.forced in ("L1", "L2"):
            return
        if acc is not None and acc.dram_miss:
            # scattered sectors L2 cannot keep leave at random places; a partial one is read
            # from DRAM first to be completed
            sectors = nbytes / self.cfg.sector_bytes
            rmw = 2 if acc.partial_sectors else 1
            self.servers["DRAM"].request(t, sectors * acc.dram_miss * rmw * self._random_bytes())
            return
        self.servers["DRAM"].request(t, nbytes * (acc.dram_share if acc else 1.0))

    def atomic(self, t, st, latency):
        """A global atomic: its bytes through L2; then it waits at its most used address (which
        takes one warp's lanes at a time, each an operation, and no less than the
        same-address interval per warp) for the share of the grid's executions that use that
        address, and at the atomic units of the slices the grid's addresses spread over for
        its operations. Both queues are this SM's share of the whole grid's."""
        acc = self.cfg.access.get(st.index)
        c = self.cfg
        done = self.servers["L2"].request(t, atomics.l2_bytes(acc, c.sector_bytes,
                                                              c.partial_write_bytes,
                                                              c.red_partial_bytes)
                                          if acc is not None else st.bytes)
        if acc is not None and acc.atom_ops and c.atomic_ns_rate:
            per_address = max(c.same_address_ns, acc.serial_lanes
                              * atomics.serial_ns(acc, c.atomic_op_ns, c.atomic_float_op_ns))
            units = acc.atom_ops * c.atomic_op_ns / max(acc.atom_chunks, 1.0)
            for what, ns in (("address", acc.addr_share * per_address), ("units", units)):
                if ns <= 0:
                    continue
                q = self.queues.get((st.index, what))
                if q is None:
                    q = self.queues[(st.index, what)] = Server(c.atomic_ns_rate)
                done = max(done, q.request(t, ns))
                self.servers["ATOMIC"].busy = max(self.servers["ATOMIC"].busy, q.busy)
                self.servers["ATOMIC"].free = max(self.servers["ATOMIC"].free, q.free)
        return done + latency

    def shared(self, t, st, latency, atomic=False):
        """A shared access: its bank wavefronts hold the SM's shared-memory port (128 bytes
        each); an atomic's wavefront takes several cycles (read, modify, write) when other
        warps use the same words (the fitting part's block-wide histogram), one pass when the
        words are the warp's own (privatised: the pilot saw no word shared between warps)."""
        acc = self.cfg.access.get(st.index)
        nbytes = acc.bytes if acc is not None else st.bytes
        if atomic and not (acc is not None and acc.private):
            nbytes *= self.cfg.shared_atomic_cycles
        return self.servers["SHARED"].request(t, nbytes) + latency
