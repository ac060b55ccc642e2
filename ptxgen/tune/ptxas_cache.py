"""ptxas resources on disk, keyed by a hash of the PTX text, the target and the ptxas binary.

The tuner assembles hundreds of schedules, and the same PTX again on every run for every
shape of one alignment class; a result depends on nothing but those three inputs, so it is
kept: one small JSON file per PTX in ptxas/ under the cache root (ptxgen.cachedir,
PTXGEN_CACHE_DIR). PTXGEN_PTXAS_CACHE=off (or PTXGEN_CACHE_DIR=off) turns it off; a damaged
file is a miss. Files are written whole and renamed into place, so parallel workers never read
half of one.
"""
import functools
import hashlib
import json
import os

from .. import cachedir


def enabled():
    return cachedir.enabled() and \
        os.environ.get("PTXGEN_PTXAS_CACHE", "").lower() not in ("off", "0", "no")


def cache_dir():
    return cachedir.subdir("ptxas")


@functools.lru_cache(maxsize=None)
def _tool_id(path):
    """The binary's identity: a new ptxas (another wheel) must not reuse old results."""
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def key(text, arch):
    from ..toolchain import find_tool
    h = hashlib.sha256()
    for part in (_tool_id(find_tool("ptxas")), arch, text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _path(k):
    return cache_dir() / k[:2] / f"{k}.json"


def get(k):
    """The stored result for key k, or None."""
    if not enabled():
        return None
    try:
        return json.loads(_path(k).read_text())
    except (OSError, ValueError):
        return None


def put(k, value):
    if not enabled():
        return
    try:
        cachedir.write_atomic(_path(k), json.dumps(value))
    except OSError:
        pass                          # a cache that cannot be written only costs time


def cached_resources(text, arch, kernel, assemble):
    """ptxas resources of `kernel` in PTX `text` for `arch` as a dict, from the cache or by
    calling assemble(text, arch) (ptxgen.toolchain.assemble)."""
    k = key(text, arch)
    hit = get(k)
    if hit is not None:
        return hit
    r = assemble(text, arch).resources[kernel]
    value = {"registers": r.registers, "spills": r.spills, "stack": r.stack_bytes,
             "shared": r.shared_bytes}
    put(k, value)
    return value


def count():
    """Files in the cache (for reports and tests)."""
    d = cache_dir()
    return sum(1 for _ in d.glob("*/*.json")) if d.is_dir() else 0


__all__ = ["cached_resources", "cache_dir", "count", "enabled", "key"]
