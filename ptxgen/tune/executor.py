"""Where the tuner's static work runs: one interface, two engines.

    ex = executor(jobs=None, cluster=None)     # local processes, or Ray when cluster is given
    results = ex.map(fn, items, progress)      # fn(item) for each item, results in order
    ex.close()

LocalExecutor runs in this process for one job, else on a process pool (concurrent.futures)
kept for the executor's life. RayExecutor sends the same calls to a Ray cluster (`--cluster
ADDRESS`; 'local' starts a private one), so a sweep over many shapes can use an existing
engine; Ray is the optional extra `ptxgen[ray]`. `fn` must be a module-level function and items
picklable (schedule dicts, not objects), so both engines take the same calls.
"""
import os

from ..errors import Arg, PtxgenError, Spelled


def cpus():
    """CPUs this process may run on (a container can show the host's count in cpu_count)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 32))


class LocalExecutor:
    def __init__(self, jobs=None):
        self.jobs = jobs or cpus()
        self._pool = None

    def map(self, fn, items, progress=None):
        items = list(items)
        out = [None] * len(items)
        if self.jobs <= 1 or len(items) <= 1:
            for i, it in enumerate(items):
                out[i] = fn(it)
                if progress is not None:
                    progress.update()
            return out
        import concurrent.futures as cf
        if self._pool is None:
            import multiprocessing as mp
            # fork where there is one: spawn would re-run an unguarded __main__. The workers
            # never touch CUDA, so a context the parent holds does not matter to them.
            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
            self._pool = cf.ProcessPoolExecutor(max_workers=self.jobs, mp_context=ctx)
        futs = {self._pool.submit(fn, it): i for i, it in enumerate(items)}
        for f in cf.as_completed(futs):
            out[futs[f]] = f.result()
            if progress is not None:
                progress.update()
        return out

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class RayExecutor:
    """The same map on a Ray cluster. `address`: a cluster's address ('ray://host:10001',
    'auto' for the one this machine belongs to) or 'local' for a private local instance."""

    def __init__(self, address, jobs=None):
        try:
            import ray
        except ImportError:
            raise PtxgenError(Spelled("a Ray cluster (", Arg("cluster=ADDRESS", "--cluster ADDRESS"),
                                      ") needs Ray, which is not installed: pip install "
                                      "'ptxgen[ray]'")) from None
        self.ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            kw = {"num_cpus": jobs} if address == "local" and jobs else {}
            try:
                ray.init(address=None if address == "local" else address,
                         include_dashboard=False, log_to_driver=False, **kw)
            except (ConnectionError, ValueError, RuntimeError) as e:
                msg = " ".join(str(e).split())[:160]
                raise PtxgenError(Spelled(Arg(f"cluster={address!r}", f"--cluster {address}"),
                                          f": cannot connect to Ray: {msg}")) from None
        self.jobs = jobs or int(ray.cluster_resources().get("CPU", 1))
        self._remote = {}

    def map(self, fn, items, progress=None):
        ray = self.ray
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = ray.remote(fn)
        refs = [remote.remote(it) for it in items]
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            if progress is not None:
                progress.update(len(done))
        return ray.get(refs)

    def close(self):
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
            self._started = False


def executor(jobs=None, cluster=None):
    """Local processes by default; Ray when a cluster address is given."""
    if cluster:
        return RayExecutor(cluster, jobs)
    return LocalExecutor(jobs)
