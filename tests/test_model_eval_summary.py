"""benchmarks/model_eval.summarize: the parts issue 14 is judged on (kernels without the fitting
microbenchmarks, fitting and held-out parts, cases beyond +-50 %)."""
import pytest

import model_eval


def _case(name, family, split, gpu_us):
    return dict(name=name, family=family, split=split, source="ptx", gpu_us=gpu_us)


def _pred(device_us):
    return dict(device_us=device_us, time_us=device_us + 10.0, wall_s=0.1, cpu_s=0.1)


def test_kernels_exclude_the_fitting_microbenchmarks_and_count_the_misses():
    micro = sorted(model_eval.micro_families())[0]
    cases = [_case("saxpy a", "saxpy", "fit", 100.0), _case("m a", micro, "fit", 100.0),
             _case("k a", "kind_a", "held7", 100.0), _case("k b", "kind_b", "held11", 100.0)]
    preds = {"saxpy a": _pred(110.0), "m a": _pred(200.0), "k a": _pred(40.0),
             "k b": _pred(180.0)}
    rows, out, worst = model_eval.summarize(cases, preds)
    assert out["kernels"]["n"] == 3 and out["micro"]["n"] == 1
    assert out["kernels"]["mape"] == pytest.approx((10 + 60 + 80) / 3)
    assert out["kernels"]["beyond_50"] == 2
    assert out["fit_kernels"] == dict(n=1, mape=pytest.approx(10.0), beyond_50=0)
    assert out["held_out"]["n"] == 2 and out["held11"]["n"] == 1   # splits come from the data
    assert out["micro"]["beyond_50"] == 1 and out["all"]["n"] == 4
    assert worst["name"] == "m a"
