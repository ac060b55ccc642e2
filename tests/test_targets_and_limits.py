"""Targets claim only what works; bad sizes, invalid launch shapes and GPU-only options without
a GPU get one line (issue 16, problems 5 and 7; demo --seed)."""
from pathlib import Path

import pytest

import ptxgen
from ptxgen import arch as archmod
from ptxgen.cli import build_parser, main

PTX = Path(__file__).parent / "data" / "ptx" / "numba_saxpy_sm90.ptx"


def _one_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("arch", archmod.targets())
def test_occupancy_for_every_target(arch):
    r = ptxgen.occupancy(128, 32, 4096, arch=arch)
    assert r.active_blocks_per_sm > 0 and r.arch == arch


# hand-checked against the CUDA C++ Programming Guide tables (cc 8.6 and 8.9: 48 warps, 1536
# threads, 64K registers, 100 KB shared per SM; 16 and 24 blocks per SM)
@pytest.mark.parametrize("arch,threads,regs,smem,blocks,limiter", [
    ("sm_86", 256, 32, 0, 6, "warps"),         # 48 warps / 8
    ("sm_86", 256, 64, 0, 4, "registers"),     # 16384 regs per sub-partition / 2048 per warp
    ("sm_86", 32, 16, 0, 16, "blocks"),
    ("sm_89", 32, 16, 0, 24, "blocks"),
    ("sm_89", 128, 16, 30 * 1024, 3, "shared"),   # (30 KB + 1 KB reserved) into 100 KB
])
def test_occupancy_ampere_ada_by_hand(arch, threads, regs, smem, blocks, limiter):
    r = ptxgen.occupancy(threads, regs, smem, arch=arch)
    assert (r.active_blocks_per_sm, r.limiter) == (blocks, limiter)


@pytest.mark.parametrize("cmd", [["analyze", str(PTX), "--arch", "sm_86"],
                                 ["simulate", "saxpy", "--n", "1000", "--arch", "sm_89"],
                                 ["roofline", "saxpy", "--arch", "sm_86"],
                                 ["isa", "sm_89"]])
def test_model_commands_refuse_targets_without_a_model(cmd, capsys):
    assert main(cmd) == 1
    err = _one_line(capsys)
    arch = next(a for a in cmd if a.startswith("sm_"))
    assert f"no machine model for {arch} (isa/{arch}.toml" in err


def test_help_lists_what_works():
    from ptxgen import isa
    sub = build_parser()._subparsers._group_actions[0].choices
    models = ", ".join(isa.model_targets())
    assert f"target with a machine model: {models}" in sub["simulate"].format_help()
    assert "sm_86" not in sub["simulate"].format_help()
    occ = sub["occupancy"].format_help()
    assert all(t in occ for t in archmod.targets())


@pytest.mark.parametrize("opt,what", [(["--threads", "2000", "--regs", "32"],
                                       "2000 threads per block exceed the 1024 of sm_90"),
                                      (["--threads", "256", "--regs", "300"],
                                       "300 registers per thread exceed the 255 of sm_90"),
                                      (["--threads", "32", "--regs", "16", "--smem", "300000"],
                                       "bytes of shared memory per block exceed")])
def test_occupancy_rejects_invalid_launch(opt, what, capsys):
    assert main(["occupancy", *opt]) == 1
    err = _one_line(capsys)
    assert "invalid launch configuration" in err and what in err


def test_sizes_checked_against_memory_before_allocating(capsys):
    assert main(["run", "matmul", "--M", "100000", "--N", "100000", "--K", "100000",
                 "--backend", "emu"]) == 1
    err = _one_line(capsys)
    assert "matmul M=100000 N=100000 K=100000" in err and "GiB of host memory" in err


def test_gpu_only_options_without_a_gpu_say_so(capsys):
    from ptxgen.runtime import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present")
    assert main(["run", "saxpy", "--n", "1000", "--time"]) == 0
    assert "--time needs a GPU" in _one_line(capsys)
    assert main(["compare", "saxpy", "--n", "1000"]) == 0
    assert "no CUDA GPU" in _one_line(capsys)


def test_demo_seed_repeats(capsys):
    runs = []
    for _ in range(2):
        assert main(["demo", "--backend", "emu", "--seed", "7"]) == 0
        runs.append([l for l in capsys.readouterr().out.splitlines() if "max relative" in l])
    assert runs[0] == runs[1] and len(runs[0]) == 2
