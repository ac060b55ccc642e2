"""Programs on disk between processes (ptxgen.progcache): the emulator's parsed modules and the
simulator's scheduled, compiled kernels are read back instead of made again; a damaged, foreign
or stale file is a miss; PTXGEN_CACHE_DIR=off keeps nothing."""
import numpy as np
import pytest

from ptxgen import progcache
from ptxgen.emu import api as emu_api
from ptxgen.emu import emulate
from ptxgen.sim import cached as sim_cached
from ptxgen.sim import simulate
from ptx_samples import SAXPY


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    emu_api._parsed.clear()
    yield tmp_path
    emu_api._parsed.clear()


def _no_parser(monkeypatch):
    import ptxgen.parse

    def refuse(*a, **k):
        raise AssertionError("parsed again")
    monkeypatch.setattr(ptxgen.parse, "parse_ptx", refuse)


def _saxpy(text, n=300):
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    want = (1.5 * x.astype(np.float64) + y).astype(np.float32)     # one rounding, as fma
    emulate(text, "saxpy", (n + 127) // 128, 128, x, y, np.float32(1.5), np.uint32(n))
    np.testing.assert_array_equal(y, want)


def test_a_second_process_reads_the_parsed_module(cache, monkeypatch):
    _saxpy(SAXPY)
    files = list((cache / "emu").glob("*.pkl"))
    assert len(files) == 1
    emu_api._parsed.clear()                 # as a fresh process: nothing in memory
    _no_parser(monkeypatch)
    _saxpy(SAXPY)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign"])
def test_a_damaged_or_foreign_file_is_a_miss(cache, damage):
    _saxpy(SAXPY)
    f = next((cache / "emu").glob("*.pkl"))
    data = f.read_bytes()
    if damage == "truncate":
        f.write_bytes(data[:len(data) // 2])
    elif damage == "garbage":
        f.write_bytes(b"\0" * 64)
    else:                                   # another key's file under this name
        f.write_bytes(data.replace(f.stem.encode(), b"0" * len(f.stem), 1))
    emu_api._parsed.clear()
    _saxpy(SAXPY)                           # parsed again, still right
    assert f.read_bytes() == data           # and the file written whole again


def test_the_key_names_version_format_and_code(cache, monkeypatch):
    k = progcache.key("emu-module", SAXPY)
    assert k != progcache.key("emu-module", SAXPY + " ")
    monkeypatch.setattr(progcache, "FORMAT", progcache.FORMAT + 1)
    assert progcache.key("emu-module", SAXPY) != k
    monkeypatch.setattr(progcache, "FORMAT", progcache.FORMAT - 1)
    monkeypatch.setattr(progcache, "__version__", "0.0.0-other")
    assert progcache.key("emu-module", SAXPY) != k
    monkeypatch.undo()
    progcache.code_digest.cache_clear()
    monkeypatch.setattr(progcache.os, "stat", _later_stat(progcache.os.stat))
    assert progcache.key("emu-module", SAXPY) != k   # an edited source file: a new key
    progcache.code_digest.cache_clear()


def _later_stat(stat):
    def later(path, *a, **k):
        st = stat(path, *a, **k)
        if str(path).endswith("progcache.py"):
            return type("S", (), {"st_size": st.st_size, "st_mtime_ns": st.st_mtime_ns + 1})()
        return st
    return later


def test_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    emu_api._parsed.clear()
    _saxpy(SAXPY)
    assert not list(tmp_path.rglob("*.pkl"))
    emu_api._parsed.clear()


def test_the_simulator_reads_its_scheduled_program(cache, monkeypatch):
    from ptxgen.parse import parse_ptx
    m = parse_ptx(SAXPY)
    args = [np.zeros(1 << 20, np.float32), np.zeros(1 << 20, np.float32), 1.5, 1 << 20]
    first = simulate(m.kernel("saxpy"), 4096, 256, args=args, module=m, registers=16)
    assert len(list((cache / "sim").glob("*.pkl"))) == 1

    def refuse(*a, **k):
        raise AssertionError("compiled again")
    monkeypatch.setattr(sim_cached, "compile_kernel", refuse)
    m2 = parse_ptx(SAXPY)
    again = simulate(m2.kernel("saxpy"), 4096, 256, args=args, module=m2, registers=16)
    assert again.device_us == first.device_us and again.cycles == first.cycles
