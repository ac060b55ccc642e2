"""Measured defaults as data (ptxgen/schedule/data/defaults.json): every entry names the
docs section it comes from, holds a value the code accepts, and the operators really read it
(changing the data changes their choice)."""
import re
from pathlib import Path

import pytest

from ptxgen.errors import PtxgenError
from ptxgen.ops.attention import Attention
from ptxgen.ops.tc_matmul import FUSED_PACKS, K_PACKS, TcMatmul, default_tc_schedule
from ptxgen.schedule import defaults
from ptxgen.schedule.attention import AttentionSchedule, default_attention_schedule
from ptxgen.schedule.matmul import CANDIDATES, default_schedule
from ptxgen.schedule.mma_attention import MmaAttentionSchedule
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

ROOT = Path(__file__).resolve().parent.parent


def _anchors(doc):
    """GitHub-style anchors of a markdown file's headings."""
    out = set()
    for line in (ROOT / doc).read_text().splitlines():
        m = re.match(r"#+ (.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def test_every_entry_has_a_value_a_reason_and_an_existing_doc_section():
    entries = defaults.entries()
    assert set(entries) >= {"tc_matmul.k_pack", "tc_matmul.schedule", "attention.schedule",
                            "mma_attention.schedule", "sgemm.default_pool"}
    for name, e in entries.items():
        assert set(e) == {"value", "why", "source"}, name
        doc, _, anchor = e["source"].partition("#")
        assert (ROOT / doc).is_file() and anchor in _anchors(doc), (name, e["source"])


def test_the_values_are_ones_the_code_accepts():
    assert defaults.choice("tc_matmul.k_pack") in set(K_PACKS) - {"auto"}
    rule = defaults.choice("tc_matmul.schedule")
    for part in ("bf16_one_wave_of_128x64", "bf16_under_one_wave", "under_one_wave", "shallow",
                 "deep"):
        TcMatmulSchedule(**rule[part]).validate("sm_90a", "bf16")
    for D, fields in defaults.choice("attention.schedule").items():
        AttentionSchedule(**fields).validate("sm_90a", "bf16", int(D))
    for D, fields in defaults.choice("mma_attention.schedule").items():
        MmaAttentionSchedule(**fields).validate("sm_80", "bf16", int(D))
    assert all(n in CANDIDATES for n in defaults.choice("sgemm.default_pool"))
    with pytest.raises(PtxgenError, match="no measured default 'nope'"):
        defaults.choice("nope")


def test_choice_returns_a_copy():
    defaults.choice("attention.schedule")["64"]["consumers"] = 99
    assert defaults.choice("attention.schedule")["64"]["consumers"] != 99


@pytest.fixture
def edited(monkeypatch):
    """Replace entries of the shipped data for one test."""
    data = {k: dict(v) for k, v in defaults.entries().items()}
    monkeypatch.setattr(defaults, "entries", lambda: data)

    def edit(name, value):
        data[name] = dict(data[name], value=value)
    return edit


def test_the_operators_read_the_data(edited):
    shape = dict(M=4096, N=4096, K=4093)
    assert default_attention_schedule(64).consumers == 3
    assert default_tc_schedule(shape).epilogue == "tma"
    assert default_schedule(dict(M=4096, N=4096, K=4096)) is CANDIDATES["128x128x8_g8"]
    assert TcMatmul("bf16", "f32").packing == "pad"
    edited("attention.schedule", {"64": {"consumers": 2}})
    edited("tc_matmul.schedule", dict(defaults.choice("tc_matmul.schedule"),
                                      shallow={"epilogue": "direct", "stages": 4}))
    edited("sgemm.default_pool", ["64x64x8"])
    edited("tc_matmul.k_pack", "fused1")
    edited("mma_attention.schedule", {"64": {"BN": 32}})
    assert default_attention_schedule(64).consumers == 2
    assert default_tc_schedule(shape).epilogue == "direct"
    assert default_schedule(dict(M=4096, N=4096, K=4096)) is CANDIDATES["64x64x8"]
    op = TcMatmul("bf16", "f32")
    assert op.packing == "fused1" and op.packing in FUSED_PACKS and op.fused(shape) != (False, False)
    att = Attention("bf16")
    att.for_target("sm_80")
    assert att.schedule_for(att.shape(B=1, H=1, S=64, D=64)).BN == 32


def test_the_block_scaled_fp8_schedule_is_read_from_the_data(edited):
    from ptxgen.ops.fp8_matmul import Fp8Matmul
    op = Fp8Matmul("e4m3", "bf16", scaling="block")
    shape = op.shape(M=4096, N=4096, K=4096)
    shipped = defaults.choice("fp8_matmul.block_schedule")
    s = op.schedule_for(shape)
    assert {k: getattr(s, k) for k in shipped} == shipped
    s.validate("sm_90a", "e4m3")
    edited("fp8_matmul.block_schedule", {"inflight": 1 - shipped["inflight"], "stages": 6})
    s = op.schedule_for(shape)
    assert (s.inflight, s.stages, s.BN, s.wgmma_n) == (1 - shipped["inflight"], 6, 128, 128)


def test_attention_forms_follow_the_data(edited):
    """The peeled loop without mods; persistent for causal grids of a few waves only."""
    from ptxgen import mods
    short, long_ = dict(B=2, H=16, S=2048, D=128), dict(B=4, H=32, S=4096, D=128)
    causal = Attention("bf16", causal=True)
    s_short, s_long = (causal.schedule_for(causal.shape(**x)) for x in (short, long_))
    assert s_short.persistent and s_short.peel and not s_long.persistent and s_long.peel
    plain = Attention("bf16")
    assert not plain.schedule_for(plain.shape(**short)).persistent
    d64 = causal.schedule_for(causal.shape(B=8, H=16, S=1024, D=64))
    assert d64.persistent and d64.consumers == 2          # the 2-consumer form at D=64
    modded = Attention("bf16", mask_mod=mods.sliding_window(256))
    s = modded.schedule_for(modded.shape(**short))
    assert not s.peel and not s.persistent
    edited("attention.forms", {"peel_without_mods": False,
                               "short_causal": {"max_waves": 1, "schedule": {}}})
    s_short = causal.schedule_for(causal.shape(**short))
    assert not s_short.peel and not s_short.persistent


def test_small_gemms_take_the_measured_small_forms():
    """1024^3: one round of 128x64 tiles on one consumer; 2048^3: 128x128 tiles with no group
    in flight and TMA stores; a long-K skinny shape keeps the 128x128 form."""
    op = TcMatmul("bf16", "bf16")
    s1, s2 = (op.schedule_for(op.shape(M=n, N=n, K=n)) for n in (1024, 2048))
    assert (s1.BM, s1.BN, s1.consumers, s1.inflight, s1.epilogue) == (128, 64, 1, 0, "tma")
    assert (s2.BM, s2.BN, s2.consumers, s2.inflight, s2.epilogue) == (128, 128, 2, 0, "tma")
    s3 = op.schedule_for(op.shape(M=128, N=8192, K=8192 * 2))
    assert (s3.BN, s3.consumers) == (128, 2)
    f16 = TcMatmul("f16", "f32")                  # unmeasured types keep the 128x128 form
    s4 = f16.schedule_for(f16.shape(M=1024, N=1024, K=1024))
    assert (s4.BN, s4.consumers, s4.inflight) == (128, 2, 1)
