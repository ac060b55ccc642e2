"""Programs kept on disk between processes: the emulator's parsed modules (`emu/`) and the
simulator's scheduled and compiled kernels (`sim/`), each a pickle under ptxgen.cachedir by a
key that hashes the PTX with everything the stored object depends on.

The key includes ptxgen's version, FORMAT, the Python version (pickles of IR objects are
Python's) and a digest of ptxgen's own source files (their paths, sizes and modification
times), so a file written by other code is never read back as current. A file holds its own key
before the object: a damaged, truncated or foreign file is a miss, as is any error while
reading it; a failed write leaves nothing behind (cachedir.write_atomic).
"""
import functools
import hashlib
import os
import pickle
import sys

from . import __version__, cachedir

FORMAT = 1
_MAGIC = b"ptxgen-progcache\n"


@functools.lru_cache(maxsize=1)
def code_digest():
    """A digest of ptxgen's source files as installed (path, size, mtime): any edit is a new
    digest."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for d, subs, files in os.walk(root):
        subs[:] = sorted(s for s in subs if s != "__pycache__")
        for f in sorted(files):
            if f.endswith((".py", ".toml")):
                st = os.stat(os.path.join(d, f))
                h.update(f"{os.path.relpath(os.path.join(d, f), root)}:{st.st_size}:"
                         f"{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def key(kind, *parts):
    """The cache key of an object of `kind` made from `parts` (strings or bytes)."""
    h = hashlib.sha256()
    for p in (kind, __version__, str(FORMAT), sys.version, code_digest(), *parts):
        b = p if isinstance(p, bytes) else str(p).encode()
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


_DIRS = {}


def _path(sub, k):
    """The file of key k, as a string (the directory found once per environment: pathlib's
    objects cost a small kernel's launch tens of microseconds)."""
    env = os.environ
    where = (sub, env.get("PTXGEN_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))
    d = _DIRS.get(where)
    if d is None:
        d = _DIRS[where] = os.fspath(cachedir.subdir(sub))
    return os.path.join(d, f"{k}.pkl")


def _read(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) == size:
            return data
        chunks = [data]                 # a short read, or a file longer than fstat said
        while True:
            more = os.read(fd, 1 << 16)
            if not more:
                return b"".join(chunks)
            chunks.append(more)
    finally:
        os.close(fd)


def load(sub, k):
    """The object stored under key k in cachedir's `sub`, or None (a miss)."""
    if not cachedir.enabled():
        return None
    try:
        data = _read(_path(sub, k))
    except OSError:
        return None
    head = _MAGIC + k.encode() + b"\n"
    if not data.startswith(head):
        return None
    try:
        return pickle.loads(data[len(head):])
    except Exception:           # noqa: BLE001 (a damaged file of any kind is a miss)
        return None


def store(sub, k, obj):
    """Keep obj under key k; a failure (disk, an object pickle cannot take) keeps nothing."""
    if not cachedir.enabled():
        return False
    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        cachedir.write_atomic(_path(sub, k), _MAGIC + k.encode() + b"\n" + data)
        return True
    except (OSError, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return False
