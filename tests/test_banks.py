"""Shared-memory bank conflict model: worked cases, invariants, and Nsight Compute's counts when
recorded (tests/data/bank_conflicts_ncu.json, written on a GPU by benchmarks/bank_ncu.py)."""
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ptxgen.analysis.banks import bank_conflicts
from ptxgen.errors import PtxgenError

DATA = Path(__file__).parent / "data" / "bank_conflicts_ncu.json"
LANES = range(32)


@pytest.mark.parametrize("addresses, width, wavefronts, ideal", [
    ([4 * i for i in LANES], 4, 1, 1),                        # stride-1 words
    ([0, 128, 256, 384], 4, 4, 1),                             # words 0, 32, 64, 96: all bank 0
    ([4 * 32 * i for i in LANES], 4, 32, 1),                   # a column of a 32x32 float tile
    ([4 * 33 * i for i in LANES], 4, 1, 1),                    # … padded to 33: conflict-free
    ([8 * i for i in LANES], 4, 2, 1),                         # stride 2 words: 2-way
    ([100] * 32, 4, 1, 1),                                     # broadcast
    ([4 * (i // 2) for i in LANES], 4, 1, 1),                  # pairs share a word
    ([0, 0, 128, 128], 4, 2, 1),                               # two words in bank 0, twice each
    ([0, 1, 2, 3], 1, 1, 1),                                   # bytes of one word
    ([2 * i for i in LANES], 2, 1, 1),                         # 16-bit, stride 1: 16 words
    ([8 * i for i in LANES], 8, 2, 2),                         # 64-bit consecutive: 2 half-warps
    ([16 * i for i in LANES], 16, 4, 4),                       # 128-bit consecutive: 4 quarters
    ([16 * i for i in LANES], 8, 4, 2),                        # 64-bit stride 2: 2-way per half
    ([32 * i for i in LANES], 16, 8, 4),                       # 128-bit stride 2: 2-way per quarter
    ([64] * 32, 16, 2, 2),                                     # 128-bit broadcast: 1 per half (ncu)
    ([128 * i for i in LANES], 8, 32, 2),                      # 64-bit, all in banks 0-1
    ([16 * i if i < 8 else None for i in LANES], 16, 1, 1),    # one active quarter-warp
    ([], 4, 0, 0),                                             # no active lane
])
def test_known_cases(addresses, width, wavefronts, ideal):
    r = bank_conflicts(addresses, width)
    assert (r.wavefronts, r.ideal) == (wavefronts, ideal)
    assert r.degree == (wavefronts / ideal if ideal else 1.0)


def test_naive_rule_is_not_the_model():
    """accesses − distinct banks + 1 would call consecutive 16-byte loads a 4-way conflict."""
    addrs = [16 * i for i in LANES]
    banks = {(a // 4 + k) % 32 for a in addrs for k in range(4)}
    assert 32 * 4 - len(banks) > 0
    assert bank_conflicts(addrs, 16).degree == 1.0


def test_lane_dict_and_inactive_lanes():
    # lanes 0 and 16 are in different half-warps for an 8-byte access: no conflict between them
    assert bank_conflicts({0: 0, 16: 128}, 8).wavefronts == 2
    assert bank_conflicts({0: 0, 1: 128}, 8).wavefronts == 2    # same half-warp: 2-way
    assert bank_conflicts({0: 0, 1: 128}, 8).ideal == 1
    assert bank_conflicts([0, None, 128], 4).active_lanes == 2
    r = bank_conflicts([4 * 32 * i for i in LANES], 4)
    assert r.worst_bank == 0 and r.group_wavefronts == [32]


@pytest.mark.parametrize("args", [([2], 4), ([4], 8), ([8], 16), ([0], 3), ([-4], 4),
                                  ([0] * 33, 4), ({40: 0}, 4), (["x"], 4)])
def test_rejects_bad_input(args):
    with pytest.raises(PtxgenError):
        bank_conflicts(*args)


@settings(max_examples=300, deadline=None)
@given(width=st.sampled_from([4, 8, 16]),
       idx=st.lists(st.one_of(st.none(), st.integers(0, 2047)), min_size=1, max_size=32))
def test_invariants(width, idx):
    addrs = [None if i is None else i * width for i in idx]
    r = bank_conflicts(addrs, width)
    active = [a for a in addrs if a is not None]
    assert r.active_lanes == len(active)
    assert r.ideal <= r.wavefronts
    # never more than one wavefront per distinct word of the access
    words = {a // 4 + k for a in active for k in range(max(1, width // 4))}
    assert r.wavefronts <= max(len(words), 0) or not active
    # relocating every address by a multiple of 128 B changes nothing
    shifted = [None if a is None else a + 128 * 7 for a in addrs]
    assert bank_conflicts(shifted, width).wavefronts == r.wavefronts
    # making every lane read lane 0's address is a broadcast: the ideal
    if active:
        same = [None if a is None else active[0] for a in addrs]
        assert bank_conflicts(same, width).wavefronts == bank_conflicts(same, width).ideal


def _ncu():
    if not DATA.exists():
        pytest.skip(f"{DATA.name} missing: run `python benchmarks/bank_ncu.py all` (Nsight "
                    f"Compute) on a GPU to record measured wavefronts")
    return json.loads(DATA.read_text())


def test_ncu_patterns_cover_each_width():
    entries = _ncu()
    for w in (4, 8, 16):
        assert sum(1 for e in entries if e["width"] == w) >= 20, f"width {w}"


@pytest.mark.parametrize("width", [4, 8, 16])
def test_matches_ncu(width):
    entries = [e for e in _ncu() if e["width"] == width]
    wrong = [(e["name"], e["wavefronts"], bank_conflicts(e["addresses"], width).wavefronts)
             for e in entries
             if bank_conflicts(e["addresses"], width).wavefronts != e["wavefronts"]]
    assert not wrong, (f"{len(wrong)}/{len(entries)} {width}-byte patterns differ from ncu "
                       f"(name, measured, model): {wrong[:6]}")
