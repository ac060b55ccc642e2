"""What a thin sector write costs L2 (stage: the simulator's memory model, store side).

A *thin* sector is one a store instruction writes fewer than `l2_partial_write_min_bytes` of
and the warp's later stores complete (access.store_sectors counts them). Its L2 cost was
measured on the H200 under three conditions, each an isa figure:

- no global load of the warp before the store: `l2_filled_thin_sector_bytes` (store_lanes,
  fit14a_store none / gap / busy: 8 stores of 4 bytes per sector, 256 MiB in ~600 us);
- after a global load of the warp: `l2_paced_thin_sector_bytes`
  (fit14a_store coal, fit10a_store_ld: 520-545 us);
- after a *thin* global load of the warp, one that reads fewer than the same minimum of every
  sector it touches (sort8_network's loads x[8 i + j], 4 bytes of each of 32
  sectors): `l2_paced_thin_load_sector_bytes` (fit14a_store thin 460 us, fit15c_sort with
  sort8's compute network between loads and stores 380-420 us, sort8 itself ~300 us per
  256 MiB). Measured, not explained: the loads leave the warp's stores cheaper, the more so
  when they are thin like the stores, and compute without loads changes nothing (fit15c_sort
  net_nold 586 us).

`paced_by` tells access.analyze which condition holds for a store; `sector_bytes` gives the
memory model the figure.
"""
from .program import LDG

AFTER_LOAD, AFTER_THIN_LOAD = 1, 2      # Access.paced: what comes before the store


def thin_load(rec, size, sector, min_bytes):
    """Whether a global load reads fewer than min_bytes of every sector its first recorded
    warp execution touches (rec: {warp: [[address per lane] per execution]})."""
    live = [w for w in sorted(rec) if rec[w] and any(x is not None for x in rec[w][0])]
    if not live or not min_bytes or not sector:
        return False
    per = {}
    for a in rec[live[0]][0]:
        if a is not None:
            for b in range(a, a + size):
                per[b // sector] = per.get(b // sector, 0) + 1
    return bool(per) and max(per.values()) < min_bytes


def paced_by(prog, records, i, sector, mm, lane_bytes):
    """What paces the store at instruction i: 0 (no global load of the warp before it in the
    program), AFTER_LOAD, or AFTER_THIN_LOAD (a thin load before it: thin_load; mm: the isa
    memory_model, for its thin minimum)."""
    min_bytes = int(mm.get("l2_partial_write_min_bytes", 0))
    before = [st for st in prog.instrs if st.kind == LDG and st.index < i]
    if not before:
        return 0
    if any(thin_load(records.get(st.index, {}), lane_bytes(st.instr), sector, min_bytes)
           for st in before):
        return AFTER_THIN_LOAD
    return AFTER_LOAD


def paced_figures(mm):
    """(after a load, after a thin load) L2 bytes per thin sector from the isa memory_model
    (0: no such figure; the thin-load one falls back to the other)."""
    after = mm.get("l2_paced_thin_sector_bytes") or 0.0
    return after, mm.get("l2_paced_thin_load_sector_bytes") or after


def sector_bytes(figures, paced, unpaced):
    """L2 bytes per thin sector of a store paced as `paced` (paced_by); `unpaced` without."""
    after, after_thin = figures
    figure = after_thin if paced == AFTER_THIN_LOAD else after if paced else 0.0
    return figure or unpaced
