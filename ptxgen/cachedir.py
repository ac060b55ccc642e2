"""The one directory ptxgen keeps files in between processes (docs/api.md, "Caches"):

    $PTXGEN_CACHE_DIR             (default $XDG_CACHE_HOME/ptxgen, else ~/.cache/ptxgen)
        kernels/   compiled operator kernels (PTX and cubin) by key
        tune/      schedules written by `ptxgen tune`   ($PTXGEN_TUNE_CACHE overrides)
        ptxas/     ptxas resource reports by PTX hash
        emu/, sim/ parsed programs of the emulator and the simulator by PTX hash

Each user of it writes files whole and renames them into place, so parallel processes never
read half a file; a damaged file is a miss. PTXGEN_CACHE_DIR=off keeps nothing on disk.
"""
import os
from pathlib import Path


def enabled():
    return os.environ.get("PTXGEN_CACHE_DIR", "").lower() not in ("off", "0", "no")


def root():
    """The cache root (not created here: its users create the subdirectory they write)."""
    given = os.environ.get("PTXGEN_CACHE_DIR")
    if given and enabled():
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ptxgen"


def subdir(name):
    return root() / name


def write_atomic(path, data):
    """Write bytes or text to `path` whole: a temporary file beside it, then a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)
