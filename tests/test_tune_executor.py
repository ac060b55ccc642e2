"""The tuner's executor interface: local processes (one or several) and Ray give the same
results in the same order; a cluster address without Ray installed is one clear line."""
import os

import pytest

from ptxgen.tune import stages, tuner
from ptxgen.schedule.tuned import shape_class

from ptxgen.errors import PtxgenError, cli_text
from ptxgen.tune import executor as exmod
from ptxgen.tune.executor import LocalExecutor, executor


def _square_pid(x):
    return x * x, os.getpid()


class Count:
    def __init__(self):
        self.n = 0

    def update(self, n=1, note=None):
        self.n += n


@pytest.mark.parametrize("jobs", [1, 2])
def test_local_map_keeps_order_and_counts_progress(jobs):
    ex = executor(jobs)
    assert isinstance(ex, LocalExecutor) and ex.jobs == jobs
    bar = Count()
    try:
        out = ex.map(_square_pid, range(12), bar)
    finally:
        ex.close()
    assert [v for v, _ in out] == [i * i for i in range(12)]
    assert bar.n == 12
    pids = {p for _, p in out}
    assert (pids == {os.getpid()}) == (jobs == 1)      # several jobs: other processes


def test_cluster_without_ray_is_one_line(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(PtxgenError, match=r"cluster=ADDRESS\) needs Ray.*ptxgen\[ray\]") as e:
        exmod.executor(cluster="auto")
    assert "--cluster ADDRESS" in cli_text(e.value)          # the CLI names its flag


@pytest.mark.needs_ptxas
def test_ray_local_instance_matches_local_processes():
    """The same search on a private local Ray instance: the same predictions, in order. Ray is
    in the `test` extra, so CI runs this; one instance serves the whole test (the tuner's own
    executor finds it running and leaves it), as starting one costs seconds."""
    import ray
    from ptxgen.tune.space import Space
    from test_tune import SHAPE, _small_space
    space = Space(_small_space().points[:8], raw=8)
    ex = executor(jobs=2, cluster="local")
    bar = Count()
    runs = []
    try:
        shapes = [{"M": 100 * i + 1, "N": 64, "K": 4096} for i in range(1, 7)]
        assert ex.map(shape_class, shapes, bar) == [shape_class(s) for s in shapes]
        assert bar.n == 6
        for cluster in (None, "local"):
            stages._ptxas_memo.clear()
            rep = tuner.tune_matmul(SHAPE, budget=6, dry_run=True, jobs=2, progress=False,
                                    space=space, cluster=cluster)
            runs.append([(str(p.schedule), p.registers, p.predicted_us) for p in rep.simulated])
        assert ray.is_initialized()                 # the tuner's executor left it running
    finally:
        ex.close()
    assert not ray.is_initialized()
    assert runs[0] == runs[1] and len(runs[0]) >= 2 and all(p for _, _, p in runs[0])
