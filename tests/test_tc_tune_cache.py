"""The tensor-core GEMM's tune cache: its shape classes (which shapes share an entry and which
do not, from the H200 measurements in docs/PERF.md) and the cache shipped with the package
(ptxgen/schedule/data/tc_matmul_bf16_sm_90a.json): it loads, every entry validates, and `auto`
takes the entry of a shape's class, else default_tc_schedule."""
import json

import pytest

from ptxgen.ops.tc_matmul import TcMatmul, default_tc_schedule
from ptxgen.schedule import tuned as cachemod
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

ARCH = "sm_90a"
# issue 13's benchmark shapes (benchmarks/tc_matmul.py NAMED)
BENCH = {"4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192), "6144": (6144, 6144, 6144),
         "oddn": (4096, 4097, 4096), "odd": (4095, 4097, 4093), "llm1": (16384, 4096, 4096),
         "llm2": (4096, 14336, 4096), "llm3": (128, 8192, 8192)}


def shape(M, N, K):
    return dict(M=M, N=N, K=K)


def cls(dims, dtype="bf16", out="bf16"):
    return cachemod.tc_shape_class(shape(*dims), ARCH, dtype, out)


@pytest.fixture
def shipped_only(tmp_path, monkeypatch):
    """Lookups see the packaged cache alone (an empty user cache, tuning on)."""
    monkeypatch.setenv("PTXGEN_TUNE_CACHE", str(tmp_path))
    monkeypatch.delenv("PTXGEN_TUNE", raising=False)


def shipped():
    path = cachemod.package_path("tc_matmul_bf16", ARCH)
    data = json.loads(path.read_text())
    assert data["format"] == cachemod.FORMAT and data["operator"] == "tc_matmul_bf16"
    assert data["arch"] == ARCH
    return data["entries"]


def test_classes_split_the_shapes_measured_to_want_different_schedules():
    c = {name: cls(dims) for name, dims in BENCH.items()}
    assert c["4096"] == "w4_k4096_a8x8_cbf16"           # 512 tiles of 128x256 on 132 SMs
    assert c["8192"] == "w16_k8192+_a8x8_cbf16"
    # 4096^3 (1-CTA TMA store won) vs 8192^3 (2-CTA clusters won): apart, where the SGEMM's
    # classes lump them together
    assert c["4096"] != c["8192"]
    assert cachemod.shape_class(shape(*BENCH["4096"])) == \
        cachemod.shape_class(shape(*BENCH["8192"]))
    # odd N: 5 waves of 128x256 but 4 of 256x128 (the turned tile won), C rows unaligned
    assert c["oddn"] == "w5t4_k4096_a8x1_cbf16"
    assert c["odd"] == "w5t4_k4096_a1x1_cbf16"          # odd K as well: pad copies
    assert len({c["4096"], c["oddn"], c["odd"]}) == 3
    # deep grids share: 6144^3 (9 waves) with 8192^3, the two LLM shapes (16, 14 waves)
    assert c["6144"] == c["8192"]
    assert c["llm1"] == c["llm2"] == "w16_k4096_a8x8_cbf16"
    assert c["llm1"] != c["8192"]                        # K 4096 vs 8192
    assert c["llm3"] == "q1tq2_k8192+_a8x8_cbf16"       # 32 tiles: a quarter wave


def test_class_boundaries():
    # 132 SMs: 528 = 4 x 132 tiles is the last 4-wave grid
    assert cls((4224, 4096, 4096)).startswith("w4t5_")   # 33 x 16 = 528; turned 17 x 32
    assert cls((4352, 4096, 4096)).startswith("w5_")     # 34 x 16 = 544 either way
    assert cls((4095, 4096, 4096)) == cls((4096, 4096, 4096))             # odd M: same rounds
    assert cls((4096, 4096, 5000)) == cls((4096, 4096, 4096))             # K nearest 2^12
    assert cls((4096, 4096, 6000)) == cls((4096, 4096, 8192))             # K to 8192+
    assert cls((4096, 4096, 100000)) == cls((4096, 4096, 8192))
    assert cls((4096, 4096, 4096), out="f32").endswith("_a8x4_cf32")
    assert cls((4096, 4096, 4096), "tf32", "f32") == "w4_k4096_a4x4_cf32"
    assert cls((4096, 4096, 4094)).endswith("_a1x8_cbf16")               # K % 8: padded
    assert cls((128, 8192, 8192)) != cls((512, 8192, 8192))               # q1 vs q4
    assert cls((32768, 32768, 4096)).startswith("w64+_")
    assert cls((8192, 16384, 4096)).startswith("w32_")                    # 31.03 waves


def test_shipped_cache_loads_and_every_entry_validates():
    entries = shipped()
    assert entries
    for key, e in entries.items():
        s = TcMatmulSchedule.from_dict(e["schedule"])
        assert s.validate(ARCH, "bf16") == s
        assert s.validate(ARCH, "f16") == s               # f16 reads bf16's entries
        assert cls(tuple(e["shape"])) == key              # the entry is its shape's class
        assert str(s) == e["name"] and e["ms"] <= e["baseline"]["ms"] * 1.0001
        assert e["device"] and e["source"].startswith("docs/PERF.md#") and e["gpu_trials"] >= 2


def test_auto_takes_the_shipped_entry_of_each_benchmark_shape(shipped_only):
    entries = shipped()
    hits = 0
    for name, dims in BENCH.items():
        sh = shape(*dims)
        want = entries.get(cls(dims))
        got = TcMatmul("bf16", "bf16").schedule_for(sh)
        if want is None:
            assert got == default_tc_schedule(sh), name
            continue
        hits += 1
        assert got == TcMatmulSchedule.from_dict(want["schedule"]), name
        assert TcMatmul("f16", "bf16").schedule_for(sh) == got, name
    assert hits >= 5


def test_a_class_mismatch_falls_back_to_the_default(shipped_only, monkeypatch):
    entries = shipped()
    for dims in ((1000, 1000, 1000), (4096, 4096, 64), (2048, 2048, 2048)):
        sh = shape(*dims)
        assert cls(dims) not in entries
        assert TcMatmul("bf16", "bf16").schedule_for(sh) == default_tc_schedule(sh, dtype="bf16")
    sh = shape(*BENCH["8192"])
    assert cls(BENCH["8192"]) in entries
    # an f32 C or tf32 inputs are other classes / files: the default
    assert TcMatmul("bf16", "f32").schedule_for(sh) == default_tc_schedule(sh)
    assert TcMatmul("tf32", "f32").schedule_for(sh) == default_tc_schedule(sh).for_dtype("tf32")
    monkeypatch.setenv("PTXGEN_TUNE", "off")
    assert TcMatmul("bf16", "bf16").schedule_for(sh) == default_tc_schedule(sh)


def test_an_unusable_entry_warns_and_falls_back(tmp_path):
    sh = shape(4096, 4096, 4096)
    path = tmp_path / "tc.json"
    bad = dict(TcMatmulSchedule().to_dict(), stages=9)                    # no shared memory
    path.write_text(json.dumps({"format": cachemod.FORMAT, "entries": {
        cls((4096, 4096, 4096)): {"schedule": bad}}}))
    with pytest.warns(UserWarning, match="w4_k4096_a8x8_cbf16 unusable"):
        assert cachemod.tuned_tc_schedule(ARCH, sh, "bf16", paths=[path]) is None
